// npusim::elementwise_chain(inputs, chain, dtype=None): elementwise ops of one
// dtype run as one kernel (compiler/ops.def's elementwise_chain), so that their
// intermediates never go through device memory. The torch.compile backend
// fuses chains of elementwise nodes into it (npusim/lowering.py); `chain` is
// the compiler's text form, e.g. "mul(in0, 0.5); tanh(%0); add(%1, in1)".
// The CPU kernel runs the same steps as ATen ops, each rounded to the dtype,
// with the constants in the dtype: the npu kernel's arithmetic. With a dtype,
// the steps are f32 over inputs of any float dtypes, rounded once to it.
#include <ATen/ExpandUtils.h>
#include <ATen/Functions.h>
#include <torch/library.h>

#include <cstdio>

#include "cpu_fallback.h"
#include "kernel_launch.h"
#include "runtime/runtime.h"

namespace npusim {
namespace {

using npu::compiler::ChainStep;
using npu::compiler::ChainValue;
using npu::compiler::OpKind;

std::vector<ChainStep> parsed(const std::vector<at::Tensor>& inputs, const std::string& chain, bool one_dtype = true) {
  TORCH_CHECK(!inputs.empty(), "npusim::elementwise_chain: no inputs");
  for (const at::Tensor& t : inputs)
    TORCH_CHECK(!one_dtype || t.scalar_type() == inputs[0].scalar_type(), "npusim::elementwise_chain: the inputs have one dtype, got ",
                t.scalar_type(), " and ", inputs[0].scalar_type());
  try {
    return npu::compiler::parse_chain(chain, inputs.size());
  } catch (const std::invalid_argument& e) {
    TORCH_CHECK(false, "npusim::elementwise_chain: ", e.what());
  }
}

std::vector<int64_t> broadcast_shape(const std::vector<at::Tensor>& inputs) {
  std::vector<int64_t> shape = inputs[0].sizes().vec();
  for (const at::Tensor& t : inputs) shape = at::infer_size(shape, t.sizes());
  return shape;
}

at::Tensor apply(OpKind kind, const at::Tensor& a, const at::Tensor& b) {
  switch (kind) {
    case OpKind::NEG: return at::neg(a);
    case OpKind::ABS: return at::abs(a);
    case OpKind::EXP: return at::exp(a);
    case OpKind::LOG: return at::log(a);
    case OpKind::SQRT: return at::sqrt(a);
    case OpKind::RSQRT: return at::rsqrt(a);
    case OpKind::RECIPROCAL: return at::reciprocal(a);
    case OpKind::TANH: return at::tanh(a);
    case OpKind::SIGMOID: return at::sigmoid(a);
    case OpKind::RELU: return at::relu(a);
    case OpKind::GELU: return at::gelu(a);
    case OpKind::GELU_TANH: return at::gelu(a, "tanh");
    case OpKind::SILU: return at::silu(a);
    case OpKind::SIN: return at::sin(a);
    case OpKind::COS: return at::cos(a);
    case OpKind::ERF: return at::erf(a);
    case OpKind::COPY: return a.clone();
    case OpKind::ADD: return at::add(a, b);
    case OpKind::SUB: return at::sub(a, b);
    case OpKind::MUL: return at::mul(a, b);
    case OpKind::DIV: return at::div(a, b);
    case OpKind::MAXIMUM: return at::maximum(a, b);
    case OpKind::MINIMUM: return at::minimum(a, b);
    case OpKind::POW: return at::pow(a, b);
    case OpKind::TRUNC_DIV: return at::div(a, b, "trunc");
    case OpKind::BITWISE_AND: return at::bitwise_and(a, b);
    case OpKind::BITWISE_OR: return at::bitwise_or(a, b);
    case OpKind::BITWISE_XOR: return at::bitwise_xor(a, b);
    case OpKind::SHIFT_LEFT: return at::bitwise_left_shift(a, b);
    case OpKind::SHIFT_RIGHT: return at::bitwise_right_shift(a, b);
    default: break;
  }
  TORCH_CHECK(false, "npusim::elementwise_chain: no CPU kernel for ", npu::compiler::op_name(kind));
}

at::Tensor elementwise_chain_cpu(const std::vector<at::Tensor>& inputs, const std::string& chain) {
  const std::vector<ChainStep> steps = parsed(inputs, chain);
  const at::ScalarType dtype = inputs[0].scalar_type();
  std::vector<at::Tensor> results;
  for (const ChainStep& step : steps) {
    at::Tensor args[2];
    for (unsigned a = 0; a < npu::compiler::op_arity(step.kind); ++a) {
      const ChainValue& v = step.args[a];
      args[a] = v.kind == ChainValue::Kind::Input  ? inputs[size_t(v.index)]
                : v.kind == ChainValue::Kind::Step ? results[size_t(v.index)]
                                                   : at::scalar_tensor(step.constant, at::TensorOptions().dtype(dtype));
    }
    results.push_back(apply(step.kind, args[0], args[1]));
  }
  // The inputs broadcast to the output's shape even where the steps would not widen them.
  return results.back().expand(broadcast_shape(inputs)).contiguous();
}

}  // namespace

at::Tensor elementwise_chain(const std::vector<at::Tensor>& inputs, const std::string& chain) {
  const std::vector<ChainStep> steps = parsed(inputs, chain);
  const std::vector<int64_t> shape = broadcast_shape(inputs);
  std::vector<at::Tensor> on_device;
  for (const at::Tensor& t : inputs) on_device.push_back(to_npu(t));
  at::Tensor out = new_npu(shape, inputs[0].scalar_type());
  const auto make_op = [&] {
    std::vector<npu::compiler::TensorDesc> described;
    for (const at::Tensor& t : on_device) described.push_back(describe(t));
    npu::compiler::OpDesc op(OpKind::ELEMENTWISE_CHAIN, described, describe(out));
    op.chain = steps;
    return op;
  };
  if (try_run(make_op, on_device, out)) return out;
  using Kernel = at::Tensor(const std::vector<at::Tensor>&, const std::string&, std::optional<at::ScalarType>);
  return fall_back_by_name<Kernel>("npusim::elementwise_chain", "", on_device, chain, std::nullopt);
}

std::string chain_constant(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

bool try_chain_in_f32_into(const std::vector<at::Tensor>& inputs, const std::string& chain, const at::Tensor& out) {
  const std::vector<ChainStep> steps = parsed(inputs, chain, /*one_dtype=*/false);
  std::vector<at::Tensor> on_device;
  for (const at::Tensor& t : inputs) on_device.push_back(to_npu(t));
  const auto make_op = [&] {
    std::vector<npu::compiler::TensorDesc> described;
    for (const at::Tensor& t : on_device) described.push_back(describe(t));
    npu::compiler::OpDesc op(OpKind::ELEMENTWISE_CHAIN, described, describe(out));
    op.chain = steps;
    op.chain_in_f32 = true;
    return op;
  };
  return try_run(make_op, on_device, out);
}

at::Tensor elementwise_chain_in_f32(const std::vector<at::Tensor>& inputs, const std::string& chain, std::optional<at::ScalarType> dtype) {
  const at::ScalarType result = dtype.value_or(inputs[0].scalar_type());
  const auto half = [](at::ScalarType d) { return d == at::kBFloat16 || d == at::kHalf; };
  bool any_half = half(result);
  for (const at::Tensor& t : inputs) {
    TORCH_CHECK(t.scalar_type() == at::kFloat || half(t.scalar_type()), "npusim: a chain in f32 reads float inputs, got ", t.scalar_type());
    any_half |= half(t.scalar_type());
  }
  TORCH_CHECK(result == at::kFloat || half(result), "npusim: a chain in f32 writes a float dtype, got ", result);
  if (any_half) {
    at::Tensor out = new_npu(broadcast_shape(inputs), result);
    if (try_chain_in_f32_into(inputs, chain, out)) return out;
  }
  std::vector<at::Tensor> f32;
  for (const at::Tensor& t : inputs) f32.push_back(as_f32(t));
  const at::Tensor out = elementwise_chain(f32, chain);
  return result == at::kFloat ? out : out.to(result);
}

namespace {

// The op with its dtype: given, the chain is computed in f32 over inputs of any float dtypes and its
// result rounded once to dtype (a graph's chain that began with x.float() or ends with .to(bf16)).
at::Tensor elementwise_chain_op_cpu(const std::vector<at::Tensor>& inputs, const std::string& chain, std::optional<at::ScalarType> dtype) {
  if (!dtype) return elementwise_chain_cpu(inputs, chain);
  std::vector<at::Tensor> f32;
  for (const at::Tensor& t : inputs) f32.push_back(as_f32(t));
  return elementwise_chain_cpu(f32, chain).to(*dtype);
}
at::Tensor elementwise_chain_op(const std::vector<at::Tensor>& inputs, const std::string& chain, std::optional<at::ScalarType> dtype) {
  return dtype ? elementwise_chain_in_f32(inputs, chain, dtype) : elementwise_chain(inputs, chain);
}

}  // namespace

TORCH_LIBRARY_IMPL(npusim, CPU, m) { m.impl("elementwise_chain", elementwise_chain_op_cpu); }
TORCH_LIBRARY_IMPL(npusim, PrivateUse1, m) { m.impl("elementwise_chain", elementwise_chain_op); }

}  // namespace npusim
