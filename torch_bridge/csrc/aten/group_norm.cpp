// Group norm on the npu (native_group_norm and its backward), from the layer-norm
// row kernel, row reductions and broadcast elementwise kernels, in f32, rounded
// once to the input's dtype. x [N, C, *] is viewed as [N, G, D] with D = C/G
// times the positions: each group is a row.
//   forward    mean and rstd [N, G] (which autograd saves) from the row kernels:
//              the mean, then the mean square of x - mean; y = x^ * weight[c] +
//              bias[c] (without an affine, x^ by the layer-norm row kernel)
//   backward   x^ = (x - mean) * rstd, g = grad * weight[c];
//              grad_x = rstd * (g - mean_D(g) - x^ * mean_D(g * x^)): the layer-norm
//              backward row kernel on the groups as rows (g, x, mean, rstd),
//              grad_weight[c] = sum over N and positions of grad * x^,
//              grad_bias[c] = sum of grad
#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <torch/library.h>

#include "PrivateUse1NativeFunctions.h"
#include "custom_ops.h"
#include "cpu_fallback.h"
#include "kernel_launch.h"

namespace npusim {
namespace {

using npu::compiler::OpKind;

// [C] as [1, G, C/G, 1], to broadcast over x viewed as [N, G, C/G, positions].
at::Tensor per_channel(const at::Tensor& v, int64_t group) { return as_f32(v).view({1, group, -1, 1}); }

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> NpuNativeFunctions::native_group_norm(const at::Tensor& input,
                                                                                     const std::optional<at::Tensor>& weight,
                                                                                     const std::optional<at::Tensor>& bias, int64_t n,
                                                                                     int64_t c, int64_t hxw, int64_t group, double eps) {
  if (!chip_floats(input, {&weight, &bias}) || group <= 0 || c % group != 0) {
    return fall_back<at::_ops::native_group_norm>("not chip floats, or channels that do not divide into the groups", input, weight, bias, n, c,
                                                  hxw, group, eps);
  }
  const at::ScalarType dtype = input.scalar_type();
  const at::Tensor rows = dense(input).view({n * group, -1});
  const at::Tensor xf = as_f32(rows);
  const at::Tensor mean = xf.mean(-1, true), centered = xf - mean;
  const at::Tensor rstd = at::rsqrt((centered * centered).mean(-1, true) + eps);
  at::Tensor out;
  if (defined(weight) || defined(bias)) {
    // The affine step in f32 on the f32 x^ (one rounding at the end, as the CPU does).
    at::Tensor y = (centered * rstd).view({n, group, c / group, -1});
    if (defined(weight)) y = y * per_channel(*weight, group);
    if (defined(bias)) y = y + per_channel(*bias, group);
    out = y.to(dtype);
  } else {
    out = layer_norm_npu(rows, std::nullopt, std::nullopt, eps);  // x^ in one kernel, rounded once
  }
  return {out.view(input.sizes()), mean.view({n, group}).to(dtype), rstd.view({n, group}).to(dtype)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> NpuNativeFunctions::native_group_norm_backward(const at::Tensor& grad,
                                                                                              const at::Tensor& input,
                                                                                              const at::Tensor& mean,
                                                                                              const at::Tensor& rstd,
                                                                                              const std::optional<at::Tensor>& weight,
                                                                                              int64_t n, int64_t c, int64_t hxw,
                                                                                              int64_t group, std::array<bool, 3> mask) {
  const std::optional<at::Tensor> g_opt = grad, m_opt = mean, r_opt = rstd;
  if (!chip_floats(input, {&weight, &g_opt, &m_opt, &r_opt}) || group <= 0 || c % group != 0) {
    return fall_back<at::_ops::native_group_norm_backward>("not chip floats, or channels that do not divide into the groups", grad, input, mean,
                                                           rstd, weight, n, c, hxw, group, mask);
  }
  const at::ScalarType dtype = input.scalar_type();
  // [N, G, C/G, positions]: the group's elements are the last two dims. (f32 copies only where used.)
  const std::vector<int64_t> grouped = {n, group, c / group, input.numel() / std::max<int64_t>(n * c, 1)};
  const auto x = [&] { return as_f32(dense(input)).view(grouped); };
  const auto gf = [&] { return as_f32(dense(grad)).view(grouped); };
  const at::Tensor mean4 = as_f32(mean).view({n, group, 1, 1}), rstd4 = as_f32(rstd).view({n, group, 1, 1});
  const auto normalized = [&] { return (x() - mean4) * rstd4; };
  at::Tensor grad_x, grad_weight, grad_bias;
  if (mask[0]) {
    // The row kernel reads grad and x in their dtype; the weight (per channel, not per element of a
    // group's row) is applied to grad first.
    const at::Tensor g = defined(weight) ? gf() * per_channel(*weight, group) : dense(grad).view(grouped);
    const std::vector<int64_t> rows = {n * group, input.numel() / std::max<int64_t>(n * group, 1)};
    const at::Tensor result = new_npu(rows, dtype);
    if (try_run_kind(OpKind::LAYER_NORM_BACKWARD, {g.view(rows), dense(input).view(rows), mean.reshape({rows[0], 1}), rstd.reshape({rows[0], 1})},
                     result)) {
      grad_x = result.view(input.sizes());
    } else {  // groups longer than the scratchpad holds
      const at::Tensor xhat = normalized(), h = as_f32(g);
      const std::vector<int64_t> elements = {2, 3};
      grad_x = (rstd4 * (h - h.mean(elements, true) - xhat * (h * xhat).mean(elements, true))).to(dtype).view(input.sizes());
    }
  }
  // Per channel: over the batch and the positions.
  const auto channel_sum = [&](const at::Tensor& t) { return t.view({n, c, -1}).sum({0, 2}); };
  if (mask[1] && defined(weight)) grad_weight = channel_sum(gf() * normalized()).to(weight->scalar_type());
  if (mask[2]) grad_bias = channel_sum(gf()).to(dtype);
  return {grad_x, grad_weight, grad_bias};
}

}  // namespace npusim
