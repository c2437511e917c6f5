#include "kernel_launch.h"

#include <ATen/Context.h>
#include <ATen/EmptyTensor.h>
#include <ATen/Functions.h>
#include <ATen/TensorIterator.h>

#include <torch/library.h>

#include <algorithm>
#include <optional>
#include <string>

#include "npusim/compiler/compiler.h"
#include "cpu_fallback.h"
#include "runtime/runtime.h"

namespace npusim {
namespace {
// Why the last try_run on this thread did not run (for the fallback's warning).
thread_local std::string t_unsupported_reason;
}  // namespace

at::Tensor new_npu(c10::IntArrayRef size, at::ScalarType dtype) {
  const c10::DispatchKeySet keys(c10::DispatchKey::PrivateUse1);
  return at::detail::empty_generic(size, c10::GetAllocator(kNpu), keys, dtype, std::nullopt);
}

at::Tensor new_npu_in_order_of(c10::IntArrayRef size, at::ScalarType dtype, const at::Tensor& like) {
  std::vector<int64_t> order(size.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = int64_t(i);
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return like.stride(x) > like.stride(y); });
  std::vector<int64_t> strides(size.size());
  int64_t stride = 1;
  for (size_t i = order.size(); i-- > 0;) {
    strides[size_t(order[i])] = stride;
    stride *= std::max<int64_t>(size[size_t(order[i])], 1);
  }
  const c10::DispatchKeySet keys(c10::DispatchKey::PrivateUse1);
  return at::detail::empty_strided_generic(size, strides, c10::GetAllocator(kNpu), keys, dtype);
}

at::Tensor new_npu_like(c10::IntArrayRef size, at::ScalarType dtype, std::initializer_list<const at::Tensor*> like) {
  // ATen's own rule, by building a TensorIterator over meta tensors of the inputs' sizes and strides: the
  // output follows the first input whose strides order two dims, broadcast dims skipped (a contiguous
  // a + a permuted b is contiguous, as on the CPU).
  std::vector<at::Tensor> inputs;  // (the config holds references)
  for (const at::Tensor* t : like)
    inputs.push_back(at::empty_strided(t->sizes(), t->strides(), at::TensorOptions().dtype(t->scalar_type()).device(at::kMeta)));
  const at::Tensor output;
  at::TensorIteratorConfig config;
  config.set_check_mem_overlap(false).check_all_same_dtype(false).promote_inputs_to_common_dtype(true).add_output(output);
  for (const at::Tensor& input : inputs) config.add_const_input(input);
  const at::TensorIterator iter = config.build();
  if (iter.output().sizes() != size) return new_npu(size, dtype);
  const c10::DispatchKeySet keys(c10::DispatchKey::PrivateUse1);
  return at::detail::empty_strided_generic(size, iter.output().strides(), c10::GetAllocator(kNpu), keys, dtype);
}

at::Tensor to_npu(const at::Tensor& t) { return on_npu(t) ? t : t.to(at::Device(kNpu, 0)); }

bool try_run(const std::function<npu::compiler::OpDesc()>& make_op, const std::vector<at::Tensor>& inputs, const at::Tensor& out,
             const std::array<uint64_t, 8>& args) {
  for (const at::Tensor& t : inputs)
    TORCH_CHECK(on_npu(t),
                "Expected all tensors to be on the same device, but found at least two devices, npu:0 and ", t.device());
  try {
    Runtime::get().run(make_op(), inputs, out, args);
    return true;
  } catch (const npu::compiler::UnsupportedOp& e) {
    t_unsupported_reason = e.what();
  } catch (const std::invalid_argument& e) {
    t_unsupported_reason = e.what();
  }
  return false;
}

bool try_run_kind(npu::compiler::OpKind kind, const std::vector<at::Tensor>& inputs, const at::Tensor& out) {
  return try_run(
      [&] {
        std::vector<npu::compiler::TensorDesc> described;
        for (const at::Tensor& t : inputs) described.push_back(describe(t));
        return npu::compiler::OpDesc(kind, described, describe(out));
      },
      inputs, out);
}

bool try_run_rows(npu::compiler::OpKind kind, const std::vector<at::Tensor>& rows, const at::Tensor& out) {
  // Rows whose elements are strided are read an element at a time: past 64 Ki elements two transposing
  // copies and the kernel on dense rows are faster (softmax(dim=0) of 4096 x 4096 f32 on base: 57.5 M
  // cycles, against 1.2 M).
  // (Not where a kernel reads the rows along the layout's contiguous run: a column reduction or softmax.)
  const auto strided_rows = [](const at::Tensor& t) { return t.dim() > 0 && t.size(-1) > 1 && t.stride(-1) != 1 && t.numel() >= 65536; };
  const auto by_columns = [&] {
    std::vector<npu::compiler::TensorDesc> described;
    for (const at::Tensor& t : rows) described.push_back(describe(t));
    return npu::compiler::reads_columns(npu::compiler::OpDesc(kind, described, describe(out)));
  };
  const bool dense_first = (strided_rows(out) || std::any_of(rows.begin(), rows.end(), strided_rows)) && !by_columns();
  if (!dense_first && try_run_kind(kind, rows, out)) return true;
  bool strided = !out.is_contiguous();
  for (const at::Tensor& t : rows) strided |= !t.is_contiguous();
  if (!strided) return false;
  // Leading dims that do not merge into one row stride (a softmax over a middle dim, moved last):
  // the rows made contiguous by the copy kernel first, and the result copied into `out`.
  std::vector<at::Tensor> dense_rows;
  for (const at::Tensor& t : rows) dense_rows.push_back(t.contiguous());
  const at::Tensor dense_out = new_npu(out.sizes(), out.scalar_type());
  if (!try_run_kind(kind, dense_rows, dense_out)) return false;
  out.copy_(dense_out);
  return true;
}

void note_cpu_fallback(const char* op) {
  const std::string reason = std::move(t_unsupported_reason);
  t_unsupported_reason.clear();
  Runtime::get().note_fallback(op, reason);
}

void note_cpu_fallback(const char* op, const std::string& reason) {
  t_unsupported_reason.clear();
  Runtime::get().note_fallback(op, reason);
}

namespace {
// fall_back's reason for the cpu_fallback it is about to call.
thread_local std::optional<std::string> t_fallback_reason;
}  // namespace

void set_fallback_reason(std::string reason) {
  if (reason.empty()) reason = std::move(t_unsupported_reason);
  t_unsupported_reason.clear();
  t_fallback_reason = reason.empty() ? "a case its npu kernel does not take (a dtype, shape or argument)" : std::move(reason);
}

void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  // (Taken before anything else: the copies below may run kernels of their own.)
  const std::string reason = t_fallback_reason.value_or("");
  t_fallback_reason.reset();
  Runtime::get().note_fallback(op.schema().operator_name().name + (op.schema().overload_name().empty() ? "" : "." + op.schema().overload_name()),
                               reason);
  at::native::cpu_fallback(op, stack);
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>()); }

// A small output and a long K (a weight gradient, 256 x 256 x 16384): the matmul cuts its output among
// the cores, not K, so each core streams all of K for its part, and the cores that share a row or a
// column of the output read it again. Where the output's f32 sums fit a few accumulators' halves, K is
// cut into S parts instead, one per core for each such half: S partial products as one batched matmul
// whose f32 sums stay f32, then their sum, rounded once to the output's dtype. False where it does not
// apply (or a kernel declined).
bool split_k_into(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out) {
  if (a.dim() != 2 || b.dim() != 2 || out.dim() != 2 || out.scalar_type() != a.scalar_type()) return false;
  const at::ScalarType dtype = a.scalar_type();
  if (dtype != at::kBFloat16 && dtype != at::kHalf && dtype != at::kFloat) return false;
  const npu::sim::ChipConfig& chip = Runtime::get().chip();
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  const int64_t half_accumulator = chip.core.accumulator.size_bytes / 2, sums = (m * n * 4 + half_accumulator - 1) / half_accumulator;
  // Parts of K at least twice the longer output side (and 1024) deep, and dividing it.
  int64_t parts = chip.num_cores / std::max<int64_t>(sums, 1);
  while (parts >= 2 && (k % parts != 0 || k / parts < std::max<int64_t>(1024, 2 * std::max(m, n)))) --parts;
  if (parts < 2) return false;
  const int64_t depth = k / parts;
  const at::Tensor a3 = a.as_strided({parts, m, depth}, {depth * a.stride(1), a.stride(0), a.stride(1)}, a.storage_offset());
  const at::Tensor b3 = b.as_strided({parts, depth, n}, {depth * b.stride(0), b.stride(0), b.stride(1)}, b.storage_offset());
  const at::Tensor partial = new_npu({parts, m, n}, at::kFloat);
  if (!gemm_into(a3, b3, nullptr, partial)) return false;
  // The parts summed by elementwise chains of as many inputs as a chain takes (8), in f32, each part
  // read once; the last chain writes the output, rounded once. (Pairwise adds, then a copy into the
  // output, took S kernels; the column reduction of a dim of S took longer.)
  const int64_t most = npu::compiler::op_arity(npu::compiler::OpKind::ELEMENTWISE_CHAIN);
  std::vector<at::Tensor> level;
  for (int64_t s = 0; s < parts; ++s) level.push_back(partial[s]);
  while (true) {
    const bool last = int64_t(level.size()) <= most;
    std::vector<at::Tensor> next;
    for (size_t first = 0; first < level.size(); first += size_t(most)) {
      const std::vector<at::Tensor> group(level.begin() + first, level.begin() + std::min(level.size(), first + size_t(most)));
      if (group.size() == 1 && !last) {  // (a part left over goes on to the next level as it is)
        next.push_back(group[0]);
        continue;
      }
      const at::Tensor sum = last ? out : new_npu(group[0].sizes(), at::kFloat);
      std::string chain = "add(in0, in1)";
      for (size_t i = 2; i < group.size(); ++i) chain += "; add(%" + std::to_string(i - 2) + ", in" + std::to_string(i) + ")";
      if (!try_chain_in_f32_into(group, chain, sum)) {
        at::Tensor total = group[0];
        for (size_t i = 1; i < group.size(); ++i) total = at::add(total, group[i]);  // (each add on the chip or noted as a fallback)
        sum.copy_(total);
      }
      next.push_back(sum);
    }
    if (last) return true;
    level = std::move(next);
  }
}

bool gemm_into(const at::Tensor& a, const at::Tensor& b, const at::Tensor* bias, const at::Tensor& out,
               const std::vector<npu::compiler::OpKind>& epilogue, const at::Tensor* scale, const at::Tensor* residual) {
  TORCH_CHECK(!scale || bias, "gemm_into: a scale comes with a bias");
  if (!bias && !residual && epilogue.empty() && split_k_into(a, b, out)) return true;
  std::vector<at::Tensor> inputs = {a, b};
  if (bias) inputs.push_back(*bias);
  if (scale) inputs.push_back(*scale);
  if (residual) inputs.push_back(*residual);
  const auto make_op = [&] {
    npu::compiler::OpDesc op(npu::compiler::OpKind::MATMUL, {describe(a), describe(b)}, describe(out));
    if (bias) op.inputs.push_back(describe(*bias));
    if (scale) op.inputs.push_back(describe(*scale));
    if (residual) op.inputs.push_back(describe(*residual)), op.residual = true;
    op.f32_precision = f32_matmul_precision();
    op.epilogue = epilogue;
    return op;
  };
  return try_run(make_op, inputs, out);
}

bool im2col_into(const at::Tensor& x, const at::Tensor& cols, const npu::compiler::Window& window, double pad_value) {
  const auto make_op = [&] {
    npu::compiler::OpDesc op(npu::compiler::OpKind::IM2COL, {describe(x)}, describe(cols));
    op.window = window;
    op.pad_value = pad_value;
    return op;
  };
  return try_run(make_op, {x}, cols);
}

at::Tensor int64_words(const at::Tensor& t) {
  TORCH_CHECK(t.scalar_type() == at::kLong, "int64_words: an int64 tensor");
  std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end()), strides;
  for (const int64_t s : t.strides()) strides.push_back(2 * s);
  sizes.push_back(2), strides.push_back(1);
  at::Tensor words = at::empty({0}, t.options().dtype(at::kInt));
  words.set_(t.storage(), 2 * t.storage_offset(), sizes, strides);
  return words;
}

npu::compiler::F32MatmulPrecision f32_matmul_precision() {
  switch (at::globalContext().float32MatmulPrecision()) {
    case at::Float32MatmulPrecision::MEDIUM: return npu::compiler::F32MatmulPrecision::Medium;
    case at::Float32MatmulPrecision::HIGH: return npu::compiler::F32MatmulPrecision::High;
    default: return npu::compiler::F32MatmulPrecision::Highest;
  }
}

}  // namespace npusim
