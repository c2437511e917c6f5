// Activation functions, their gradients and the small elementwise ops of
// training loops that the vector unit has no one instruction for, composed of
// the chip's kernels with the formulas of ATen's CPU kernels:
//
//   tanh'             g * (1 - y * y)                  sigmoid'   g * (1 - y) * y
//   hardsigmoid       min(max(x + 3, 0), 6) / 6        hardswish  x * min(max(x + 3, 0), 6) / 6
//   hardtanh, relu6   clamp(x, min, max)               leaky_relu x > 0 ? x : x * slope
//   elu               x <= 0 ? (exp(x * s_in) - 1) * alpha * scale : x * scale
//   softplus          x * beta > threshold ? x : log(1 + exp(x * beta)) / beta
//   mish              x * tanh(log(1 + exp(x)))        log_sigmoid min(x, 0) - log(1 + exp(-|x|))
//   clamp_min/max     maximum / minimum                mse_loss   (x - y)^2, its mean or sum
//   smooth_l1, huber  the quadratic or the linear branch of |x - y|
//   and each one's gradient by ATen's formula; log1p and expm1 by Kahan's
//   forms, sign (sgn), and round, floor, ceil, trunc (below).
//
// The arithmetic of each branch runs in f32 as one elementwise chain and is
// rounded once to the result's dtype, as ATen's CPU kernels compute bf16 and
// f16 (in f32, their opmath type; the chain converts half-precision inputs on
// the chip); leaky_relu and elu are one chain (their formulas below), other
// branches are chosen by the comparison and select kernels, with
// the comparisons of ATen's scalar code (its vectorized code sends a NaN down
// the other branch in places: elu's and hardswish's gradients at a NaN are 0
// here, NaN on the CPU). Inside softplus, mish, elu and log_sigmoid, where
// ATen calls log1p or expm1, the chain computes log(1 + y) or exp(y) - 1 (the
// vector unit has neither): the same to within a few f32 ulps of 1 in
// absolute terms, which is the tolerance the tests use. Integer and f64
// tensors and empty ones go to the CPU, counted.
#include <ATen/Functions.h>
#include <torch/library.h>

#include <cmath>
#include <string>
#include <vector>

#include "PrivateUse1NativeFunctions.h"
#include "cpu_fallback.h"
#include "kernel_launch.h"

namespace npusim {
namespace {

// Every tensor a chip float on the npu, of one dtype, and none empty.
bool on_chip(std::initializer_list<const at::Tensor*> tensors) {
  const at::ScalarType dtype = (*tensors.begin())->scalar_type();
  for (const at::Tensor* t : tensors)
    if (!chip_float(*t) || t->scalar_type() != dtype || t->numel() == 0) return false;
  return true;
}

// The chain over the inputs (broadcast to one shape) in f32, rounded once to `dtype`.
at::Tensor f32_chain(const std::string& chain, const std::vector<at::Tensor>& inputs, at::ScalarType dtype) {
  return elementwise_chain_in_f32(inputs, chain, dtype);
}

// A scalar operand of the select kernel: 0-dim, on the host, of `dtype`.
at::Tensor constant(double value, at::ScalarType dtype) { return at::scalar_tensor(value, at::TensorOptions().dtype(dtype)); }

constexpr const char* kNotOnChip = "operands not all non-empty f32, bf16 or f16 of one dtype";

// ---- tanh, sigmoid --------------------------------------------------------------

}  // namespace

at::Tensor NpuNativeFunctions::tanh_backward(const at::Tensor& grad, const at::Tensor& y) {
  if (on_chip({&grad, &y})) return f32_chain("mul(in1, in1); sub(1, %0); mul(in0, %1)", {grad, y}, grad.scalar_type());
  return fall_back<at::_ops::tanh_backward>("", grad, y);
}

at::Tensor NpuNativeFunctions::sigmoid_backward(const at::Tensor& grad, const at::Tensor& y) {
  if (on_chip({&grad, &y})) return f32_chain("sub(1, in1); mul(in0, %0); mul(%1, in1)", {grad, y}, grad.scalar_type());
  return fall_back<at::_ops::sigmoid_backward>("", grad, y);
}

// ---- hardsigmoid, hardswish, hardtanh --------------------------------------------

at::Tensor NpuNativeFunctions::hardsigmoid(const at::Tensor& x) {
  if (on_chip({&x})) return f32_chain("add(in0, 3); maximum(%0, 0); minimum(%1, 6); div(%2, 6)", {x}, x.scalar_type());
  return fall_back<at::_ops::hardsigmoid>("", x);
}

// (x > -3 && x < 3) ? g / 6 : 0, the sixth a float constant as ATen's.
at::Tensor NpuNativeFunctions::hardsigmoid_backward(const at::Tensor& grad, const at::Tensor& x) {
  if (on_chip({&grad, &x})) {
    const at::Tensor inside = at::logical_and(at::gt(x, -3), at::lt(x, 3));
    const at::Tensor sixth = f32_chain("mul(in0, " + chain_constant(double(1.0f / 6.0f)) + ")", {grad}, grad.scalar_type());
    return at::where(inside, sixth, constant(0, grad.scalar_type()));
  }
  return fall_back<at::_ops::hardsigmoid_backward>("", grad, x);
}

at::Tensor NpuNativeFunctions::hardswish(const at::Tensor& x) {
  if (on_chip({&x})) return f32_chain("add(in0, 3); maximum(%0, 0); minimum(%1, 6); mul(in0, %2); div(%3, 6)", {x}, x.scalar_type());
  return fall_back<at::_ops::hardswish>("", x);
}

// x <= -3 ? 0 : x < 3 ? g * (x / 3 + 0.5) : g
at::Tensor NpuNativeFunctions::hardswish_backward(const at::Tensor& grad, const at::Tensor& x) {
  if (on_chip({&grad, &x})) {
    const at::Tensor ramp = f32_chain("div(in1, 3); add(%0, 0.5); mul(in0, %1)", {grad, x}, grad.scalar_type());
    return at::where(at::le(x, -3), constant(0, grad.scalar_type()), at::where(at::lt(x, 3), ramp, grad));
  }
  return fall_back<at::_ops::hardswish_backward>("", grad, x);
}

at::Tensor NpuNativeFunctions::hardtanh(const at::Tensor& x, const at::Scalar& min, const at::Scalar& max) {
  if (on_chip({&x})) return at::clamp(x, min, max);
  return fall_back<at::_ops::hardtanh>("", x, min, max);
}

// (x <= min || x >= max) ? 0 : g
at::Tensor NpuNativeFunctions::hardtanh_backward(const at::Tensor& grad, const at::Tensor& x, const at::Scalar& min, const at::Scalar& max) {
  if (on_chip({&grad, &x})) {
    const at::Tensor outside = at::logical_or(at::le(x, min), at::ge(x, max));
    return at::where(outside, constant(0, grad.scalar_type()), grad);
  }
  return fall_back<at::_ops::hardtanh_backward>("", grad, x, min, max);
}

// ---- leaky_relu, elu ---------------------------------------------------------------

// x > 0 ? x : x * slope is max(x, x * slope) for a slope up to 1 and min(x, x * slope) above: one kernel.
// A slope of 0 (+inf * 0 is NaN where the CPU keeps +inf) or not finite takes the comparison and select.
at::Tensor NpuNativeFunctions::leaky_relu(const at::Tensor& x, const at::Scalar& slope) {
  if (on_chip({&x})) {
    const double a = slope.toDouble();
    if (std::isfinite(a) && a != 0)
      return f32_chain("mul(in0, " + chain_constant(a) + "); " + (a <= 1 ? "maximum" : "minimum") + "(in0, %0)", {x}, x.scalar_type());
    const at::Tensor sloped = f32_chain("mul(in0, " + chain_constant(slope.toDouble()) + ")", {x}, x.scalar_type());
    return at::where(at::gt(x, 0), x, sloped);
  }
  return fall_back<at::_ops::leaky_relu>("", x, slope);
}

at::Tensor NpuNativeFunctions::leaky_relu_backward(const at::Tensor& grad, const at::Tensor& x, const at::Scalar& slope, bool self_is_result) {
  if (on_chip({&grad, &x})) {
    const at::Tensor sloped = f32_chain("mul(in0, " + chain_constant(slope.toDouble()) + ")", {grad}, grad.scalar_type());
    return at::where(at::gt(x, 0), grad, sloped);
  }
  return fall_back<at::_ops::leaky_relu_backward>(kNotOnChip, grad, x, slope, self_is_result);
}

namespace {

// ATen's coefficients, in float: negcoef = alpha * scale, poscoef = scale, negiptcoef = input_scale.
struct EluCoefficients {
  std::string negative, positive, input;
  bool finite;
  EluCoefficients(const at::Scalar& alpha, const at::Scalar& scale, const at::Scalar& input_scale)
      : negative(chain_constant(double(alpha.to<float>() * scale.to<float>()))),
        positive(chain_constant(double(scale.to<float>()))),
        input(chain_constant(double(input_scale.to<float>()))),
        finite(std::isfinite(alpha.to<float>() * scale.to<float>()) && std::isfinite(scale.to<float>()) && std::isfinite(input_scale.to<float>())) {}
};

}  // namespace

at::Tensor NpuNativeFunctions::elu(const at::Tensor& x, const at::Scalar& alpha, const at::Scalar& scale, const at::Scalar& input_scale) {
  if (on_chip({&x})) {
    // One kernel: max(x, 0) * poscoef + (exp(min(x, 0) * negiptcoef) - 1) * negcoef. Where x > 0 the
    // second term is exactly 0, where x <= 0 the first is, so each element is its branch's value as the
    // CPU rounds it (a NaN propagates through max).
    // (Coefficients that are not finite make 0 * inf: those take the comparison and select.)
    const EluCoefficients c(alpha, scale, input_scale);
    if (c.finite)
      return f32_chain("maximum(in0, 0); mul(%0, " + c.positive + "); minimum(in0, 0); mul(%2, " + c.input + "); exp(%3); sub(%4, 1); mul(%5, " +
                           c.negative + "); add(%1, %6)",
                       {x}, x.scalar_type());
    const at::Tensor negative = f32_chain("mul(in0, " + c.input + "); exp(%0); sub(%1, 1); mul(%2, " + c.negative + ")", {x}, x.scalar_type());
    const at::Tensor positive = f32_chain("mul(in0, " + c.positive + ")", {x}, x.scalar_type());
    return at::where(at::le(x, 0), negative, positive);
  }
  return fall_back<at::_ops::elu>("", x, alpha, scale, input_scale);
}

// From the result (is_result): r <= 0 ? g * negiptcoef * (r + negcoef) : g * poscoef;
// from the input: x <= 0 ? g * negiptcoef * negcoef * exp(x * negiptcoef) : g * poscoef.
at::Tensor NpuNativeFunctions::elu_backward(const at::Tensor& grad, const at::Scalar& alpha, const at::Scalar& scale,
                                            const at::Scalar& input_scale, bool is_result, const at::Tensor& self_or_result) {
  if (on_chip({&grad, &self_or_result})) {
    const EluCoefficients c(alpha, scale, input_scale);
    const std::string chain = is_result ? "mul(in0, " + c.input + "); add(in1, " + c.negative + "); mul(%0, %1)"
                                        : "mul(in0, " + c.input + "); mul(%0, " + c.negative + "); mul(in1, " + c.input +
                                              "); exp(%2); mul(%1, %3)";
    const at::Tensor negative = f32_chain(chain, {grad, self_or_result}, grad.scalar_type());
    const at::Tensor positive = f32_chain("mul(in0, " + c.positive + ")", {grad}, grad.scalar_type());
    return at::where(at::le(self_or_result, 0), negative, positive);
  }
  return fall_back<at::_ops::elu_backward>(kNotOnChip, grad, alpha, scale, input_scale, is_result, self_or_result);
}

namespace {

// ---- softplus, mish, log_sigmoid ---------------------------------------------------------

// x * beta > threshold, the product in f32.
at::Tensor above_threshold(const at::Tensor& x, const std::string& beta, const at::Scalar& threshold) {
  return at::gt(f32_chain("mul(in0, " + beta + ")", {x}, at::kFloat), threshold);
}

}  // namespace

at::Tensor NpuNativeFunctions::softplus(const at::Tensor& x, const at::Scalar& beta, const at::Scalar& threshold) {
  if (on_chip({&x})) {
    const std::string b = chain_constant(double(beta.to<float>()));
    const at::Tensor smooth = f32_chain("mul(in0, " + b + "); exp(%0); add(%1, 1); log(%2); div(%3, " + b + ")", {x}, x.scalar_type());
    return at::where(above_threshold(x, b, threshold), x, smooth);
  }
  return fall_back<at::_ops::softplus>("", x, beta, threshold);
}

// z = exp(x * beta): x * beta > threshold ? g : g * z / (z + 1)
at::Tensor NpuNativeFunctions::softplus_backward(const at::Tensor& grad, const at::Tensor& x, const at::Scalar& beta,
                                                 const at::Scalar& threshold) {
  if (on_chip({&grad, &x})) {
    const std::string b = chain_constant(double(beta.to<float>()));
    const at::Tensor smooth = f32_chain("mul(in1, " + b + "); exp(%0); mul(in0, %1); add(%1, 1); div(%2, %3)", {grad, x}, grad.scalar_type());
    return at::where(above_threshold(x, b, threshold), grad, smooth);
  }
  return fall_back<at::_ops::softplus_backward>("", grad, x, beta, threshold);
}

at::Tensor NpuNativeFunctions::mish(const at::Tensor& x) {
  if (on_chip({&x})) return f32_chain("exp(in0); add(%0, 1); log(%1); tanh(%2); mul(in0, %3)", {x}, x.scalar_type());
  return fall_back<at::_ops::mish>("", x);
}

// The buffer ATen's CPU kernel fills is not needed by the backward below: empty, as CUDA's.
std::tuple<at::Tensor, at::Tensor> NpuNativeFunctions::log_sigmoid_forward(const at::Tensor& x) {
  if (on_chip({&x})) {
    const at::Tensor out = f32_chain("abs(in0); neg(%0); exp(%1); add(%2, 1); log(%3); minimum(in0, 0); sub(%5, %4)", {x}, x.scalar_type());
    return {out, new_npu({0}, x.scalar_type())};
  }
  return fall_back<at::_ops::log_sigmoid_forward>(kNotOnChip, x);
}
std::tuple<at::Tensor&, at::Tensor&> NpuNativeFunctions::log_sigmoid_forward_out(const at::Tensor& x, at::Tensor& out, at::Tensor& buffer) {
  auto [result, scratch] = NpuNativeFunctions::log_sigmoid_forward(x);
  into(result, out);
  into(scratch, buffer);
  return {out, buffer};
}

// z = exp(-|x|): x < 0 ? g * (1 - z / (1 + z)) : g * (z / (1 + z))
at::Tensor NpuNativeFunctions::log_sigmoid_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& buffer) {
  if (on_chip({&grad, &x})) {
    const std::string share = "abs(in1); neg(%0); exp(%1); add(%2, 1); div(%2, %3); ";
    const at::Tensor negative = f32_chain(share + "sub(1, %4); mul(in0, %5)", {grad, x}, grad.scalar_type());
    const at::Tensor positive = f32_chain(share + "mul(in0, %4)", {grad, x}, grad.scalar_type());
    return at::where(at::lt(x, 0), negative, positive);
  }
  // ATen's CPU kernel reads the buffer its own forward fills (the npu's is empty): that forward first.
  const at::Tensor cpu_buffer = std::get<1>(fall_back<at::_ops::log_sigmoid_forward>(kNotOnChip, x));
  return fall_back<at::_ops::log_sigmoid_backward>(kNotOnChip, grad, x, cpu_buffer);
}

namespace {

// ---- clamp_min, clamp_max ------------------------------------------------------------

// Bounds of x's float dtype (a bound of another dtype would promote): the maximum or minimum kernel.
at::Tensor clamp_bound(const at::Tensor& x, const at::Tensor& bound, bool lower) {
  if (on_chip({&x}) && (bound.dim() == 0 || bound.scalar_type() == x.scalar_type()) && at::result_type(x, bound) == x.scalar_type())
    return lower ? at::maximum(x, bound) : at::minimum(x, bound);
  return lower ? fall_back<at::_ops::clamp_min_Tensor>(kNotOnChip, x, bound) : fall_back<at::_ops::clamp_max_Tensor>(kNotOnChip, x, bound);
}
}  // namespace

at::Tensor& NpuNativeFunctions::clamp_min_out(const at::Tensor& x, const at::Scalar& min, at::Tensor& out) {
  return into(clamp_bound(x, at::scalar_tensor(min, at::TensorOptions().dtype(x.scalar_type())), true), out);
}
at::Tensor& NpuNativeFunctions::clamp_max_out(const at::Tensor& x, const at::Scalar& max, at::Tensor& out) {
  return into(clamp_bound(x, at::scalar_tensor(max, at::TensorOptions().dtype(x.scalar_type())), false), out);
}
at::Tensor& NpuNativeFunctions::clamp_min_out(const at::Tensor& x, const at::Tensor& min, at::Tensor& out) {
  return into(clamp_bound(x, min, true), out);
}
at::Tensor& NpuNativeFunctions::clamp_max_out(const at::Tensor& x, const at::Tensor& max, at::Tensor& out) {
  return into(clamp_bound(x, max, false), out);
}

// ---- mse_loss ---------------------------------------------------------------------------

// (x - y)^2 rounded to x's dtype, then its mean or sum (accumulated in f32, rounded once), as the CPU does.
at::Tensor NpuNativeFunctions::mse_loss(const at::Tensor& x, const at::Tensor& y, int64_t reduction) {
  if (on_chip({&x, &y})) {
    const at::Tensor squares = f32_chain("sub(in0, in1); mul(%0, %0)", {x, y}, x.scalar_type());
    if (reduction == at::Reduction::Mean) return at::mean(squares);
    if (reduction == at::Reduction::Sum) return at::sum(squares);
    return squares;
  }
  return fall_back<at::_ops::mse_loss>("", x, y, reduction);
}

// norm * (x - y) * g, norm = 2 / N for the mean, else 2.
at::Tensor NpuNativeFunctions::mse_loss_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& y, int64_t reduction) {
  if (on_chip({&grad, &x, &y})) {
    const double norm = reduction == at::Reduction::Mean ? 2.0 / double(x.numel()) : 2.0;
    return f32_chain("sub(in0, in1); mul(%0, " + chain_constant(norm) + "); mul(%1, in2)", {x, y, grad}, x.scalar_type());
  }
  return fall_back<at::_ops::mse_loss_backward>("", grad, x, y, reduction);
}

namespace {

// ---- smooth_l1_loss, huber_loss ------------------------------------------------------------

// The loss per element in f32 rounded to x's dtype, then its mean or sum (f32 accumulation, rounded once).
at::Tensor reduced(const at::Tensor& losses, int64_t reduction) {
  if (reduction == at::Reduction::Mean) return at::mean(losses);
  if (reduction == at::Reduction::Sum) return at::sum(losses);
  return losses;
}

// z = |x - y|: z < beta ? 0.5 * z * z / beta : z - 0.5 * beta (huber: z < delta ? 0.5 * z * z : delta * (z - 0.5 * delta)).
at::Tensor robust_loss(const at::Tensor& x, const at::Tensor& y, int64_t reduction, double beta, bool huber) {
  const at::Tensor z = f32_chain("sub(in0, in1); abs(%0)", {x, y}, at::kFloat);
  const std::string b = chain_constant(double(float(beta))), half_b = chain_constant(double(0.5f * float(beta)));
  const at::Tensor quadratic = elementwise_chain({z}, huber ? "mul(in0, 0.5); mul(%0, in0)" : "mul(in0, 0.5); mul(%0, in0); div(%1, " + b + ")");
  const at::Tensor linear = elementwise_chain({z}, huber ? "sub(in0, " + half_b + "); mul(%0, " + b + ")" : "sub(in0, " + half_b + ")");
  const at::Tensor losses = at::where(at::lt(z, beta), quadratic, linear);
  return reduced(losses.scalar_type() == x.scalar_type() ? losses : losses.to(x.scalar_type()), reduction);
}

// d = x - y, norm = 1 / N for the mean, else 1: d <= -beta ? -norm * g : d >= beta ? norm * g : norm * d * g / beta
// (huber: the outer branches times delta, the inner one norm * d * g).
at::Tensor robust_loss_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& y, int64_t reduction, double beta, bool huber) {
  const double norm = reduction == at::Reduction::Mean ? 1.0 / double(x.numel()) : 1.0;
  const std::string n = chain_constant(double(float(norm))), minus_n = chain_constant(-double(float(norm))), b = chain_constant(double(float(beta)));
  const at::ScalarType dtype = grad.scalar_type();
  const at::Tensor d = f32_chain("sub(in0, in1)", {x, y}, at::kFloat);
  const at::Tensor inner = f32_chain(huber ? "mul(in0, " + n + "); mul(%0, in1)" : "mul(in0, " + n + "); mul(%0, in1); div(%1, " + b + ")",
                                     {d, grad}, dtype);
  const std::string times_b = huber ? "; mul(%0, " + b + ")" : "";
  const at::Tensor above = f32_chain("mul(in0, " + n + ")" + times_b, {grad}, dtype);
  const at::Tensor below = f32_chain("mul(in0, " + minus_n + ")" + times_b, {grad}, dtype);
  return at::where(at::le(d, -beta), below, at::where(at::ge(d, beta), above, inner)).expand(x.sizes()).contiguous();
}

}  // namespace

at::Tensor NpuNativeFunctions::smooth_l1_loss(const at::Tensor& x, const at::Tensor& y, int64_t reduction, double beta) {
  if (on_chip({&x, &y}) && beta >= 0) return robust_loss(x, y, reduction, beta, false);
  return fall_back<at::_ops::smooth_l1_loss>("", x, y, reduction, beta);
}
at::Tensor NpuNativeFunctions::smooth_l1_loss_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& y, int64_t reduction,
                                                       double beta) {
  if (on_chip({&grad, &x, &y}) && beta > 0) return robust_loss_backward(grad, x, y, reduction, beta, false);
  return fall_back<at::_ops::smooth_l1_loss_backward>("", grad, x, y, reduction, beta);
}
at::Tensor NpuNativeFunctions::huber_loss(const at::Tensor& x, const at::Tensor& y, int64_t reduction, double delta) {
  if (on_chip({&x, &y}) && delta > 0) return robust_loss(x, y, reduction, delta, true);
  return fall_back<at::_ops::huber_loss>("", x, y, reduction, delta);
}
at::Tensor NpuNativeFunctions::huber_loss_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& y, int64_t reduction,
                                                   double delta) {
  if (on_chip({&grad, &x, &y}) && delta > 0) return robust_loss_backward(grad, x, y, reduction, delta, true);
  return fall_back<at::_ops::huber_loss_backward>("", grad, x, y, reduction, delta);
}

// ---- log1p, expm1, sign --------------------------------------------------------------------

// Kahan's forms, accurate near zero where log(1 + x) and exp(x) - 1 are not:
//   log1p: u = 1 + x; u == 1 ? x : log(u) * (x / (u - 1))    (u = inf: inf)
//   expm1: u = exp(x); u == 1 ? x : u - 1 == -1 ? -1 : (u - 1) * (x / log(u))    (u = inf: inf)
// The quotient first, which is near 1: log(u) * x overflowed for x near f32's largest (log1p(3e38) was inf),
// and (u - 1) * x for x near 88.
at::Tensor NpuNativeFunctions::log1p(const at::Tensor& x) {
  if (!on_chip({&x})) return fall_back<at::_ops::log1p>("", x);
  const at::Tensor xf = as_f32(x), u = at::add(xf, 1);
  const at::Tensor kahan = elementwise_chain({xf, u}, "sub(in1, 1); div(in0, %0); log(in1); mul(%2, %1)");
  const at::Tensor result = at::where(at::eq(u, 1), xf, at::where(at::eq(u, INFINITY), u, kahan));
  return result.scalar_type() == x.scalar_type() ? result : result.to(x.scalar_type());
}

at::Tensor NpuNativeFunctions::expm1(const at::Tensor& x) {
  if (!on_chip({&x})) return fall_back<at::_ops::expm1>("", x);
  const at::Tensor xf = as_f32(x), u = at::exp(xf);
  const at::Tensor kahan = elementwise_chain({xf, u}, "sub(in1, 1); log(in1); div(in0, %1); mul(%0, %2)");
  at::Tensor result = at::where(at::eq(at::sub(u, 1), -1), constant(-1, at::kFloat), at::where(at::eq(u, INFINITY), u, kahan));
  result = at::where(at::eq(u, 1), xf, result);
  return result.scalar_type() == x.scalar_type() ? result : result.to(x.scalar_type());
}

// sign (and sgn, the same for real dtypes): 1, -1 or 0 (NaN and -0 included), as the CPU gives; integers too
// (int64 compared and selected on its words: DeBERTa's relative positions).
at::Tensor NpuNativeFunctions::sign(const at::Tensor& x) {
  const at::ScalarType t = x.scalar_type();
  const bool chip = on_npu(x) && x.numel() > 0 && (chip_float_dtype(t) || t == at::kInt || t == at::kChar || t == at::kByte || t == at::kLong);
  if (!chip) return fall_back<at::_ops::sign>("", x);
  if (t == at::kByte) return at::gt(x, 0).to(t);  // (nothing below 0)
  return at::where(at::gt(x, 0), constant(1, t), at::where(at::lt(x, 0), constant(-1, t), constant(0, t)));
}
at::Tensor NpuNativeFunctions::sgn(const at::Tensor& x) { return sign(x); }  // (abs's gradient)

namespace {

// ---- round, floor, ceil, trunc ------------------------------------------------------------

enum class Rounding { Nearest, Floor, Ceil, Trunc };

// Below 2^23 in magnitude, x + 2^23 (x - 2^23 for a negative x) keeps no fraction bits, so f32's own
// rounding (to nearest, ties to even) rounds it, and subtracting 2^23 again is exact; from 2^23 up
// (and for inf and NaN) x is its own rounding. Floor, ceil and trunc correct the nearest integer by
// one where it lies on the wrong side of x. In f32, exact; bf16 and f16 results are representable.
// (A negative x rounding to zero gives +0 where the CPU gives -0: equal, but of another sign bit.)
at::Tensor rounded(const at::Tensor& x, Rounding mode) {
  if (on_npu(x) && x.numel() > 0 && at::isIntegralType(x.scalar_type(), /*includeBool=*/true)) return x.clone();  // integers are their own
  if (!on_chip({&x})) {
    switch (mode) {
      case Rounding::Nearest: return fall_back<at::_ops::round>(kNotOnChip, x);
      case Rounding::Floor: return fall_back<at::_ops::floor>(kNotOnChip, x);
      case Rounding::Ceil: return fall_back<at::_ops::ceil>(kNotOnChip, x);
      case Rounding::Trunc: return fall_back<at::_ops::trunc>(kNotOnChip, x);
    }
  }
  const at::Tensor xf = as_f32(x);
  const at::Tensor up = elementwise_chain({xf}, "add(in0, 8388608); sub(%0, 8388608)");
  const at::Tensor down = elementwise_chain({xf}, "sub(in0, 8388608); add(%0, 8388608)");
  const at::Tensor negative = at::lt(xf, 0);
  at::Tensor nearest = at::where(at::lt(at::abs(xf), 8388608.0), at::where(negative, down, up), xf);
  const auto one_if = [](const at::Tensor& condition) { return condition.to(at::kFloat); };
  at::Tensor result = nearest;
  if (mode == Rounding::Floor || (mode == Rounding::Trunc)) {
    const at::Tensor floor = at::sub(nearest, one_if(at::gt(nearest, xf)));
    const at::Tensor ceil = at::add(nearest, one_if(at::lt(nearest, xf)));
    result = mode == Rounding::Floor ? floor : at::where(negative, ceil, floor);
  } else if (mode == Rounding::Ceil) {
    result = at::add(nearest, one_if(at::lt(nearest, xf)));
  }
  return result.scalar_type() == x.scalar_type() ? result : result.to(x.scalar_type());
}
}  // namespace

at::Tensor NpuNativeFunctions::round(const at::Tensor& x) { return rounded(x, Rounding::Nearest); }
at::Tensor NpuNativeFunctions::floor(const at::Tensor& x) { return rounded(x, Rounding::Floor); }
at::Tensor NpuNativeFunctions::ceil(const at::Tensor& x) { return rounded(x, Rounding::Ceil); }
at::Tensor NpuNativeFunctions::trunc(const at::Tensor& x) { return rounded(x, Rounding::Trunc); }

}  // namespace npusim
