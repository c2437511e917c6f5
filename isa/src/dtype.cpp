#include "npusim/isa/dtype.h"

#include <cmath>
#include <cstring>

namespace npu::isa {

unsigned dtype_size_bytes(DType dtype) {
  switch (dtype) {
    case DType::F32:
    case DType::I32: return 4;
    case DType::BF16:
    case DType::F16: return 2;
    case DType::I8:
    case DType::U8: return 1;
  }
  return 0;
}

bool dtype_is_float(DType dtype) {
  return dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F16;
}

std::string_view dtype_name(DType dtype) {
  const auto& names = operand_value_names(OperandKind::DType);
  const auto index = static_cast<size_t>(dtype);
  return index < names.size() ? std::string_view(names[index]) : std::string_view("?");
}

std::optional<DType> dtype_from_name(std::string_view name) {
  const auto& names = operand_value_names(OperandKind::DType);
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<DType>(i);
  return std::nullopt;
}

uint16_t f32_to_f16(float value) {
  const uint32_t bits = f32_bits(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const uint32_t abs_bits = bits & 0x7fffffff;
  if (abs_bits > 0x7f800000) return static_cast<uint16_t>(sign | 0x7e00 | ((abs_bits >> 13) & 0x3ff));
  if (abs_bits >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);  // rounds to >= 65520: inf
  const int exponent = static_cast<int>(abs_bits >> 23) - 127;
  if (exponent >= -14) {
    // Normal half: keep 10 mantissa bits, round to nearest even on the 13 dropped.
    const uint32_t half = ((static_cast<uint32_t>(exponent + 15) << 10) | ((abs_bits >> 13) & 0x3ff));
    const uint32_t dropped = abs_bits & 0x1fff;
    const uint32_t round_up = (dropped > 0x1000 || (dropped == 0x1000 && (half & 1))) ? 1 : 0;
    return static_cast<uint16_t>(sign | (half + round_up));
  }
  if (exponent < -25) return sign;  // below half the smallest subnormal: zero
  // Subnormal half: value = mantissa * 2^-24.
  const uint32_t mantissa = (abs_bits & 0x7fffff) | 0x800000;
  const int shift = -exponent - 1;  // 14..24 positions so that result is in units of 2^-24
  const uint32_t half = mantissa >> shift;
  const uint32_t dropped = mantissa & ((1u << shift) - 1);
  const uint32_t halfway = 1u << (shift - 1);
  const uint32_t round_up = (dropped > halfway || (dropped == halfway && (half & 1))) ? 1 : 0;
  return static_cast<uint16_t>(sign | (half + round_up));
}

float f16_to_f32(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1f;
  const uint32_t mantissa = bits & 0x3ff;
  if (exponent == 0x1f) return f32_from_bits(sign | 0x7f800000 | (mantissa << 13));
  if (exponent != 0) return f32_from_bits(sign | ((exponent + 112) << 23) | (mantissa << 13));
  const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  return sign ? -magnitude : magnitude;
}

}  // namespace npu::isa
