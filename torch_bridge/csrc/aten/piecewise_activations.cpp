// Piecewise activations and clamps, by the comparison and select kernels with ATen's CPU formulas
// (each branch's arithmetic rounded once in the dtype, as the CPU's; NaN takes the branch of
// ATen's comparisons):
//   threshold(x, t, v)     x <= t ? v : x
//   hardshrink(x, l)       -l <= x <= l ? 0 : x;  its gradient -l <= x <= l ? 0 : g
//   softshrink(x, l)       x > l ? x - l : x < -l ? x + l : 0 (x * 0, so NaN stays NaN); gradient as hardshrink's
//   prelu (_prelu_kernel)  x > 0 ? x : w x; its gradients x > 0 ? g : w g and x > 0 ? 0 : x g (the
//                          weight's in the broadcast shape, which autograd sums, as on the CPU)
//   rrelu_with_noise       eval: leaky_relu with slope (lower + upper) / 2; training: the noise drawn
//                          uniform in [lower, upper] by the npu generator where x <= 0 (1 elsewhere),
//                          then x * noise (draws differ from the CPU's, as every random op's)
//   clamp with tensor bounds   minimum(maximum(x, min), max), NaN propagating as on the CPU
//   lerp with a tensor weight  |w| < 0.5 ? a + w (b - a) : b - (b - a)(1 - w), ATen's form, in f32 rounded once
// Integer, f64 and empty tensors: the CPU, counted.
#include <ATen/Functions.h>
#include <torch/library.h>

#include <optional>
#include <vector>

#include "PrivateUse1NativeFunctions.h"
#include "cpu_fallback.h"
#include "kernel_launch.h"

namespace npusim {
namespace {

constexpr const char* kNotOnChip = "operands not all non-empty f32, bf16 or f16 on the npu";

at::Tensor zero_of(const at::Tensor& like) { return at::zeros({}, at::TensorOptions().dtype(like.scalar_type())); }
at::Tensor inside(const at::Tensor& x, double lambd) { return at::logical_and(at::ge(x, -lambd), at::le(x, lambd)); }

}  // namespace

at::Tensor NpuNativeFunctions::threshold(const at::Tensor& x, const at::Scalar& threshold, const at::Scalar& value) {
  if (!non_empty_chip_floats({&x})) {
    return fall_back<at::_ops::threshold>(kNotOnChip, x, threshold, value);
  }
  return at::where(at::le(x, threshold), at::scalar_tensor(value, at::TensorOptions().dtype(x.scalar_type())), x);
}

at::Tensor NpuNativeFunctions::hardshrink(const at::Tensor& x, const at::Scalar& lambd) {
  if (!non_empty_chip_floats({&x})) {
    return fall_back<at::_ops::hardshrink>(kNotOnChip, x, lambd);
  }
  return at::where(inside(x, lambd.toDouble()), zero_of(x), x);
}

namespace {

// hardshrink's and softshrink's gradient (the same formula); Op the one asked for, for the CPU fallback.
template <typename Op>
at::Tensor shrink_backward(const at::Tensor& grad, const at::Tensor& x, const at::Scalar& lambd) {
  if (!non_empty_chip_floats({&x, &grad})) return fall_back<Op>(kNotOnChip, grad, x, lambd);
  return at::where(inside(x, lambd.toDouble()), zero_of(grad), grad);
}
}  // namespace

at::Tensor NpuNativeFunctions::hardshrink_backward(const at::Tensor& grad, const at::Tensor& x, const at::Scalar& lambd) {
  return shrink_backward<at::_ops::hardshrink_backward>(grad, x, lambd);
}
at::Tensor NpuNativeFunctions::softshrink_backward(const at::Tensor& grad, const at::Tensor& x, const at::Scalar& lambd) {
  return shrink_backward<at::_ops::softshrink_backward>(grad, x, lambd);
}

at::Tensor NpuNativeFunctions::softshrink(const at::Tensor& x, const at::Scalar& lambd) {
  if (!non_empty_chip_floats({&x})) {
    return fall_back<at::_ops::softshrink>(kNotOnChip, x, lambd);
  }
  const double l = lambd.toDouble();
  return at::where(at::gt(x, l), at::sub(x, l), at::where(at::lt(x, -l), at::add(x, l), at::mul(x, 0)));
}

at::Tensor NpuNativeFunctions::_prelu_kernel(const at::Tensor& x, const at::Tensor& weight) {
  if (!non_empty_chip_floats({&x, &weight}) || x.scalar_type() != weight.scalar_type()) {
    return fall_back<at::_ops::_prelu_kernel>(kNotOnChip, x, weight);
  }
  return at::where(at::gt(x, 0), x, at::mul(weight, x));
}

std::tuple<at::Tensor, at::Tensor> NpuNativeFunctions::_prelu_kernel_backward(const at::Tensor& grad, const at::Tensor& x,
                                                                              const at::Tensor& weight) {
  if (!non_empty_chip_floats({&x, &weight, &grad}) || x.scalar_type() != weight.scalar_type()) {
    return fall_back<at::_ops::_prelu_kernel_backward>(kNotOnChip, grad, x, weight);
  }
  const at::Tensor positive = at::gt(x, 0);
  return {at::where(positive, grad, at::mul(weight, grad)), at::where(positive, zero_of(x), at::mul(x, grad))};
}

at::Tensor NpuNativeFunctions::rrelu_with_noise(const at::Tensor& x, at::Tensor& noise, const at::Scalar& lower, const at::Scalar& upper,
                                                bool training, std::optional<at::Generator> generator) {
  if (!non_empty_chip_floats({&x}) || (training && (!chip_float(noise) || noise.sizes() != x.sizes()))) {
    // (Without the npu generator: the CPU's default one draws the noise, as for the other random ops.)
    return fall_back<at::_ops::rrelu_with_noise>(kNotOnChip, x, noise, lower, upper, training, std::nullopt);
  }
  if (!training) return at::leaky_relu(x, (lower.toDouble() + upper.toDouble()) / 2);
  noise.uniform_(lower.toDouble(), upper.toDouble(), generator);
  noise.copy_(at::where(at::le(x, 0), noise, at::ones({}, at::TensorOptions().dtype(noise.scalar_type()))));
  return at::mul(x, noise);
}
// (Not derived: the functional form writes noise, so it is not a plain functional.)
at::Tensor& NpuNativeFunctions::rrelu_with_noise_out(const at::Tensor& x, at::Tensor& noise, const at::Scalar& lower,
                                                     const at::Scalar& upper, bool training, std::optional<at::Generator> generator,
                                                     at::Tensor& out) {
  return into(NpuNativeFunctions::rrelu_with_noise(x, noise, lower, upper, training, generator), out);
}

at::Tensor& NpuNativeFunctions::clamp_out(const at::Tensor& x, const std::optional<at::Tensor>& min, const std::optional<at::Tensor>& max,
                                          at::Tensor& out) {
  TORCH_CHECK(defined(min) || defined(max), "torch.clamp: At least one of 'min' or 'max' must not be None");
  at::Tensor result = x;
  if (defined(min)) result = at::maximum(result, *min);
  if (defined(max)) result = at::minimum(result, *max);
  return into(result.is_same(x) ? x.clone() : result, out);
}

at::Tensor& NpuNativeFunctions::lerp_out(const at::Tensor& self, const at::Tensor& end, const at::Tensor& weight, at::Tensor& out) {
  if (!chip_float(self) || !chip_float(end) || !chip_float(weight)) {
    return fall_back<at::_ops::lerp_Tensor_out>(kNotOnChip, self, end, weight, out);
  }
  // In f32 (ATen's opmath), rounded once.
  const std::vector<at::Tensor> operands = {as_f32(self), as_f32(end), as_f32(weight)};
  const at::Tensor from_self = elementwise_chain(operands, "sub(in1, in0); mul(in2, %0); add(in0, %1)");
  const at::Tensor from_end = elementwise_chain(operands, "sub(in1, in0); sub(1, in2); mul(%0, %1); sub(in1, %2)");
  const at::Tensor result = at::where(at::lt(at::abs(operands[2]), 0.5), from_self, from_end);
  return into(result.to(at::result_type(self, end)), out);
}

}  // namespace npusim
