// Variance and standard deviation on the npu (var, std, var_mean, std_mean with
// a correction), over any dims: one row kernel (var / std) where the reduced
// dims make rows, otherwise from the row kernels and elementwise kernels:
//   mean = mean(x, dims);  var = sum((x - mean)^2, dims) / max(0, N - correction)
// two passes in f32 (the CPU uses Welford's one pass: results agree to f32
// rounding), rounded once to x's dtype. N is the number of elements reduced;
// N <= correction divides by zero, giving inf or nan as on the CPU. Other
// dtypes (f64; integers, which PyTorch refuses) go to the CPU.
#include <ATen/Functions.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

#include <algorithm>
#include <optional>

#include "PrivateUse1NativeFunctions.h"
#include "cpu_fallback.h"
#include "kernel_launch.h"
#include "runtime/runtime.h"

namespace npusim {
namespace {

using npu::compiler::OpDesc;
using npu::compiler::OpKind;

struct Moments {
  at::Tensor mean, var;  // f32, the reduced dims kept (size 1)
};

// The dims to reduce: all of them when none or an empty list is given (as ATen's var does).
std::vector<int64_t> reduced_dims(const at::Tensor& x, at::OptionalIntArrayRef dims) {
  std::vector<int64_t> result;
  if (!dims.has_value() || dims->empty()) {
    for (int64_t d = 0; d < x.dim(); ++d) result.push_back(d);
  } else {
    for (const int64_t d : *dims) result.push_back(at::maybe_wrap_dim(d, std::max<int64_t>(x.dim(), 1)));
  }
  return result;
}

Moments moments(const at::Tensor& self, at::OptionalIntArrayRef dims, const std::optional<at::Scalar>& correction) {
  const at::Tensor x = as_f32(self.dim() == 0 ? self.reshape(std::vector<int64_t>{1}) : self);
  const std::vector<int64_t> over = reduced_dims(x, dims);
  int64_t count = 1;
  for (const int64_t d : over) count *= x.size(d);
  Moments m;
  m.mean = at::mean(x, over, /*keepdim=*/true);
  const at::Tensor centered = at::sub(x, m.mean);
  const double divisor = std::max(0.0, double(count) - (correction ? correction->toDouble() : 1.0));
  m.var = at::div(at::sum(at::mul(centered, centered), over, /*keepdim=*/true), divisor);
  return m;
}

// A kept-dims statistic as the op returns it: the dims dropped unless keepdim, in `like`'s dtype.
at::Tensor shaped(const at::Tensor& statistic, const at::Tensor& like, at::OptionalIntArrayRef dims, bool keepdim) {
  at::Tensor result = statistic;
  if (like.dim() == 0) {
    result = result.reshape(std::vector<int64_t>{});  // (view({}) would pick the dtype overload)
  } else if (!keepdim) {
    std::vector<int64_t> over = reduced_dims(like, dims), shape;
    for (int64_t d = 0; d < like.dim(); ++d)
      if (std::find(over.begin(), over.end(), d) == over.end()) shape.push_back(like.size(d));
    result = result.reshape(shape);
  }
  return result.scalar_type() == like.scalar_type() ? result : result.to(like.scalar_type());
}

bool on_chip(const at::Tensor& x) { return chip_float(x) && x.numel() > 0; }

// var or std in one row kernel (the compiler's VAR / STD: mean and squared deviations on the core, x read
// once), where the reduced dims make rows: one dim (moved last as a view), or trailing dims of a contiguous
// tensor. A whole large tensor is left to the composition above, which every core shares (one row would
// be walked by one core).
std::optional<at::Tensor> one_kernel(OpKind kind, const at::Tensor& self, at::OptionalIntArrayRef dims,
                                     const std::optional<at::Scalar>& correction, bool keepdim) {
  if (self.dim() == 0) return std::nullopt;
  std::vector<int64_t> over = reduced_dims(self, dims);
  std::sort(over.begin(), over.end());
  if (std::adjacent_find(over.begin(), over.end()) != over.end()) return std::nullopt;
  std::vector<int64_t> shape;  // the result's
  int64_t length = 1;
  for (int64_t d = 0; d < self.dim(); ++d) {
    const bool reduced = std::binary_search(over.begin(), over.end(), d);
    if (reduced) length *= self.size(d);
    if (!reduced) shape.push_back(self.size(d));
    else if (keepdim) shape.push_back(1);
  }
  at::Tensor x;
  if (over.size() == 1) {
    x = self.movedim(over[0], -1);
  } else if (self.is_contiguous() && over.back() == self.dim() - 1 && over.back() - over.front() + 1 == int64_t(over.size())) {
    x = self.view({self.numel() / length, length});
  } else {
    return std::nullopt;
  }
  if (x.numel() == length && length >= (int64_t{1} << 16)) return std::nullopt;
  at::Tensor out = new_npu(shape, self.scalar_type());
  const double c = correction ? correction->toDouble() : 1.0;
  const auto make = [&] {
    OpDesc op(kind, {describe(x)}, describe(out));
    op.correction = c;
    return op;
  };
  if (!try_run(make, {x}, out)) return std::nullopt;
  return out;
}

}  // namespace

at::Tensor NpuNativeFunctions::var(const at::Tensor& self, at::OptionalIntArrayRef dims, const std::optional<at::Scalar>& correction,
                                   bool keepdim) {
  if (!on_chip(self)) {
    return fall_back<at::_ops::var_correction>("", self, dims, correction, keepdim);
  }
  if (auto result = one_kernel(OpKind::VAR, self, dims, correction, keepdim)) return *result;
  return shaped(moments(self, dims, correction).var, self, dims, keepdim);
}

at::Tensor NpuNativeFunctions::std(const at::Tensor& self, at::OptionalIntArrayRef dims, const std::optional<at::Scalar>& correction,
                                   bool keepdim) {
  if (!on_chip(self)) {
    return fall_back<at::_ops::std_correction>("", self, dims, correction, keepdim);
  }
  if (auto result = one_kernel(OpKind::STD, self, dims, correction, keepdim)) return *result;
  return shaped(at::sqrt(moments(self, dims, correction).var), self, dims, keepdim);
}

std::tuple<at::Tensor, at::Tensor> NpuNativeFunctions::var_mean(const at::Tensor& self, at::OptionalIntArrayRef dims,
                                                                const std::optional<at::Scalar>& correction, bool keepdim) {
  if (!on_chip(self)) {
    return fall_back<at::_ops::var_mean_correction>("", self, dims, correction, keepdim);
  }
  if (auto result = one_kernel(OpKind::VAR, self, dims, correction, keepdim))
    return {*result, shaped(at::mean(self, reduced_dims(self, dims), true), self, dims, keepdim)};
  const Moments m = moments(self, dims, correction);
  return {shaped(m.var, self, dims, keepdim), shaped(m.mean, self, dims, keepdim)};
}

std::tuple<at::Tensor, at::Tensor> NpuNativeFunctions::std_mean(const at::Tensor& self, at::OptionalIntArrayRef dims,
                                                                const std::optional<at::Scalar>& correction, bool keepdim) {
  if (!on_chip(self)) {
    return fall_back<at::_ops::std_mean_correction>("", self, dims, correction, keepdim);
  }
  if (auto result = one_kernel(OpKind::STD, self, dims, correction, keepdim))
    return {*result, shaped(at::mean(self, reduced_dims(self, dims), true), self, dims, keepdim)};
  const Moments m = moments(self, dims, correction);
  return {shaped(at::sqrt(m.var), self, dims, keepdim), shaped(m.mean, self, dims, keepdim)};
}

}  // namespace npusim
