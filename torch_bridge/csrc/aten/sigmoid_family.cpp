// Ops built on the logistic sigmoid, in f32 (one kernel for bf16 and f16 too, rounded once: ATen's
// CPU arithmetic), with the formulas of ATen's CPU kernels:
//   glu(x, dim)          a * sigmoid(b), a and b the halves of x along dim
//   glu's gradient       grad * sigmoid(b) for a, (1 - sigmoid(b)) * sigmoid(b) * a * grad for b
//   logit(x, eps)        log(z / (1 - z)), z = x clamped to [eps, 1 - eps] when eps is given
//   logit's gradient     grad / (x * (1 - x)); with eps, 0 where x lies outside [eps, 1 - eps]
// v.sigmoid and v.log are within an f32 ulp or two of the CPU's. Integer, f64 and empty tensors go
// to the CPU, counted.
#include <ATen/Functions.h>
#include <torch/library.h>

#include <optional>
#include <string>

#include "PrivateUse1NativeFunctions.h"
#include "cpu_fallback.h"
#include "kernel_launch.h"

namespace npusim {
namespace {

constexpr const char* kNotOnChip = "operands not all non-empty f32, bf16 or f16 of one dtype";

bool on_chip(std::initializer_list<const at::Tensor*> tensors) {
  const at::ScalarType dtype = (*tensors.begin())->scalar_type();
  for (const at::Tensor* t : tensors)
    if (!chip_float(*t) || t->numel() == 0 || t->scalar_type() != dtype) return false;
  return true;
}

}  // namespace

at::Tensor NpuNativeFunctions::glu(const at::Tensor& self, int64_t dim) {
  TORCH_CHECK(self.dim() > 0, "glu does not support scalars because halving size must be even");
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK(self.size(d) % 2 == 0, "Halving dimension must be even, but dimension ", d, " is size ", self.size(d));
  if (!on_chip({&self})) {
    return fall_back<at::_ops::glu>(kNotOnChip, self, dim);
  }
  const int64_t half = self.size(d) / 2;
  return elementwise_chain_in_f32({self.narrow(d, 0, half), self.narrow(d, half, half)}, "sigmoid(in1); mul(in0, %0)");
}

at::Tensor NpuNativeFunctions::glu_backward(const at::Tensor& grad, const at::Tensor& self, int64_t dim) {
  if (!on_chip({&self, &grad}) || self.dim() == 0) {
    return fall_back<at::_ops::glu_backward>(kNotOnChip, grad, self, dim);
  }
  const int64_t d = at::maybe_wrap_dim(dim, self.dim()), half = self.size(d) / 2;
  const at::Tensor a = self.narrow(d, 0, half), b = self.narrow(d, half, half);
  at::Tensor result = new_npu(self.sizes(), self.scalar_type());
  result.narrow(d, 0, half).copy_(elementwise_chain_in_f32({grad, b}, "sigmoid(in1); mul(in0, %0)"));
  result.narrow(d, half, half).copy_(elementwise_chain_in_f32({grad, a, b}, "sigmoid(in2); sub(1, %0); mul(%1, %0); mul(%2, in1); mul(%3, in0)"));
  return result;
}

namespace {

// ATen clamps only for a non-negative eps.
bool clamps(std::optional<double> eps) { return eps && *eps >= 0; }

}  // namespace

at::Tensor NpuNativeFunctions::logit(const at::Tensor& self, std::optional<double> eps) {
  if (!on_chip({&self})) {
    return fall_back<at::_ops::logit>(kNotOnChip, self, eps);
  }
  const std::string chain = clamps(eps) ? "maximum(in0, " + chain_constant(*eps) + "); minimum(%0, " + chain_constant(1.0 - *eps) +
                                              "); sub(1, %1); div(%1, %2); log(%3)"
                                        : "sub(1, in0); div(in0, %0); log(%1)";
  return elementwise_chain_in_f32({self}, chain);
}

at::Tensor NpuNativeFunctions::logit_backward(const at::Tensor& grad, const at::Tensor& self, std::optional<double> eps) {
  if (!on_chip({&self, &grad})) {
    return fall_back<at::_ops::logit_backward>(kNotOnChip, grad, self, eps);
  }
  const at::Tensor result = elementwise_chain_in_f32({grad, self}, "sub(1, in1); mul(in1, %0); div(in0, %1)");
  if (!clamps(eps)) return result;
  const at::Tensor outside = at::logical_or(at::lt(self, *eps), at::gt(self, 1.0 - *eps));
  return at::where(outside, at::zeros({}, at::TensorOptions().dtype(self.scalar_type())), result);
}

}  // namespace npusim
