// 3-D max pooling (max_pool3d_with_indices and its backward) on the npu from the 2-D max pool, slice
// by slice of the window's depth: window slice kd reads depth plane d = od * sd - pd + kd * dd for
// output plane od (none where that lies outside the input), and
//   forward   the 2-D max pool (values, indices h * W + w) of those planes, all output planes as one
//             batch; the running maximum over kd takes a slice's value where it is larger or NaN, as
//             the CPU's loop (depth outermost) does, the first slice with a plane to read at once;
//             the index d * H * W + the 2-D index
//   backward  for each kd, the output gradient where the chosen index lies in that slice's planes
//             (index / (H * W) == d), through the 2-D max pool's backward (with the 2-D indices),
//             added into the planes it read: f32, rounded once
// The 2-D kernel does not propagate a NaN inside a plane (pooling.cpp). Other operands (integers,
// f64, empty tensors, bad geometries): the CPU, counted.
#include <ATen/Functions.h>
#include <torch/library.h>

#include <vector>

#include "PrivateUse1NativeFunctions.h"
#include "cpu_fallback.h"
#include "kernel_launch.h"

namespace npusim {
namespace {

struct Depth {
  int64_t kernel, stride, padding, dilation, in, out;
  // The input plane window slice kd reads for output plane od, or -1.
  int64_t plane(int64_t od, int64_t kd) const {
    const int64_t d = od * stride - padding + kd * dilation;
    return d >= 0 && d < in ? d : -1;
  }
};

// ATen's pooling_output_shape along D.
int64_t pooled_size(int64_t in, int64_t kernel, int64_t pad, int64_t stride, int64_t dilation, bool ceil_mode) {
  int64_t out = (in + 2 * pad - dilation * (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0)) / stride + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

// Three values from an argument of one or three (stride: none means the kernel's).
std::vector<int64_t> triple(c10::IntArrayRef values, c10::IntArrayRef fallback) {
  const c10::IntArrayRef v = values.empty() ? fallback : values;
  return v.size() == 1 ? std::vector<int64_t>{v[0], v[0], v[0]} : std::vector<int64_t>(v.begin(), v.end());
}

struct Geometry {
  std::vector<int64_t> kernel, stride, padding, dilation;
  bool ceil_mode;
  bool valid() const {
    if (kernel.size() != 3 || stride.size() != 3 || padding.size() != 3 || dilation.size() != 3) return false;
    for (size_t i = 0; i < 3; ++i)
      if (kernel[i] <= 0 || stride[i] <= 0 || dilation[i] <= 0 || padding[i] < 0 || padding[i] * 2 > kernel[i]) return false;
    return true;
  }
  Depth depth(int64_t in) const {
    return {kernel[0], stride[0], padding[0], dilation[0], in, pooled_size(in, kernel[0], padding[0], stride[0], dilation[0], ceil_mode)};
  }
};

Geometry geometry_of(c10::IntArrayRef kernel_size, c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation, bool ceil_mode) {
  return {triple(kernel_size, kernel_size), triple(stride, kernel_size), triple(padding, padding), triple(dilation, dilation), ceil_mode};
}

// The planes slice kd reads, as [N, C * OD, H, W] (an absent plane reads plane 0, masked later), and per
// output plane the plane read (i64 [OD], -1 where absent).
std::pair<at::Tensor, std::vector<int64_t>> planes_read(const at::Tensor& x, const Depth& d, int64_t kd) {
  std::vector<int64_t> planes;
  std::vector<int32_t> read;
  for (int64_t od = 0; od < d.out; ++od) {
    planes.push_back(d.plane(od, kd));
    read.push_back(int32_t(std::max<int64_t>(planes.back(), 0)));
  }
  const at::Tensor picked = at::index_select(x, 2, to_npu(at::tensor(read, at::TensorOptions().dtype(at::kInt))));  // [N, C, OD, H, W]
  return {picked.reshape({x.size(0), x.size(1) * d.out, x.size(3), x.size(4)}), planes};
}

// A host vector per output plane as an npu tensor shaped to broadcast over [N, C, OD, OH, OW].
at::Tensor per_plane(const std::vector<int64_t>& values, at::ScalarType dtype) {
  return to_npu(at::tensor(values, at::TensorOptions().dtype(at::kLong)).to(dtype).view({1, 1, int64_t(values.size()), 1, 1}));
}

bool on_chip(const at::Tensor& x, const Geometry& g) { return chip_float(x) && (x.dim() == 4 || x.dim() == 5) && x.numel() > 0 && g.valid(); }

}  // namespace

std::tuple<at::Tensor, at::Tensor> NpuNativeFunctions::max_pool3d_with_indices(const at::Tensor& self, c10::IntArrayRef kernel_size,
                                                                               c10::IntArrayRef stride, c10::IntArrayRef padding,
                                                                               c10::IntArrayRef dilation, bool ceil_mode) {
  const Geometry g = geometry_of(kernel_size, stride, padding, dilation, ceil_mode);
  if (!on_chip(self, g)) {
    return fall_back<at::_ops::max_pool3d_with_indices>("not a non-empty 4-D or 5-D f32, bf16 or f16 tensor with a valid geometry", self, kernel_size, stride, padding, dilation, ceil_mode);
  }
  const at::Tensor x = self.dim() == 4 ? self.unsqueeze(0) : self;
  const Depth d = g.depth(x.size(2));
  const int64_t n = x.size(0), c = x.size(1), plane_size = x.size(3) * x.size(4);
  at::Tensor best, index, seen;
  for (int64_t kd = 0; kd < d.kernel; ++kd) {
    auto [planes, read] = planes_read(x, d, kd);
    auto [values, plane_index] = at::max_pool2d_with_indices(planes, {g.kernel[1], g.kernel[2]}, {g.stride[1], g.stride[2]},
                                                             {g.padding[1], g.padding[2]}, {g.dilation[1], g.dilation[2]}, ceil_mode);
    values = values.view({n, c, d.out, values.size(2), values.size(3)});
    plane_index = plane_index.view(values.sizes());
    std::vector<int64_t> present, offset;
    for (const int64_t p : read) present.push_back(p >= 0), offset.push_back(std::max<int64_t>(p, 0) * plane_size);
    const at::Tensor here = at::ne(per_plane(present, at::kInt), 0);
    const at::Tensor flat = at::add(plane_index, per_plane(offset, at::kLong));
    if (!best.defined()) {
      best = values, index = flat, seen = here.expand(values.sizes());
      continue;
    }
    // Taken where this slice has a plane and (nothing was taken yet, or its value is larger or NaN).
    const at::Tensor take = at::logical_and(here, at::logical_or(at::logical_not(seen), at::logical_or(at::gt(values, best), at::isnan(values))));
    best = at::where(take, values, best), index = at::where(take, flat, index), seen = at::logical_or(seen, here);
  }
  if (self.dim() == 4) return {best.squeeze(0), index.squeeze(0)};
  return {best, index};
}

at::Tensor NpuNativeFunctions::max_pool3d_with_indices_backward(const at::Tensor& grad, const at::Tensor& self,
                                                                c10::IntArrayRef kernel_size, c10::IntArrayRef stride,
                                                                c10::IntArrayRef padding, c10::IntArrayRef dilation, bool ceil_mode,
                                                                const at::Tensor& indices) {
  const Geometry g = geometry_of(kernel_size, stride, padding, dilation, ceil_mode);
  if (!on_chip(self, g) || !chip_float(grad) || !on_npu(indices)) {
    return fall_back<at::_ops::max_pool3d_with_indices_backward>("not non-empty 4-D or 5-D chip floats with a valid geometry", grad, self, kernel_size, stride, padding, dilation, ceil_mode, indices);
  }
  const bool unbatched = self.dim() == 4;
  const at::Tensor x = unbatched ? self.unsqueeze(0) : self, dy = unbatched ? grad.unsqueeze(0) : grad, chosen = unbatched ? indices.unsqueeze(0) : indices;
  const Depth d = g.depth(x.size(2));
  const int64_t n = x.size(0), c = x.size(1), plane_size = x.size(3) * x.size(4);
  const at::Tensor chosen_plane = at::floor_divide(chosen, plane_size);
  at::Tensor grad_x = at::zeros(x.sizes(), x.options().dtype(at::kFloat));
  const at::Tensor zero = at::zeros({}, dy.options().device(at::kCPU));
  for (int64_t kd = 0; kd < d.kernel; ++kd) {
    auto [planes, read] = planes_read(x, d, kd);
    std::vector<int64_t> offset;
    for (const int64_t p : read) offset.push_back(p * plane_size);  // (-1 x H x W where absent: no index equals it)
    const at::Tensor mine = at::eq(chosen_plane, per_plane(read, at::kLong));
    const at::Tensor g_here = at::where(mine, dy, zero).reshape({n, c * d.out, dy.size(3), dy.size(4)});
    const at::Tensor plane_index = at::where(mine, at::sub(chosen, per_plane(offset, at::kLong)), at::zeros({}, chosen.options().device(at::kCPU)))
                                       .reshape(g_here.sizes());
    const at::Tensor g_planes = at::max_pool2d_with_indices_backward(g_here, planes, {g.kernel[1], g.kernel[2]}, {g.stride[1], g.stride[2]},
                                                                     {g.padding[1], g.padding[2]}, {g.dilation[1], g.dilation[2]}, ceil_mode,
                                                                     plane_index);
    // Added into the planes read (index_add along D: output planes of one slice may read one plane twice only when
    // the stride is below the dilation; index_add sums repeats).
    std::vector<int32_t> targets;
    for (const int64_t p : read) targets.push_back(int32_t(std::max<int64_t>(p, 0)));
    const at::Tensor contribution = at::where(at::ne(per_plane(read, at::kLong), -1), g_planes.view({n, c, d.out, x.size(3), x.size(4)}).to(at::kFloat),
                                              at::zeros({}, at::TensorOptions().dtype(at::kFloat)));
    grad_x = at::index_add(grad_x, 2, to_npu(at::tensor(targets, at::TensorOptions().dtype(at::kInt))), contribution);
  }
  const at::Tensor result = grad_x.to(self.scalar_type());
  return unbatched ? result.squeeze(0) : result;
}

}  // namespace npusim
