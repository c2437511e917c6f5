// Element encodings: device memory is little-endian, like every host we build
// for, so an element is its host value copied byte for byte.
#include <cmath>
#include <cstring>
#include <limits>

#include "functional/elements.h"
#include "functional/kernels.h"
#include "npusim/isa/dtype.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "element loads assume a little-endian host");

namespace npu::sim::functional {
namespace {

using isa::DType;

template <typename T>
T read(const uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof value);
  return value;
}

template <typename T>
void write(uint8_t* p, T value) {
  std::memcpy(p, &value, sizeof value);
}

int64_t truncate_saturate(float value, int64_t lo, int64_t hi) {
  if (std::isnan(value)) return 0;
  // double holds every float exactly, and lo/hi closely enough to compare.
  const double truncated = std::trunc(static_cast<double>(value));
  if (truncated <= static_cast<double>(lo)) return lo;
  if (truncated >= static_cast<double>(hi)) return hi;
  return static_cast<int64_t>(truncated);
}

template <typename T>
void load_ints(const uint8_t* src, size_t n, int64_t* out) {
  for (size_t i = 0; i < n; ++i) out[i] = read<T>(src + i * sizeof(T));
}

// Unsigned narrowing is modular: exactly the wrap we want.
template <typename U>
void store_wrapped(uint8_t* dst, size_t n, const int64_t* values) {
  for (size_t i = 0; i < n; ++i) write(dst + i * sizeof(U), static_cast<U>(values[i]));
}

}  // namespace

int64_t int_min(DType dtype) {
  switch (dtype) {
    case DType::I8: return std::numeric_limits<int8_t>::min();
    case DType::I32: return std::numeric_limits<int32_t>::min();
    case DType::U8: return 0;
    default: return std::numeric_limits<int64_t>::min();
  }
}

int64_t int_max(DType dtype) {
  switch (dtype) {
    case DType::I8: return std::numeric_limits<int8_t>::max();
    case DType::I32: return std::numeric_limits<int32_t>::max();
    case DType::U8: return std::numeric_limits<uint8_t>::max();
    default: return std::numeric_limits<int64_t>::max();
  }
}

void load_f32_n(DType dtype, const uint8_t* src, size_t n, float* out) {
  switch (dtype) {
    case DType::F32: std::memcpy(out, src, n * sizeof(float)); break;
    case DType::BF16:
      for (size_t i = 0; i < n; ++i) out[i] = isa::bf16_to_f32(read<uint16_t>(src + 2 * i));
      break;
    case DType::F16:
      for (size_t i = 0; i < n; ++i) out[i] = isa::f16_to_f32(read<uint16_t>(src + 2 * i));
      break;
    default: {
      const unsigned size = isa::dtype_size_bytes(dtype);
      for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(load_int(dtype, src + i * size));
      break;
    }
  }
}

void store_f32_n(DType dtype, uint8_t* dst, size_t n, const float* values) {
  switch (dtype) {
    case DType::F32: std::memcpy(dst, values, n * sizeof(float)); break;
    case DType::BF16:
      for (size_t i = 0; i < n; ++i) write(dst + 2 * i, isa::f32_to_bf16(values[i]));
      break;
    case DType::F16:
      for (size_t i = 0; i < n; ++i) write(dst + 2 * i, isa::f32_to_f16(values[i]));
      break;
    default: {
      const int64_t lo = int_min(dtype), hi = int_max(dtype);
      const unsigned size = isa::dtype_size_bytes(dtype);
      for (size_t i = 0; i < n; ++i) store_int(dtype, dst + i * size, truncate_saturate(values[i], lo, hi));
      break;
    }
  }
}

void load_int_n(DType dtype, const uint8_t* src, size_t n, int64_t* out) {
  switch (dtype) {
    case DType::I8: load_ints<int8_t>(src, n, out); break;
    case DType::I32: load_ints<int32_t>(src, n, out); break;
    case DType::U8: load_ints<uint8_t>(src, n, out); break;
    default: {
      const unsigned size = isa::dtype_size_bytes(dtype);
      for (size_t i = 0; i < n; ++i) out[i] = load_int(dtype, src + i * size);
      break;
    }
  }
}

void store_int_n(DType dtype, uint8_t* dst, size_t n, const int64_t* values) {
  switch (dtype) {
    case DType::I8:
    case DType::U8: store_wrapped<uint8_t>(dst, n, values); break;
    case DType::I32: store_wrapped<uint32_t>(dst, n, values); break;
    default: {
      const unsigned size = isa::dtype_size_bytes(dtype);
      for (size_t i = 0; i < n; ++i) store_int(dtype, dst + i * size, values[i]);
      break;
    }
  }
}

int64_t load_int(DType dtype, const uint8_t* element) {
  switch (dtype) {
    case DType::I8: return read<int8_t>(element);
    case DType::I32: return read<int32_t>(element);
    case DType::U8: return read<uint8_t>(element);
    default:
      return truncate_saturate(load_f32(dtype, element), std::numeric_limits<int64_t>::min(),
                               std::numeric_limits<int64_t>::max());
  }
}

void store_int(DType dtype, uint8_t* element, int64_t value) {
  switch (dtype) {
    case DType::I8:
    case DType::U8: write(element, static_cast<uint8_t>(value)); break;
    case DType::I32: write(element, static_cast<uint32_t>(value)); break;
    // Like torch: to f32 first (nearest even), then to the narrower float.
    default: store_f32(dtype, element, static_cast<float>(value)); break;
  }
}

float load_f32(DType dtype, const uint8_t* element) {
  switch (dtype) {
    case DType::F32: return read<float>(element);
    case DType::BF16: return isa::bf16_to_f32(read<uint16_t>(element));
    case DType::F16: return isa::f16_to_f32(read<uint16_t>(element));
    default: return static_cast<float>(load_int(dtype, element));
  }
}

void store_f32(DType dtype, uint8_t* element, float value) {
  switch (dtype) {
    case DType::F32: write(element, value); break;
    case DType::BF16: write(element, isa::f32_to_bf16(value)); break;
    case DType::F16: write(element, isa::f32_to_f16(value)); break;
    default: store_int(dtype, element, truncate_saturate(value, int_min(dtype), int_max(dtype))); break;
  }
}

}  // namespace npu::sim::functional
