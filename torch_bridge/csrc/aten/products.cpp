// Products along a dim on the npu (the chip has no multiplying reduction), by elementwise
// multiplications of halves:
//   prod       a tree: the first half of the dim times the second, until one element is left
//              (log2 L kernels)
//   cumprod    a Hillis-Steele scan (scan.h): x[i - s] * x[i] for s = 1, 2, 4, ... (log2 L steps)
// Integers (bool, uint8, int8, int32, int64) become int64 first, as ATen promotes them, and multiply
// on int64's words: exact and wrapping as the CPU's in any order. Floats multiply in f32 and round once
// to their dtype; the order differs from the CPU's (a sequential product in double for cumprod): within
// log2 L f32 roundings. f64 and other dtypes: the CPU, counted.
#include <ATen/Functions.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

#include <optional>

#include "PrivateUse1NativeFunctions.h"
#include "cpu_fallback.h"
#include "kernel_launch.h"
#include "scan.h"

namespace npusim {
namespace {

// The dtype ATen gives a product of self: int64 for integers and bool, else self's.
at::ScalarType product_dtype(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  if (dtype) return *dtype;
  return at::isIntegralType(self.scalar_type(), /*includeBool=*/true) ? at::kLong : self.scalar_type();
}

// self in the dtype the products are computed in (int64 or f32), or undefined where the chip cannot.
at::Tensor operand(const at::Tensor& self, at::ScalarType result) {
  if (!on_npu(self) || !(chip_dtype(self.scalar_type()) || self.scalar_type() == at::kLong)) return at::Tensor();
  if (result == at::kLong) return self.to(at::kLong);
  if (chip_float_dtype(result) && at::isFloatingType(self.scalar_type())) return as_f32(self);
  return at::Tensor();
}

// The product along the last dim of x (length >= 1): [..., 1].
at::Tensor product_tree(at::Tensor x) {
  while (x.size(-1) > 1) {
    const int64_t half = x.size(-1) / 2;
    at::Tensor products = at::mul(x.narrow(-1, 0, half), x.narrow(-1, half, half));
    if (x.size(-1) % 2 == 1) products = at::cat({products, x.narrow(-1, 2 * half, 1)}, -1);
    x = products;
  }
  return x;
}

}  // namespace

at::Tensor NpuNativeFunctions::prod(const at::Tensor& self, int64_t dim, bool keepdim, std::optional<at::ScalarType> dtype) {
  const at::ScalarType result = product_dtype(self, dtype);
  const at::Tensor x = operand(self, result);
  if (!x.defined()) {
    return fall_back<at::_ops::prod_dim_int>("not a chip dtype or int64", self, dim, keepdim, dtype);
  }
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  at::Tensor rows = self.dim() == 0 ? x.view({1}) : x.movedim(d, -1);
  at::Tensor product;
  if (rows.size(-1) == 0) {
    std::vector<int64_t> shape = rows.sizes().vec();
    shape.back() = 1;
    product = at::ones(shape, rows.options());
  } else {
    product = product_tree(rows);
  }
  product = self.dim() == 0 ? product.view(c10::IntArrayRef{}) : product.movedim(-1, d);
  if (!keepdim && self.dim() > 0) product = product.squeeze(d);
  return product.to(result).contiguous();
}
at::Tensor NpuNativeFunctions::prod(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  return NpuNativeFunctions::prod(self.reshape({-1}), 0, false, dtype);
}

at::Tensor NpuNativeFunctions::cumprod(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype) {
  const at::ScalarType result = product_dtype(self, dtype);
  const at::Tensor x = operand(self, result);
  if (!x.defined()) {
    return fall_back<at::_ops::cumprod>("not a chip dtype or int64", self, dim, dtype);
  }
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  at::Tensor scan = self.dim() == 0 ? x.view({1}) : x.movedim(d, -1);
  scan = inclusive_scan(scan, [](const at::Tensor& earlier, const at::Tensor& later) { return at::mul(earlier, later); });
  scan = self.dim() == 0 ? scan.view(c10::IntArrayRef{}) : scan.movedim(-1, d);
  return scan.to(result).contiguous();
}

}  // namespace npusim
