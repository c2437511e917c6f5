// The gamma family from the vector unit's log, sin, cos and division, in f32 and rounded once to the
// input's dtype (ATen computes bf16 and f16 ones in f32):
//   lgamma           z > 0: Stirling's series (to 1/(1260 z^5)) at y = z where z >= 8; below, at y = z + 8,
//                    less log(z (z + 1) ... (z + 7)). y = z + 8 rounds, so the series' value is moved by
//                    log(y) (z - (y - 8)), a difference that is exact. x <= 0: the reflection
//                    log(pi / |sin(pi r)|) - lgamma(1 - x) with r = x - round(x) exact, so that the poles
//                    (zeros, negative integers) give +inf as on the CPU; +inf at +-inf.
//   digamma          ATen's calc_digamma: from 10 on its asymptotic series (the same coefficients, the same
//                    order); below, that series at y = x + 10 less sum 1/(x + k), k = 0..9 (a fixed shift
//                    where the CPU steps up to 10), moved by (x - (y - 10)) / y as lgamma's is. x < 0:
//                    digamma(1 - x) - pi / tan(pi r), r = x - round(x); NaN at negative integers, -inf at
//                    +0, +inf at -0.
//   polygamma(1, x)  ATen's trigamma, step for step: the reflection below 1/2, six unit shifts, its
//                    four-term series. polygamma(0, x) is digamma; higher orders run on the CPU (counted).
// Accuracy (measured against the CPU on 60,000 values from -100 to 1e30, poles and zeros included): the
// shifted sums and the reflection cancel, most near the functions' zeros (lgamma at 1 and 2 and between
// negative integers, digamma at 1.4616...). lgamma is within 5.3e-6 absolute where |lgamma| < 1 and 4.4e-6
// relative elsewhere (the CPU's own lgammaf is within 6e-8 of the exact value): at most half of
// torch.testing's f32 tolerance (rtol 1.3e-6, atol 1e-5), which the tests hold it to. digamma: 9.5e-7
// absolute, 9.2e-7 relative; trigamma within 6e-8. Integer, f64 and empty tensors: the CPU, counted.
#include <ATen/Functions.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <string>

#include "PrivateUse1NativeFunctions.h"
#include "aten/float_unary.h"
#include "aten/cpu_fallback.h"
#include "aten/kernel_launch.h"

namespace npusim {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kInfinity = std::numeric_limits<double>::infinity();

at::Tensor f32_scalar(double value) { return at::scalar_tensor(value, at::TensorOptions().dtype(at::kFloat)); }

// An elementwise chain's text, a step at a time: each step returns the reference later steps read it by.
class Chain {
 public:
  std::string operator()(const std::string& op, const std::string& a, const std::string& b = "") {
    text_ += (text_.empty() ? "" : "; ") + op + "(" + a + (b.empty() ? "" : ", " + b) + ")";
    return "%" + std::to_string(steps_++);
  }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  int steps_ = 0;
};
std::string c(double value) { return chain_constant(value); }

// log gamma(y) for y >= 8: (y - 1/2) log y - y + log(2 pi) / 2 + (1/12 - (1/360 - 1/(1260 y^2)) / y^2) / y.
at::Tensor stirling_log_gamma(const at::Tensor& y) {
  Chain s;
  const std::string main = s("sub", s("mul", s("sub", "in0", "0.5"), s("log", "in0")), "in0");
  const std::string w = s("div", "1", "in0"), w2 = s("mul", w, w);
  const std::string series = s("mul", s("add", s("mul", s("sub", s("mul", w2, c(1.0 / 1260)), c(1.0 / 360)), w2), c(1.0 / 12)), w);
  s("add", s("add", main, series), c(0.5 * std::log(2 * kPi)));
  return elementwise_chain({y}, s.text());
}

// log gamma(z) for z > 0.
at::Tensor log_gamma_positive(const at::Tensor& z) {
  const at::Tensor shifted = at::lt(z, 8.0);
  const at::Tensor y = at::where(shifted, at::add(z, 8.0), z);
  const at::Tensor series = stirling_log_gamma(y);
  // in0 the series at y, in1 y, in2 z: series + log(y) (z - (y - 8)) - log(z (z + 1) ... (z + 7)).
  Chain s;
  const std::string at_z_plus_8 = s("add", "in0", s("mul", s("log", "in1"), s("sub", "in2", s("sub", "in1", "8"))));
  std::string product = "in2";
  for (int k = 1; k <= 7; ++k) product = s("mul", product, s("add", "in2", std::to_string(k)));
  s("sub", at_z_plus_8, s("log", product));
  return at::where(shifted, elementwise_chain({series, y, z}, s.text()), series);
}

at::Tensor lgamma_f32(const at::Tensor& x) {
  const at::Tensor reflected = at::le(x, 0.0);
  const at::Tensor positive = log_gamma_positive(at::where(reflected, at::rsub(x, 1.0), x));
  // in0 r = x - round(x) (exact: |r| <= 1/2), in1 lgamma(1 - x): log(pi) - log|sin(pi r)| - lgamma(1 - x).
  Chain s;
  s("sub", s("sub", c(std::log(kPi)), s("log", s("abs", s("sin", s("mul", "in0", c(kPi)))))), "in1");
  const at::Tensor reflection = elementwise_chain({at::sub(x, at::round(x)), positive}, s.text());
  return at::where(at::isinf(x), f32_scalar(kInfinity), at::where(reflected, reflection, positive));
}

// digamma(y) for y >= 10 as ATen's calc_digamma: (log y - 0.5 / y) - z P(z), z = 1 / y^2, P by Horner.
at::Tensor asymptotic_digamma(const at::Tensor& y) {
  const double coefficients[] = {8.33333333333333333333E-2, -2.10927960927960927961E-2, 7.57575757575757575758E-3, -4.16666666666666666667E-3,
                                 3.96825396825396825397E-3, -8.33333333333333333333E-3, 8.33333333333333333333E-2};
  Chain s;
  const std::string log_y = s("log", "in0"), half_over_y = s("div", "0.5", "in0");
  const std::string z = s("div", "1", s("mul", "in0", "in0"));
  std::string p = c(coefficients[0]);
  for (int i = 1; i < 7; ++i) p = s("add", s("mul", p, z), c(coefficients[i]));
  s("sub", s("sub", log_y, half_over_y), s("mul", z, p));
  return elementwise_chain({y}, s.text());
}

// digamma(u) for u > 0.
at::Tensor digamma_positive(const at::Tensor& u) {
  const at::Tensor shifted = at::lt(u, 10.0);
  const at::Tensor y = at::where(shifted, at::add(u, 10.0), u);
  const at::Tensor series = asymptotic_digamma(y);
  // in0 the series at y, in1 y, in2 u: series + (u - (y - 10)) / y - (1/u + 1/(u + 1) + ... + 1/(u + 9)).
  Chain s;
  const std::string at_u_plus_10 = s("add", "in0", s("div", s("sub", "in2", s("sub", "in1", "10")), "in1"));
  std::string sum = s("div", "1", "in2");
  for (int k = 1; k <= 9; ++k) sum = s("add", sum, s("div", "1", s("add", "in2", std::to_string(k))));
  s("sub", at_u_plus_10, sum);
  return at::where(shifted, elementwise_chain({series, y, u}, s.text()), series);
}

at::Tensor digamma_f32(const at::Tensor& x) {
  const at::Tensor negative = at::lt(x, 0.0);
  const at::Tensor positive = digamma_positive(at::where(negative, at::rsub(x, 1.0), x));
  // in0 r = x - round(x) (exact, and tan's period: the angle pi r is small next to the poles, and so
  // precise), in1 digamma(1 - x): digamma(1 - x) - pi cos(pi r) / sin(pi r).
  const at::Tensor r = at::sub(x, at::round(x));
  Chain s;
  const std::string angle = s("mul", "in0", c(kPi));
  s("sub", "in1", s("mul", s("div", s("cos", angle), s("sin", angle)), c(kPi)));
  const at::Tensor reflection = elementwise_chain({r, positive}, s.text());
  const at::Tensor result = at::where(negative, at::where(at::eq(r, 0.0), f32_scalar(std::nan("")), reflection), positive);
  // +-0: -+inf (C's and SciPy's digamma).
  const at::Tensor zero_value = at::where(at::signbit(x), f32_scalar(kInfinity), f32_scalar(-kInfinity));
  return at::where(at::eq(x, 0.0), zero_value, result);
}

// ATen's trigamma in f32: below 1/2, sign -1, result = -pi^2 / sin^2(pi x) and x = 1 - x; then six times
// result += 1 / x^2, x += 1; then result += (1 + 1 / (2 x) + w (1/6 - w (1/30 - w / 42))) / x, w = 1 / x^2.
at::Tensor trigamma_f32(const at::Tensor& x) {
  const float pi = static_cast<float>(kPi);
  const at::Tensor reflected = at::lt(x, 0.5);
  Chain r;
  const std::string sine = r("sin", r("mul", "in0", c(pi)));
  r("neg", r("div", c(pi * pi), r("mul", sine, sine)));
  const at::Tensor start = at::where(reflected, elementwise_chain({x}, r.text()), f32_scalar(0.0));
  // in0 x (1 - x where reflected), in1 the start.
  Chain s;
  std::string shifted_x = "in0", result = "in1";
  for (int i = 0; i < 6; ++i) {
    result = s("add", result, s("div", "1", s("mul", shifted_x, shifted_x)));
    shifted_x = s("add", shifted_x, "1");
  }
  const std::string w = s("div", "1", s("mul", shifted_x, shifted_x));
  const std::string polynomial = s("mul", w, s("sub", c(1.0 / 6), s("mul", w, s("sub", c(1.0 / 30), s("mul", w, c(1.0 / 42))))));
  const std::string numerator = s("add", s("add", s("div", "1", s("mul", shifted_x, "2")), "1"), polynomial);
  s("add", result, s("div", numerator, shifted_x));
  const at::Tensor sum = elementwise_chain({at::where(reflected, at::rsub(x, 1.0), x), start}, s.text());
  return at::where(reflected, at::neg(sum), sum);
}

}  // namespace

at::Tensor NpuNativeFunctions::lgamma(const at::Tensor& x) {
  return float_unary<at::_ops::lgamma>(x, lgamma_f32);
}

at::Tensor NpuNativeFunctions::digamma(const at::Tensor& x) {
  return float_unary<at::_ops::digamma>(x, digamma_f32);
}

at::Tensor NpuNativeFunctions::polygamma(int64_t n, const at::Tensor& x) {
  TORCH_CHECK(n >= 0, "polygamma(n, x) does not support negative n.");
  if (n == 0) return NpuNativeFunctions::digamma(x);
  if (n == 1) return float_unary<at::_ops::polygamma>(x, trigamma_f32, n);
  return fall_back<at::_ops::polygamma>("orders above 1 (the Hurwitz zeta function) have no npu kernel", n, x);
}
// (Not derived: polygamma_ takes its arguments in another order.)
at::Tensor& NpuNativeFunctions::polygamma_(at::Tensor& x, int64_t n) { return x.copy_(NpuNativeFunctions::polygamma(n, x)); }

}  // namespace npusim
