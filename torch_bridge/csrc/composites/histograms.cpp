// Counting values into buckets on the npu, by comparisons and sums (no atomic add on the chip: each
// count is a sum of a comparison's column), exact:
//   searchsorted(seq, v), bucketize(v, boundaries)
//        the count of boundaries b with !(b >= v) (left) or !(b > v) (right): the index ATen's binary
//        search returns for a sorted sequence, NaN values included (they count every boundary); each
//        value against each boundary of its row, an [..., m, n] comparison summed into int64
//   bincount(x, weights, minlength)
//        its length from x's maximum (read back, as CUDA does; a negative minimum raises the CPU's
//        error), then each value against 0 .. length - 1, the hits counted (int64) or their f32
//        weights summed (f32, within rounding of the CPU's order)
//   histc(x, bins, min, max)  (f32; integers as CUDA bins them, below)
//        the bin of each element by the CPU's own f32 arithmetic, trunc((x - min) * bins / (max - min))
//        with max's elements in the last bin and those outside [min, max] or NaN in none, then
//        counted per bin; a range of min == max takes the data's extrema (read back), as the CPU does
// Beyond 2^24 comparisons, a sorter, int64 or f64 values, bf16 and f16 histograms (the CPU counts
// those in their own dtype, rounding at every add) and bincount's non-f32 weights: the CPU, counted.
#include <ATen/Functions.h>
#include <torch/library.h>

#include <optional>
#include <string>

#include "PrivateUse1NativeFunctions.h"
#include "aten/int64_arithmetic.h"
#include "aten/cpu_fallback.h"
#include "aten/kernel_launch.h"

namespace npusim {
namespace {

constexpr int64_t kMaxComparisons = int64_t{1} << 24;

bool comparable(const at::Tensor& t) {
  return on_npu(t) && (chip_float_dtype(t.scalar_type()) || t.scalar_type() == at::kInt) && t.numel() > 0;
}

// The index of each value in its row of boundaries (or in the one row of 1-D boundaries).
at::Tensor search(const at::Tensor& boundaries, const at::Tensor& values, bool right, bool out_int32) {
  const at::Tensor v = values.unsqueeze(-1);
  const at::Tensor b = boundaries.dim() == 1 ? boundaries : boundaries.unsqueeze(-2);
  const at::Tensor below = at::logical_not(right ? at::gt(b, v) : at::ge(b, v));
  const at::Tensor counts = at::sum(below, {-1}, false, at::kLong);
  return out_int32 ? counts.to(at::kInt) : counts;
}

bool search_on_chip(const at::Tensor& boundaries, const at::Tensor& values, const std::optional<at::Tensor>& sorter) {
  return !defined(sorter) && comparable(boundaries) && comparable(values) && boundaries.scalar_type() == values.scalar_type() &&
         boundaries.dim() >= 1 && double(values.numel()) * double(boundaries.size(-1)) <= double(kMaxComparisons);
}

bool right_side(bool right, std::optional<c10::string_view> side) { return side ? *side == "right" : right; }

}  // namespace

at::Tensor NpuNativeFunctions::searchsorted(const at::Tensor& sorted, const at::Tensor& self, bool out_int32, bool right,
                                            std::optional<c10::string_view> side, const std::optional<at::Tensor>& sorter) {
  const bool leading_match = sorted.dim() == 1 || (sorted.dim() == self.dim() && sorted.sizes().slice(0, size_t(sorted.dim() - 1)) ==
                                                                                      self.sizes().slice(0, size_t(self.dim() - 1)));
  if (!search_on_chip(sorted, self, sorter) || !leading_match || (side && right && *side == "left")) {
    return fall_back<at::_ops::searchsorted_Tensor>("a sorter, int64 or f64 values, or beyond 2^24 comparisons", sorted, self, out_int32, right, side, on_host(sorter));
  }
  return search(sorted, self, right_side(right, side), out_int32);
}
at::Tensor NpuNativeFunctions::searchsorted(const at::Tensor& sorted, const at::Scalar& self, bool out_int32, bool right,
                                            std::optional<c10::string_view> side, const std::optional<at::Tensor>& sorter) {
  return NpuNativeFunctions::searchsorted(sorted, to_npu(at::scalar_tensor(self, at::TensorOptions().dtype(sorted.scalar_type()))), out_int32, right, side,
                          sorter);
}

at::Tensor NpuNativeFunctions::bucketize(const at::Tensor& self, const at::Tensor& boundaries, bool out_int32, bool right) {
  TORCH_CHECK(boundaries.dim() == 1, "boundaries tensor must be 1 dimension, but got dim(", boundaries.dim(), ")");
  if (!search_on_chip(boundaries, self, std::nullopt)) {
    return fall_back<at::_ops::bucketize_Tensor>("int64 or f64 values, or beyond 2^24 comparisons", self, boundaries, out_int32, right);
  }
  return search(boundaries, self, right, out_int32);
}
at::Tensor NpuNativeFunctions::bucketize(const at::Scalar& self, const at::Tensor& boundaries, bool out_int32, bool right) {
  return NpuNativeFunctions::bucketize(to_npu(at::scalar_tensor(self, at::TensorOptions().dtype(boundaries.scalar_type()))), boundaries, out_int32, right);
}

at::Tensor NpuNativeFunctions::bincount(const at::Tensor& self, const std::optional<at::Tensor>& weights, int64_t minlength) {
  TORCH_CHECK(minlength >= 0, "minlength should be >= 0");
  const bool integral = at::isIntegralType(self.scalar_type(), /*includeBool=*/false);
  const bool supported = on_npu(self) && integral && self.dim() == 1 && self.numel() > 0 && self.numel() < kMaxComparisons &&
                         (!defined(weights) || (on_npu(*weights) && weights->scalar_type() == at::kFloat && weights->sizes() == self.sizes()));
  int64_t length = minlength;
  if (supported) {
    const at::Tensor x = self.scalar_type() == at::kLong ? self : self.to(at::kLong);
    TORCH_CHECK(at::min(x).cpu().item<int64_t>() >= 0, "bincount only supports 1-d non-negative integral inputs.");
    length = std::max(length, at::max(x).cpu().item<int64_t>() + 1);
    if (double(length) * double(self.numel()) <= double(kMaxComparisons)) {
      const at::Tensor hits = at::eq(index_words(x).view({-1, 1}), to_npu(at::arange(length, at::TensorOptions().dtype(at::kInt))).view({1, -1}));
      if (!defined(weights)) return at::sum(hits, {0}, false, at::kLong);
      return at::sum(at::where(hits, weights->view({-1, 1}), at::zeros({}, at::TensorOptions().dtype(at::kFloat))), {0});
    }
  }
  return fall_back<at::_ops::bincount>("not a 1-d integer tensor with f32 weights or none, or beyond 2^24 comparisons", self, on_host(weights), minlength);
}

namespace {

// histc of integers, which the CPU refuses and CUDA computes (a mixture of experts counts its tokens per
// expert so): CUDA's integer arithmetic, bin = (x - min) * bins / (max - min) truncated, the last edge in
// the last bin, in i32 here while (max - min) * bins < 2^31; the counts in the input's dtype. Undefined
// where the chip cannot.
at::Tensor integer_histc(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max) {
  const at::ScalarType t = self.scalar_type();
  if (!on_npu(self) || !(t == at::kLong || t == at::kInt || t == at::kChar || t == at::kByte) ||
      double(self.numel()) * double(bins) > double(kMaxComparisons))
    return {};
  int64_t lo = min.toLong(), hi = max.toLong();
  if (lo == hi && self.numel() > 0) lo = at::min(self).cpu().item<int64_t>(), hi = at::max(self).cpu().item<int64_t>();
  if (lo == hi) lo -= 1, hi += 1;
  TORCH_CHECK(lo < hi, "torch.histc: max must be larger than min");
  if (lo < INT32_MIN || hi > INT32_MAX || double(hi - lo) * double(bins) >= 2147483648.0) return {};
  if (self.numel() == 0) return at::zeros({bins}, at::TensorOptions().dtype(t).device(kNpu));
  const at::Tensor x = self.reshape({-1});
  const at::Tensor counted = at::logical_and(at::ge(x, lo), at::le(x, hi));  // (int64 compared on its words)
  const at::Tensor low = t == at::kLong ? int64_low_word(x) : x.to(at::kInt);  // the value itself where counted
  const at::Tensor bin = at::minimum(at::div(at::mul(at::sub(low, lo), bins), hi - lo, "trunc"), at::full({}, bins - 1, at::TensorOptions().dtype(at::kInt)));
  const at::Tensor binned = at::where(counted, bin, at::full({}, -1, at::TensorOptions().dtype(at::kInt)));
  const at::Tensor hits = at::eq(binned.view({-1, 1}), to_npu(at::arange(bins, at::TensorOptions().dtype(at::kInt))).view({1, -1}));
  return at::sum(hits.to(at::kFloat), {0}).to(t);
}

}  // namespace

at::Tensor NpuNativeFunctions::histc(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max) {
  TORCH_CHECK(bins > 0, "torch.histc(): bins must be > 0, but got ", bins, " for dimension 0");
  if (const at::Tensor counts = integer_histc(self, bins, min, max); counts.defined()) return counts;
  const bool supported = on_npu(self) && self.scalar_type() == at::kFloat && double(self.numel()) * double(bins) <= double(kMaxComparisons);
  if (!supported) {
    return fall_back<at::_ops::histc>("not f32, or beyond 2^24 comparisons", self, bins, min, max);
  }
  // The CPU's outer edges (histc_select_outer_bin_edges), then its f32 arithmetic on them.
  double lo = min.toDouble(), hi = max.toDouble();
  if (lo == hi && self.numel() > 0) {
    lo = at::min(self).cpu().item<double>(), hi = at::max(self).cpu().item<double>();
  }
  if (lo == hi) lo -= 1, hi += 1;
  TORCH_CHECK(!(std::isinf(lo) || std::isinf(hi) || std::isnan(lo) || std::isnan(hi)), "torch.histc: range of [", lo, ", ", hi,
              "] is not finite");
  TORCH_CHECK(lo < hi, "torch.histc: max must be larger than min");
  if (self.numel() == 0) return at::zeros({bins}, at::TensorOptions().dtype(at::kFloat).device(kNpu));
  const float left = float(lo), right = float(hi), width = right - left;
  const at::Tensor x = self.reshape({-1});
  const at::Tensor position = elementwise_chain(
      {x}, "sub(in0, " + chain_constant(left) + "); mul(%0, " + chain_constant(double(float(bins))) + "); div(%1, " + chain_constant(width) + ")");
  // trunc; the right edge's elements in the last bin
  const at::Tensor bin = elementwise_chain({position.to(at::kInt)}, "minimum(in0, " + std::to_string(bins - 1) + ")");
  const at::Tensor counted = at::logical_and(at::ge(x, left), at::le(x, right));
  const at::Tensor binned = at::where(counted, bin, at::full({}, -1, at::TensorOptions().dtype(at::kInt)));
  const at::Tensor hits = at::eq(binned.view({-1, 1}), to_npu(at::arange(bins, at::TensorOptions().dtype(at::kInt))).view({1, -1}));
  return at::sum(hits.to(at::kFloat), {0});
}

}  // namespace npusim
