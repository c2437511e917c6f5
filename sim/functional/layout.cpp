// v.trans and v.gather: kernels that move whole elements between positions,
// so in-place runs read from a copy of the source.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "functional/kernels.h"
#include "functional/support.h"
#include "npusim/isa/dtype.h"

namespace npu::sim::functional {
namespace {

// Square blocks keep both the rows read and the rows written in cache.
constexpr size_t kTransposeBlock = 32;

template <typename Bits>
void transpose_as(uint8_t* dst, const uint8_t* src, size_t rows, size_t cols) {
  for (size_t i0 = 0; i0 < rows; i0 += kTransposeBlock) {
    for (size_t j0 = 0; j0 < cols; j0 += kTransposeBlock) {
      const size_t i_end = std::min(rows, i0 + kTransposeBlock);
      const size_t j_end = std::min(cols, j0 + kTransposeBlock);
      for (size_t i = i0; i < i_end; ++i) {
        for (size_t j = j0; j < j_end; ++j) {
          Bits value;
          std::memcpy(&value, src + (i * cols + j) * sizeof(Bits), sizeof(Bits));
          std::memcpy(dst + (j * rows + i) * sizeof(Bits), &value, sizeof(Bits));
        }
      }
    }
  }
}

}  // namespace

void vector_transpose(isa::DType dtype, uint8_t* dst, const uint8_t* src, uint64_t rows, uint64_t cols) {
  const size_t size = isa::dtype_size_bytes(dtype);
  const size_t bytes = rows * cols * size;
  std::vector<uint8_t> scratch;
  src = stable_source(dst, bytes, src, bytes, scratch);
  switch (size) {
    case 1: transpose_as<uint8_t>(dst, src, rows, cols); break;
    case 2: transpose_as<uint16_t>(dst, src, rows, cols); break;
    default: transpose_as<uint32_t>(dst, src, rows, cols); break;
  }
}

KernelError vector_gather(isa::DType dtype, uint8_t* dst, const uint8_t* src, uint64_t src_rows, const uint8_t* idx, uint64_t rows,
                          uint64_t cols) {
  // Every index is checked before any row is written: a faulting gather
  // leaves dst untouched. Reading idx first also makes dst == idx safe.
  std::vector<int32_t> indices(rows);
  if (rows != 0) std::memcpy(indices.data(), idx, rows * sizeof(int32_t));
  for (const int32_t index : indices) {
    if (index < 0 || static_cast<uint64_t>(index) >= src_rows) {
      const std::string range = src_rows == 0 ? "the source has no rows" : "0.." + std::to_string(src_rows - 1);
      return "gather index " + std::to_string(index) + " out of range (" + range + ")";
    }
  }
  const size_t row_bytes = cols * isa::dtype_size_bytes(dtype);
  std::vector<uint8_t> scratch;
  src = stable_source(dst, rows * row_bytes, src, src_rows * row_bytes, scratch);
  for (size_t i = 0; i < rows; ++i)
    if (row_bytes != 0) std::memcpy(dst + i * row_bytes, src + static_cast<size_t>(indices[i]) * row_bytes, row_bytes);
  return std::nullopt;
}

}  // namespace npu::sim::functional
