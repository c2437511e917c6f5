// Bulk versions of the element accessors in kernels.h, for the kernels'
// inner loops: the dtype switch happens once per run of elements instead of
// once per element.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "npusim/isa/isa.h"

namespace npu::sim::functional {

// Kernels stage this many elements at a time in f32 or int64 (stack arrays
// that stay in L1).
inline constexpr size_t kChunk = 256;

// float values of n elements; integer dtypes convert exactly, then round to f32.
void load_f32_n(isa::DType dtype, const uint8_t* src, size_t n, float* out);
// Rounds to float dtypes (nearest even); integer dtypes truncate toward zero
// and saturate, NaN gives 0 (the v.cvt rule).
void store_f32_n(isa::DType dtype, uint8_t* dst, size_t n, const float* values);
// Integer values of n elements; float dtypes truncate toward zero (NaN gives 0).
void load_int_n(isa::DType dtype, const uint8_t* src, size_t n, int64_t* out);
// Integer dtypes wrap to their width; float dtypes round through f32.
void store_int_n(isa::DType dtype, uint8_t* dst, size_t n, const int64_t* values);

// load_f32_n / store_f32_n for float staging, load_int_n / store_int_n for int64.
template <typename Value>
void load_values(isa::DType dtype, const uint8_t* src, size_t n, Value* out) {
  if constexpr (std::is_same_v<Value, float>)
    load_f32_n(dtype, src, n, out);
  else
    load_int_n(dtype, src, n, out);
}

template <typename Value>
void store_values(isa::DType dtype, uint8_t* dst, size_t n, const Value* values) {
  if constexpr (std::is_same_v<Value, float>)
    store_f32_n(dtype, dst, n, values);
  else
    store_int_n(dtype, dst, n, values);
}

// Smallest and largest value of an integer dtype.
int64_t int_min(isa::DType dtype);
int64_t int_max(isa::DType dtype);

}  // namespace npu::sim::functional
