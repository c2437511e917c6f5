// Order statistics on the npu, from the topk kernel (topk.cpp: smallest first, equal values in
// order of position, NaN above +inf, as the CPU orders them):
//   kthvalue(k)     the k-th smallest: the last of the k smallest
//   median          the lower median, kthvalue((L + 1) / 2); a row holding a NaN gives NaN and the
//                   first NaN's position, as on the CPU
//   nanmedian       the NaNs left out: the row sorted, then the lower median of its non-NaN
//                   elements picked by the gather kernel (NaN where all are NaN)
// Values are exact. Among equal values the CPU's index is the one its quickselect lands on, which
// PyTorch leaves open; here it is the position of one of them. Beyond topk's 2^24 element-rounds per
// row and dtypes other than f32, bf16 and f16: the CPU, counted.
#include <ATen/Functions.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

#include <limits>
#include <tuple>

#include "PrivateUse1NativeFunctions.h"
#include "cpu_fallback.h"
#include "kernel_launch.h"

namespace npusim {
namespace {

using Selected = std::tuple<at::Tensor, at::Tensor>;

constexpr int64_t kMaxElementRounds = int64_t{1} << 24;

bool on_chip(const at::Tensor& self, int64_t dim, int64_t k) {
  if (!chip_float(self) || self.numel() == 0) return false;
  const int64_t length = self.dim() == 0 ? 1 : self.size(at::maybe_wrap_dim(dim, self.dim()));
  return k * length <= kMaxElementRounds;
}

// The k-th smallest along dim and its position (k from 1).
Selected kth_smallest(const at::Tensor& self, int64_t k, int64_t dim, bool keepdim) {
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  if (self.dim() == 0) return {self.clone(), at::zeros({}, self.options().dtype(at::kLong))};
  auto [values, indices] = at::topk(self, k, d, /*largest=*/false, /*sorted=*/true);
  at::Tensor value = values.narrow(d, k - 1, 1), index = indices.narrow(d, k - 1, 1);
  if (!keepdim) value = value.squeeze(d), index = index.squeeze(d);
  return {value.contiguous(), index.contiguous()};
}

}  // namespace

Selected NpuNativeFunctions::kthvalue(const at::Tensor& self, int64_t k, int64_t dim, bool keepdim) {
  const int64_t length = self.dim() == 0 ? 1 : self.size(at::maybe_wrap_dim(dim, self.dim()));
  TORCH_CHECK(k >= 1 && k <= length, "kthvalue(): selected number k out of range for dimension ", dim);
  if (!on_chip(self, dim, k)) {
    return fall_back<at::_ops::kthvalue>("not a chip float, or beyond 2^24 element-rounds per row", self, k, dim, keepdim);
  }
  return kth_smallest(self, k, dim, keepdim);
}
std::tuple<at::Tensor&, at::Tensor&> NpuNativeFunctions::kthvalue_out(const at::Tensor& self, int64_t k, int64_t dim, bool keepdim,
                                                                      at::Tensor& values, at::Tensor& indices) {
  auto [v, i] = NpuNativeFunctions::kthvalue(self, k, dim, keepdim);
  into(v, values);
  into(i, indices);
  return {values, indices};
}

Selected NpuNativeFunctions::median(const at::Tensor& self, int64_t dim, bool keepdim) {
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  const int64_t length = self.dim() == 0 ? 1 : self.size(d);
  TORCH_CHECK(self.numel() > 0 || length > 0, "median() cannot compute median for a dimension of size 0");
  const int64_t k = (length + 1) / 2;
  if (!on_chip(self, dim, k)) {
    return fall_back<at::_ops::median_dim>("not a chip float, or beyond 2^24 element-rounds per row", self, dim, keepdim);
  }
  auto [value, index] = kth_smallest(self, k, d, keepdim);
  if (self.dim() == 0) return {value, index};
  const at::Tensor nan = at::isnan(self);
  const at::Tensor has_nan = at::any(nan, d, keepdim);
  const at::Tensor first_nan = at::argmax(nan.to(at::kFloat), d, keepdim);
  const at::Tensor nan_value = at::full({}, std::numeric_limits<double>::quiet_NaN(), at::TensorOptions().dtype(self.scalar_type()));
  return {at::where(has_nan, nan_value, value), at::where(has_nan, first_nan, index)};
}
std::tuple<at::Tensor&, at::Tensor&> NpuNativeFunctions::median_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& values,
                                                                    at::Tensor& indices) {
  auto [v, i] = NpuNativeFunctions::median(self, dim, keepdim);
  into(v, values);
  into(i, indices);
  return {values, indices};
}
at::Tensor NpuNativeFunctions::median(const at::Tensor& self) {
  TORCH_CHECK(self.numel() > 0, "median() input tensor cannot be empty");
  return std::get<0>(NpuNativeFunctions::median(self.reshape({-1}), 0, false));
}

Selected NpuNativeFunctions::nanmedian(const at::Tensor& self, int64_t dim, bool keepdim) {
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  const int64_t length = self.dim() == 0 ? 1 : self.size(d);
  TORCH_CHECK(self.numel() > 0 || length > 0, "nanmedian() cannot compute median for a dimension of size 0");
  if (!on_chip(self, dim, length)) {
    return fall_back<at::_ops::nanmedian_dim>("not a chip float, or beyond 2^24 element-rounds per row", self, dim, keepdim);
  }
  if (self.dim() == 0) return {self.clone(), at::zeros({}, self.options().dtype(at::kLong))};
  auto [sorted, order] = at::topk(self, length, d, /*largest=*/false, /*sorted=*/true);
  // The lower median's place among each row's numbers: (count - 1) / 2, 0 where all are NaN.
  // (in i32: the int64 sum's low word)
  const at::Tensor numbers = at::sum(at::logical_not(at::isnan(self)), {d}, /*keepdim=*/true, at::kLong).to(at::kInt);
  const at::Tensor place = at::floor_divide(at::relu(at::sub(numbers, 1)), 2).to(at::kLong);
  at::Tensor value = at::gather(sorted, d, place), index = at::gather(order, d, place);
  if (!keepdim) value = value.squeeze(d), index = index.squeeze(d);
  return {value.contiguous(), index.contiguous()};
}
std::tuple<at::Tensor&, at::Tensor&> NpuNativeFunctions::nanmedian_out(const at::Tensor& self, int64_t dim, bool keepdim,
                                                                       at::Tensor& values, at::Tensor& indices) {
  auto [v, i] = NpuNativeFunctions::nanmedian(self, dim, keepdim);
  into(v, values);
  into(i, indices);
  return {values, indices};
}
at::Tensor NpuNativeFunctions::nanmedian(const at::Tensor& self) {
  TORCH_CHECK(self.numel() > 0, "nanmedian() input tensor cannot be empty");
  return std::get<0>(NpuNativeFunctions::nanmedian(self.reshape({-1}), 0, false));
}

}  // namespace npusim
