#include <algorithm>
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "test_util.h"

namespace npu::sim::functional::test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Source values for a dtype: random ones across its range plus its edges.
std::vector<double> sources(DType dtype) {
  Random random(static_cast<uint32_t>(dtype) + 1);
  std::vector<double> values;
  if (isa::dtype_is_float(dtype)) {
    for (const float v : random.floats(dtype, 300, -70000, 70000)) values.push_back(v);
    for (const float v : random.floats(dtype, 300, -300, 300)) values.push_back(v);
    for (const float v : {kNaN, kInf, -kInf, -0.0f, 0.0f, 0.5f, -0.99f, 127.9f, 128.0f, -128.9f, -129.0f, 255.5f, 256.0f,
                          2147483520.0f, 2147483648.0f, -2147483648.0f, -2147483904.0f, 1e-30f, 3.0e38f})
      values.push_back(round_to(dtype, v));
  } else {
    for (const int64_t v : random.ints(600, min_of(dtype), max_of(dtype))) values.push_back(static_cast<double>(v));
    for (const int64_t v : {min_of(dtype), max_of(dtype), int64_t{0}, int64_t{1}}) values.push_back(static_cast<double>(v));
    if (dtype == DType::I32)  // double rounding into bf16 (f32 tie, then bf16 tie) and f16 overflow
      for (const int64_t v : {(1 << 24) + (1 << 16) + 1, 16777217, 65520, 65519, -2049}) values.push_back(static_cast<double>(v));
  }
  return values;
}

Bytes encode(DType dtype, const std::vector<double>& values) {
  if (isa::dtype_is_float(dtype)) return encode_floats(dtype, std::vector<float>(values.begin(), values.end()));
  std::vector<int64_t> ints;
  for (const double v : values) ints.push_back(static_cast<int64_t>(v));
  return encode_ints(dtype, ints);
}

int64_t saturate(DType dtype, double value) {
  if (std::isnan(value)) return 0;
  return static_cast<int64_t>(std::clamp(std::trunc(value), static_cast<double>(min_of(dtype)), static_cast<double>(max_of(dtype))));
}

TEST(VectorConvert, EveryPairOfDtypes) {
  for (const DType src_dtype : kAllTypes) {
    for (const DType dst_dtype : kAllTypes) {
      SCOPED_TRACE(name(src_dtype) + " -> " + name(dst_dtype));
      const std::vector<double> values = sources(src_dtype);
      const Bytes src = encode(src_dtype, values);
      Bytes dst(values.size() * size_of(dst_dtype));
      vector_convert(dst_dtype, src_dtype, dst.data(), src.data(), 1, values.size());
      if (isa::dtype_is_float(dst_dtype)) {
        const std::vector<float> got = decode_floats(dst_dtype, dst);
        for (size_t i = 0; i < values.size(); ++i) {
          // Integer sources round to f32 first, like torch (a double rounding for i32).
          const float expected = round_to(dst_dtype, static_cast<float>(values[i]));
          if (std::isnan(expected))
            ASSERT_TRUE(std::isnan(got[i]));
          else
            ASSERT_TRUE(same_bits(got[i], expected)) << values[i] << " gave " << got[i] << ", expected " << expected;
        }
      } else {
        const std::vector<int64_t> got = decode_ints(dst_dtype, dst);
        for (size_t i = 0; i < values.size(); ++i) {
          const int64_t expected = isa::dtype_is_float(src_dtype) ? saturate(dst_dtype, values[i])
                                                                   : wrap(dst_dtype, static_cast<int64_t>(values[i]));
          ASSERT_EQ(got[i], expected) << values[i];
        }
      }
    }
  }
}

TEST(VectorConvert, NarrowingFloatsTieToEven) {
  struct Case {
    DType src, dst;
    float value, expected;
  };
  const Case cases[] = {
      {DType::F32, DType::BF16, 1.00390625f, 1.0f},       // 1 + 2^-8: tie, even below
      {DType::F32, DType::BF16, 1.01171875f, 1.015625f},  // 1 + 3 * 2^-8: tie, even above
      {DType::F32, DType::BF16, isa::f32_from_bits(0x3f808001), 1.0078125f},  // just above the tie
      {DType::F32, DType::F16, 1.00048828125f, 1.0f},  // 1 + 2^-11: tie
      {DType::F32, DType::F16, 1.00146484375f, 1.001953125f},
      {DType::F32, DType::F16, 65520.0f, kInf},  // rounds past the largest half
      {DType::F32, DType::F16, 65519.0f, 65504.0f},
      {DType::F32, DType::F16, std::ldexp(1.0f, -25), 0.0f},  // 2^-25: tie with the smallest subnormal, even is 0
      {DType::F16, DType::BF16, 1.00390625f, 1.0f},    // exact in f16, a tie in bf16
      {DType::F16, DType::BF16, 1.0048828125f, 1.0078125f},
      {DType::BF16, DType::F16, 1e10f, kInf},
      {DType::BF16, DType::F16, -1e-10f, -0.0f},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(name(c.src) + " -> " + name(c.dst) + " of " + std::to_string(c.value));
    const Bytes src = encode_floats(c.src, {c.value});
    Bytes dst(size_of(c.dst));
    vector_convert(c.dst, c.src, dst.data(), src.data(), 1, 1);
    EXPECT_TRUE(same_bits(decode_floats(c.dst, dst)[0], c.expected)) << decode_floats(c.dst, dst)[0];
  }
}

TEST(VectorConvert, FloatToIntegerSaturatesAndNaNIsZero) {
  const Bytes src = encode_floats(DType::F32, {1e10f, -1e10f, kNaN, kInf, -kInf, -0.9f, 2.99f});
  Bytes i32(7 * 4), i8(7), u8(7);
  vector_convert(DType::I32, DType::F32, i32.data(), src.data(), 1, 7);
  vector_convert(DType::I8, DType::F32, i8.data(), src.data(), 7, 1);
  vector_convert(DType::U8, DType::F32, u8.data(), src.data(), 1, 7);
  const int64_t max32 = std::numeric_limits<int32_t>::max(), min32 = std::numeric_limits<int32_t>::min();
  EXPECT_EQ(decode_ints(DType::I32, i32), (std::vector<int64_t>{max32, min32, 0, max32, min32, 0, 2}));
  EXPECT_EQ(decode_ints(DType::I8, i8), (std::vector<int64_t>{127, -128, 0, 127, -128, 0, 2}));
  EXPECT_EQ(decode_ints(DType::U8, u8), (std::vector<int64_t>{255, 0, 0, 255, 0, 0, 2}));
}

TEST(VectorConvert, IntegerToIntegerWraps) {
  const Bytes src = encode_ints(DType::I32, {200, -1, 256, -129, 65535});
  Bytes i8(5), u8(5);
  vector_convert(DType::I8, DType::I32, i8.data(), src.data(), 1, 5);
  vector_convert(DType::U8, DType::I32, u8.data(), src.data(), 1, 5);
  EXPECT_EQ(decode_ints(DType::I8, i8), (std::vector<int64_t>{-56, -1, 0, 127, -1}));
  EXPECT_EQ(decode_ints(DType::U8, u8), (std::vector<int64_t>{200, 255, 0, 127, 255}));
}

TEST(VectorConvert, InPlaceWideningAndNarrowing) {
  Random random(5);
  const size_t count = 1000;  // several staging chunks
  for (const DType narrow : {DType::I8, DType::BF16, DType::U8}) {
    for (const DType wide : {DType::F32, DType::I32}) {
      SCOPED_TRACE(name(narrow) + " <-> " + name(wide));
      const Bytes narrow_values = isa::dtype_is_float(narrow)
                                      ? encode_floats(narrow, random.floats(narrow, count, -100, 100))
                                      : encode_ints(narrow, random.ints(count, min_of(narrow), max_of(narrow)));
      Bytes expected_wide(count * size_of(wide));
      vector_convert(wide, narrow, expected_wide.data(), narrow_values.data(), 10, 100);
      Bytes buffer(count * size_of(wide), 0);
      std::copy(narrow_values.begin(), narrow_values.end(), buffer.begin());
      vector_convert(wide, narrow, buffer.data(), buffer.data(), 10, 100);
      EXPECT_EQ(buffer, expected_wide);
      Bytes expected_narrow(narrow_values.size());
      vector_convert(narrow, wide, expected_narrow.data(), expected_wide.data(), 100, 10);
      vector_convert(narrow, wide, buffer.data(), buffer.data(), 100, 10);
      EXPECT_EQ(Bytes(buffer.begin(), buffer.begin() + static_cast<ptrdiff_t>(narrow_values.size())), expected_narrow);
    }
  }
}

}  // namespace
}  // namespace npu::sim::functional::test
