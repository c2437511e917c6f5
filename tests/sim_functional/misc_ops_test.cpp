#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "test_util.h"

namespace npu::sim::functional::test {
namespace {

TEST(VectorFill, FloatTakesLowWordAsF32RoundedToDtype) {
  const uint64_t value = 0xdeadbeef00000000ull | isa::f32_bits(1.1f);  // high word ignored
  for (const DType dtype : kFloatTypes) {
    SCOPED_TRACE(name(dtype));
    Bytes dst(6 * size_of(dtype) + 4, 0x11);
    vector_fill(dtype, dst.data(), value, 2, 3);
    const std::vector<float> got = decode_floats(dtype, Bytes(dst.begin(), dst.end() - 4));
    for (const float v : got) EXPECT_TRUE(same_bits(v, round_to(dtype, 1.1f)));
    EXPECT_EQ(Bytes(dst.end() - 4, dst.end()), Bytes(4, 0x11));
  }
}

TEST(VectorFill, IntegerTruncates) {
  struct Case {
    DType dtype;
    uint64_t value;
    int64_t expected;
  };
  const Case cases[] = {
      {DType::I32, 0x1234567890ull, 0x34567890}, {DType::I8, 0x1234567890ull, -112}, {DType::U8, 0x1234567890ull, 0x90},
      {DType::I32, static_cast<uint64_t>(-5), -5}, {DType::I8, static_cast<uint64_t>(-5), -5},
      {DType::U8, static_cast<uint64_t>(-5), 251},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(name(c.dtype));
    Bytes dst(4 * 5 * size_of(c.dtype));
    vector_fill(c.dtype, dst.data(), c.value, 4, 5);
    EXPECT_EQ(decode_ints(c.dtype, dst), std::vector<int64_t>(20, c.expected));
  }
}

TEST(VectorSelect, NonzeroConditionPicksA) {
  Random random(3);
  const size_t rows = 9, cols = 70;
  std::vector<int64_t> cond = random.ints(rows * cols, 0, 3);
  for (int64_t& c : cond) c = c == 3 ? 255 : c;  // 0 picks b; 1, 2 and 255 pick a
  const Bytes cond_bytes = encode_ints(DType::U8, cond);
  for (const DType dtype : kAllTypes) {
    SCOPED_TRACE(name(dtype));
    const size_t size = size_of(dtype);
    Bytes a(rows * cols * size), b(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = static_cast<uint8_t>(i * 7 + 1);
      b[i] = static_cast<uint8_t>(i * 13 + 5);
    }
    Bytes expected(a.size());
    for (size_t e = 0; e < rows * cols; ++e)
      std::copy_n((cond[e] != 0 ? a : b).begin() + static_cast<ptrdiff_t>(e * size), size,
                  expected.begin() + static_cast<ptrdiff_t>(e * size));

    Bytes dst(a.size());
    vector_select(dtype, dst.data(), cond_bytes.data(), a.data(), b.data(), rows, cols);
    EXPECT_EQ(dst, expected);
    Bytes on_a = a;
    vector_select(dtype, on_a.data(), cond_bytes.data(), on_a.data(), b.data(), rows, cols);
    EXPECT_EQ(on_a, expected);
    Bytes on_b = b;
    vector_select(dtype, on_b.data(), cond_bytes.data(), a.data(), on_b.data(), rows, cols);
    EXPECT_EQ(on_b, expected);
    // dst over the condition: wider elements would overrun unread condition bytes.
    Bytes on_cond(a.size());
    std::copy(cond_bytes.begin(), cond_bytes.end(), on_cond.begin());
    vector_select(dtype, on_cond.data(), on_cond.data(), a.data(), b.data(), rows, cols);
    EXPECT_EQ(on_cond, expected);
  }
}

TEST(VectorIota, CountsRowMajorAndWraps) {
  Bytes dst(3 * 4 * 4);
  vector_iota(dst.data(), -5, 3, 4);
  std::vector<int64_t> expected;
  for (int64_t v = -5; v < 7; ++v) expected.push_back(v);
  EXPECT_EQ(decode_ints(DType::I32, dst), expected);

  const int64_t max32 = std::numeric_limits<int32_t>::max(), min32 = std::numeric_limits<int32_t>::min();
  Bytes wrapping(4 * 4);
  vector_iota(wrapping.data(), max32 - 1, 2, 2);
  EXPECT_EQ(decode_ints(DType::I32, wrapping), (std::vector<int64_t>{max32 - 1, max32, min32, min32 + 1}));
  vector_iota(wrapping.data(), (int64_t{1} << 32) + 7, 1, 4);  // start itself is truncated
  EXPECT_EQ(decode_ints(DType::I32, wrapping), (std::vector<int64_t>{7, 8, 9, 10}));
}

}  // namespace
}  // namespace npu::sim::functional::test
