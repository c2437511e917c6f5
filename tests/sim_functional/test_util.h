// Helpers for the functional-kernel tests: tiles as byte vectors, encoded and
// decoded with the ISA's own conversions (not the kernels'), and random data.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "functional/kernels.h"
#include "npusim/isa/dtype.h"

namespace npu::sim::functional::test {

using isa::DType;
using Bytes = std::vector<uint8_t>;

inline constexpr DType kFloatTypes[] = {DType::F32, DType::BF16, DType::F16};
inline constexpr DType kIntTypes[] = {DType::I8, DType::I32, DType::U8};
inline constexpr DType kAllTypes[] = {DType::F32, DType::BF16, DType::F16, DType::I8, DType::I32, DType::U8};

inline std::string name(DType dtype) { return std::string(isa::dtype_name(dtype)); }
inline size_t size_of(DType dtype) { return isa::dtype_size_bytes(dtype); }

// value rounded to a float dtype, to nearest even.
inline float round_to(DType dtype, float value) {
  switch (dtype) {
    case DType::BF16: return isa::bf16_to_f32(isa::f32_to_bf16(value));
    case DType::F16: return isa::f16_to_f32(isa::f32_to_f16(value));
    default: return value;
  }
}

inline Bytes encode_floats(DType dtype, const std::vector<float>& values) {
  Bytes bytes(values.size() * size_of(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    uint8_t* p = bytes.data() + i * size_of(dtype);
    if (dtype == DType::F32) {
      std::memcpy(p, &values[i], 4);
    } else {
      const uint16_t bits = dtype == DType::BF16 ? isa::f32_to_bf16(values[i]) : isa::f32_to_f16(values[i]);
      std::memcpy(p, &bits, 2);
    }
  }
  return bytes;
}

inline std::vector<float> decode_floats(DType dtype, const Bytes& bytes, size_t offset = 0) {
  std::vector<float> values((bytes.size() - offset) / size_of(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    const uint8_t* p = bytes.data() + offset + i * size_of(dtype);
    if (dtype == DType::F32) {
      std::memcpy(&values[i], p, 4);
    } else {
      uint16_t bits;
      std::memcpy(&bits, p, 2);
      values[i] = dtype == DType::BF16 ? isa::bf16_to_f32(bits) : isa::f16_to_f32(bits);
    }
  }
  return values;
}

// Values must be in range for the dtype.
inline Bytes encode_ints(DType dtype, const std::vector<int64_t>& values) {
  Bytes bytes(values.size() * size_of(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    uint8_t* p = bytes.data() + i * size_of(dtype);
    if (dtype == DType::I32) {
      const auto v = static_cast<int32_t>(values[i]);
      std::memcpy(p, &v, 4);
    } else {
      *p = static_cast<uint8_t>(values[i]);
    }
  }
  return bytes;
}

inline std::vector<int64_t> decode_ints(DType dtype, const Bytes& bytes) {
  std::vector<int64_t> values(bytes.size() / size_of(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    const uint8_t* p = bytes.data() + i * size_of(dtype);
    if (dtype == DType::I32) {
      int32_t v;
      std::memcpy(&v, p, 4);
      values[i] = v;
    } else if (dtype == DType::I8) {
      values[i] = static_cast<int8_t>(*p);
    } else {
      values[i] = *p;
    }
  }
  return values;
}

inline int64_t min_of(DType dtype) {
  return dtype == DType::I8 ? -128 : dtype == DType::I32 ? std::numeric_limits<int32_t>::min() : 0;
}
inline int64_t max_of(DType dtype) {
  return dtype == DType::I8 ? 127 : dtype == DType::I32 ? std::numeric_limits<int32_t>::max() : 255;
}

// Two's complement wrap of value to the dtype's width.
inline int64_t wrap(DType dtype, int64_t value) {
  switch (dtype) {
    case DType::I8: return static_cast<int8_t>(static_cast<uint8_t>(value));
    case DType::U8: return static_cast<uint8_t>(value);
    default: return static_cast<int32_t>(static_cast<uint32_t>(value));
  }
}

class Random {
 public:
  explicit Random(uint32_t seed) : engine_(seed) {}

  // Uniform in [lo, hi], already rounded to the dtype.
  std::vector<float> floats(DType dtype, size_t n, float lo, float hi) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> values(n);
    for (float& v : values) v = round_to(dtype, dist(engine_));
    return values;
  }

  std::vector<int64_t> ints(size_t n, int64_t lo, int64_t hi) {
    std::uniform_int_distribution<int64_t> dist(lo, hi);
    std::vector<int64_t> values(n);
    for (int64_t& v : values) v = dist(engine_);
    return values;
  }

 private:
  std::mt19937 engine_;
};

// Unit roundoff of a float dtype (half an ulp of 1).
inline double epsilon(DType dtype) {
  return dtype == DType::BF16 ? std::ldexp(1.0, -8) : dtype == DType::F16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -24);
}

inline bool same_bits(float a, float b) { return isa::f32_bits(a) == isa::f32_bits(b); }

}  // namespace npu::sim::functional::test
