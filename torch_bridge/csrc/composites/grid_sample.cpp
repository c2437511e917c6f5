// F.grid_sample on the npu (grid_sampler_2d and its backward: spatial transformers, flow warping),
// bilinear and nearest, with zeros or border padding, from elementwise chains, the gather kernel
// and scatter_add (no atomic add on the chip), in f32, rounded once:
//   coordinates  ATen's unnormalization of the grid, ((g + 1) / 2)(size - 1) with align_corners,
//                else ((g + 1) size - 1) / 2; border clamps them to [0, size - 1]; NaN and infinite
//                ones become -100, outside the image, as ATen's safe_downgrade_to_int_range makes them
//   bilinear     the four neighbours floor(x) + {0, 1}, floor(y) + {0, 1}, each gathered from its
//                (n, c) plane by its flat index, zero where it lies outside the image, and weighted by
//                (1 - wx or wx)(1 - wy or wy); a non-finite coordinate's weights are NaN, so its output
//                is NaN, as the CPU's; nearest: the neighbour at round(x), round(y) (ties to even, as
//                nearbyint), zero outside
//   backward     the input's gradient: the weighted output gradient scatter-added at each corner's
//                index; the grid's: sum over channels of the output gradient times each corner's
//                value times its weight's derivative, times the unnormalization's scale (and zero
//                where border padding clamped the coordinate, as ATen's clip_coordinates_set_grad)
// Reflection padding, bicubic interpolation, 5-D grids, bf16 and f16 (which the CPU computes in the
// dtype, rounding every step of the coordinates) and beyond 2^24 scatter terms per plane: the CPU, counted.
#include <ATen/Functions.h>
#include <torch/library.h>

#include <array>
#include <optional>
#include <tuple>
#include <vector>

#include "PrivateUse1NativeFunctions.h"
#include "aten/cpu_fallback.h"
#include "aten/kernel_launch.h"

namespace npusim {
namespace {

constexpr int64_t kBilinear = 0, kNearest = 1;
constexpr int64_t kZeros = 0, kBorder = 1;
constexpr int64_t kMaxScatterTerms = int64_t{1} << 24;

bool on_chip(const at::Tensor& input, const at::Tensor& grid, int64_t interpolation, int64_t padding) {
  // f32 only: the CPU computes bf16 and f16 sampling in the dtype, rounding every step of the coordinates.
  return input.scalar_type() == at::kFloat && grid.scalar_type() == at::kFloat && on_npu(input) && on_npu(grid) && input.dim() == 4 &&
         grid.dim() == 4 && grid.size(3) == 2 && input.numel() > 0 &&
         grid.numel() > 0 && (interpolation == kBilinear || interpolation == kNearest) && (padding == kZeros || padding == kBorder) &&
         4 * grid.size(1) * grid.size(2) * input.size(2) * input.size(3) <= kMaxScatterTerms;
}

at::Tensor f32_scalar(double value) { return at::scalar_tensor(value, at::TensorOptions().dtype(at::kFloat)); }

// One grid component as a source coordinate along a dim of `size` [N, Ho, Wo] (f32), and where
// border padding clamped it (for the gradient).
struct Coordinate {
  at::Tensor value, raw, clamped;  // value: non-finite ones moved outside; raw: as computed (weights keep its NaN, as ATen's)
  double scale;  // d value / d grid, before clamping
};
Coordinate source_coordinate(const at::Tensor& g, int64_t size, int64_t padding, bool align_corners) {
  const double scale = align_corners ? (double(size) - 1) / 2 : double(size) / 2;
  const std::string chain = align_corners ? "add(in0, 1); mul(%0, 0.5); mul(%1, " + chain_constant(double(size) - 1) + ")"
                                          : "add(in0, 1); mul(%0, " + chain_constant(double(size)) + "); sub(%1, 1); mul(%2, 0.5)";
  at::Tensor x = elementwise_chain({g}, chain);
  at::Tensor clamped;
  if (padding == kBorder) {
    clamped = at::logical_or(at::le(x, 0), at::ge(x, double(size - 1)));
    x = at::clamp(x, 0, double(size - 1));
  }
  return {at::where(at::isfinite(x), x, f32_scalar(-100.0)), x, clamped, scale};
}

// A neighbour at integer coordinates (xi, yi) [N, L] (f32): its flat index in the plane (clamped
// into it, int64 [N, 1, L]) and whether it lies inside.
struct Neighbour {
  at::Tensor index, inside;
};
Neighbour neighbour(const at::Tensor& xi, const at::Tensor& yi, int64_t height, int64_t width) {
  const at::Tensor inside =
      at::logical_and(at::logical_and(at::ge(xi, 0), at::le(xi, double(width - 1))), at::logical_and(at::ge(yi, 0), at::le(yi, double(height - 1))));
  const at::Tensor flat = elementwise_chain({at::clamp(xi, 0, double(width - 1)), at::clamp(yi, 0, double(height - 1))},
                                            "mul(in1, " + chain_constant(double(width)) + "); add(%0, in0)");
  return {flat.to(at::kInt).to(at::kLong).unsqueeze(1), inside};
}

struct Sampling {
  Coordinate x, y;
  std::vector<Neighbour> corners;  // bilinear: (0,0), (1,0), (0,1), (1,1) as (dx, dy); nearest: one
  std::vector<at::Tensor> weights; // [N, L]; NaN where a coordinate is not finite (ATen's products with it)
  at::Tensor wx, wy;               // bilinear: the fractional parts
};

Sampling sample_points(const at::Tensor& input, const at::Tensor& grid, int64_t interpolation, int64_t padding, bool align_corners) {
  const int64_t n = input.size(0), height = input.size(2), width = input.size(3), l = grid.size(1) * grid.size(2);
  const at::Tensor g = as_f32(grid).reshape({n, l, 2});
  Sampling s{source_coordinate(g.select(2, 0), width, padding, align_corners), source_coordinate(g.select(2, 1), height, padding, align_corners),
             {}, {}, {}, {}};
  if (interpolation == kNearest) {
    s.corners.push_back(neighbour(at::round(s.x.value), at::round(s.y.value), height, width));
    s.weights.push_back(at::ones({n, l}, g.options()));
    return s;
  }
  const at::Tensor x0 = at::floor(s.x.value), y0 = at::floor(s.y.value);
  s.wx = at::sub(s.x.raw, at::floor(s.x.raw)), s.wy = at::sub(s.y.raw, at::floor(s.y.raw));
  for (int dy = 0; dy < 2; ++dy)
    for (int dx = 0; dx < 2; ++dx) {
      const Neighbour corner = neighbour(dx ? at::add(x0, 1) : x0, dy ? at::add(y0, 1) : y0, height, width);
      s.weights.push_back(at::mul(dx ? s.wx : at::rsub(s.wx, 1), dy ? s.wy : at::rsub(s.wy, 1)));
      s.corners.push_back(corner);
    }
  return s;
}

// The plane's values at a neighbour, zero where it lies outside: [N, C, L].
at::Tensor gathered(const at::Tensor& planes, const Neighbour& corner) {
  const at::Tensor values = at::gather(planes, 2, corner.index.expand({planes.size(0), planes.size(1), corner.index.size(2)}));
  return at::where(corner.inside.unsqueeze(1), values, f32_scalar(0.0));
}

}  // namespace

at::Tensor NpuNativeFunctions::grid_sampler_2d(const at::Tensor& input, const at::Tensor& grid, int64_t interpolation, int64_t padding,
                                               bool align_corners) {
  if (!on_chip(input, grid, interpolation, padding)) {
    return fall_back<at::_ops::grid_sampler_2d>("reflection padding, bicubic, not 4-D f32, or beyond 2^24 scatter terms", input, grid, interpolation, padding, align_corners);
  }
  const int64_t n = input.size(0), c = input.size(1);
  const Sampling s = sample_points(input, grid, interpolation, padding, align_corners);
  const at::Tensor planes = as_f32(input).reshape({n, c, input.size(2) * input.size(3)});
  at::Tensor out;
  for (size_t k = 0; k < s.corners.size(); ++k) {
    const at::Tensor term = at::mul(gathered(planes, s.corners[k]), s.weights[k].unsqueeze(1));
    out = k == 0 ? term : at::add(out, term);
  }
  return out.view({n, c, grid.size(1), grid.size(2)}).to(input.scalar_type());
}

std::tuple<at::Tensor, at::Tensor> NpuNativeFunctions::grid_sampler_2d_backward(const at::Tensor& grad, const at::Tensor& input,
                                                                                const at::Tensor& grid, int64_t interpolation,
                                                                                int64_t padding, bool align_corners,
                                                                                std::array<bool, 2> output_mask) {
  if (!on_chip(input, grid, interpolation, padding) || !chip_float(grad)) {
    return fall_back<at::_ops::grid_sampler_2d_backward>("reflection padding, bicubic, not 4-D f32, or beyond 2^24 scatter terms", grad, input,
                                                         grid, interpolation, padding, align_corners, output_mask);
  }
  const int64_t n = input.size(0), c = input.size(1), plane = input.size(2) * input.size(3), l = grid.size(1) * grid.size(2);
  const Sampling s = sample_points(input, grid, interpolation, padding, align_corners);
  const at::Tensor g = as_f32(grad).reshape({n, c, l});
  at::Tensor grad_input, grad_grid;
  if (output_mask[0]) {
    // Every corner's weighted gradient, scatter-added at its index (one scatter over all corners).
    std::vector<at::Tensor> sources, indices;
    for (size_t k = 0; k < s.corners.size(); ++k) {
      sources.push_back(at::mul(g, at::where(s.corners[k].inside, s.weights[k], f32_scalar(0.0)).unsqueeze(1)));
      indices.push_back(s.corners[k].index.expand({n, c, l}));
    }
    grad_input = at::scatter_add(at::zeros({n, c, plane}, g.options()), 2, at::cat(indices, 2), at::cat(sources, 2))
                     .view(input.sizes())
                     .to(input.scalar_type());
  }
  if (output_mask[1]) {
    if (interpolation == kNearest) {
      grad_grid = at::zeros(grid.sizes(), grid.options());
    } else {
      // d out / d x = sum over corners of value * (dx ? 1 : -1) * (dy ? wy : 1 - wy) (values zero outside); likewise for y.
      const at::Tensor planes = as_f32(input).reshape({n, c, plane});
      at::Tensor gx, gy;
      for (int k = 0; k < 4; ++k) {
        const int dx = k % 2, dy = k / 2;
        const at::Tensor weighted = at::sum(at::mul(g, gathered(planes, s.corners[size_t(k)])), {1});  // [N, L]
        const at::Tensor along_x = dy ? s.wy : at::rsub(s.wy, 1), along_y = dx ? s.wx : at::rsub(s.wx, 1);
        const at::Tensor tx = at::mul(weighted, dx ? along_x : at::neg(along_x)), ty = at::mul(weighted, dy ? along_y : at::neg(along_y));
        gx = k == 0 ? tx : at::add(gx, tx);
        gy = k == 0 ? ty : at::add(gy, ty);
      }
      gx = at::mul(gx, s.x.scale), gy = at::mul(gy, s.y.scale);
      if (padding == kBorder) gx = at::where(s.x.clamped, f32_scalar(0.0), gx), gy = at::where(s.y.clamped, f32_scalar(0.0), gy);
      grad_grid = at::stack({gx, gy}, -1).view(grid.sizes()).to(grid.scalar_type());
    }
  }
  return {grad_input, grad_grid};
}

}  // namespace npusim
