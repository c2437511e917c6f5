// Maxima and minima with their indices on the npu (max.dim, min.dim, argmax,
// argmin, and max / min of a whole tensor), from the row kernels:
//   values   amax / amin over the dim
//   indices  argmax / argmin over the dim (i32, widened to int64 as the CPU
//            returns them): the first of equal extrema, and the first NaN,
//            as on the CPU
// Where the kernel declines (dims that do not make rows), the first position
// holding the value instead: where(x == value, position, inf), then its
// minimum over the dim, in f32 (exact for positions below 2^24); there a NaN
// is not found. Integers (int64 on its words, int32, and int8 and uint8 as
// int32) always take that path. f64, bool and dims of 2^24 or more go to the
// CPU, counted.
//
// Also: aminmax (amin and amax), and cummax / cummin as a Hillis-Steele scan
// of (value, position) pairs: at step s each position takes the pair s before
// it unless its own value is at least as large (as small), or is NaN, which
// is the CPU's sequential rule (the later of equal extrema; NaN, once seen,
// stays), and associative, so log2 L steps of compare-and-select give it.
#include <ATen/Functions.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

#include <functional>
#include <limits>

#include "PrivateUse1NativeFunctions.h"
#include "int64_arithmetic.h"
#include "cpu_fallback.h"
#include "kernel_launch.h"
#include "runtime/runtime.h"

namespace npusim {
namespace {

using npu::compiler::OpDesc;
using npu::compiler::OpKind;

bool on_chip(const at::Tensor& x, int64_t dim) {
  return chip_float(x) && x.numel() > 0 && x.dim() > 0 && x.size(dim) < (int64_t{1} << 24);
}

// The position of each element along dim, as f32, shaped to broadcast over x.
at::Tensor positions(const at::Tensor& x, int64_t dim) {
  std::vector<int64_t> shape(size_t(x.dim()), 1);
  shape[size_t(dim)] = x.size(dim);
  return to_npu(at::arange(x.size(dim), at::TensorOptions().dtype(at::kFloat)).view(shape));
}

// The first index along dim where x holds its extremum: the argmax / argmin kernel, or (values:
// the extrema, the dim kept) the first position holding the value.
at::Tensor first_index(bool maximum, const at::Tensor& x, const std::function<at::Tensor()>& values, int64_t dim, bool keepdim) {
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  if (keepdim) shape[size_t(dim)] = 1;
  else shape.erase(shape.begin() + dim);
  at::Tensor index = new_npu(shape, at::kInt);
  const at::Tensor rows = x.movedim(dim, -1);
  const auto make = [&] { return OpDesc(maximum ? OpKind::ARGMAX : OpKind::ARGMIN, {describe(rows)}, describe(index)); };
  if (try_run(make, {rows}, index)) return index.to(at::kLong);
  const at::Tensor infinity = at::scalar_tensor(std::numeric_limits<float>::infinity(), at::TensorOptions().dtype(at::kFloat));
  const at::Tensor candidates = at::where(at::eq(x, values()), positions(x, dim), infinity);
  return at::amin(candidates, {dim}, keepdim).to(at::kInt).to(at::kLong);
}

// Integers (int64 on its words; int8 and uint8 widened to int32, exactly) with a dim of fewer than 2^24.
bool integers_on_chip(const at::Tensor& x, int64_t dim) {
  const at::ScalarType t = x.scalar_type();
  return on_npu(x) && (t == at::kLong || t == at::kInt || t == at::kChar || t == at::kByte) && x.numel() > 0 && x.dim() > 0 &&
         x.size(dim) < (int64_t{1} << 24);
}

std::tuple<at::Tensor, at::Tensor> extremum_dim(bool maximum, const at::Tensor& self, int64_t dim, bool keepdim) {
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  if (integers_on_chip(self, d)) {  // (token ids: CLIP's end-of-text position is input_ids.argmax(-1))
    const bool narrow = self.scalar_type() == at::kChar || self.scalar_type() == at::kByte;
    const at::Tensor x = narrow ? self.to(at::kInt) : self;
    const at::Tensor values = maximum ? at::amax(x, {d}, true) : at::amin(x, {d}, true);
    const at::Tensor index = first_index(maximum, x, [&] { return values; }, d, keepdim);
    const at::Tensor kept = narrow ? values.to(self.scalar_type()) : values;
    return {keepdim ? kept : kept.squeeze(d), index};
  }
  if (!on_chip(self, d)) {
    return maximum ? fall_back<at::_ops::max_dim>("", self, dim, keepdim) : fall_back<at::_ops::min_dim>("", self, dim, keepdim);
  }
  const at::Tensor values = maximum ? at::amax(self, {d}, true) : at::amin(self, {d}, true);
  return {keepdim ? values : values.squeeze(d), first_index(maximum, self, [&] { return values; }, d, keepdim)};
}

// The index alone: no values computed unless the fallback needs them.
at::Tensor index_dim(bool maximum, const at::Tensor& self, int64_t dim, bool keepdim) {
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  if (!on_chip(self, d)) return std::get<1>(extremum_dim(maximum, self, dim, keepdim));
  return first_index(maximum, self, [&] { return maximum ? at::amax(self, {d}, true) : at::amin(self, {d}, true); }, d, keepdim);
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> NpuNativeFunctions::max(const at::Tensor& self, int64_t dim, bool keepdim) { return extremum_dim(true, self, dim, keepdim); }
std::tuple<at::Tensor, at::Tensor> NpuNativeFunctions::min(const at::Tensor& self, int64_t dim, bool keepdim) { return extremum_dim(false, self, dim, keepdim); }

namespace {

// argmax / argmin: over dim, or over the flattened tensor when none is given.
at::Tensor arg_extremum(bool maximum, const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  if (!dim) {
    at::Tensor index = index_dim(maximum, self.reshape({-1}), 0, false);
    return keepdim ? index.reshape(std::vector<int64_t>(size_t(self.dim()), 1)) : index;
  }
  if (self.dim() == 0) return index_dim(maximum, self.reshape({1}), 0, false).reshape(std::vector<int64_t>{});
  return index_dim(maximum, self, *dim, keepdim);
}
}  // namespace

at::Tensor NpuNativeFunctions::argmax(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) { return arg_extremum(true, self, dim, keepdim); }
at::Tensor NpuNativeFunctions::argmin(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) { return arg_extremum(false, self, dim, keepdim); }

namespace {

// max() / min() of every element: the row kernels over all dims (int64: on its words; i32 compared as integers).
at::Tensor extremum_all(bool maximum, const at::Tensor& self) {
  if (self.scalar_type() == at::kLong && on_npu(self) && self.numel() > 0) return int64_reduce_extremum(maximum, self, {}, false);
  if (!(chip_float(self) || (on_npu(self) && self.scalar_type() == at::kInt)) || self.numel() == 0) {
    const char* reason = "not f32, bf16, f16, int32 or int64, or empty";
    return maximum ? fall_back<at::_ops::max>(reason, self) : fall_back<at::_ops::min>(reason, self);
  }
  const at::Tensor flat = self.reshape({-1});
  return (maximum ? at::amax(flat, {0}) : at::amin(flat, {0})).reshape(std::vector<int64_t>{});
}
}  // namespace

at::Tensor NpuNativeFunctions::max(const at::Tensor& self) { return extremum_all(true, self); }
at::Tensor NpuNativeFunctions::min(const at::Tensor& self) { return extremum_all(false, self); }

std::tuple<at::Tensor, at::Tensor> NpuNativeFunctions::aminmax(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  if (dim) return {at::amin(self, {*dim}, keepdim), at::amax(self, {*dim}, keepdim)};
  at::Tensor low = at::amin(self, {}, false), high = at::amax(self, {}, false);
  if (keepdim) {  // every dim kept, of size 1
    const std::vector<int64_t> ones(size_t(self.dim()), 1);
    low = low.reshape(ones), high = high.reshape(ones);
  }
  return {low, high};
}
std::tuple<at::Tensor&, at::Tensor&> NpuNativeFunctions::aminmax_out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                                                                     at::Tensor& min, at::Tensor& max) {
  auto [low, high] = NpuNativeFunctions::aminmax(self, dim, keepdim);
  into(low, min);
  into(high, max);
  return {min, max};
}

namespace {

std::tuple<at::Tensor, at::Tensor> cumulative_extremum(bool maximum, const at::Tensor& self, int64_t dim) {
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  const int64_t length = self.dim() == 0 ? 1 : self.size(d);
  const bool supported = on_npu(self) && (chip_float(self) || self.scalar_type() == at::kInt) && self.numel() > 0 && length < (int64_t{1} << 31);
  if (!supported) {
    const char* reason = "not f32, bf16, f16 or int32, or empty";
    return maximum ? fall_back<at::_ops::cummax>(reason, self, dim) : fall_back<at::_ops::cummin>(reason, self, dim);
  }
  at::Tensor values = self.dim() == 0 ? self.view({1}) : self.movedim(d, -1);
  std::vector<int64_t> shape(size_t(values.dim()), 1);
  shape.back() = length;
  at::Tensor positions = to_npu(at::arange(length, at::TensorOptions().dtype(at::kInt))).view(shape).expand(values.sizes());
  const bool is_float = chip_float(self);
  for (int64_t s = 1; s < length; s *= 2) {
    const at::Tensor own = values.narrow(-1, s, length - s), before = values.narrow(-1, 0, length - s);
    at::Tensor keep_own = maximum ? at::ge(own, before) : at::le(own, before);
    if (is_float) keep_own = at::logical_or(keep_own, at::isnan(own));
    values = at::cat({values.narrow(-1, 0, s), at::where(keep_own, own, before)}, -1);
    const at::Tensor kept = at::where(keep_own, positions.narrow(-1, s, length - s), positions.narrow(-1, 0, length - s));
    positions = at::cat({positions.narrow(-1, 0, s), kept}, -1);
  }
  at::Tensor indices = positions.to(at::kLong);
  if (self.dim() == 0) return {values.view(c10::IntArrayRef{}).clone(), indices.view(c10::IntArrayRef{})};
  return {values.movedim(-1, d).contiguous(), indices.movedim(-1, d).contiguous()};
}
std::tuple<at::Tensor, at::Tensor> npu_cummax(const at::Tensor& self, int64_t dim) { return cumulative_extremum(true, self, dim); }
std::tuple<at::Tensor, at::Tensor> npu_cummin(const at::Tensor& self, int64_t dim) { return cumulative_extremum(false, self, dim); }
}  // namespace

// (torch.cummax reaches the helper, which fills the given outputs.)
void NpuNativeFunctions::_cummax_helper(const at::Tensor& self, at::Tensor& values, at::Tensor& indices, int64_t dim) {
  auto [v, i] = npu_cummax(self, dim);
  into(v, values);
  into(i, indices);
}
void NpuNativeFunctions::_cummin_helper(const at::Tensor& self, at::Tensor& values, at::Tensor& indices, int64_t dim) {
  auto [v, i] = npu_cummin(self, dim);
  into(v, values);
  into(i, indices);
}

}  // namespace npusim
