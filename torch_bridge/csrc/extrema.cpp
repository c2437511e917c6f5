// Maxima and minima with their indices on the npu (max.dim, min.dim, argmax,
// argmin, and max / min of a whole tensor), from the row kernels:
//   values   amax / amin over the dim
//   indices  argmax / argmin over the dim (i32, widened to int64 as the CPU
//            returns them): the first of equal extrema, and the first NaN,
//            as on the CPU
// Where the kernel declines (dims that do not make rows), the first position
// holding the value instead: where(x == value, position, inf), then its
// minimum over the dim, in f32 (exact for positions below 2^24); there a NaN
// is not found. Other dtypes (integers,
// f64) and dims of 2^24 or more go to the CPU, counted.
#include <ATen/Functions.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

#include <functional>
#include <limits>

#include "int64_arithmetic.h"
#include "kernel_launch.h"
#include "runtime.h"

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

std::tuple<at::Tensor, at::Tensor> extremum_dim(bool maximum, const at::Tensor& self, int64_t dim, bool keepdim) {
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  if (!on_chip(self, d)) {
    note_cpu_fallback(maximum ? "aten::max.dim" : "aten::min.dim");
    auto [v, i] = maximum ? at::max(self.cpu(), dim, keepdim) : at::min(self.cpu(), dim, keepdim);
    return {to_npu(v), to_npu(i)};
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

std::tuple<at::Tensor, at::Tensor> max_dim(const at::Tensor& self, int64_t dim, bool keepdim) { return extremum_dim(true, self, dim, keepdim); }
std::tuple<at::Tensor, at::Tensor> min_dim(const at::Tensor& self, int64_t dim, bool keepdim) { return extremum_dim(false, self, dim, keepdim); }

// argmax / argmin: over dim, or over the flattened tensor when none is given.
at::Tensor arg_extremum(bool maximum, const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  if (!dim) {
    at::Tensor index = index_dim(maximum, self.reshape({-1}), 0, false);
    return keepdim ? index.reshape(std::vector<int64_t>(size_t(self.dim()), 1)) : index;
  }
  if (self.dim() == 0) return index_dim(maximum, self.reshape({1}), 0, false).reshape(std::vector<int64_t>{});
  return index_dim(maximum, self, *dim, keepdim);
}
at::Tensor argmax(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) { return arg_extremum(true, self, dim, keepdim); }
at::Tensor argmin(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) { return arg_extremum(false, self, dim, keepdim); }

// max() / min() of every element: the row kernels over all dims (int64: on its words; i32 compared as integers).
at::Tensor extremum_all(bool maximum, const at::Tensor& self) {
  if (self.scalar_type() == at::kLong && on_npu(self) && self.numel() > 0) return int64_reduce_extremum(maximum, self, {}, false);
  if (!(chip_float(self) || (on_npu(self) && self.scalar_type() == at::kInt)) || self.numel() == 0) {
    note_cpu_fallback(maximum ? "aten::max" : "aten::min");
    return to_npu(maximum ? at::max(self.cpu()) : at::min(self.cpu()));
  }
  const at::Tensor flat = self.reshape({-1});
  return (maximum ? at::amax(flat, {0}) : at::amin(flat, {0})).reshape(std::vector<int64_t>{});
}
at::Tensor max_all(const at::Tensor& self) { return extremum_all(true, self); }
at::Tensor min_all(const at::Tensor& self) { return extremum_all(false, self); }

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("max.dim", max_dim);
  m.impl("min.dim", min_dim);
  m.impl("argmax", argmax);
  m.impl("argmin", argmin);
  m.impl("max", max_all);
  m.impl("min", min_all);
}

}  // namespace npusim
