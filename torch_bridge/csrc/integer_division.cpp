// Integer division on the npu: floor_divide (//), remainder (%) and div with rounding_mode "trunc"
// or "floor", bit-exact with the CPU. The vector unit's v.div truncates (the compiler's div_trunc);
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
// Floats: div with rounding_mode "trunc" is trunc(a / b) on the chip, as the CPU computes it; float
// floor division and remainder (whose exact remainder needs fmod) go to the CPU, counted.
#include <ATen/ExpandUtils.h>
#include <ATen/Functions.h>
#include <torch/library.h>

#include <functional>
#include <limits>
#include <optional>
#include <string>

#include "int64_arithmetic.h"
#include "kernel_launch.h"

namespace npusim {
namespace {

enum class Rounding { Trunc, Floor, Remainder };

bool chip_integer(at::ScalarType t) { return t == at::kInt || t == at::kChar || t == at::kByte; }

// One chain over a and b of one chip integer dtype.
at::Tensor divide_on_chip(const at::Tensor& a, const at::Tensor& b, Rounding rounding) {
  const bool is_unsigned = a.scalar_type() == at::kByte;  // the truncated quotient is the floor
  if (rounding == Rounding::Trunc || (rounding == Rounding::Floor && is_unsigned)) return elementwise_chain({a, b}, "div_trunc(in0, in1)");
  const std::string quotient_and_remainder = "div_trunc(in0, in1); mul(%0, in1); sub(in0, %1)";  // %0 q, %2 r
  if (is_unsigned) return elementwise_chain({a, b}, quotient_and_remainder);
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

at::Tensor on_host(const char* name, const std::string& reason, const std::function<at::Tensor()>& reference) {
  if (reason.empty()) note_cpu_fallback(name);
  else note_cpu_fallback(name, reason);
  return to_npu(reference());
}

at::Tensor divide(const char* name, const at::Tensor& a_in, const at::Tensor& b_in, Rounding rounding,
                  const std::function<at::Tensor()>& reference) {
  const at::ScalarType common = at::result_type(a_in, b_in);
  if (at::isFloatingType(common)) return on_host(name, "floats: the exact remainder needs fmod, which the chip has not", reference);
  if (!(chip_integer(common) || common == at::kLong)) return on_host(name, "", reference);
  const auto prepare = [&](const at::Tensor& t) {
    if (!on_npu(t) && t.dim() == 0) return to_npu(t.to(common));
    return on_npu(t) && t.scalar_type() != common ? t.to(common) : to_npu(t);
  };
  const at::Tensor a = prepare(a_in), b = prepare(b_in);
  if (a.numel() == 0 || b.numel() == 0) return on_host(name, "empty operands", reference);
  if (chip_integer(common)) return divide_on_chip(a, b, rounding);
  if (at::logical_or(outside_int32(a, true), outside_int32(b, false)).cpu().item<bool>())
    return on_host(name, "int64 values beyond 32 bits", reference);
  return divide_on_chip(int64_low_word(a), int64_low_word(b), rounding).to(at::kLong);
}

at::Tensor npu_floor_divide(const at::Tensor& a, const at::Tensor& b) {
  return divide("aten::floor_divide", a, b, Rounding::Floor, [&] { return at::floor_divide(a.cpu(), b.cpu()); });
}
at::Tensor& floor_divide_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) { return into(npu_floor_divide(a, b), out); }
at::Tensor npu_remainder(const at::Tensor& a, const at::Tensor& b) {
  return divide("aten::remainder.Tensor", a, b, Rounding::Remainder, [&] { return at::remainder(a.cpu(), b.cpu()); });
}
at::Tensor& remainder_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) { return into(npu_remainder(a, b), out); }

// div with a rounding mode: integers above; floats' "trunc" as trunc(a / b) on the chip; "floor" of floats and
// no mode (true division, dispatched here with one) through the other kernels.
at::Tensor div_mode(const at::Tensor& a, const at::Tensor& b, std::optional<c10::string_view> mode) {
  const auto reference = [&] { return at::div(a.cpu(), b.cpu(), mode); };
  if (!mode) return at::div(a, b);
  const bool integers = at::isIntegralType(at::result_type(a, b), /*includeBool=*/false);
  if (*mode == "trunc") return integers ? divide("aten::div.Tensor_mode", a, b, Rounding::Trunc, reference) : at::trunc(at::div(a, b));
  if (*mode == "floor" && integers) return divide("aten::div.Tensor_mode", a, b, Rounding::Floor, reference);
  return on_host("aten::div.Tensor_mode", "", reference);  // (an unknown mode: the CPU's error)
}
at::Tensor& div_mode_out(const at::Tensor& a, const at::Tensor& b, std::optional<c10::string_view> mode, at::Tensor& out) {
  return into(div_mode(a, b, mode), out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("floor_divide", npu_floor_divide);
  m.impl("floor_divide.out", floor_divide_out);
  m.impl("remainder.Tensor", npu_remainder);
  m.impl("remainder.Tensor_out", remainder_out);
  m.impl("div.Tensor_mode", div_mode);
  m.impl("div.out_mode", div_mode_out);
}

}  // namespace npusim
