// 3-D convolutions (video, volumetric images) on the npu as sums of 2-D ones over the kernel's depth:
// with x padded along D, kernel slice kd reads the depth planes kd * dilation + od * stride for every
// output plane od, so
//   y[:, :, od] = sum over kd of conv2d(x[:, :, kd * dd + od * sd], w[:, :, kd]) (+ bias)
// each conv2d taking the N * OD planes as its batch (the 2-D path: im2col and the tensor core). Its
// gradients are the 2-D ones of each kd: the weight's slice kd from conv2d's weight gradient, the
// input's gradient added into the planes slice kd read. Partial sums in f32, rounded once (each 2-D
// result is itself rounded to bf16 for bf16 operands: KD roundings where the CPU makes one, within
// bf16's tolerance). Transposed 3-D convolutions run on the CPU, counted.
#include "conv3d.h"

#include <ATen/Functions.h>

#include <vector>

#include "kernel_launch.h"

namespace npusim {
namespace {

struct Depth {
  int64_t stride, padding, dilation, kernel, out;
};

bool chip_operands(const at::Tensor& x, const at::Tensor& w, c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation) {
  return x.dim() == 5 && w.dim() == 5 && chip_float(x) && chip_float(w) && x.scalar_type() == w.scalar_type() && x.numel() > 0 &&
         stride.size() == 3 && padding.size() == 3 && dilation.size() == 3;
}

Depth depth_of(const at::Tensor& x, const at::Tensor& w, c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation) {
  const int64_t kernel = w.size(2);
  return {stride[0], padding[0], dilation[0], kernel, (x.size(2) + 2 * padding[0] - dilation[0] * (kernel - 1) - 1) / stride[0] + 1};
}

// x padded along D (zeros), as the planes of every kernel slice read.
at::Tensor depth_padded(const at::Tensor& x, const Depth& d) {
  return d.padding == 0 ? x : at::constant_pad_nd(x, {0, 0, 0, 0, d.padding, d.padding}, 0);
}

// The planes kernel slice kd reads from padded x [N, C, D', H, W], as a 2-D batch [N * OD, C, H, W].
at::Tensor planes_read(const at::Tensor& padded, const Depth& d, int64_t kd) {
  const int64_t first = kd * d.dilation;
  const at::Tensor planes = at::slice(padded, 2, first, first + d.stride * (d.out - 1) + 1, d.stride);  // [N, C, OD, H, W]
  return planes.permute({0, 2, 1, 3, 4}).reshape({-1, padded.size(1), padded.size(3), padded.size(4)});
}

}  // namespace

at::Tensor conv3d_forward(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& bias, c10::IntArrayRef stride,
                          c10::IntArrayRef padding, c10::IntArrayRef dilation, int64_t groups) {
  if (!chip_operands(x, w, stride, padding, dilation)) return {};
  const Depth d = depth_of(x, w, stride, padding, dilation);
  if (d.out <= 0) return {};
  const at::Tensor padded = depth_padded(x, d);
  at::Tensor sum;
  for (int64_t kd = 0; kd < d.kernel; ++kd) {
    const at::Tensor plane_bias = kd == 0 && bias && bias->defined() ? *bias : at::Tensor();
    const at::Tensor y = at::convolution(planes_read(padded, d, kd), w.select(2, kd), plane_bias, stride.slice(1), padding.slice(1),
                                         dilation.slice(1), false, {0, 0}, groups);
    sum = sum.defined() ? at::add(sum, y.to(at::kFloat)) : y.to(at::kFloat);
  }
  const int64_t n = x.size(0);
  return sum.view({n, d.out, sum.size(1), sum.size(2), sum.size(3)}).permute({0, 2, 1, 3, 4}).contiguous().to(x.scalar_type());
}

bool conv3d_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& w, c10::IntArrayRef stride, c10::IntArrayRef padding,
                     c10::IntArrayRef dilation, int64_t groups, std::array<bool, 3> mask,
                     std::tuple<at::Tensor, at::Tensor, at::Tensor>* gradients) {
  if (!chip_operands(x, w, stride, padding, dilation) || !chip_float(grad) || grad.dim() != 5) return false;
  const Depth d = depth_of(x, w, stride, padding, dilation);
  const at::Tensor padded = depth_padded(x, d);
  // The output's gradient as the 2-D batch [N * OD, O, OH, OW].
  const at::Tensor grad_planes = grad.permute({0, 2, 1, 3, 4}).reshape({-1, grad.size(1), grad.size(3), grad.size(4)});
  at::Tensor grad_padded = mask[0] ? at::zeros(padded.sizes(), padded.options().dtype(at::kFloat)) : at::Tensor();
  std::vector<at::Tensor> weight_slices;
  for (int64_t kd = 0; kd < d.kernel; ++kd) {
    const at::Tensor planes = planes_read(padded, d, kd);
    auto [gi, gw, unused] = at::convolution_backward(grad_planes, planes, w.select(2, kd), std::nullopt, stride.slice(1), padding.slice(1),
                                                     dilation.slice(1), false, {0, 0}, groups, {mask[0], mask[1], false});
    if (mask[0]) {
      const int64_t first = kd * d.dilation;
      at::Tensor read = at::slice(grad_padded, 2, first, first + d.stride * (d.out - 1) + 1, d.stride);  // [N, C, OD, H, W], a view
      read.add_(gi.view({x.size(0), d.out, x.size(1), x.size(3), x.size(4)}).permute({0, 2, 1, 3, 4}).to(at::kFloat));
    }
    if (mask[1]) weight_slices.push_back(gw);
  }
  at::Tensor grad_x, grad_w, grad_bias;
  if (mask[0]) grad_x = at::narrow(grad_padded, 2, d.padding, x.size(2)).contiguous().to(x.scalar_type());
  if (mask[1]) grad_w = at::stack(weight_slices, 2);
  if (mask[2]) grad_bias = at::sum(as_f32(grad), {0, 2, 3, 4}).to(grad.scalar_type());
  *gradients = {grad_x, grad_w, grad_bias};
  return true;
}

}  // namespace npusim
