// Elementary functions the vector unit has no instruction for, from the ones it has (exp, log,
// sqrt, sin, cos, erf, division) and the select kernel, each in f32 and rounded once to its dtype
// (bf16 and f16 as ATen computes them, in f32):
//   tan          sin / cos
//   sinh, cosh   (e^x - e^-x) / 2, (e^x + e^-x) / 2; sinh below |x| = 1 by its Taylor series to x^11
//                (no cancellation). Both overflow from |x| = 88.7, where e^x does (the CPU's from 89.4)
//   asinh        sign(x) log1p(|x| + x^2 / (1 + sqrt(1 + x^2))), or log|x| + ln 2 from |x| = 2^12
//   acosh        log1p((x - 1) + sqrt((x - 1)(x + 1))), or log x + ln 2 from x = 2^12
//   atanh        log1p(2x / (1 - x)) / 2
//   atan         Cephes' reduction to |r| <= tan(pi/8) (r = -1/|x| above tan(3pi/8), (|x|-1)/(|x|+1)
//                above tan(pi/8)) and its degree-9 odd polynomial, the sign restored
//   asin, acos   atan(x / sqrt((1 - x)(1 + x))), 2 atan(sqrt((1 - x) / (1 + x)))
//   atan2(y, x)  atan(y / x), plus pi with y's sign where x's sign bit is set; C's values where both are
//                zeros (+-0 or +-pi) or both infinite (+-pi/4, +-3pi/4)
//   erfinv       Giles' single-precision approximation, then one Newton step on the chip's erf; +-inf at +-1
//   erfc         t exp(-z^2 + P(t)), t = 1 / (1 + z / 2), z = |x| (Numerical Recipes' erfcc: relative
//                error 1.2e-7), with z^2 split exactly into hi + lo (Veltkamp) and exp(-hi) exp(P(t) - lo),
//                so the tail keeps its relative precision; 2 - erfc(|x|) for negative x
//   sinc         sin(pi x) / (pi x), 1 at 0 (ATen's formula)
//   frac         x - trunc(x)
//   logaddexp    max + log1p(exp(-|a - b|)); a where a and b are the same infinity (ATen's order)
//   copysign, signbit  on the f32 bit patterns (i32 views), exact; heaviside and logical_xor by
//                comparisons and selects, exact
// log1p is the bridge's (activations.cpp: Kahan's form). Results are within a few f32 ulps of the
// CPU's (the tests' tolerance: rtol 1.3e-6). Integer, f64 and empty tensors: the CPU, counted.
#include <ATen/ExpandUtils.h>
#include <ATen/Functions.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "PrivateUse1NativeFunctions.h"
#include "float_unary.h"
#include "cpu_fallback.h"
#include "kernel_launch.h"

namespace npusim {
namespace {

constexpr double kPi = 3.14159265358979323846;

at::Tensor f32_scalar(double value) { return at::scalar_tensor(value, at::TensorOptions().dtype(at::kFloat)); }
std::string c(double value) { return chain_constant(value); }

// The sign bit of `sign_source` on the magnitude of `magnitude` (f32 tensors), exactly.
at::Tensor copysign_f32(const at::Tensor& magnitude, const at::Tensor& sign_source) {
  const at::Tensor bits = elementwise_chain({dense(magnitude).view(at::kInt), dense(sign_source).view(at::kInt)},
                                            "bitwise_and(in0, 2147483647); bitwise_and(in1, -2147483648); bitwise_or(%0, %1)");
  return bits.view(at::kFloat);
}
at::Tensor sign_bit_f32(const at::Tensor& x) { return at::lt(dense(x).view(at::kInt), 0); }

at::Tensor tan_f32(const at::Tensor& x) { return elementwise_chain({x}, "sin(in0); cos(in0); div(%0, %1)"); }

at::Tensor sinh_f32(const at::Tensor& x) {
  // x + x z (1/3! + z (1/5! + z (1/7! + z (1/9! + z / 11!)))), z = x^2
  const at::Tensor series = elementwise_chain(
      {x}, "mul(in0, in0); mul(%0, " + c(1.0 / 39916800) + "); add(%1, " + c(1.0 / 362880) + "); mul(%2, %0); add(%3, " + c(1.0 / 5040) +
               "); mul(%4, %0); add(%5, " + c(1.0 / 120) + "); mul(%6, %0); add(%7, " + c(1.0 / 6) + "); mul(%8, %0); mul(%9, in0); add(in0, %10)");
  const at::Tensor exponential = elementwise_chain({x}, "exp(in0); div(1, %0); sub(%0, %1); mul(%2, 0.5)");
  return at::where(at::lt(at::abs(x), 1.0), series, exponential);
}
at::Tensor cosh_f32(const at::Tensor& x) { return elementwise_chain({x}, "exp(in0); div(1, %0); add(%0, %1); mul(%2, 0.5)"); }

at::Tensor asinh_f32(const at::Tensor& x) {
  const at::Tensor a = at::abs(x);
  const at::Tensor small = at::log1p(elementwise_chain({a}, "mul(in0, in0); add(%0, 1); sqrt(%1); add(%2, 1); div(%0, %3); add(in0, %4)"));
  const at::Tensor large = elementwise_chain({a}, "log(in0); add(%0, " + c(std::log(2.0)) + ")");
  return copysign_f32(at::where(at::lt(a, 4096.0), small, large), x);
}
at::Tensor acosh_f32(const at::Tensor& x) {
  const at::Tensor small = at::log1p(elementwise_chain({x}, "sub(in0, 1); add(in0, 1); mul(%0, %1); sqrt(%2); add(%0, %3)"));
  const at::Tensor large = elementwise_chain({x}, "log(in0); add(%0, " + c(std::log(2.0)) + ")");
  return at::where(at::lt(x, 4096.0), small, large);
}
at::Tensor atanh_f32(const at::Tensor& x) {
  return at::mul(at::log1p(elementwise_chain({x}, "mul(in0, 2); sub(1, in0); div(%0, %1)")), 0.5);
}

at::Tensor atan_f32(const at::Tensor& x) {
  const at::Tensor a = at::abs(x);
  const at::Tensor big = at::gt(a, 2.414213562373095), mid = at::gt(a, 0.4142135623730950);
  const at::Tensor reduced = at::where(big, elementwise_chain({a}, "div(-1, in0)"),
                                       at::where(mid, elementwise_chain({a}, "sub(in0, 1); add(in0, 1); div(%0, %1)"), a));
  const at::Tensor offset = at::where(big, f32_scalar(kPi / 2), at::where(mid, f32_scalar(kPi / 4), f32_scalar(0.0)));
  // offset + r + r z (((8.05374449538e-2 z - 1.38776856032e-1) z + 1.99777106478e-1) z - 3.33329491539e-1), z = r^2
  const at::Tensor result = elementwise_chain(
      {reduced, offset}, "mul(in0, in0); mul(%0, 8.05374449538e-2); sub(%1, 1.38776856032e-1); mul(%2, %0); add(%3, 1.99777106478e-1); "
                         "mul(%4, %0); sub(%5, 3.33329491539e-1); mul(%6, %0); mul(%7, in0); add(%8, in0); add(%9, in1)");
  return copysign_f32(result, x);
}
at::Tensor asin_f32(const at::Tensor& x) { return atan_f32(elementwise_chain({x}, "sub(1, in0); add(1, in0); mul(%0, %1); sqrt(%2); div(in0, %3)")); }
at::Tensor acos_f32(const at::Tensor& x) {
  return at::mul(atan_f32(elementwise_chain({x}, "sub(1, in0); add(1, in0); div(%0, %1); sqrt(%2)")), 2.0);
}

at::Tensor atan2_f32(const at::Tensor& y, const at::Tensor& x) {
  const std::vector<int64_t> shape = at::infer_size(y.sizes(), x.sizes());
  const at::Tensor yb = y.expand(shape), xb = x.expand(shape);
  const at::Tensor pi_with_y_sign = copysign_f32(at::full(shape, kPi, at::TensorOptions().dtype(at::kFloat).device(kNpu)), yb);
  const at::Tensor x_negative = sign_bit_f32(xb);
  at::Tensor result = at::add(atan_f32(at::div(yb, xb)), at::where(x_negative, pi_with_y_sign, f32_scalar(0.0)));
  // Both zeros: +-0 or +-pi; both infinite: +-pi/4 or +-3pi/4 (C's atan2).
  const at::Tensor zeros = at::logical_and(at::eq(yb, 0), at::eq(xb, 0));
  result = at::where(zeros, at::where(x_negative, pi_with_y_sign, copysign_f32(at::zeros(shape, pi_with_y_sign.options()), yb)), result);
  const at::Tensor infinities = at::logical_and(at::isinf(yb), at::isinf(xb));
  return at::where(infinities, at::mul(pi_with_y_sign, at::where(x_negative, f32_scalar(0.75), f32_scalar(0.25))), result);
}

at::Tensor erfinv_f32(const at::Tensor& x) {
  // Giles (2010), single precision: w = -log((1 - x)(1 + x)), a polynomial in w - 2.5 below w = 5, in sqrt(w) - 3 above.
  const at::Tensor w = elementwise_chain({x}, "sub(1, in0); add(1, in0); mul(%0, %1); log(%2); neg(%3)");
  // The polynomial k[0] v^n + ... + k[n] by Horner's rule, v the last of the prefix's steps.
  const auto horner = [](const std::string& prefix, int prefix_steps, const std::vector<double>& k) {
    const std::string v = "%" + std::to_string(prefix_steps - 1);
    std::string chain = prefix + "; mul(" + v + ", " + c(k[0]) + ")";
    int last = prefix_steps;  // the step just added
    for (size_t i = 1; i < k.size(); ++i) {
      chain += "; add(%" + std::to_string(last++) + ", " + c(k[i]) + ")";
      if (i + 1 < k.size()) chain += "; mul(%" + std::to_string(last++) + ", " + v + ")";
    }
    return chain;
  };
  const at::Tensor central = elementwise_chain({w}, horner("sub(in0, 2.5)", 1, {2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                                                                               0.00021858087, -0.00125372503, -0.00417768164, 0.246640727,
                                                                               1.50140941}));
  const at::Tensor tail = elementwise_chain({w}, horner("sqrt(in0); sub(%0, 3)", 2, {-0.000200214257, 0.000100950558, 0.00134934322,
                                                                                      -0.00367342844, 0.00573950773, -0.0076224613,
                                                                                      0.00943887047, 1.00167406, 2.83297682}));
  const at::Tensor estimate = at::mul(at::where(at::lt(w, 5.0), central, tail), x);
  // One Newton step on erf(r) = x: r - (erf(r) - x) / (2 / sqrt(pi) e^(-r^2)); kept where it is finite (x = +-1 gives +-inf).
  const at::Tensor refined = elementwise_chain(
      {estimate, x}, "erf(in0); sub(%0, in1); mul(in0, in0); neg(%2); exp(%3); mul(%4, " + c(2.0 / std::sqrt(kPi)) + "); div(%1, %5); sub(in0, %6)");
  // x = +-1: +-inf (the tail polynomial, whose leading coefficient is negative, went to -inf at w = inf).
  const at::Tensor infinity = copysign_f32(at::full(x.sizes(), std::numeric_limits<double>::infinity(), x.options()), x);
  return at::where(at::eq(at::abs(x), 1.0), infinity, at::where(at::isfinite(refined), refined, estimate));
}

at::Tensor erfc_f32(const at::Tensor& x) {
  // P(t) = -1.26551223 + t (1.00002368 + t (0.37409196 + ... + t 0.17087277)), Horner from the innermost
  // coefficient; in0 = x. %0 z = |x|, %4 t.
  std::string chain = "abs(in0); mul(%0, 0.5); add(%1, 1); div(1, %2); copy(%3); mul(%4, 0.17087277)";
  const double coefficients[] = {-0.82215223, 1.48851587, -1.13520398, 0.27886807, -0.18628806, 0.09678418, 0.37409196, 1.00002368};
  int last = 5;
  for (const double k : coefficients) {
    chain += "; add(%" + std::to_string(last) + ", " + c(k) + "); mul(%" + std::to_string(last + 1) + ", %4)";
    last += 2;
  }
  chain += "; add(%" + std::to_string(last) + ", -1.26551223)";  // P(t)
  const int p = ++last;
  // z^2 = hi + lo exactly: hi = fl(z z), lo from Veltkamp's halves of z (zh = c - (c - z), c = 4097 z)
  chain += "; mul(%0, %0); mul(%0, 4097); sub(%" + std::to_string(p + 2) + ", %0); sub(%" + std::to_string(p + 2) + ", %" + std::to_string(p + 3) +
           "); sub(%0, %" + std::to_string(p + 4) + ")";
  const int hi = p + 1, zh = p + 4, zl = p + 5;
  const auto at_ = [](int i) { return "%" + std::to_string(i); };
  // lo = ((zh zh - hi) + 2 zh zl) + zl zl
  chain += "; mul(" + at_(zh) + ", " + at_(zh) + "); sub(" + at_(zl + 1) + ", " + at_(hi) + "); mul(" + at_(zh) + ", " + at_(zl) + "); mul(" +
           at_(zl + 3) + ", 2); add(" + at_(zl + 2) + ", " + at_(zl + 4) + "); mul(" + at_(zl) + ", " + at_(zl) + "); add(" + at_(zl + 5) + ", " +
           at_(zl + 6) + ")";
  const int lo = zl + 7;
  // t exp(-hi) exp(P - lo)
  chain += "; neg(" + at_(hi) + "); exp(" + at_(lo + 1) + "); sub(" + at_(p) + ", " + at_(lo) + "); exp(" + at_(lo + 3) + "); mul(" + at_(lo + 2) +
           ", " + at_(lo + 4) + "); mul(%4, " + at_(lo + 5) + ")";
  const at::Tensor positive = elementwise_chain({x}, chain);
  // Beyond |x| = 10 erfc is below f32's smallest subnormal (or 2 less it), where the splits would overflow.
  const at::Tensor result = at::where(at::lt(x, 0), at::rsub(positive, 2), positive);
  return at::where(at::gt(x, 10.0), f32_scalar(0.0), at::where(at::lt(x, -10.0), f32_scalar(2.0), result));
}

at::Tensor sinc_f32(const at::Tensor& x) {
  return at::where(at::eq(x, 0), f32_scalar(1.0), elementwise_chain({x}, "mul(in0, " + c(kPi) + "); sin(%0); div(%1, %0)"));
}
at::Tensor frac_f32(const at::Tensor& x) { return at::sub(x, at::trunc(x)); }

}  // namespace

// The in-place and out= forms come from these (aten_table.cpp).
#define NPUSIM_ELEMENTARY(NAME, F32)                                                                                   \
  at::Tensor NpuNativeFunctions::NAME(const at::Tensor& x) {                                                             \
    return float_unary<at::_ops::NAME>(x, F32);                                                                         \
  }
NPUSIM_ELEMENTARY(tan, tan_f32)
NPUSIM_ELEMENTARY(sinh, sinh_f32)
NPUSIM_ELEMENTARY(cosh, cosh_f32)
NPUSIM_ELEMENTARY(asinh, asinh_f32)
NPUSIM_ELEMENTARY(acosh, acosh_f32)
NPUSIM_ELEMENTARY(atanh, atanh_f32)
NPUSIM_ELEMENTARY(atan, atan_f32)
NPUSIM_ELEMENTARY(asin, asin_f32)
NPUSIM_ELEMENTARY(acos, acos_f32)
NPUSIM_ELEMENTARY(erfinv, erfinv_f32)
NPUSIM_ELEMENTARY(erfc, erfc_f32)
NPUSIM_ELEMENTARY(sinc, sinc_f32)
NPUSIM_ELEMENTARY(frac, frac_f32)
#undef NPUSIM_ELEMENTARY

namespace {

// Binary functions of two float operands (npu tensors or CPU scalars), in f32, rounded once to ATen's result
// dtype; other operands take the CPU fallback of `Op` (at::_ops::NAME).
template <typename Op, typename Compute>
at::Tensor binary(const at::Tensor& a, const at::Tensor& b, Compute compute) {
  const at::ScalarType dtype = at::result_type(a, b);
  const auto usable = [](const at::Tensor& t) { return (chip_float(t) && t.numel() > 0) || (!on_npu(t) && t.dim() == 0); };
  if (!chip_float_dtype(dtype) || !usable(a) || !usable(b) || (!on_npu(a) && !on_npu(b))) return fall_back<Op>(kNotChipFloats, a, b);
  const at::Tensor result = compute(as_f32(to_npu(a)), as_f32(to_npu(b)));
  return result.scalar_type() == dtype ? result : result.to(dtype);
}

}  // namespace

at::Tensor NpuNativeFunctions::atan2(const at::Tensor& y, const at::Tensor& x) {
  return binary<at::_ops::atan2>(y, x, atan2_f32);
}

at::Tensor NpuNativeFunctions::logaddexp(const at::Tensor& a, const at::Tensor& b) {
  return binary<at::_ops::logaddexp>(a, b, [](const at::Tensor& p, const at::Tensor& q) {
    const at::Tensor larger = at::maximum(p, q);
    const at::Tensor sum = at::add(larger, at::log1p(elementwise_chain({p, q}, "sub(in0, in1); abs(%0); neg(%1); exp(%2)")));
    const at::Tensor same_infinity = at::logical_and(at::isinf(p), at::eq(p, q));
    return at::where(same_infinity, p.expand(sum.sizes()), sum);
  });
}

at::Tensor NpuNativeFunctions::copysign(const at::Tensor& a, const at::Tensor& b) {
  const at::ScalarType dtype = at::result_type(a, b);
  if (!chip_float_dtype(dtype)) {  // (integers copysign into floats on the CPU)
    return fall_back<at::_ops::copysign_Tensor>(kNotChipFloats, a, b);
  }
  return binary<at::_ops::copysign_Tensor>(a, b, [](const at::Tensor& p, const at::Tensor& q) {
    const std::vector<int64_t> shape = at::infer_size(p.sizes(), q.sizes());
    return copysign_f32(p.expand(shape), q.expand(shape));
  });
}

at::Tensor NpuNativeFunctions::signbit(const at::Tensor& x) {
  if (chip_float(x) && x.numel() > 0) return sign_bit_f32(as_f32(x));
  if (on_npu(x) && (x.scalar_type() == at::kInt || x.scalar_type() == at::kChar)) return at::lt(x, 0);
  return fall_back<at::_ops::signbit>(kNotChipFloats, x);
}

at::Tensor NpuNativeFunctions::heaviside(const at::Tensor& x, const at::Tensor& values) {
  TORCH_CHECK(x.scalar_type() == values.scalar_type(), "heaviside is not yet implemented for tensors with different dtypes");
  if (!on_npu(x) || !chip_dtype(x.scalar_type()) || x.scalar_type() == at::kBool) {
    return fall_back<at::_ops::heaviside>("not a chip dtype", x, values);
  }
  const at::Tensor step = at::gt(x, 0).to(x.scalar_type());
  return at::where(at::eq(x, 0), to_npu(values), step);
}

at::Tensor& NpuNativeFunctions::logical_xor_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  const auto usable = [](const at::Tensor& t) { return on_npu(t) && chip_dtype(t.scalar_type()); };
  if (!usable(a) || !usable(b)) {
    return fall_back<at::_ops::logical_xor_out>("not chip dtypes on the npu", a, b, out);
  }
  return into(at::ne(at::ne(a, 0), at::ne(b, 0)), out);
}

}  // namespace npusim
