// Division with rounding on the npu: floor_divide (//), remainder (%), fmod and div with rounding_mode
// "trunc" or "floor", bit-exact with the CPU. The vector unit's v.div truncates (the compiler's div_trunc);
// floor division and Python's remainder (with the divisor's sign) are its quotient and remainder
// moved by one where the remainder is nonzero and its sign is not the divisor's, found with shifts
// and masks instead of comparisons, so that each is one elementwise chain:
//   q = a div_trunc b, r = a - q b
//   adjust = ((r ^ b) >> (bits - 1)) & ((r | -r) >> (bits - 1))   (-1 there, else 0)
//   a // b = q + adjust, a % b = r + (b & adjust)
// (uint8 needs no adjusting). int32, int8 and uint8 run on the chip; int64 on its low words where
// every value of both operands fits 32 bits and the dividend is not -2^31 (whose quotient by -1 does
// not), which is checked on the chip and read back as one value (as CUDA reads back nonzero's count),
// the result then widened on the chip; other int64 values go to the CPU, counted. A zero divisor
// faults the launch (a RuntimeError naming v.div), where the CPU raises ZeroDivisionError.
// fmod of integers is the truncating remainder r above.
//
// Floats (f32; bf16 and f16 through f32, where their fmod is exact and converts back exactly): fmod exactly,
// as C's, in one chain, then ATen's remainder and floor division formulas on it, each step in the dtype as
// the CPU rounds them (so bit-exact with the CPU):
//   A = |a|, B = |b|, q = round(A / B) (by adding and taking away 2^23: q is floor(A / B) or one more)
//   r = A - q B exactly: Dekker's product q B = p + e (Veltkamp's splits by 4097), A - p exact by
//       Sterbenz's lemma (p is within a factor 2 of A), and r = (A - p) - e exact because r is
//       representable (a multiple of ulp(B) below 2^24 ulp(B)); r < 0 (q one too many) gives r + B
//   fmod(a, b) = r with a's sign; NaN where b is 0 or a infinite, a where b is infinite
// This holds while A / B < 2^22 and the values lie within 2^-100 .. 2^100 (no overflow in the splits,
// no underflow in e); the chip checks it and one value is read back; other values go to the CPU,
// counted. div with rounding_mode "trunc" of floats is trunc(a / b) on the chip, as the CPU computes it.
#include <ATen/ExpandUtils.h>
#include <ATen/Functions.h>
#include <torch/library.h>

#include <functional>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "PrivateUse1NativeFunctions.h"
#include "int64_arithmetic.h"
#include "cpu_fallback.h"
#include "kernel_launch.h"

namespace npusim {
namespace {

enum class Rounding { Trunc, Floor, Remainder, Fmod };

bool chip_integer(at::ScalarType t) { return t == at::kInt || t == at::kChar || t == at::kByte; }

// One chain over a and b of one chip integer dtype.
at::Tensor divide_on_chip(const at::Tensor& a, const at::Tensor& b, Rounding rounding) {
  const bool is_unsigned = a.scalar_type() == at::kByte;  // the truncated quotient is the floor
  if (rounding == Rounding::Trunc || (rounding == Rounding::Floor && is_unsigned)) return elementwise_chain({a, b}, "div_trunc(in0, in1)");
  const std::string quotient_and_remainder = "div_trunc(in0, in1); mul(%0, in1); sub(in0, %1)";  // %0 q, %2 r
  if (is_unsigned || rounding == Rounding::Fmod) return elementwise_chain({a, b}, quotient_and_remainder);
  const std::string sign = std::to_string(c10::elementSize(a.scalar_type()) * 8 - 1);
  const std::string adjust = "; bitwise_xor(%2, in1); bitwise_right_shift(%3, " + sign + "); neg(%2); bitwise_or(%2, %5); bitwise_right_shift(%6, " +
                             sign + "); bitwise_and(%4, %7)";  // %8 adjust
  return elementwise_chain({a, b}, quotient_and_remainder + adjust + (rounding == Rounding::Floor ? "; add(%0, %8)" : "; bitwise_and(in1, %8); add(%2, %9)"));
}

// Whether some value of t lies outside int32 (its high word is not its low word's sign), or, for the
// dividend, is -2^31.
at::Tensor outside_int32(const at::Tensor& t, bool dividend) {
  const at::Tensor low = int64_low_word(t);
  at::Tensor outside = at::ne(int64_high_word(t), at::bitwise_right_shift(low, 31));
  if (dividend) outside = at::logical_or(outside, at::eq(low, std::numeric_limits<int32_t>::min()));
  return at::any(outside);
}

// `fallback(reason)`: the op itself on the CPU fallback (an empty reason: the kernel's).
using Fallback = std::function<at::Tensor(const char* reason)>;

at::Tensor f32_scalar(double value) { return at::scalar_tensor(value, at::TensorOptions().dtype(at::kFloat)); }

// C's fmod of f32 tensors (broadcast), exactly, or undefined where some value is out of the method's range.
at::Tensor exact_fmod(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor magnitude_a = at::abs(a), magnitude_b = at::abs(b);
  const at::Tensor finite = at::logical_and(at::logical_and(at::isfinite(a), at::isfinite(b)), at::ne(b, 0));
  const at::Tensor beyond_2_100 = at::logical_or(at::lt(magnitude_b, std::ldexp(1.0, -100)), at::gt(magnitude_a, std::ldexp(1.0, 100)));
  const at::Tensor out_of_range = at::logical_or(at::ge(at::div(magnitude_a, magnitude_b), 4194304.0), beyond_2_100);  // 2^22
  if (at::any(at::logical_and(finite, out_of_range)).cpu().item<bool>()) return at::Tensor();
  const at::Tensor remainder = elementwise_chain(
      {a, b},
      "abs(in0); abs(in1); div(%0, %1); add(%2, 8388608); sub(%3, 8388608); "          // %0 A, %1 B, %4 q
      "mul(%4, 4097); sub(%5, %4); sub(%5, %6); sub(%4, %7); "                          // %7 q hi, %8 q lo
      "mul(%1, 4097); sub(%9, %1); sub(%9, %10); sub(%1, %11); "                        // %11 B hi, %12 B lo
      "mul(%4, %1); mul(%7, %11); sub(%14, %13); mul(%7, %12); add(%15, %16); "          // %13 p = fl(q B)
      "mul(%8, %11); add(%17, %18); mul(%8, %12); add(%19, %20); "                      // %21 e = q B - p
      "sub(%0, %13); sub(%22, %21)");                                                    // %23 r = (A - p) - e
  const at::Tensor corrected = at::where(at::lt(remainder, 0), at::add(remainder, magnitude_b), remainder);
  const std::vector<int64_t> shape = at::infer_size(a.sizes(), b.sizes());
  at::Tensor result = at::where(finite, at::copysign(corrected, a), f32_scalar(std::numeric_limits<double>::quiet_NaN()));
  // a finite and b infinite: a itself
  return at::where(at::logical_and(at::isfinite(a), at::isinf(b)), a.expand(shape), result);
}

// fmod, remainder or floor division of floats of one dtype: ATen's formulas on the exact fmod (computed
// in f32, exact in the dtype too), each step in the dtype, rounded as the CPU's scalar_t arithmetic.
at::Tensor divide_floats(const at::Tensor& a, const at::Tensor& b, Rounding rounding) {
  at::Tensor mod = exact_fmod(as_f32(a), as_f32(b));
  if (!mod.defined()) return mod;
  mod = mod.to(a.scalar_type());
  if (rounding == Rounding::Fmod) return mod;
  // the remainder's sign is not the divisor's: Python's % and // move by one divisor
  const at::Tensor moves = at::logical_and(at::ne(mod, 0), at::ne(at::lt(b, 0), at::lt(mod, 0)));
  if (rounding == Rounding::Remainder) return at::where(moves, at::add(mod, b), mod);
  // ATen's div_floor_floating: div = (a - mod) / b, less one where it moves; floor, rounded up past .5;
  // a zero quotient takes the sign of a / b; a zero divisor gives a / b
  const at::Tensor quotient = at::div(a, b);
  at::Tensor div = at::div(at::sub(a, mod), b);
  div = at::where(moves, at::sub(div, 1), div);
  at::Tensor floored = at::floor(div);
  floored = at::where(at::gt(at::sub(div, floored), 0.5), at::add(floored, 1), floored);
  const at::Tensor result = at::where(at::ne(div, 0), floored, at::copysign(at::zeros_like(div), quotient));
  return at::where(at::eq(b, 0), quotient, result);
}

at::Tensor divide(const at::Tensor& a_in, const at::Tensor& b_in, Rounding rounding, const Fallback& fallback) {
  const at::ScalarType common = at::result_type(a_in, b_in);
  if (at::isFloatingType(common)) {
    const auto usable = [](const at::Tensor& t) { return (on_npu(t) && t.numel() > 0) || (!on_npu(t) && t.dim() == 0); };
    if (!chip_float_dtype(common) || !usable(a_in) || !usable(b_in) || (!on_npu(a_in) && !on_npu(b_in)))
      return fallback("f64, or empty operands");
    // ATen floor-divides bf16 and f16 by a host scalar in f32 with the scalar unrounded (its
    // original_scalar_value), rounding once; otherwise in the dtype.
    const bool in_f32 = rounding == Rounding::Floor && common != at::kFloat && !on_npu(b_in);
    const at::ScalarType computed = in_f32 ? at::kFloat : common;
    // (a host scalar converted on the host: an f64 one has no chip dtype to convert from)
    const auto operand = [&](const at::Tensor& t) { return on_npu(t) ? t.to(computed) : to_npu(t.to(computed)); };
    const at::Tensor result = divide_floats(operand(a_in), operand(b_in), rounding);
    if (!result.defined()) return fallback("float values whose quotient reaches 2^22, or beyond 2^-100 .. 2^100");
    return result.to(common);
  }
  if (!(chip_integer(common) || common == at::kLong)) return fallback("");
  const auto prepare = [&](const at::Tensor& t) {
    if (!on_npu(t) && t.dim() == 0) return to_npu(t.to(common));
    return on_npu(t) && t.scalar_type() != common ? t.to(common) : to_npu(t);
  };
  const at::Tensor a = prepare(a_in), b = prepare(b_in);
  if (a.numel() == 0 || b.numel() == 0) return fallback("empty operands");
  if (chip_integer(common)) return divide_on_chip(a, b, rounding);
  if (at::logical_or(outside_int32(a, true), outside_int32(b, false)).cpu().item<bool>())
    return fallback("int64 values beyond 32 bits");
  return divide_on_chip(int64_low_word(a), int64_low_word(b), rounding).to(at::kLong);
}

}  // namespace

at::Tensor NpuNativeFunctions::floor_divide(const at::Tensor& a, const at::Tensor& b) {
  return divide(a, b, Rounding::Floor, [&](const char* reason) { return fall_back<at::_ops::floor_divide>(reason, a, b); });
}
at::Tensor NpuNativeFunctions::remainder(const at::Tensor& a, const at::Tensor& b) {
  return divide(a, b, Rounding::Remainder, [&](const char* reason) { return fall_back<at::_ops::remainder_Tensor>(reason, a, b); });
}
at::Tensor NpuNativeFunctions::fmod(const at::Tensor& a, const at::Tensor& b) {
  return divide(a, b, Rounding::Fmod, [&](const char* reason) { return fall_back<at::_ops::fmod_Tensor>(reason, a, b); });
}
at::Tensor NpuNativeFunctions::fmod(const at::Tensor& a, const at::Scalar& b) { return NpuNativeFunctions::fmod(a, at::scalar_tensor(b)); }

// div with a rounding mode: integers above; floats' "trunc" as trunc(a / b) on the chip; "floor" of floats and
// no mode (true division, dispatched here with one) through the other kernels.
at::Tensor NpuNativeFunctions::div(const at::Tensor& a, const at::Tensor& b, std::optional<c10::string_view> mode) {
  const auto fallback = [&](const char* reason) { return fall_back<at::_ops::div_Tensor_mode>(reason, a, b, mode); };
  if (!mode) return at::div(a, b);
  const bool integers = at::isIntegralType(at::result_type(a, b), /*includeBool=*/false);
  if (*mode == "trunc") return integers ? divide(a, b, Rounding::Trunc, fallback) : at::trunc(at::div(a, b));
  if (*mode == "floor") return divide(a, b, Rounding::Floor, fallback);
  return fallback("");  // (an unknown mode: the CPU's error)
}

}  // namespace npusim
