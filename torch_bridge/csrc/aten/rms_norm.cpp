// RMS norm on the npu: aten::_fused_rms_norm (which F.rms_norm and aten::rms_norm
// call when the device has it) and its backward. The normalized dims are one row
// of L elements (x reshaped to [rows, L]); everything in f32, rounded once.
//   forward    y = x * rstd * weight by the rms_norm row kernel; rstd =
//              rsqrt(mean(x^2) + eps) [..., 1 per normalized dim] in f32, which
//              autograd saves, from the row and elementwise kernels
//   backward   grad_x = rstd * (h - x^ * mean(h * x^)), x^ = x * rstd, h = grad *
//              weight, by the rms_norm backward row kernel (composed where rows
//              are longer than the scratchpad); grad_weight = the column sums of
//              grad * x^
// eps defaults to f32's epsilon for every float dtype, as PyTorch's.
#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <torch/library.h>

#include <limits>

#include "PrivateUse1NativeFunctions.h"
#include "cpu_fallback.h"
#include "kernel_launch.h"
#include "runtime/runtime.h"

namespace npusim {
namespace {

using npu::compiler::OpDesc;
using npu::compiler::OpKind;

// [rows, L] for the last normalized_shape.size() dims, which must be normalized_shape.
int64_t row_length(const at::Tensor& input, at::IntArrayRef normalized_shape, const std::optional<at::Tensor>& weight) {
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  TORCH_CHECK(k >= 1 && input.dim() >= k && input.sizes().slice(size_t(input.dim() - k)) == normalized_shape,
              "rms_norm: normalized_shape ", normalized_shape, " is not the trailing shape of an input of shape ", input.sizes());
  TORCH_CHECK(!defined(weight) || weight->sizes() == normalized_shape, "rms_norm: the weight's shape ", weight->sizes(),
              " is not normalized_shape ", normalized_shape);
  int64_t length = 1;
  for (const int64_t d : normalized_shape) length *= d;
  return length;
}

// rstd's shape: the input's leading dims, then a 1 per normalized dim.
std::vector<int64_t> statistics_shape(const at::Tensor& input, size_t normalized_dims) {
  std::vector<int64_t> shape(input.sizes().begin(), input.sizes().end() - static_cast<std::ptrdiff_t>(normalized_dims));
  shape.resize(shape.size() + normalized_dims, 1);
  return shape;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> NpuNativeFunctions::_fused_rms_norm(const at::Tensor& input, at::IntArrayRef normalized_shape,
                                                                       const std::optional<at::Tensor>& weight, std::optional<double> eps) {
  const int64_t length = row_length(input, normalized_shape, weight);
  const double epsilon = eps.value_or(std::numeric_limits<float>::epsilon());
  if (!chip_floats(input, {&weight}) || length == 0) {
    return fall_back<at::_ops::_fused_rms_norm>("", input, normalized_shape, on_host(weight), eps);
  }
  const int64_t rows = input.numel() / length;
  const at::Tensor x = input.reshape({rows, length});
  const at::Tensor xf = as_f32(x);
  const at::Tensor rstd = at::rsqrt((xf * xf).mean(-1, true) + epsilon);
  at::Tensor y = new_npu(input.sizes(), input.scalar_type());
  std::vector<at::Tensor> inputs = {x};
  if (defined(weight)) inputs.push_back(weight->reshape({length}));
  const at::Tensor y_rows = y.view({rows, length});
  const auto make_op = [&] {
    std::vector<npu::compiler::TensorDesc> described;
    for (const at::Tensor& t : inputs) described.push_back(describe(t));
    OpDesc op(OpKind::RMS_NORM, described, describe(y_rows));
    op.epsilon = epsilon;
    return op;
  };
  if (!try_run(make_op, inputs, y_rows)) {
    at::Tensor out = xf * rstd;
    if (defined(weight)) out = out * as_f32(weight->reshape({length}));
    y_rows.copy_(out);
  }
  return {y, rstd.view(statistics_shape(input, normalized_shape.size()))};
}

std::tuple<at::Tensor, at::Tensor> NpuNativeFunctions::_fused_rms_norm_backward(const at::Tensor& grad, const at::Tensor& input,
                                                                                at::IntArrayRef normalized_shape, const at::Tensor& rstd,
                                                                                const std::optional<at::Tensor>& weight,
                                                                                std::array<bool, 2> mask) {
  const int64_t length = row_length(input, normalized_shape, weight);
  const int64_t rows = length == 0 ? 0 : input.numel() / length;
  const std::optional<at::Tensor> g_opt = grad, r_opt = rstd;
  at::Tensor grad_x, grad_weight;
  if (!chip_floats(input, {&weight, &g_opt, &r_opt}) || length == 0) {
    // (PyTorch has no CPU kernel for this op: the same formulas with the CPU's ops.)
    note_cpu_fallback("aten::_fused_rms_norm_backward");
    const at::Tensor x = input.cpu().to(at::kFloat).reshape({rows, length}), g = grad.cpu().to(at::kFloat).reshape({rows, length});
    const at::Tensor r = rstd.cpu().to(at::kFloat).reshape({rows, 1}), xhat = x * r;
    const at::Tensor h = defined(weight) ? g * weight->cpu().to(at::kFloat).reshape({length}) : g;
    if (mask[0]) grad_x = to_npu((r * (h - xhat * (h * xhat).mean(-1, true))).to(input.scalar_type()).view(input.sizes()));
    if (mask[1] && defined(weight)) grad_weight = to_npu((g * xhat).sum(0).to(weight->scalar_type()).view(weight->sizes()));
    return {grad_x, grad_weight};
  }
  const at::Tensor x = input.reshape({rows, length}), g = grad.reshape({rows, length}), r = rstd.reshape({rows, 1});
  const auto normalized = [&] { return as_f32(x) * as_f32(r); };
  if (mask[0]) {
    const at::Tensor result = new_npu({rows, length}, input.scalar_type());
    std::vector<at::Tensor> inputs = {g, x, r};
    if (defined(weight)) inputs.push_back(weight->reshape({length}));
    if (try_run_kind(OpKind::RMS_NORM_BACKWARD, inputs, result)) {
      grad_x = result.view(input.sizes());
    } else {  // rows longer than the scratchpad holds
      const at::Tensor xhat = normalized(), gf = as_f32(g);
      const at::Tensor h = defined(weight) ? gf * as_f32(weight->reshape({length})) : gf;
      grad_x = (as_f32(r) * (h - xhat * (h * xhat).mean(-1, true))).to(input.scalar_type()).view(input.sizes());
    }
  }
  if (mask[1] && defined(weight)) grad_weight = (as_f32(g) * normalized()).sum(0).to(weight->scalar_type()).view(weight->sizes());
  return {grad_x, grad_weight};
}

}  // namespace npusim
