// Vector norms on the npu (linalg_vector_norm: torch.linalg.vector_norm,
// torch.norm, clip_grad_norm_'s per-tensor and total norms), over any dims,
// from the elementwise kernels and the reductions, in f32, rounded once:
//   ord 2         sqrt(sum(x * x))
//   ord inf/-inf  amax / amin of |x|
//   ord 1         sum(|x|)
//   ord 0         the count of nonzero elements
//   other p       sum(|x| ^ p) ^ (1 / p)
// The CPU accumulates in double: results agree to f32 rounding, and a sum of
// squares beyond f32's range (|x| around 1e19) overflows here. Other dtypes
// (f64, integers) and empty tensors go to the CPU, counted.
//
// Built on it:
//   norm (torch.norm's ATen op, F.pairwise_distance)   linalg_vector_norm, p 2 by default
//   hypot(a, b)    max(|a|, |b|) * sqrt(1 + (min / max)^2) in f32, rounded once: no overflow
//                  where a * a would; 0 where both are 0, inf where either is infinite (a NaN
//                  besides too, as the CPU's); within 2 f32 ulps of the CPU's
//   renorm         each slice along dim scaled by maxnorm / (norm + 1e-7) where its p-norm exceeds
//                  maxnorm (ATen's formula), the norm over the slice's other dims as above
//   cdist          the direct path of _cdist_forward (torch.cdist takes it for p != 2, and for
//                  p 2 with at most 25 rows on each side; bigger p-2 problems run
//                  _euclidean_dist, matmuls already on the chip): the norm of every difference
//                  [..., P, R, M]; its backward (ATen's formula for each p) summed over R
//   pdist          the same over the row pairs i < j (F.pdist), its backward added into both rows
//   _weight_norm_interface and its backward (nn.utils.weight_norm): the norm over every dim but
//                  one, w = v * g / norm, and ATen's gradient formula
#include <ATen/Functions.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <optional>
#include <tuple>
#include <vector>

#include "PrivateUse1NativeFunctions.h"
#include "cpu_fallback.h"
#include "kernel_launch.h"

namespace npusim {

at::Tensor& NpuNativeFunctions::linalg_vector_norm_out(const at::Tensor& self, const at::Scalar& ord, at::OptionalIntArrayRef dim,
                                                       bool keepdim, std::optional<at::ScalarType> dtype, at::Tensor& out) {
  const at::ScalarType result_type = dtype.value_or(self.scalar_type());
  const bool supported = chip_float(self) && self.numel() > 0 && chip_float_dtype(result_type);
  if (!supported) return fall_back<at::_ops::linalg_vector_norm_out>("not a non-empty chip float tensor", self, ord, dim, keepdim, dtype, out);
  at::Tensor result;
  {
    const double p = ord.toDouble();
    const at::Tensor x = as_f32(self);
    // The reductions take the dims as given; none or an empty list is every dim, as for the norm.
    const std::vector<int64_t> all;
    const at::OptionalIntArrayRef dims = dim.has_value() && !dim->empty() ? dim : at::OptionalIntArrayRef(all);
    const auto sum = [&](const at::Tensor& t) { return at::sum(t, dims, keepdim); };
    if (p == 2) {
      result = at::sqrt(sum(at::mul(x, x)));
    } else if (std::isinf(p)) {
      result = p > 0 ? at::amax(at::abs(x), dims.value_or(all), keepdim) : at::amin(at::abs(x), dims.value_or(all), keepdim);
    } else if (p == 1) {
      result = sum(at::abs(x));
    } else if (p == 0) {
      result = sum(at::ne(x, 0).to(at::kFloat));
    } else {
      result = at::pow(sum(at::pow(at::abs(x), p)), 1.0 / p);
    }
  }
  return into(result, out);
}

at::Tensor& NpuNativeFunctions::norm_out(const at::Tensor& self, const std::optional<at::Scalar>& p, at::IntArrayRef dim, bool keepdim,
                                         at::Tensor& out) {
  return NpuNativeFunctions::linalg_vector_norm_out(self, p.value_or(2), dim, keepdim, std::nullopt, out);
}
at::Tensor& NpuNativeFunctions::norm_out(const at::Tensor& self, const std::optional<at::Scalar>& p, at::IntArrayRef dim, bool keepdim,
                                         at::ScalarType dtype, at::Tensor& out) {
  return NpuNativeFunctions::linalg_vector_norm_out(self, p.value_or(2), dim, keepdim, dtype, out);
}
at::Tensor& NpuNativeFunctions::norm_out(const at::Tensor& self, const at::Scalar& p, at::Tensor& out) {
  return NpuNativeFunctions::linalg_vector_norm_out(self, p, std::nullopt, false, std::nullopt, out);
}
at::Tensor& NpuNativeFunctions::norm_out(const at::Tensor& self, const std::optional<at::Scalar>& p, at::ScalarType dtype, at::Tensor& out) {
  return NpuNativeFunctions::linalg_vector_norm_out(self, p.value_or(2), std::nullopt, false, dtype, out);
}

at::Tensor NpuNativeFunctions::hypot(const at::Tensor& a, const at::Tensor& b) {
  const at::ScalarType dtype = at::result_type(a, b);
  if (!chip_float(a) || !chip_float(b) || !chip_float_dtype(dtype) || a.numel() == 0 || b.numel() == 0) {
    return fall_back<at::_ops::hypot>("operands not all non-empty f32, bf16 or f16 on the npu", a, b);
  }
  const at::Tensor af = as_f32(a), bf = as_f32(b);
  const at::Tensor largest = elementwise_chain({af, bf}, "abs(in0); abs(in1); maximum(%0, %1)");
  const at::Tensor scaled =
      elementwise_chain({af, bf, largest}, "abs(in0); abs(in1); minimum(%0, %1); div(%2, in2); mul(%3, %3); add(%4, 1); sqrt(%5); mul(in2, %6)");
  const at::TensorOptions f32 = at::TensorOptions().dtype(at::kFloat);
  const at::Tensor zero = at::zeros({}, f32), inf = at::full({}, std::numeric_limits<float>::infinity(), f32);
  const at::Tensor result = at::where(at::logical_or(at::isinf(af), at::isinf(bf)), inf, at::where(at::eq(largest, 0), zero, scaled));
  return result.to(dtype);
}

namespace {

// Every difference x1[..., i, :] - x2[..., j, :]: [..., P, R, M] in f32. The CPU walks them
// without materializing; here they are one tensor, so problems beyond kMaxDifferences go to the CPU.
constexpr int64_t kMaxDifferences = int64_t(1) << 26;
bool cdist_on_chip(const at::Tensor& x1, const at::Tensor& x2) {
  if (!chip_float(x1) || !chip_float(x2) || x1.dim() < 2 || x2.dim() < 2 || x1.numel() == 0 || x2.numel() == 0) return false;
  const double batch = double(x1.numel()) / double(x1.size(-2) * x1.size(-1));
  return batch * double(x1.size(-2)) * double(x2.size(-2)) * double(x1.size(-1)) <= double(kMaxDifferences);
}
at::Tensor differences(const at::Tensor& x1, const at::Tensor& x2) { return at::sub(as_f32(x1).unsqueeze(-2), as_f32(x2).unsqueeze(-3)); }

}  // namespace

at::Tensor NpuNativeFunctions::_cdist_forward(const at::Tensor& x1, const at::Tensor& x2, double p, std::optional<int64_t> compute_mode) {
  if (!cdist_on_chip(x1, x2) || p < 0) {
    return fall_back<at::_ops::_cdist_forward>("not chip floats, or more than 2^26 differences", x1, x2, p, compute_mode);
  }
  return at::linalg_vector_norm(differences(x1, x2), p, {-1}, false).to(x1.scalar_type());
}

namespace {

// d dist / d a times grad for each difference diff = a - b [..., M] (g and dist broadcast over M):
// the formulas of ATen's distance kernels, per p (0 where the distance is 0, for p = 2 and p above 2).
at::Tensor distance_gradient(const at::Tensor& diff, const at::Tensor& g, const at::Tensor& dist, double p) {
  const at::Tensor zero = at::zeros({}, at::TensorOptions().dtype(at::kFloat));
  if (p == 0) return at::zeros_like(diff);
  if (p == 1) return at::mul(at::sign(diff), g);
  if (p < 2) {
    // sign(diff) |diff|^(p-1) grad / dist^(p-1); 0 where diff is 0 and p < 1
    const at::Tensor t = at::div(at::mul(at::mul(at::sign(diff), at::pow(at::abs(diff), p - 1)), g), at::pow(dist, p - 1));
    return p < 1 ? at::where(at::eq(diff, 0), zero, t) : t;
  }
  if (p == 2) return at::where(at::eq(dist, 0), zero, at::div(at::mul(diff, g), dist));
  if (std::isinf(p)) {
    // grad sign(diff) where |diff| is the distance (1 - min(1, ceil(| |diff| - dist |))), else 0
    const at::Tensor hit = at::rsub(at::clamp_max(at::ceil(at::abs(at::sub(at::abs(diff), dist))), 1), 1);
    return at::mul(at::mul(at::sign(diff), g), hit);
  }
  // diff |diff|^(p-2) grad / dist^(p-1)
  return at::where(at::eq(dist, 0), zero, at::div(at::mul(at::mul(diff, at::pow(at::abs(diff), p - 2)), g), at::pow(dist, p - 1)));
}

}  // namespace

// _cdist_backward: grad_x1[..., i, :] = the sum over j of the gradient of dist(i, j).
at::Tensor NpuNativeFunctions::_cdist_backward(const at::Tensor& grad, const at::Tensor& x1, const at::Tensor& x2, double p,
                                               const at::Tensor& cdist) {
  if (!cdist_on_chip(x1, x2) || !chip_float(grad) || !chip_float(cdist) || p < 0) {
    return fall_back<at::_ops::_cdist_backward>("not chip floats, or more than 2^26 differences", grad, x1, x2, p, cdist);
  }
  const at::Tensor terms = distance_gradient(differences(x1, x2), as_f32(grad).unsqueeze(-1), as_f32(cdist).unsqueeze(-1), p);
  return at::sum(terms, {-2}).to(x1.scalar_type());
}

namespace {

// pdist: the distances of the pairs i < j of x's rows [N, M], in row-major pair order: the rows
// gathered by the pairs' indices (computed on the host from N alone), then as cdist.
bool pdist_on_chip(const at::Tensor& x) {
  return chip_float(x) && x.dim() == 2 && x.size(0) >= 2 && double(x.size(0)) * double(x.size(0)) * double(x.size(1)) / 2 <= double(kMaxDifferences);
}
std::tuple<at::Tensor, at::Tensor> pairs(int64_t n) {
  const at::Tensor indices = at::triu_indices(n, n, 1, at::TensorOptions().dtype(at::kLong).device(kNpu));
  return {indices[0], indices[1]};
}
}  // namespace

at::Tensor NpuNativeFunctions::_pdist_forward(const at::Tensor& x, double p) {
  TORCH_CHECK(p >= 0, "pdist only supports non-negative p values");
  if (!pdist_on_chip(x)) {
    return fall_back<at::_ops::_pdist_forward>("not a 2-D chip float tensor of at least 2 rows, or more than 2^26 differences", x, p);
  }
  auto [first, second] = pairs(x.size(0));
  const at::Tensor diff = at::sub(at::index_select(as_f32(x), 0, first), at::index_select(as_f32(x), 0, second));
  return at::linalg_vector_norm(diff, p, {-1}, false).to(x.scalar_type());
}
// Each pair's gradient added into its first row and subtracted from its second (index_add: f32 sums, rounded once).
at::Tensor NpuNativeFunctions::_pdist_backward(const at::Tensor& grad, const at::Tensor& x, double p, const at::Tensor& pdist) {
  if (!pdist_on_chip(x) || !chip_float(grad) || !chip_float(pdist)) {
    return fall_back<at::_ops::_pdist_backward>("not a 2-D chip float tensor of at least 2 rows, or more than 2^26 differences", grad, x, p, pdist);
  }
  auto [first, second] = pairs(x.size(0));
  const at::Tensor xf = as_f32(x);
  const at::Tensor diff = at::sub(at::index_select(xf, 0, first), at::index_select(xf, 0, second));
  const at::Tensor terms = distance_gradient(diff, as_f32(grad).unsqueeze(-1), as_f32(pdist).unsqueeze(-1), p);
  const at::Tensor zeros = at::zeros(xf.sizes(), xf.options());
  return at::sub(at::index_add(zeros, 0, first, terms), at::index_add(zeros, 0, second, terms)).to(x.scalar_type());
}

at::Tensor NpuNativeFunctions::renorm(const at::Tensor& self, const at::Scalar& p, int64_t dim, const at::Scalar& maxnorm) {
  TORCH_CHECK(p.toDouble() > 0, "renorm: non-positive-norm not supported");
  TORCH_CHECK(maxnorm.toDouble() >= 0, "renorm: expected maxnorm to be >= 0 but got ", maxnorm.toDouble());
  if (!chip_float(self) || self.numel() == 0 || self.dim() == 0) {
    return fall_back<at::_ops::renorm>("not a non-empty chip float tensor", self, p, dim, maxnorm);
  }
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  std::vector<int64_t> others;
  for (int64_t i = 0; i < self.dim(); ++i)
    if (i != d) others.push_back(i);
  const double limit = maxnorm.toDouble();
  const at::Tensor norm = at::linalg_vector_norm(as_f32(self), p, others, /*keepdim=*/true);
  const at::Tensor scale = elementwise_chain({norm}, "add(in0, 1e-7); div(" + chain_constant(limit) + ", %0)");
  const at::Tensor factor = at::where(at::gt(norm, limit), scale, at::ones({}, norm.options().device(at::kCPU)));
  return at::mul(as_f32(self), factor).to(self.scalar_type());
}

namespace {

// The dims of v other than dim (none where dim is -1: the whole tensor's norm).
std::vector<int64_t> dims_except(const at::Tensor& v, int64_t dim) {
  std::vector<int64_t> others;
  for (int64_t i = 0; i < v.dim(); ++i)
    if (i != dim) others.push_back(i);
  return others;
}

}  // namespace

// Weight normalization's fused forward (nn.utils.weight_norm, as wav2vec2's positional convolution
// uses it): norm = ||v|| over every dim but dim, in f32 (as the CPU returns it), w = v * (g / norm).
std::tuple<at::Tensor, at::Tensor> NpuNativeFunctions::_weight_norm_interface(const at::Tensor& v, const at::Tensor& g, int64_t dim) {
  if (!chip_float(v) || !chip_float(g) || v.numel() == 0) {
    return fall_back<at::_ops::_weight_norm_interface>("not non-empty chip float tensors", v, g, dim);
  }
  const at::Tensor norm = at::linalg_vector_norm(as_f32(v), 2, dims_except(v, dim), /*keepdim=*/true).view(g.sizes());
  const at::Tensor w = elementwise_chain({as_f32(v), as_f32(g), norm}, "div(in1, in2); mul(in0, %0)");
  return {w.to(v.scalar_type()), norm};
}

// Its backward (ATen's formula): per slice along dim, a = sum(grad_w * v); grad_g = a / norm;
// grad_v = (g / norm) * (grad_w - v * (a / norm^2)). In f32, rounded once to each input's dtype.
std::tuple<at::Tensor, at::Tensor> NpuNativeFunctions::_weight_norm_interface_backward(const at::Tensor& grad_w, const at::Tensor& v,
                                                                                       const at::Tensor& g, const at::Tensor& norm,
                                                                                       int64_t dim) {
  if (!chip_float(grad_w) || !chip_float(v) || !chip_float(g) || !chip_float(norm) || v.numel() == 0) {
    return fall_back<at::_ops::_weight_norm_interface_backward>("not non-empty chip float tensors", grad_w, v, g, norm, dim);
  }
  const at::Tensor vf = as_f32(v), n = as_f32(norm).view(g.sizes());
  const at::Tensor a = at::sum(at::mul(as_f32(grad_w), vf), dims_except(v, dim), /*keepdim=*/true).view(g.sizes());
  const at::Tensor grad_g = at::div(a, n);
  const at::Tensor grad_v =
      elementwise_chain({as_f32(grad_w), vf, as_f32(g), n, a}, "mul(in3, in3); div(in4, %0); mul(in1, %1); sub(in0, %2); div(in2, in3); mul(%4, %3)");
  return {grad_v.to(v.scalar_type()), grad_g.to(g.scalar_type())};
}

}  // namespace npusim
