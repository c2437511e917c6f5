// Element types of the ISA: sizes, names, and the conversions every layer
// must agree on (round to nearest even for narrowing float conversions).
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#include "npusim/isa/isa.h"

namespace npu::isa {

inline constexpr unsigned kNumDTypes = 6;

unsigned dtype_size_bytes(DType dtype);
bool dtype_is_float(DType dtype);
std::string_view dtype_name(DType dtype);
std::optional<DType> dtype_from_name(std::string_view name);

inline uint32_t f32_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

inline float f32_from_bits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// f32 <-> bf16 / f16 bit patterns. Narrowing rounds to nearest, ties to even;
// NaN stays NaN (quiet); overflow gives infinity. The bf16 pair is inline and
// branch-free because the simulator converts every element of every tile
// through it: the compiler vectorizes the loops that call it.
inline uint16_t f32_to_bf16(float value) {
  const uint32_t bits = f32_bits(value);
  const uint32_t rounded = (bits + 0x7fff + ((bits >> 16) & 1)) >> 16;
  const uint32_t quiet_nan = (bits >> 16) | 0x0040;  // keeps the sign
  return static_cast<uint16_t>((bits & 0x7fffffff) > 0x7f800000 ? quiet_nan : rounded);
}

inline float bf16_to_f32(uint16_t bits) { return f32_from_bits(static_cast<uint32_t>(bits) << 16); }

uint16_t f32_to_f16(float value);
float f16_to_f32(uint16_t bits);

}  // namespace npu::isa
