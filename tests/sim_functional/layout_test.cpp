#include <gtest/gtest.h>

#include "test_util.h"

namespace npu::sim::functional::test {
namespace {

Bytes pattern(size_t bytes, unsigned seed) {
  Bytes data(bytes);
  for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>(i * 31 + seed * 7 + (i >> 8));
  return data;
}

Bytes element(const Bytes& tile, size_t index, size_t size) {
  return Bytes(tile.begin() + static_cast<ptrdiff_t>(index * size), tile.begin() + static_cast<ptrdiff_t>((index + 1) * size));
}

TEST(VectorTranspose, EveryDtypeAndShape) {
  const std::pair<size_t, size_t> shapes[] = {{1, 1}, {1, 9}, {9, 1}, {33, 70}, {64, 64}, {5, 130}};
  for (const DType dtype : kAllTypes) {
    for (const auto& [rows, cols] : shapes) {
      SCOPED_TRACE(name(dtype) + " " + std::to_string(rows) + "x" + std::to_string(cols));
      const size_t size = size_of(dtype);
      const Bytes src = pattern(rows * cols * size, 1);
      Bytes expected(src.size());
      for (size_t i = 0; i < rows; ++i)
        for (size_t j = 0; j < cols; ++j)
          std::copy_n(src.begin() + static_cast<ptrdiff_t>((i * cols + j) * size), size,
                      expected.begin() + static_cast<ptrdiff_t>((j * rows + i) * size));
      Bytes dst(src.size());
      vector_transpose(dtype, dst.data(), src.data(), rows, cols);
      EXPECT_EQ(dst, expected);
      Bytes in_place = src;
      vector_transpose(dtype, in_place.data(), in_place.data(), rows, cols);
      EXPECT_EQ(in_place, expected);
    }
  }
}

TEST(VectorGather, CopiesIndexedRows) {
  for (const DType dtype : kAllTypes) {
    SCOPED_TRACE(name(dtype));
    const size_t size = size_of(dtype), src_rows = 10, rows = 14, cols = 6;
    const Bytes src = pattern(src_rows * cols * size, 2);
    const std::vector<int64_t> idx = {9, 0, 3, 3, 1, 9, 2, 5, 4, 8, 7, 6, 0, 3};  // repeats allowed
    const Bytes idx_bytes = encode_ints(DType::I32, idx);
    Bytes expected;
    for (const int64_t r : idx)
      for (size_t j = 0; j < cols; ++j) {
        const Bytes e = element(src, static_cast<size_t>(r) * cols + j, size);
        expected.insert(expected.end(), e.begin(), e.end());
      }
    Bytes dst(rows * cols * size);
    ASSERT_FALSE(vector_gather(dtype, dst.data(), src.data(), src_rows, idx_bytes.data(), rows, cols));
    EXPECT_EQ(dst, expected);
  }
}

TEST(VectorGather, InPlaceOnSourceOrIndices) {
  const size_t rows = 8, cols = 3;
  const Bytes src = pattern(rows * cols * 4, 3);
  const std::vector<int64_t> idx = {7, 6, 5, 4, 3, 2, 1, 0};
  const Bytes idx_bytes = encode_ints(DType::I32, idx);
  Bytes expected(src.size());
  ASSERT_FALSE(vector_gather(DType::F32, expected.data(), src.data(), rows, idx_bytes.data(), rows, cols));

  Bytes on_src = src;
  ASSERT_FALSE(vector_gather(DType::F32, on_src.data(), on_src.data(), rows, idx_bytes.data(), rows, cols));
  EXPECT_EQ(on_src, expected);

  // dst over the index array (i32 rows of one i32 column).
  Bytes indices_then_dst = idx_bytes;
  const Bytes column = pattern(rows * 4, 4);
  Bytes column_expected(rows * 4);
  ASSERT_FALSE(vector_gather(DType::I32, column_expected.data(), column.data(), rows, idx_bytes.data(), rows, 1));
  ASSERT_FALSE(vector_gather(DType::I32, indices_then_dst.data(), column.data(), rows, indices_then_dst.data(), rows, 1));
  EXPECT_EQ(indices_then_dst, column_expected);
}

TEST(VectorGather, OutOfRangeIndexFaultsBeforeWriting) {
  const Bytes src = pattern(5 * 2 * 4, 5);
  struct Case {
    std::vector<int64_t> idx;
    const char* message;
  };
  const Case cases[] = {
      {{0, 1, 2, 5}, "gather index 5 out of range (0..4)"},
      {{4, -1, 0}, "gather index -1 out of range (0..4)"},
      {{0, 1, 2, 3, 4, 0, 1, 2147483647}, "gather index 2147483647 out of range (0..4)"},
  };
  for (const Case& c : cases) {
    const Bytes idx = encode_ints(DType::I32, c.idx);
    Bytes dst(c.idx.size() * 2 * 4, 0x99);
    const KernelError error = vector_gather(DType::F32, dst.data(), src.data(), 5, idx.data(), c.idx.size(), 2);
    ASSERT_TRUE(error);
    EXPECT_EQ(*error, c.message);
    EXPECT_EQ(dst, Bytes(dst.size(), 0x99));
  }
  const Bytes zero = encode_ints(DType::I32, {0});
  uint8_t dst[4];
  const KernelError error = vector_gather(DType::F32, dst, src.data(), 0, zero.data(), 1, 1);
  ASSERT_TRUE(error);
  EXPECT_EQ(*error, "gather index 0 out of range (the source has no rows)");
}

TEST(VectorGather, NoRowsIsANoOp) {
  uint8_t dst[4] = {1, 2, 3, 4};
  const uint8_t src[4] = {};
  EXPECT_FALSE(vector_gather(DType::F32, dst, src, 1, nullptr, 0, 1));
  EXPECT_EQ(dst[0], 1);
}

}  // namespace
}  // namespace npu::sim::functional::test
