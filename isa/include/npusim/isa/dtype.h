// Element types of the ISA: sizes, names, and the conversions every layer
// must agree on (round to nearest even for narrowing float conversions).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "npusim/isa/isa.h"

namespace npu::isa {

inline constexpr unsigned kNumDTypes = 6;

unsigned dtype_size_bytes(DType dtype);
bool dtype_is_float(DType dtype);
std::string_view dtype_name(DType dtype);
std::optional<DType> dtype_from_name(std::string_view name);

// f32 <-> bf16 / f16 bit patterns. Narrowing rounds to nearest, ties to even;
// NaN stays NaN (quiet); overflow gives infinity.
uint16_t f32_to_bf16(float value);
float bf16_to_f32(uint16_t bits);
uint16_t f32_to_f16(float value);
float f16_to_f32(uint16_t bits);

uint32_t f32_bits(float value);
float f32_from_bits(uint32_t bits);

}  // namespace npu::isa
