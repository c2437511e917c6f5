// Resampling along the last two dims on the npu, where every output row
// (column) reads input rows (columns) by a fixed map: nearest and bilinear
// upsampling (nearest, bilinear, bicubic), reflection and replication padding, and their gradients.
//
// Index maps (nearest, padding) move values: two gathers (index_select along
// H, then W) with the indices made on the host, exact; for nearest
// upsampling by a whole factor (2x, 3x, ...) one copy kernel instead,
// reading x through stride-0 dims. Bilinear's weights make it a product:
// out = Wh x Ww^T, Wh [OH, H] and Ww [OW, W] with two nonzeros per row, as
// two f32 matmuls. Every gradient is the transposed map applied to the
// output's gradient, Wh^T g Ww with the 0/1 matrices of an index map (for
// whole factors: sums over the factor's dims), in f32 rounded once to the
// gradient's dtype: the sums of the positions that read one input element,
// in another order than the CPU's.
//
// The maps follow ATen's CPU kernels: nearest reads min(floor(o * scale),
// in - 1), scale = 1 / scale_factor when one is given, else in / out, in
// float; bilinear reads src = scale * (o + 0.5) - 0.5 clamped at 0 (or
// (in - 1) / (out - 1) * o with align_corners) between floor(src) and the
// next index, with weights 1 - l and l; reflection mirrors about the edge
// elements, replication repeats them; bicubic reads src = scale * (o + 0.5) -
// 0.5 (not clamped; scale * o with align_corners) at floor(src) - 1 .. floor(src)
// + 2, clamped to the dim, with Keys' cubic convolution weights (A = -0.75) of
// t = src - floor(src), all as ATen's CPU kernel computes them, in float. Like
// bilinear it is a product of weight matrices, with four nonzeros per row.
// 1-D (linear, nearest) and 3-D (trilinear, nearest) upsampling and 3-D padding
// apply the same maps to the last dim, or to H and W and then D; adaptive average pooling of any
// sizes is a weighted map too (resampling.h). Antialiased and nearest-exact
// modes, bicubic in 1-D or 3-D, int64 and f64, and empty tensors go to the CPU,
// counted.
#include <ATen/Functions.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <vector>

#include "PrivateUse1NativeFunctions.h"
#include "cpu_fallback.h"
#include "kernel_launch.h"
#include "resampling.h"

namespace npusim {
namespace {

// One dim's map: the input index each output index reads (an index map), or
// the weights of the input indices each output index sums (a weighted map:
// `weights` [out, in] row-major).
struct DimMap {
  int64_t in = 0, out = 0;
  std::vector<int32_t> indices;
  std::vector<float> weights;
};

DimMap nearest_map(int64_t in, int64_t out, std::optional<double> scale_factor) {
  const float scale = scale_factor && *scale_factor > 0 ? static_cast<float>(1.0 / *scale_factor) : static_cast<float>(in) / static_cast<float>(out);
  DimMap map{in, out, {}, {}};
  for (int64_t o = 0; o < out; ++o) map.indices.push_back(int32_t(std::min<int64_t>(int64_t(std::floor(float(o) * scale)), in - 1)));
  return map;
}

// Padding by `before` and `after` elements: mirrored about the edge elements (reflect) or repeating them.
DimMap padding_map(int64_t in, int64_t before, int64_t after, bool reflect) {
  DimMap map{in, in + before + after, {}, {}};
  for (int64_t o = 0; o < map.out; ++o) {
    int64_t i = o - before;
    if (reflect) {
      i = i < 0 ? -i : i >= in ? 2 * (in - 1) - i : i;
    } else {
      i = std::clamp<int64_t>(i, 0, in - 1);
    }
    map.indices.push_back(int32_t(i));
  }
  return map;
}

// ATen's area_pixel_compute_scale, in float.
float source_scale(int64_t in, int64_t out, bool align_corners, std::optional<double> scale_factor) {
  if (align_corners) return out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.0f;
  return scale_factor && *scale_factor > 0 ? static_cast<float>(1.0 / *scale_factor) : static_cast<float>(in) / static_cast<float>(out);
}

DimMap linear_map(int64_t in, int64_t out, bool align_corners, std::optional<double> scale_factor) {
  const float scale = source_scale(in, out, align_corners, scale_factor);
  DimMap map{in, out, {}, std::vector<float>(size_t(out * in), 0.0f)};
  for (int64_t o = 0; o < out; ++o) {
    const float source = align_corners ? scale * float(o) : std::max(scale * (float(o) + 0.5f) - 0.5f, 0.0f);
    const int64_t first = std::min<int64_t>(int64_t(std::floor(source)), in - 1);
    const int64_t second = first + (first < in - 1 ? 1 : 0);
    const float lambda = std::min(std::max(source - float(first), 0.0f), 1.0f);
    map.weights[size_t(o * in + first)] += 1.0f - lambda;
    map.weights[size_t(o * in + second)] += lambda;
  }
  return map;
}

DimMap cubic_map(int64_t in, int64_t out, bool align_corners, std::optional<double> scale_factor) {
  const float scale = source_scale(in, out, align_corners, scale_factor);
  constexpr float A = -0.75f;  // Keys' cubic convolution, as ATen
  const auto near = [&](float x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };     // |x| <= 1
  const auto far = [&](float x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };  // 1 < |x| < 2
  DimMap map{in, out, {}, std::vector<float>(size_t(out * in), 0.0f)};
  for (int64_t o = 0; o < out; ++o) {
    const float source = align_corners ? scale * float(o) : scale * (float(o) + 0.5f) - 0.5f;
    const float floor_source = std::floor(source);
    const float t = source - floor_source;
    const float weights[4] = {far(t + 1.0f), near(t), near(1.0f - t), far(2.0f - t)};
    for (int64_t k = 0; k < 4; ++k) {
      const int64_t i = std::clamp<int64_t>(int64_t(floor_source) - 1 + k, 0, in - 1);
      map.weights[size_t(o * in + i)] += weights[k];
    }
  }
  return map;
}

// Adaptive average pooling's map: output o averages ATen's window [floor(o in / out), ceil((o + 1) in / out)).
DimMap adaptive_map(int64_t in, int64_t out) {
  DimMap map{in, out, {}, std::vector<float>(size_t(out * in), 0.0f)};
  for (int64_t o = 0; o < out; ++o) {
    const int64_t start = o * in / out, end = ((o + 1) * in + out - 1) / out;
    for (int64_t i = start; i < end; ++i) map.weights[size_t(o * in + i)] = 1.0f / float(end - start);
  }
  return map;
}

// s where output index o reads input index o / s for every o (out = s * in), else 0.
int64_t whole_factor(const DimMap& map) {
  if (map.indices.empty() || map.in <= 0 || map.out % map.in != 0) return 0;
  const int64_t factor = map.out / map.in;
  for (int64_t o = 0; o < map.out; ++o)
    if (map.indices[size_t(o)] != o / factor) return 0;
  return factor;
}

// The map as a matrix [out, in] in f32 on the npu (an index map's is 0/1).
at::Tensor matrix(const DimMap& map) {
  at::Tensor m = at::zeros({map.out, map.in}, at::TensorOptions().dtype(at::kFloat));
  if (map.indices.empty()) {
    std::copy(map.weights.begin(), map.weights.end(), m.data_ptr<float>());
  } else {
    for (int64_t o = 0; o < map.out; ++o) m.data_ptr<float>()[o * map.in + map.indices[size_t(o)]] = 1.0f;
  }
  return to_npu(m);
}

// x [..., H, W] read through the maps of its last two dims (none: the dim as it is), f32 sums rounded once.
at::Tensor apply_maps(const at::Tensor& x, const DimMap* rows, const DimMap& cols) {
  const bool index_maps = !cols.indices.empty() && (!rows || !rows->indices.empty());
  if (index_maps) {
    const auto gather = [](const at::Tensor& t, int64_t dim, const DimMap& map) {
      return at::index_select(t, dim, to_npu(at::tensor(map.indices, at::TensorOptions().dtype(at::kInt))));
    };
    return gather(rows ? gather(x, -2, *rows) : x, -1, cols);
  }
  at::Tensor result = at::matmul(as_f32(x), matrix(cols).t());
  if (rows) result = at::matmul(matrix(*rows), result);
  return (result.scalar_type() == x.scalar_type() ? result : result.to(x.scalar_type())).contiguous();
}

// The gradient of apply_maps: the transposed maps applied to the output's gradient, in f32, rounded once.
at::Tensor apply_transposed_maps(const at::Tensor& grad, const DimMap* rows, const DimMap& cols) {
  at::Tensor result = at::matmul(as_f32(grad), matrix(cols));
  if (rows) result = at::matmul(matrix(*rows).t(), result);
  return (result.scalar_type() == grad.scalar_type() ? result : result.to(grad.scalar_type())).contiguous();
}

// The forward's operand: on the npu, `dims` dims, not empty, of a dtype the chip moves (weighted maps: floats).
bool resamplable(const at::Tensor& x, std::initializer_list<int64_t> dims, bool weighted = false) {
  return on_npu(x) && std::find(dims.begin(), dims.end(), x.dim()) != dims.end() && x.numel() > 0 &&
         (weighted ? chip_float_dtype(x.scalar_type()) : chip_dtype(x.scalar_type()));
}

// ---- nearest ----------------------------------------------------------------------

}  // namespace

at::Tensor NpuNativeFunctions::upsample_nearest2d(const at::Tensor& x, c10::IntArrayRef output_size, std::optional<double> scales_h,
                                                  std::optional<double> scales_w) {
  if (!resamplable(x, {4}) || output_size.size() != 2) {
    return fall_back<at::_ops::upsample_nearest2d>("not a non-empty 4-D tensor of a chip dtype", x, output_size, scales_h, scales_w);
  }
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  const DimMap rows = nearest_map(h, output_size[0], scales_h), cols = nearest_map(w, output_size[1], scales_w);
  const int64_t fh = whole_factor(rows), fw = whole_factor(cols);
  if (fh && fw) return x.view({n, c, h, 1, w, 1}).expand({n, c, h, fh, w, fw}).reshape({n, c, rows.out, cols.out});
  return apply_maps(x, &rows, cols);
}

at::Tensor NpuNativeFunctions::upsample_nearest2d_backward(const at::Tensor& grad, c10::IntArrayRef output_size,
                                                           c10::IntArrayRef input_size, std::optional<double> scales_h,
                                                           std::optional<double> scales_w) {
  if (!chip_float(grad) || grad.dim() != 4 || grad.numel() == 0 || input_size.size() != 4 || output_size.size() != 2) {
    return fall_back<at::_ops::upsample_nearest2d_backward>("not a non-empty 4-D f32, bf16 or f16 gradient", grad, output_size, input_size, scales_h, scales_w);
  }
  const int64_t n = input_size[0], c = input_size[1], h = input_size[2], w = input_size[3];
  const DimMap rows = nearest_map(h, output_size[0], scales_h), cols = nearest_map(w, output_size[1], scales_w);
  const int64_t fh = whole_factor(rows), fw = whole_factor(cols);
  if (!fh || !fw) return apply_transposed_maps(grad, &rows, cols);
  const at::Tensor sums = at::sum(as_f32(grad).reshape({n, c, h, fh, w, fw}), {3, 5});
  return sums.scalar_type() == grad.scalar_type() ? sums : sums.to(grad.scalar_type());
}

namespace {

// ---- bilinear and bicubic: weighted maps --------------------------------------------

using MapBuilder = DimMap (*)(int64_t in, int64_t out, bool align_corners, std::optional<double> scale_factor);

// `fallback(reason)`: the op itself on the CPU fallback.
using Fallback = std::function<at::Tensor(const char* reason)>;

at::Tensor weighted_upsample(MapBuilder build, const at::Tensor& x, c10::IntArrayRef output_size, bool align_corners,
                             std::optional<double> scales_h, std::optional<double> scales_w, const Fallback& fallback) {
  if (!resamplable(x, {4}, true) || output_size.size() != 2) return fallback("not a non-empty 4-D f32, bf16 or f16 tensor");
  const DimMap rows = build(x.size(2), output_size[0], align_corners, scales_h);
  const DimMap cols = build(x.size(3), output_size[1], align_corners, scales_w);
  return apply_maps(x, &rows, cols);
}

at::Tensor weighted_upsample_backward(MapBuilder build, const at::Tensor& grad, c10::IntArrayRef output_size, c10::IntArrayRef input_size,
                                      bool align_corners, std::optional<double> scales_h, std::optional<double> scales_w,
                                      const Fallback& fallback) {
  if (!chip_float(grad) || grad.dim() != 4 || grad.numel() == 0 || input_size.size() != 4 || output_size.size() != 2)
    return fallback("not a non-empty 4-D f32, bf16 or f16 gradient");
  const DimMap rows = build(input_size[2], output_size[0], align_corners, scales_h);
  const DimMap cols = build(input_size[3], output_size[1], align_corners, scales_w);
  return apply_transposed_maps(grad, &rows, cols);
}

}  // namespace

at::Tensor NpuNativeFunctions::upsample_bilinear2d(const at::Tensor& x, c10::IntArrayRef output_size, bool align_corners,
                                                   std::optional<double> scales_h, std::optional<double> scales_w) {
  return weighted_upsample(linear_map, x, output_size, align_corners, scales_h, scales_w, [&](const char* reason) {
    return fall_back<at::_ops::upsample_bilinear2d>(reason, x, output_size, align_corners, scales_h, scales_w);
  });
}
at::Tensor NpuNativeFunctions::upsample_bilinear2d_backward(const at::Tensor& grad, c10::IntArrayRef output_size,
                                                            c10::IntArrayRef input_size, bool align_corners, std::optional<double> scales_h,
                                                            std::optional<double> scales_w) {
  return weighted_upsample_backward(linear_map, grad, output_size, input_size, align_corners, scales_h, scales_w, [&](const char* reason) {
    return fall_back<at::_ops::upsample_bilinear2d_backward>(reason, grad, output_size, input_size, align_corners, scales_h, scales_w);
  });
}

at::Tensor NpuNativeFunctions::upsample_bicubic2d(const at::Tensor& x, c10::IntArrayRef output_size, bool align_corners,
                                                  std::optional<double> scales_h, std::optional<double> scales_w) {
  return weighted_upsample(cubic_map, x, output_size, align_corners, scales_h, scales_w, [&](const char* reason) {
    return fall_back<at::_ops::upsample_bicubic2d>(reason, x, output_size, align_corners, scales_h, scales_w);
  });
}
at::Tensor NpuNativeFunctions::upsample_bicubic2d_backward(const at::Tensor& grad, c10::IntArrayRef output_size,
                                                           c10::IntArrayRef input_size, bool align_corners, std::optional<double> scales_h,
                                                           std::optional<double> scales_w) {
  return weighted_upsample_backward(cubic_map, grad, output_size, input_size, align_corners, scales_h, scales_w, [&](const char* reason) {
    return fall_back<at::_ops::upsample_bicubic2d_backward>(reason, grad, output_size, input_size, align_corners, scales_h, scales_w);
  });
}

namespace {

// ---- 1-D and 3-D upsampling: the 2-D maps on the last dim, or on (H, W) and then D ------------------------

// x [N, C, D, H, W] through the maps of D, H and W, in f32 (index maps: in x's dtype, exact).
at::Tensor apply_maps_3d(const at::Tensor& x, const DimMap& depth, const DimMap& rows, const DimMap& cols) {
  const at::Tensor planes = apply_maps(cols.indices.empty() ? as_f32(x) : x, &rows, cols);
  return apply_maps(planes.movedim(2, -1), nullptr, depth).movedim(-1, 2).contiguous();
}
at::Tensor apply_transposed_maps_3d(const at::Tensor& grad, const DimMap& depth, const DimMap& rows, const DimMap& cols) {
  const at::Tensor planes = apply_transposed_maps(as_f32(grad), &rows, cols);
  return apply_transposed_maps(planes.movedim(2, -1), nullptr, depth).movedim(-1, 2).contiguous();
}
at::Tensor in_dtype(const at::Tensor& result, const at::Tensor& like) {
  return result.scalar_type() == like.scalar_type() ? result : result.to(like.scalar_type());
}

}  // namespace

at::Tensor NpuNativeFunctions::upsample_linear1d(const at::Tensor& x, c10::IntArrayRef output_size, bool align_corners,
                                                 std::optional<double> scales) {
  if (!resamplable(x, {3}, true) || output_size.size() != 1) {
    return fall_back<at::_ops::upsample_linear1d>("not a non-empty 3-D f32, bf16 or f16 tensor", x, output_size, align_corners, scales);
  }
  return apply_maps(x, nullptr, linear_map(x.size(2), output_size[0], align_corners, scales));
}
at::Tensor NpuNativeFunctions::upsample_linear1d_backward(const at::Tensor& grad, c10::IntArrayRef output_size, c10::IntArrayRef input_size,
                                                          bool align_corners, std::optional<double> scales) {
  if (!chip_float(grad) || grad.dim() != 3 || grad.numel() == 0 || input_size.size() != 3 || output_size.size() != 1) {
    return fall_back<at::_ops::upsample_linear1d_backward>("not a non-empty 3-D f32, bf16 or f16 gradient", grad, output_size, input_size, align_corners, scales);
  }
  return apply_transposed_maps(grad, nullptr, linear_map(input_size[2], output_size[0], align_corners, scales));
}

at::Tensor NpuNativeFunctions::upsample_nearest1d(const at::Tensor& x, c10::IntArrayRef output_size, std::optional<double> scales) {
  if (!resamplable(x, {3}) || output_size.size() != 1) {
    return fall_back<at::_ops::upsample_nearest1d>("not a non-empty 3-D tensor of a chip dtype", x, output_size, scales);
  }
  return apply_maps(x, nullptr, nearest_map(x.size(2), output_size[0], scales));
}
at::Tensor NpuNativeFunctions::upsample_nearest1d_backward(const at::Tensor& grad, c10::IntArrayRef output_size,
                                                           c10::IntArrayRef input_size, std::optional<double> scales) {
  if (!chip_float(grad) || grad.dim() != 3 || grad.numel() == 0 || input_size.size() != 3 || output_size.size() != 1) {
    return fall_back<at::_ops::upsample_nearest1d_backward>("not a non-empty 3-D f32, bf16 or f16 gradient", grad, output_size, input_size, scales);
  }
  return apply_transposed_maps(grad, nullptr, nearest_map(input_size[2], output_size[0], scales));
}

at::Tensor NpuNativeFunctions::upsample_trilinear3d(const at::Tensor& x, c10::IntArrayRef output_size, bool align_corners,
                                                    std::optional<double> scales_d, std::optional<double> scales_h,
                                                    std::optional<double> scales_w) {
  if (!resamplable(x, {5}, true) || output_size.size() != 3) {
    return fall_back<at::_ops::upsample_trilinear3d>("not a non-empty 5-D f32, bf16 or f16 tensor", x, output_size, align_corners, scales_d, scales_h, scales_w);
  }
  const DimMap depth = linear_map(x.size(2), output_size[0], align_corners, scales_d);
  const DimMap rows = linear_map(x.size(3), output_size[1], align_corners, scales_h);
  const DimMap cols = linear_map(x.size(4), output_size[2], align_corners, scales_w);
  return in_dtype(apply_maps_3d(x, depth, rows, cols), x);
}
at::Tensor NpuNativeFunctions::upsample_trilinear3d_backward(const at::Tensor& grad, c10::IntArrayRef output_size,
                                                             c10::IntArrayRef input_size, bool align_corners,
                                                             std::optional<double> scales_d, std::optional<double> scales_h,
                                                             std::optional<double> scales_w) {
  if (!chip_float(grad) || grad.dim() != 5 || grad.numel() == 0 || input_size.size() != 5 || output_size.size() != 3) {
    return fall_back<at::_ops::upsample_trilinear3d_backward>("not a non-empty 5-D f32, bf16 or f16 gradient", grad, output_size, input_size, align_corners, scales_d, scales_h, scales_w);
  }
  const DimMap depth = linear_map(input_size[2], output_size[0], align_corners, scales_d);
  const DimMap rows = linear_map(input_size[3], output_size[1], align_corners, scales_h);
  const DimMap cols = linear_map(input_size[4], output_size[2], align_corners, scales_w);
  return in_dtype(apply_transposed_maps_3d(grad, depth, rows, cols), grad);
}

at::Tensor NpuNativeFunctions::upsample_nearest3d(const at::Tensor& x, c10::IntArrayRef output_size, std::optional<double> scales_d,
                                                  std::optional<double> scales_h, std::optional<double> scales_w) {
  if (!resamplable(x, {5}) || output_size.size() != 3) {
    return fall_back<at::_ops::upsample_nearest3d>("not a non-empty 5-D tensor of a chip dtype", x, output_size, scales_d, scales_h, scales_w);
  }
  return apply_maps_3d(x, nearest_map(x.size(2), output_size[0], scales_d), nearest_map(x.size(3), output_size[1], scales_h),
                       nearest_map(x.size(4), output_size[2], scales_w));
}
at::Tensor NpuNativeFunctions::upsample_nearest3d_backward(const at::Tensor& grad, c10::IntArrayRef output_size,
                                                           c10::IntArrayRef input_size, std::optional<double> scales_d,
                                                           std::optional<double> scales_h, std::optional<double> scales_w) {
  if (!chip_float(grad) || grad.dim() != 5 || grad.numel() == 0 || input_size.size() != 5 || output_size.size() != 3) {
    return fall_back<at::_ops::upsample_nearest3d_backward>("not a non-empty 5-D f32, bf16 or f16 gradient", grad, output_size, input_size, scales_d, scales_h, scales_w);
  }
  return in_dtype(apply_transposed_maps_3d(grad, nearest_map(input_size[2], output_size[0], scales_d),
                                           nearest_map(input_size[3], output_size[1], scales_h),
                                           nearest_map(input_size[4], output_size[2], scales_w)),
                  grad);
}

// The .out forms the structured ops dispatch to.

namespace {

// ---- reflection and replication padding (1-D: [C, W] or [N, C, W]; 2-D: [C, H, W] or [N, C, H, W]; 3-D: [C, D, H, W] or [N, C, D, H, W]) ----

// padding: (left, right) or (left, right, top, bottom). Reflection needs each pad below its dim (else the
// CPU gives its error); negative pads (cropping) go to the CPU too.
bool paddable(const at::Tensor& t, c10::IntArrayRef padding, bool reflect) {
  for (size_t i = 0; i < padding.size(); ++i) {
    const int64_t size = t.size(t.dim() - 1 - int64_t(i / 2));
    if (padding[i] < 0 || (reflect && padding[i] >= size)) return false;
  }
  return true;
}

// The CPU's padding and its gradient, for 1, 2 or 3 padded dims (2, 4 or 6 pads).
// padding: (left, right[, top, bottom[, front, back]]) of the last 1, 2 or 3 dims (3-D: the maps of H
// and W, then D's), an unbatched or batched tensor.
// Op: the padding op asked for (at::_ops::NAME), for the CPU fallback.
template <typename Op>
at::Tensor pad(const at::Tensor& x, c10::IntArrayRef padding, bool reflect) {
  const int64_t dims = int64_t(padding.size() / 2);
  const bool ok = (padding.size() == 2 || padding.size() == 4 || padding.size() == 6) && resamplable(x, {dims + 1, dims + 2}) &&
                  paddable(x, padding, reflect);
  if (!ok) {
    return fall_back<Op>(paddable(x, padding, reflect) ? "a rank, dtype or size the chip path does not take"
                                                       : "a negative padding, or a reflection not below its dim",
                         x, padding);
  }
  const DimMap cols = padding_map(x.size(-1), padding[0], padding[1], reflect);
  if (dims == 1) return apply_maps(x, nullptr, cols);
  const DimMap rows = padding_map(x.size(-2), padding[2], padding[3], reflect);
  if (dims == 2) return apply_maps(x, &rows, cols);
  const DimMap depth = padding_map(x.size(-3), padding[4], padding[5], reflect);
  return apply_maps(apply_maps(x, &rows, cols).movedim(-3, -1), nullptr, depth).movedim(-1, -3).contiguous();
}

template <typename Op>
at::Tensor pad_backward(const at::Tensor& grad, const at::Tensor& x, c10::IntArrayRef padding, bool reflect) {
  const int64_t dims = int64_t(padding.size() / 2);
  if (!chip_float(grad) || grad.numel() == 0 || x.numel() == 0 || grad.dim() != x.dim() || !paddable(x, padding, reflect) || dims < 1 ||
      dims > 3 || grad.dim() < dims + 1) {
    return fall_back<Op>("an empty or non-float gradient, or a padding the forward ran on the CPU", grad, x, padding);
  }
  const DimMap cols = padding_map(x.size(-1), padding[0], padding[1], reflect);
  if (dims == 1) return apply_transposed_maps(grad, nullptr, cols);
  const DimMap rows = padding_map(x.size(-2), padding[2], padding[3], reflect);
  if (dims == 2) return apply_transposed_maps(grad, &rows, cols);
  const DimMap depth = padding_map(x.size(-3), padding[4], padding[5], reflect);
  const at::Tensor planes = apply_transposed_maps(as_f32(grad), &rows, cols);
  return in_dtype(apply_transposed_maps(planes.movedim(-3, -1), nullptr, depth).movedim(-1, -3).contiguous(), grad);
}

}  // namespace

at::Tensor NpuNativeFunctions::reflection_pad1d(const at::Tensor& x, c10::IntArrayRef p) { return pad<at::_ops::reflection_pad1d>(x, p, true); }
at::Tensor NpuNativeFunctions::reflection_pad2d(const at::Tensor& x, c10::IntArrayRef p) { return pad<at::_ops::reflection_pad2d>(x, p, true); }
at::Tensor NpuNativeFunctions::replication_pad1d(const at::Tensor& x, c10::IntArrayRef p) { return pad<at::_ops::replication_pad1d>(x, p, false); }
at::Tensor NpuNativeFunctions::replication_pad2d(const at::Tensor& x, c10::IntArrayRef p) { return pad<at::_ops::replication_pad2d>(x, p, false); }
at::Tensor NpuNativeFunctions::reflection_pad3d(const at::Tensor& x, c10::IntArrayRef p) { return pad<at::_ops::reflection_pad3d>(x, p, true); }
at::Tensor NpuNativeFunctions::replication_pad3d(const at::Tensor& x, c10::IntArrayRef p) { return pad<at::_ops::replication_pad3d>(x, p, false); }
at::Tensor NpuNativeFunctions::reflection_pad3d_backward(const at::Tensor& g, const at::Tensor& x, c10::IntArrayRef p) {
  return pad_backward<at::_ops::reflection_pad3d_backward>(g, x, p, true);
}
at::Tensor NpuNativeFunctions::replication_pad3d_backward(const at::Tensor& g, const at::Tensor& x, c10::IntArrayRef p) {
  return pad_backward<at::_ops::replication_pad3d_backward>(g, x, p, false);
}

at::Tensor NpuNativeFunctions::reflection_pad1d_backward(const at::Tensor& g, const at::Tensor& x, c10::IntArrayRef p) {
  return pad_backward<at::_ops::reflection_pad1d_backward>(g, x, p, true);
}
at::Tensor NpuNativeFunctions::reflection_pad2d_backward(const at::Tensor& g, const at::Tensor& x, c10::IntArrayRef p) {
  return pad_backward<at::_ops::reflection_pad2d_backward>(g, x, p, true);
}
at::Tensor NpuNativeFunctions::replication_pad1d_backward(const at::Tensor& g, const at::Tensor& x, c10::IntArrayRef p) {
  return pad_backward<at::_ops::replication_pad1d_backward>(g, x, p, false);
}
at::Tensor NpuNativeFunctions::replication_pad2d_backward(const at::Tensor& g, const at::Tensor& x, c10::IntArrayRef p) {
  return pad_backward<at::_ops::replication_pad2d_backward>(g, x, p, false);
}

at::Tensor adaptive_average_f32(const at::Tensor& x, std::optional<int64_t> rows_out, int64_t cols_out) {
  const DimMap cols = adaptive_map(x.size(-1), cols_out);
  if (!rows_out) return apply_maps(as_f32(x), nullptr, cols);
  const DimMap rows = adaptive_map(x.size(-2), *rows_out);
  return apply_maps(as_f32(x), &rows, cols);
}

at::Tensor adaptive_average_backward_f32(const at::Tensor& grad, std::optional<int64_t> rows_in, int64_t cols_in) {
  const DimMap cols = adaptive_map(cols_in, grad.size(-1));
  if (!rows_in) return apply_transposed_maps(as_f32(grad), nullptr, cols);
  const DimMap rows = adaptive_map(*rows_in, grad.size(-2));
  return apply_transposed_maps(as_f32(grad), &rows, cols);
}

}  // namespace npusim
