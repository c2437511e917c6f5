// ATen kernels the npu gets without writing them by hand:
//
// 1. The elementwise ops, from the compiler's op table (compiler/ops.def): for
//    each NPU_ELEMENTWISE_OP row, every functional overload of aten::NAME
//    whose inputs are plain, (Tensor self) for a unary row, (Tensor self,
//    Tensor other) or (Tensor self, Scalar other) for a binary one, runs the
//    row's kernel. Adding an elementwise op is then a row in ops.def, its
//    vector instruction's semantics, and a test.
// 2. The in-place and out= forms of every op whose functional form has an npu
//    kernel (by hand or from 1): aten::NAME_.overload(Tensor(a!) self, S) and
//    aten::NAME.overload(S, *, Tensor(a!) out) with S the functional's inputs
//    compute the functional form, then check and write as ATen does (the
//    result castable to the target's dtype; in place, of self's shape).
//
// An overload with an npu kernel of its own (written by hand: add's alpha,
// div's integer promotion, an in-place form that writes where it reads), or
// one ATen decomposes before any backend (CompositeImplicitAutograd), keeps
// it: these register when the module loads, after every hand-written kernel. Where the chip cannot run a table op (a
// dtype it lacks) the op itself takes the CPU fallback, counted with its reason.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "aten_table.h"
#include "cpu_fallback.h"
#include "kernel_launch.h"

namespace npusim {
namespace {

using npu::compiler::OpKind;

// A functional overload of an op table row.
struct TableOp {
  OpKind kind;
  int arity;
  bool bool_result;
  bool scalar_other;  // a binary op's second input is a Scalar
  std::string name;   // "aten::eq.Scalar": for the operands' device check
};

// An in-place or out= form, and the functional overload it computes.
struct DerivedOp {
  bool in_place;
  size_t inputs;
  c10::OperatorHandle functional;
};

std::unordered_map<c10::OperatorName, TableOp>& table() {
  static std::unordered_map<c10::OperatorName, TableOp> ops;
  return ops;
}
std::unordered_map<c10::OperatorName, DerivedOp>& derived() {
  static std::unordered_map<c10::OperatorName, DerivedOp> ops;
  return ops;
}

bool is_tensor(const c10::Argument& a) { return a.type()->kind() == c10::TypeKind::TensorType; }
bool writes(const c10::Argument& a) { return a.alias_info() != nullptr && a.alias_info()->isWrite(); }

at::Tensor call(const c10::OperatorHandle& op, torch::jit::Stack stack) {
  op.callBoxed(&stack);
  return stack.at(0).toTensor();
}

// ---- 1. the table's functional kernels ----

// "T", "TT" or "TS" for a plain functional schema (inputs as above, one Tensor returned); "" otherwise.
std::string plain_inputs(const c10::FunctionSchema& schema) {
  const auto& args = schema.arguments();
  if (args.empty() || args.size() > 2 || schema.returns().size() != 1 || !is_tensor(schema.returns()[0])) return "";
  std::string kinds;
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::Argument& a = args[i];
    if (a.kwarg_only() || a.default_value() || writes(a)) return "";
    if (is_tensor(a)) kinds += 'T';
    else if (a.type()->kind() == c10::TypeKind::NumberType && i == 1) kinds += 'S';
    else return "";
  }
  return kinds[0] == 'T' ? kinds : "";
}

// The op on the CPU fallback, with the inputs it was given.
at::Tensor on_cpu_fallback(const c10::OperatorHandle& handle, torch::jit::Stack inputs) {
  set_fallback_reason("");
  cpu_fallback(handle, &inputs);
  return inputs.at(0).toTensor();
}

void table_kernel(const c10::OperatorHandle& handle, torch::jit::Stack* stack) {
  const TableOp& op = table().at(handle.operator_name());
  const torch::jit::Stack inputs(stack->end() - op.arity, stack->end());
  const auto fallback = [&] { return on_cpu_fallback(handle, inputs); };
  const at::Tensor self = inputs.at(0).toTensor();
  at::Tensor result;
  if (op.arity == 1) {
    result = unary(op.kind, self, fallback);
  } else {
    const c10::IValue& other = inputs.at(1);
    const at::Tensor b = op.scalar_other ? cpu_scalar(other.toScalar()) : other.toTensor();
    result = binary(op.kind, op.name.c_str(), self, b, op.bool_result, fallback);
  }
  torch::jit::drop(*stack, op.arity);
  torch::jit::push(*stack, std::move(result));
}

// ---- 2. in-place and out= forms from the functional ones ----

// ATen's rule for writing a result into an existing tensor (in place, out=).
void check_castable(const at::Tensor& result, const at::Tensor& target) {
  TORCH_CHECK(at::canCast(result.scalar_type(), target.scalar_type()), "result type ", result.scalar_type(),
              " can't be cast to the desired output type ", target.scalar_type());
}

void derived_kernel(const c10::OperatorHandle& handle, torch::jit::Stack* stack) {
  const DerivedOp& op = derived().at(handle.operator_name());
  const size_t arguments = handle.schema().arguments().size();
  torch::jit::Stack args(stack->end() - static_cast<std::ptrdiff_t>(arguments), stack->end());
  at::Tensor target = op.in_place ? args.front().toTensor() : args.back().toTensor();
  const auto table_op = table().find(op.functional.operator_name());
  if (op.in_place && table_op != table().end() && table_op->second.arity == 1 && !table_op->second.bool_result && chip_float(target)) {
    // A unary table op on floats writes where it reads (relu_, exp_): the result has self's dtype.
    const TableOp& t = table_op->second;
    unary_(t.kind, target, [&] { return on_cpu_fallback(op.functional, {target}); });
  } else {
    const at::Tensor result = call(op.functional, torch::jit::Stack(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(op.inputs)));
    check_castable(result, target);
    if (op.in_place) {
      TORCH_CHECK(result.sizes() == target.sizes(), "output with shape ", target.sizes(), " doesn't match the broadcast shape ", result.sizes());
      target.copy_(result);
    } else {
      into(result, target);
    }
  }
  torch::jit::drop(*stack, arguments);
  torch::jit::push(*stack, std::move(target));
}

// The types of a schema's inputs (an out= form's out argument aside), without alias annotations.
std::vector<std::string> input_types(const c10::FunctionSchema& schema, bool out) {
  std::vector<std::string> types;
  const auto& args = schema.arguments();
  for (size_t i = 0; i + (out ? 1 : 0) < args.size(); ++i) types.push_back(args[i].type()->str());
  return types;
}

// An npu kernel of its own, or a decomposition ATen runs before any backend's kernel (its autograd
// comes from the ops it decomposes into: a kernel of ours would go without one).
bool has_own_kernel(const c10::OperatorHandle& op) {
  return op.hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1) || op.hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd);
}

struct Row {
  OpKind kind;
  const char* name;
  int arity;
  bool bool_result;
};

}  // namespace

TableRegistrations register_table_ops() {
  static std::unique_ptr<torch::Library> library;
  static TableRegistrations registered;
  if (library) return registered;
  library = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  c10::Dispatcher& dispatcher = c10::Dispatcher::singleton();
  const std::vector<c10::OperatorName> all = dispatcher.getAllOpNames();
  const auto display = [](const c10::OperatorName& n) { return n.name.substr(6) + (n.overload_name.empty() ? "" : "." + n.overload_name); };

  const Row rows[] = {
#define NPU_ELEMENTWISE_OP(ID, NAME, ARITY, OPCODE, RESULT, DTYPES) {OpKind::ID, NAME, ARITY, std::string_view(#RESULT) == "Bool"},
#include "ops.def"
#undef NPU_ELEMENTWISE_OP
  };
  for (const Row& row : rows) {
    for (const c10::OperatorName& op_name : all) {
      if (op_name.name != std::string("aten::") + row.name) continue;
      const auto handle = dispatcher.findSchema(op_name);
      if (!handle || has_own_kernel(*handle)) continue;
      const std::string kinds = plain_inputs(handle->schema());
      if (kinds.size() != static_cast<size_t>(row.arity)) continue;
      table().emplace(op_name, TableOp{row.kind, row.arity, row.bool_result, kinds == "TS", "aten::" + display(op_name)});
      registered.table.push_back(display(op_name));
      library->impl(registered.table.back().c_str(), torch::CppFunction::makeFromBoxedFunction<&table_kernel>());
    }
  }

  // Functional overloads with an npu kernel now, by their name and input types.
  std::unordered_map<std::string, std::vector<c10::OperatorHandle>> functionals;
  for (const c10::OperatorName& op_name : all) {
    const auto handle = dispatcher.findSchema(op_name);
    // (Not a view: its in-place form, as_strided_, changes self's strides, not its data.)
    if (handle && handle->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1) && !handle->schema().is_mutable() &&
        handle->schema().returns().size() == 1 && handle->schema().returns()[0].alias_info() == nullptr)
      functionals[op_name.name].push_back(*handle);
  }
  for (const c10::OperatorName& op_name : all) {
    const auto handle = dispatcher.findSchema(op_name);
    if (!handle || has_own_kernel(*handle)) continue;
    const c10::FunctionSchema& schema = handle->schema();
    const auto& args = schema.arguments();
    if (args.empty() || schema.returns().size() != 1 || !is_tensor(schema.returns()[0])) continue;
    const bool in_place = op_name.name.back() == '_' && is_tensor(args.front()) && writes(args.front());
    const bool out = args.back().is_out() && is_tensor(args.back());
    size_t written = 0;
    for (const c10::Argument& a : args) written += writes(a) ? 1 : 0;
    if (in_place == out || written != 1) continue;
    const std::string functional_name = in_place ? op_name.name.substr(0, op_name.name.size() - 1) : op_name.name;
    const auto candidates = functionals.find(functional_name);
    if (candidates == functionals.end()) continue;
    const std::vector<std::string> types = input_types(schema, out);
    for (const c10::OperatorHandle& functional : candidates->second) {
      if (input_types(functional.schema(), false) != types) continue;
      derived().emplace(op_name, DerivedOp{in_place, types.size(), functional});
      registered.derived.push_back(display(op_name));
      library->impl(registered.derived.back().c_str(), torch::CppFunction::makeFromBoxedFunction<&derived_kernel>());
      break;
    }
  }
  return registered;
}

}  // namespace npusim
