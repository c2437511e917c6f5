// v.fill, v.sel and v.iota: elementwise writes that need no arithmetic dtype.
#include <cstring>
#include <vector>

#include "functional/kernels.h"
#include "functional/support.h"
#include "npusim/isa/dtype.h"

namespace npu::sim::functional {
namespace {

template <typename Bits>
void select_as(uint8_t* dst, const uint8_t* cond, const uint8_t* a, const uint8_t* b, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    Bits value;
    std::memcpy(&value, (cond[i] != 0 ? a : b) + i * sizeof(Bits), sizeof(Bits));
    std::memcpy(dst + i * sizeof(Bits), &value, sizeof(Bits));
  }
}

}  // namespace

void vector_select(isa::DType dtype, uint8_t* dst, const uint8_t* cond, const uint8_t* a, const uint8_t* b, uint64_t rows,
                   uint64_t cols) {
  const size_t count = rows * cols;
  const size_t size = isa::dtype_size_bytes(dtype);
  // With wider elements, dst element i covers cond bytes not read yet.
  std::vector<uint8_t> scratch;
  cond = stable_source(dst, count * size, cond, count, scratch);
  switch (size) {
    case 1: select_as<uint8_t>(dst, cond, a, b, count); break;
    case 2: select_as<uint16_t>(dst, cond, a, b, count); break;
    default: select_as<uint32_t>(dst, cond, a, b, count); break;
  }
}

void vector_fill(isa::DType dtype, uint8_t* dst, uint64_t value, uint64_t rows, uint64_t cols) {
  uint8_t element[4];
  if (isa::dtype_is_float(dtype))
    store_f32(dtype, element, isa::f32_from_bits(static_cast<uint32_t>(value)));
  else
    store_int(dtype, element, static_cast<int64_t>(value));
  const size_t size = isa::dtype_size_bytes(dtype);
  const size_t count = rows * cols;
  for (size_t i = 0; i < count; ++i) std::memcpy(dst + i * size, element, size);
}

void vector_iota(uint8_t* dst, int64_t start, uint64_t rows, uint64_t cols) {
  // Unsigned arithmetic wraps where int64 would overflow; the low 32 bits are
  // the wrapped i32.
  for (uint64_t i = 0; i < rows; ++i) {
    for (uint64_t j = 0; j < cols; ++j) {
      const auto value = static_cast<uint32_t>(static_cast<uint64_t>(start) + i * cols + j);
      std::memcpy(dst + (i * cols + j) * 4, &value, 4);
    }
  }
}

}  // namespace npu::sim::functional
