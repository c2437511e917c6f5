// 2-D pooling on the npu, from the compiler's kernels:
//
//   max pool       im2col padding with -inf; then, window position by
//                  position, a comparison and two selects keep the running
//                  maximum and its input index (the first maximum wins, as
//                  on the CPU; a NaN is not propagated, unlike the CPU)
//   average pool   im2col laid out with the window last, a row sum, a
//                  division by each output's divisor (computed on the host
//                  from the geometry: PyTorch's rules for padding, ceil mode
//                  and divisor_override)
//   max values     (npusim::max_pool2d, where a graph never reads the indices)
//                  im2col padding with -inf, then one elementwise maximum per
//                  window position (NaN propagates, as on the CPU)
//   adaptive avg   when the output size divides the input's: row means; other sizes (and 3-D)
//                  as products with averaging matrices (resampling.h)
//   adaptive max   when the output size divides the input's: the max pool
//                  above with kernel = stride = input / output size
//   unfold (im2col) the window kernel itself, into [N, C*KH*KW, OH*OW]
//   avg pool 3-D   with count_include_pad and without ceil mode or a divisor override every
//                  window divides by KD*KH*KW, so it is separable: the 2-D average over H and W,
//                  then one over D (in f32, rounded once); its gradient the two 2-D gradients
//   fold (col2im)  unfold's adjoint: each window position's columns added
//                  into a zeroed, padded f32 image, as the backward below
//   backward       each window position's share added into a zeroed,
//                  padded f32 gradient through a strided view, then cropped
// Geometries outside these go to the CPU, counted.
#include <ATen/Functions.h>
#include <torch/library.h>

#include <array>
#include <limits>
#include <optional>
#include <vector>

#include "PrivateUse1NativeFunctions.h"
#include "cpu_fallback.h"
#include "kernel_launch.h"
#include "resampling.h"

namespace npusim {
namespace {

using npu::compiler::Window;

// A pooling's 2-D geometry, from ATen's one-or-two-value arguments.
struct Pool {
  std::array<int64_t, 2> kernel{1, 1}, stride{1, 1}, padding{0, 0}, dilation{1, 1};
  bool ceil_mode = false;

  static std::array<int64_t, 2> pair(c10::IntArrayRef v, std::array<int64_t, 2> otherwise) {
    if (v.empty()) return otherwise;
    return {v[0], v.size() > 1 ? v[1] : v[0]};
  }
  Pool(c10::IntArrayRef k, c10::IntArrayRef s, c10::IntArrayRef p, c10::IntArrayRef d, bool ceil) : ceil_mode(ceil) {
    kernel = pair(k, {1, 1}), stride = pair(s, kernel), padding = pair(p, {0, 0}), dilation = pair(d, {1, 1});
  }
  // ATen's pooling_output_shape.
  int64_t out_size(int d, int64_t in) const {
    const int64_t k = kernel[size_t(d)], s = stride[size_t(d)], p = padding[size_t(d)], dil = dilation[size_t(d)];
    const int64_t numerator = in + 2 * p - dil * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
    int64_t out = (numerator >= 0 ? numerator / s : -((-numerator + s - 1) / s)) + 1;
    if (ceil_mode && (out - 1) * s >= in + p) --out;
    return out;
  }
  Window window() const {
    Window w;
    w.stride = stride, w.padding = padding, w.dilation = dilation;
    return w;
  }
  bool valid() const {
    for (int d = 0; d < 2; ++d)
      if (kernel[size_t(d)] < 1 || stride[size_t(d)] < 1 || dilation[size_t(d)] < 1 || padding[size_t(d)] < 0) return false;
    return true;
  }
};

// Batched 4-D view of a 3-D ([C, H, W]) or 4-D input.
at::Tensor batched(const at::Tensor& t) { return t.dim() == 3 ? t.unsqueeze(0) : t; }
at::Tensor unbatched(const at::Tensor& t, bool was_3d) { return was_3d ? t.squeeze(0) : t; }

// The input's flat index (h * W + w) that window position (i, j) of each output reads: [KH, KW, OH, OW] i32 on the npu.
at::Tensor window_positions(const Pool& pool, int64_t width, int64_t oh, int64_t ow) {
  at::Tensor host = at::empty({pool.kernel[0], pool.kernel[1], oh, ow}, at::TensorOptions().dtype(at::kInt));
  int32_t* p = host.data_ptr<int32_t>();
  for (int64_t i = 0; i < pool.kernel[0]; ++i)
    for (int64_t j = 0; j < pool.kernel[1]; ++j)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t x = 0; x < ow; ++x) {
          const int64_t h = y * pool.stride[0] + i * pool.dilation[0] - pool.padding[0];
          const int64_t w = x * pool.stride[1] + j * pool.dilation[1] - pool.padding[1];
          *p++ = int32_t(h * width + w);
        }
  return to_npu(host);
}

// grad_input [N, C, H, W] (f32) = the sum over window positions (i, j) of share(i, j) [N, C, OH, OW],
// each added where that position reads: a zeroed, padded buffer, one strided add per position.
at::Tensor scatter_windows(const Pool& pool, int64_t n, int64_t c, int64_t height, int64_t width, int64_t oh, int64_t ow,
                           const std::function<at::Tensor(int64_t, int64_t)>& share) {
  const int64_t span_h = (oh - 1) * pool.stride[0] + 1, span_w = (ow - 1) * pool.stride[1] + 1;
  const int64_t padded_h = std::max((pool.kernel[0] - 1) * pool.dilation[0] + span_h, height + pool.padding[0]);
  const int64_t padded_w = std::max((pool.kernel[1] - 1) * pool.dilation[1] + span_w, width + pool.padding[1]);
  at::Tensor padded = at::zeros({n, c, padded_h, padded_w}, at::TensorOptions().dtype(at::kFloat).device(kNpu));
  for (int64_t i = 0; i < pool.kernel[0]; ++i)
    for (int64_t j = 0; j < pool.kernel[1]; ++j) {
      at::Tensor slab = padded.slice(2, i * pool.dilation[0], i * pool.dilation[0] + span_h, pool.stride[0])
                            .slice(3, j * pool.dilation[1], j * pool.dilation[1] + span_w, pool.stride[1]);
      at::add_out(slab, slab, share(i, j));
    }
  return padded.slice(2, pool.padding[0], pool.padding[0] + height).slice(3, pool.padding[1], pool.padding[1] + width);
}

// The windows of a max pooling of x [N, C, H, W]: [N, C, KH, KW, OH, OW], -inf where they overhang.
at::Tensor max_pool_windows(const at::Tensor& x, const Pool& pool) {
  at::Tensor windows = new_npu({x.size(0), x.size(1), pool.kernel[0], pool.kernel[1], pool.out_size(0, x.size(2)), pool.out_size(1, x.size(3))},
                               x.scalar_type());
  require(im2col_into(x, windows, pool.window(), -std::numeric_limits<double>::infinity()));
  return windows;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> NpuNativeFunctions::max_pool2d_with_indices(const at::Tensor& self, c10::IntArrayRef kernel_size,
                                                                               c10::IntArrayRef stride, c10::IntArrayRef padding,
                                                                               c10::IntArrayRef dilation, bool ceil_mode) {
  const Pool pool(kernel_size, stride, padding, dilation, ceil_mode);
  if (chip_float(self) && (self.dim() == 3 || self.dim() == 4) && pool.valid()) {
    try {
      const at::Tensor x = batched(self);
      const int64_t n = x.size(0), c = x.size(1), oh = pool.out_size(0, x.size(2)), ow = pool.out_size(1, x.size(3));
      const at::Tensor windows = max_pool_windows(x, pool);
      const at::Tensor positions = window_positions(pool, x.size(3), oh, ow);
      at::Tensor best = windows.select(2, 0).select(2, 0).clone();
      at::Tensor index = positions.select(0, 0).select(0, 0).expand({n, c, oh, ow}).clone();
      for (int64_t k = 1; k < pool.kernel[0] * pool.kernel[1]; ++k) {
        const int64_t i = k / pool.kernel[1], j = k % pool.kernel[1];
        const at::Tensor candidate = windows.select(2, i).select(2, j);
        const at::Tensor larger = at::gt(candidate, best);
        best = at::where(larger, candidate, best);
        index = at::where(larger, positions.select(0, i).select(0, j), index);
      }
      // int64 indices: the i32 ones in the low words, zeros in the high words.
      at::Tensor indices = at::zeros({n, c, oh, ow}, at::TensorOptions().dtype(at::kLong).device(kNpu));
      indices.view(at::kInt).slice(3, 0, std::nullopt, 2).copy_(index);
      return {unbatched(best, self.dim() == 3), unbatched(indices, self.dim() == 3)};
    } catch (const OffChip&) {
    }
  }
  return fall_back<at::_ops::max_pool2d_with_indices>("", self, kernel_size, stride, padding, dilation, ceil_mode);
}

at::Tensor NpuNativeFunctions::max_pool2d_with_indices_backward(const at::Tensor& grad, const at::Tensor& self,
                                                                c10::IntArrayRef kernel_size, c10::IntArrayRef stride,
                                                                c10::IntArrayRef padding, c10::IntArrayRef dilation, bool ceil_mode,
                                                                const at::Tensor& indices) {
  const Pool pool(kernel_size, stride, padding, dilation, ceil_mode);
  if (chip_float(self) && chip_float(grad) && on_npu(indices) && (self.dim() == 3 || self.dim() == 4) && pool.valid()) {
    try {
      const at::Tensor x = batched(self), g = as_f32(batched(grad)), picked = dense(batched(indices));
      const int64_t n = x.size(0), c = x.size(1), oh = g.size(2), ow = g.size(3);
      const at::Tensor low = picked.view(at::kInt).slice(3, 0, std::nullopt, 2);
      const at::Tensor positions = window_positions(pool, x.size(3), oh, ow);
      const at::Tensor zero = at::zeros({}, at::TensorOptions().dtype(at::kFloat));
      const at::Tensor gi = scatter_windows(pool, n, c, x.size(2), x.size(3), oh, ow, [&](int64_t i, int64_t j) {
        return at::where(at::eq(low, positions.select(0, i).select(0, j)), g, zero);
      });
      return unbatched(gi.to(self.scalar_type()).contiguous(), self.dim() == 3);
    } catch (const OffChip&) {
    }
  }
  return fall_back<at::_ops::max_pool2d_with_indices_backward>("", grad, self, kernel_size, stride, padding, dilation, ceil_mode, indices);
}

namespace {

// Adaptive max pooling where the output size divides the input's: windows of H/OH x W/OW,
// which do not overlap, and their indices (h * W + w in each plane) as max_pool2d_with_indices'.
std::optional<Pool> dividing_pool(const at::Tensor& self, c10::IntArrayRef output_size) {
  if ((self.dim() != 3 && self.dim() != 4) || output_size.size() != 2) return std::nullopt;
  const int64_t h = self.size(-2), w = self.size(-1), oh = output_size[0], ow = output_size[1];
  if (oh <= 0 || ow <= 0 || h % oh != 0 || w % ow != 0 || h == 0 || w == 0) return std::nullopt;
  const std::array<int64_t, 2> window{h / oh, w / ow};
  return Pool(window, window, {}, {}, false);
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> NpuNativeFunctions::adaptive_max_pool2d(const at::Tensor& self, c10::IntArrayRef output_size) {
  const std::optional<Pool> pool = dividing_pool(self, output_size);
  if (pool && chip_float(self) && self.numel() > 0)
    return at::max_pool2d_with_indices(self, pool->kernel, pool->stride, pool->padding, pool->dilation, false);
  return fall_back<at::_ops::adaptive_max_pool2d>("an output size that does not divide the input's, or not a chip float", self, output_size);
}
std::tuple<at::Tensor&, at::Tensor&> NpuNativeFunctions::adaptive_max_pool2d_out(const at::Tensor& self, c10::IntArrayRef output_size,
                                                                                 at::Tensor& out, at::Tensor& indices) {
  auto [values, picked] = NpuNativeFunctions::adaptive_max_pool2d(self, output_size);
  into(values, out);
  into(picked, indices);
  return {out, indices};
}

at::Tensor NpuNativeFunctions::adaptive_max_pool2d_backward(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& indices) {
  const std::optional<Pool> pool = dividing_pool(self, grad.sizes().slice(size_t(grad.dim() - 2)));
  if (pool && chip_float(self) && self.numel() > 0)
    return at::max_pool2d_with_indices_backward(grad, self, pool->kernel, pool->stride, pool->padding, pool->dilation, false, indices);
  return fall_back<at::_ops::adaptive_max_pool2d_backward>("an output size that does not divide the input's, or not a chip float", grad, self, indices);
}

// F.unfold: [N, C, H, W] (or [C, H, W]) into [N, C*KH*KW, OH*OW], the window kernel's own layout.
at::Tensor NpuNativeFunctions::im2col(const at::Tensor& self, c10::IntArrayRef kernel_size, c10::IntArrayRef dilation,
                                      c10::IntArrayRef padding, c10::IntArrayRef stride) {
  const Pool pool(kernel_size, stride, padding, dilation, false);
  if (chip_float(self) && (self.dim() == 3 || self.dim() == 4) && pool.valid() && self.numel() > 0) {
    const at::Tensor x = batched(self);
    const int64_t n = x.size(0), c = x.size(1), oh = pool.out_size(0, x.size(2)), ow = pool.out_size(1, x.size(3));
    if (oh > 0 && ow > 0) {
      at::Tensor cols = new_npu({n, c * pool.kernel[0] * pool.kernel[1], oh * ow}, self.scalar_type());
      if (im2col_into(x, cols.view({n, c, pool.kernel[0], pool.kernel[1], oh, ow}), pool.window(), 0.0))
        return unbatched(cols, self.dim() == 3);
    }
  }
  return fall_back<at::_ops::im2col>("", self, kernel_size, dilation, padding, stride);
}

// F.fold, unfold's adjoint (and its gradient): [N, C*KH*KW, L] summed into [N, C, H, W], in f32,
// rounded once (the CPU adds in the input's dtype: equal in f32, within rounding in bf16 where windows overlap).
at::Tensor NpuNativeFunctions::col2im_symint(const at::Tensor& self, c10::SymIntArrayRef output_size_sym, c10::IntArrayRef kernel_size,
                                             c10::IntArrayRef dilation, c10::IntArrayRef padding, c10::IntArrayRef stride) {
  const std::vector<int64_t> output_size = {output_size_sym[0].expect_int(), output_size_sym[1].expect_int()};
  const Pool pool(kernel_size, stride, padding, dilation, false);
  if (chip_float(self) && (self.dim() == 2 || self.dim() == 3) && pool.valid() && self.numel() > 0) {
    const at::Tensor cols = self.dim() == 2 ? self.unsqueeze(0) : self;
    const int64_t kh = pool.kernel[0], kw = pool.kernel[1], height = output_size[0], width = output_size[1];
    const int64_t oh = pool.out_size(0, height), ow = pool.out_size(1, width);
    if (oh > 0 && ow > 0 && cols.size(1) % (kh * kw) == 0 && cols.size(2) == oh * ow) {
      const int64_t n = cols.size(0), c = cols.size(1) / (kh * kw);
      const at::Tensor windows = as_f32(cols).view({n, c, kh, kw, oh, ow});
      const at::Tensor image = scatter_windows(pool, n, c, height, width, oh, ow,
                                               [&](int64_t i, int64_t j) { return windows.select(2, i).select(2, j); });
      const at::Tensor result = image.to(self.scalar_type()).contiguous();
      return self.dim() == 2 ? result.squeeze(0) : result;
    }
  }
  return fall_back<at::_ops::col2im>("", self, output_size, kernel_size, dilation, padding, stride);
}

namespace {

// Each output's divisor [OH, OW] (f32 on the npu), by ATen's rules.
at::Tensor avg_divisors(const Pool& pool, int64_t height, int64_t width, int64_t oh, int64_t ow, bool count_include_pad,
                        std::optional<int64_t> divisor_override) {
  at::Tensor host = at::empty({oh, ow}, at::TensorOptions().dtype(at::kFloat));
  float* p = host.data_ptr<float>();
  for (int64_t y = 0; y < oh; ++y)
    for (int64_t x = 0; x < ow; ++x) {
      int64_t h0 = y * pool.stride[0] - pool.padding[0], w0 = x * pool.stride[1] - pool.padding[1];
      int64_t h1 = std::min(h0 + pool.kernel[0], height + pool.padding[0]), w1 = std::min(w0 + pool.kernel[1], width + pool.padding[1]);
      const int64_t with_pad = (h1 - h0) * (w1 - w0);
      h0 = std::max<int64_t>(h0, 0), w0 = std::max<int64_t>(w0, 0), h1 = std::min(h1, height), w1 = std::min(w1, width);
      const int64_t inside = (h1 - h0) * (w1 - w0);
      *p++ = float(divisor_override ? *divisor_override : count_include_pad ? with_pad : inside);
    }
  return to_npu(host);
}

// npusim::max_pool2d: the values of max_pool2d_with_indices without the indices.
at::Tensor max_pool2d_values_cpu(const at::Tensor& self, c10::IntArrayRef kernel_size, c10::IntArrayRef stride, c10::IntArrayRef padding,
                                 c10::IntArrayRef dilation, bool ceil_mode) {
  return std::get<0>(at::max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode));
}

at::Tensor max_pool2d_values(const at::Tensor& self, c10::IntArrayRef kernel_size, c10::IntArrayRef stride, c10::IntArrayRef padding,
                             c10::IntArrayRef dilation, bool ceil_mode) {
  const Pool pool(kernel_size, stride, padding, dilation, ceil_mode);
  if (chip_float(self) && (self.dim() == 3 || self.dim() == 4) && pool.valid()) {
    try {
      // Window positions first (im2col's fast layout), then a running maximum over them: one
      // elementwise max per position (a row max over windows of a few elements costs more).
      const at::Tensor windows = max_pool_windows(batched(self), pool);
      at::Tensor best = windows.select(2, 0).select(2, 0);
      for (int64_t k = 1; k < pool.kernel[0] * pool.kernel[1]; ++k)
        best = at::maximum(best, windows.select(2, k / pool.kernel[1]).select(2, k % pool.kernel[1]));
      return unbatched(best.is_contiguous() ? best : best.contiguous(), self.dim() == 3);
    } catch (const OffChip&) {
    }
  }
  return fall_back_by_name<decltype(max_pool2d_values)>("npusim::max_pool2d", "", self, kernel_size, stride, padding, dilation, ceil_mode);
}

}  // namespace

at::Tensor NpuNativeFunctions::avg_pool2d(const at::Tensor& self, c10::IntArrayRef kernel_size, c10::IntArrayRef stride,
                                          c10::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                                          std::optional<int64_t> divisor_override) {
  const Pool pool(kernel_size, stride, padding, {}, ceil_mode);
  if (chip_float(self) && (self.dim() == 3 || self.dim() == 4) && pool.valid() && (!divisor_override || *divisor_override != 0)) {
    try {
      const at::Tensor x = batched(self);
      const int64_t n = x.size(0), c = x.size(1), oh = pool.out_size(0, x.size(2)), ow = pool.out_size(1, x.size(3));
      const int64_t window = pool.kernel[0] * pool.kernel[1];
      // Windows last: [N, C, OH, OW, KH*KW], written through im2col's output strides.
      at::Tensor windows = new_npu({n, c, oh, ow, pool.kernel[0], pool.kernel[1]}, x.scalar_type());
      require(im2col_into(x, windows.permute({0, 1, 4, 5, 2, 3}), pool.window(), 0.0));
      const at::Tensor sums = at::sum(as_f32(windows.view({n, c, oh, ow, window})), {4});
      const at::Tensor out = at::div(sums, avg_divisors(pool, x.size(2), x.size(3), oh, ow, count_include_pad, divisor_override));
      return unbatched(out.to(self.scalar_type()), self.dim() == 3);
    } catch (const OffChip&) {
    }
  }
  return fall_back<at::_ops::avg_pool2d>("", self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override);
}

at::Tensor NpuNativeFunctions::avg_pool2d_backward(const at::Tensor& grad, const at::Tensor& self, c10::IntArrayRef kernel_size,
                                                   c10::IntArrayRef stride, c10::IntArrayRef padding, bool ceil_mode,
                                                   bool count_include_pad, std::optional<int64_t> divisor_override) {
  const Pool pool(kernel_size, stride, padding, {}, ceil_mode);
  if (chip_float(self) && chip_float(grad) && (self.dim() == 3 || self.dim() == 4) && pool.valid() &&
      (!divisor_override || *divisor_override != 0)) {
    try {
      const at::Tensor x = batched(self), g = as_f32(batched(grad));
      const int64_t oh = g.size(2), ow = g.size(3);
      const at::Tensor share = at::div(g, avg_divisors(pool, x.size(2), x.size(3), oh, ow, count_include_pad, divisor_override));
      const at::Tensor gi = scatter_windows(pool, x.size(0), x.size(1), x.size(2), x.size(3), oh, ow, [&](int64_t, int64_t) { return share; });
      return unbatched(gi.to(self.scalar_type()).contiguous(), self.dim() == 3);
    } catch (const OffChip&) {
    }
  }
  return fall_back<at::_ops::avg_pool2d_backward>("", grad, self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override);
}

namespace {

// A 3-D pooling's (D, H, W) triple from ATen's one-or-three-value arguments.
std::array<int64_t, 3> triple(c10::IntArrayRef v, std::array<int64_t, 3> otherwise) {
  if (v.empty()) return otherwise;
  return v.size() == 1 ? std::array<int64_t, 3>{v[0], v[0], v[0]} : std::array<int64_t, 3>{v[0], v[1], v[2]};
}

struct Pool3d {
  std::array<int64_t, 3> kernel, stride, padding;
  bool separable;  // see the top of the file
  Pool3d(c10::IntArrayRef k, c10::IntArrayRef s, c10::IntArrayRef p, bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor)
      : kernel(triple(k, {1, 1, 1})), stride(triple(s, kernel)), padding(triple(p, {0, 0, 0})),
        separable(count_include_pad && !ceil_mode && !divisor && (k.size() == 1 || k.size() == 3) && (s.empty() || s.size() == 1 || s.size() == 3) &&
                  (p.size() == 1 || p.size() == 3)) {}
  std::vector<int64_t> hw_kernel() const { return {kernel[1], kernel[2]}; }
  std::vector<int64_t> hw_stride() const { return {stride[1], stride[2]}; }
  std::vector<int64_t> hw_padding() const { return {padding[1], padding[2]}; }
  std::vector<int64_t> d_kernel() const { return {kernel[0], 1}; }
  std::vector<int64_t> d_stride() const { return {stride[0], 1}; }
  std::vector<int64_t> d_padding() const { return {padding[0], 0}; }
};

}  // namespace

at::Tensor NpuNativeFunctions::avg_pool3d(const at::Tensor& self, c10::IntArrayRef kernel_size, c10::IntArrayRef stride,
                                          c10::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                                          std::optional<int64_t> divisor_override) {
  const Pool3d pool(kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override);
  if (pool.separable && chip_float(self) && (self.dim() == 4 || self.dim() == 5) && self.numel() > 0) {
    const at::Tensor x = as_f32(self.dim() == 4 ? self.unsqueeze(0) : self);
    const int64_t n = x.size(0), c = x.size(1), d = x.size(2);
    const at::Tensor planes = at::avg_pool2d(x.reshape({n, c * d, x.size(3), x.size(4)}), pool.hw_kernel(), pool.hw_stride(), pool.hw_padding());
    const int64_t oh = planes.size(2), ow = planes.size(3);
    const at::Tensor out = at::avg_pool2d(planes.view({n, c, d, oh * ow}), pool.d_kernel(), pool.d_stride(), pool.d_padding());
    const at::Tensor result = out.view({n, c, out.size(2), oh, ow}).to(self.scalar_type());
    return self.dim() == 4 ? result.squeeze(0) : result;
  }
  return fall_back<at::_ops::avg_pool3d>("ceil mode, count_include_pad=False, a divisor override, or not a chip float", self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override);
}

at::Tensor NpuNativeFunctions::avg_pool3d_backward(const at::Tensor& grad, const at::Tensor& self, c10::IntArrayRef kernel_size,
                                                   c10::IntArrayRef stride, c10::IntArrayRef padding, bool ceil_mode,
                                                   bool count_include_pad, std::optional<int64_t> divisor_override) {
  const Pool3d pool(kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override);
  if (pool.separable && chip_float(self) && chip_float(grad) && (self.dim() == 4 || self.dim() == 5) && self.numel() > 0) {
    const at::Tensor x = self.dim() == 4 ? self.unsqueeze(0) : self, g = as_f32(grad.dim() == 4 ? grad.unsqueeze(0) : grad);
    const int64_t n = x.size(0), c = x.size(1), d = x.size(2), oh = g.size(3), ow = g.size(4);
    const at::TensorOptions f32 = at::TensorOptions().dtype(at::kFloat).device(kNpu);
    // The D step's gradient, then the H and W step's.
    const at::Tensor planes_shape = at::empty({n, c, d, oh * ow}, f32);
    const at::Tensor g_planes = at::avg_pool2d_backward(g.reshape({n, c, g.size(2), oh * ow}), planes_shape, pool.d_kernel(), pool.d_stride(),
                                                        pool.d_padding(), false, true, std::nullopt);
    const at::Tensor input_shape = at::empty({n, c * d, x.size(3), x.size(4)}, f32);
    const at::Tensor g_x = at::avg_pool2d_backward(g_planes.reshape({n, c * d, oh, ow}), input_shape, pool.hw_kernel(), pool.hw_stride(),
                                                   pool.hw_padding(), false, true, std::nullopt);
    const at::Tensor result = g_x.view(x.sizes()).to(self.scalar_type());
    return self.dim() == 4 ? result.squeeze(0) : result;
  }
  return fall_back<at::_ops::avg_pool3d_backward>("ceil mode, count_include_pad=False, a divisor override, or not a chip float", grad, self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override);
}

// Adaptive average pooling where the output size divides the input's: windows of H/OH x W/OW, two row means in f32.
at::Tensor NpuNativeFunctions::_adaptive_avg_pool2d_symint(const at::Tensor& self, c10::SymIntArrayRef output_size_sym) {
  const std::vector<int64_t> output_size = {output_size_sym[0].expect_int(), output_size_sym[1].expect_int()};
  if (chip_float(self) && (self.dim() == 3 || self.dim() == 4)) {
    const at::Tensor x = batched(self);
    const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3), oh = output_size[0], ow = output_size[1];
    if (oh > 0 && ow > 0 && h % oh == 0 && w % ow == 0 && x.numel() > 0) {
      const int64_t kh = h / oh, kw = w / ow;
      const at::Tensor xf = as_f32(dense(x));
      at::Tensor out;
      if (oh == 1 && ow == 1) {
        out = at::mean(xf.view({n, c, h * w}), {2}).view({n, c, 1, 1});
      } else {
        const at::Tensor along_w = at::mean(xf.view({n, c, oh, kh, ow, kw}), {5});
        out = at::mean(dense(along_w.permute({0, 1, 2, 4, 3})), {4});
      }
      return unbatched(out.to(self.scalar_type()), self.dim() == 3);
    }
    // Other sizes (AdaptiveAvgPool1d(4) of 11 columns, a pyramid pooling's 6 x 6 of 20 x 20): overlapping
    // windows of unequal sizes, as two products with averaging matrices (resampling.h).
    if (oh > 0 && ow > 0 && x.numel() > 0) return unbatched(adaptive_average_f32(x, oh, ow).to(self.scalar_type()), self.dim() == 3);
  }
  return fall_back<at::_ops::_adaptive_avg_pool2d>("", self, output_size);
}

at::Tensor NpuNativeFunctions::_adaptive_avg_pool2d_backward(const at::Tensor& grad, const at::Tensor& self) {
  if (chip_float(self) && chip_float(grad) && (self.dim() == 3 || self.dim() == 4)) {
    const at::Tensor x = batched(self), g = batched(grad);
    const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3), oh = g.size(2), ow = g.size(3);
    if (oh > 0 && ow > 0 && h % oh == 0 && w % ow == 0) {
      const int64_t kh = h / oh, kw = w / ow;
      const at::Tensor spread = g.reshape({n, c, oh, 1, ow, 1}).expand({n, c, oh, kh, ow, kw});
      const at::Tensor gi = at::div(as_f32(spread), double(kh * kw)).to(self.scalar_type()).reshape({n, c, h, w});
      return unbatched(gi, self.dim() == 3);
    }
    if (oh > 0 && ow > 0 && x.numel() > 0) return unbatched(adaptive_average_backward_f32(g, h, w).to(self.scalar_type()), self.dim() == 3);
  }
  return fall_back<at::_ops::_adaptive_avg_pool2d_backward>("", grad, self);
}

// 3-D adaptive average pooling ([C, D, H, W] or [N, C, D, H, W]): the averaging matrices over H and W,
// then over D, in f32, rounded once.
at::Tensor NpuNativeFunctions::_adaptive_avg_pool3d_symint(const at::Tensor& self, c10::SymIntArrayRef output_size_sym) {
  const int64_t od = output_size_sym[0].expect_int(), oh = output_size_sym[1].expect_int(), ow = output_size_sym[2].expect_int();
  if (!chip_float(self) || (self.dim() != 4 && self.dim() != 5) || self.numel() == 0 || od <= 0 || oh <= 0 || ow <= 0) {
    return fall_back<at::_ops::_adaptive_avg_pool3d>("not a non-empty 4-D or 5-D f32, bf16 or f16 tensor", self, std::vector<int64_t>{od, oh, ow});
  }
  const int64_t depth_dim = self.dim() - 3;
  const at::Tensor planes = adaptive_average_f32(self, oh, ow);
  return adaptive_average_f32(planes.movedim(depth_dim, -1), std::nullopt, od).movedim(-1, depth_dim).contiguous().to(self.scalar_type());
}

at::Tensor NpuNativeFunctions::_adaptive_avg_pool3d_backward(const at::Tensor& grad, const at::Tensor& self) {
  if (!chip_float(grad) || !chip_float(self) || (self.dim() != 4 && self.dim() != 5) || self.numel() == 0) {
    return fall_back<at::_ops::_adaptive_avg_pool3d_backward>("not a non-empty 4-D or 5-D f32, bf16 or f16 tensor", grad, self);
  }
  const int64_t depth_dim = self.dim() - 3;
  const at::Tensor planes = adaptive_average_backward_f32(grad, self.size(-2), self.size(-1));
  return adaptive_average_backward_f32(planes.movedim(depth_dim, -1), std::nullopt, self.size(depth_dim))
      .movedim(-1, depth_dim)
      .contiguous()
      .to(self.scalar_type());
}
// (Not derived: the functional form is _adaptive_avg_pool3d_backward, another name.)
at::Tensor& NpuNativeFunctions::adaptive_avg_pool3d_backward_out(const at::Tensor& grad, const at::Tensor& self, at::Tensor& grad_input) {
  return into(NpuNativeFunctions::_adaptive_avg_pool3d_backward(grad, self), grad_input);
}
// (Not derived: the functional form is _adaptive_avg_pool3d, another name.)
at::Tensor& NpuNativeFunctions::adaptive_avg_pool3d_out_symint(const at::Tensor& self, c10::SymIntArrayRef output_size, at::Tensor& out) {
  return into(NpuNativeFunctions::_adaptive_avg_pool3d_symint(self, output_size), out);
}

TORCH_LIBRARY_IMPL(npusim, CPU, m) { m.impl("max_pool2d", max_pool2d_values_cpu); }
TORCH_LIBRARY_IMPL(npusim, PrivateUse1, m) { m.impl("max_pool2d", max_pool2d_values); }

}  // namespace npusim
