#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "test_util.h"

namespace npu::sim::functional::test {
namespace {

using isa::Axis;
using isa::Bcast;

TEST(Elements, FloatStoreRoundsToNearestEven) {
  for (const DType dtype : kFloatTypes) {
    SCOPED_TRACE(name(dtype));
    for (const float value : {1.0f, -2.5f, 3.14159265f, 1e-6f, 70000.0f, -0.0f}) {
      uint8_t element[4];
      store_f32(dtype, element, value);
      EXPECT_EQ(Bytes(element, element + size_of(dtype)), encode_floats(dtype, {value}));
      EXPECT_TRUE(same_bits(load_f32(dtype, element), round_to(dtype, value)));
    }
  }
  // 1 + 2^-8 is halfway between two bf16 values: ties go to the even one.
  uint8_t element[2];
  store_f32(DType::BF16, element, 1.00390625f);
  EXPECT_EQ(load_f32(DType::BF16, element), 1.0f);
  store_f32(DType::BF16, element, 1.01171875f);  // 1 + 3 * 2^-8: halfway, odd below
  EXPECT_EQ(load_f32(DType::BF16, element), 1.015625f);
}

TEST(Elements, IntegerStoreWraps) {
  uint8_t element[4];
  store_int(DType::I8, element, 200);
  EXPECT_EQ(load_int(DType::I8, element), -56);
  store_int(DType::U8, element, -1);
  EXPECT_EQ(load_int(DType::U8, element), 255);
  store_int(DType::I32, element, (int64_t{1} << 32) + 5);
  EXPECT_EQ(load_int(DType::I32, element), 5);
  store_int(DType::I32, element, int64_t{1} << 31);
  EXPECT_EQ(load_int(DType::I32, element), std::numeric_limits<int32_t>::min());
}

TEST(Elements, IntegerLoadSignExtendsSignedTypesOnly) {
  const uint8_t all_ones[4] = {0xff, 0xff, 0xff, 0xff};
  EXPECT_EQ(load_int(DType::I8, all_ones), -1);
  EXPECT_EQ(load_int(DType::U8, all_ones), 255);
  EXPECT_EQ(load_int(DType::I32, all_ones), -1);
  EXPECT_EQ(load_f32(DType::I32, all_ones), -1.0f);
  EXPECT_EQ(load_f32(DType::U8, all_ones), 255.0f);
}

TEST(Elements, FloatToIntegerTruncatesAndSaturates) {
  uint8_t element[4];
  const auto through = [&](DType dtype, float value) {
    store_f32(dtype, element, value);
    return load_int(dtype, element);
  };
  EXPECT_EQ(through(DType::I8, 2.9f), 2);
  EXPECT_EQ(through(DType::I8, -2.9f), -2);
  EXPECT_EQ(through(DType::I8, 300.5f), 127);
  EXPECT_EQ(through(DType::I8, -300.5f), -128);
  EXPECT_EQ(through(DType::U8, -5.0f), 0);
  EXPECT_EQ(through(DType::U8, 1e10f), 255);
  EXPECT_EQ(through(DType::I32, 3e9f), std::numeric_limits<int32_t>::max());
  EXPECT_EQ(through(DType::I32, -3e9f), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(through(DType::I32, -2147483648.0f), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(through(DType::I32, 2147483520.0f), 2147483520);  // largest float below 2^31
  EXPECT_EQ(through(DType::I32, std::numeric_limits<float>::quiet_NaN()), 0);
  EXPECT_EQ(through(DType::I32, -std::numeric_limits<float>::infinity()), std::numeric_limits<int32_t>::min());
}

TEST(Elements, IntegerToNarrowFloatRoundsThroughF32) {
  // 2^24 + 2^16 + 1 rounds to 2^24 + 2^16 in f32 (a tie, to even), which is
  // a bf16 tie rounding to 2^24; rounding once would give 2^24 + 2^17. torch
  // rounds twice too.
  uint8_t element[2];
  store_int(DType::BF16, element, (1 << 24) + (1 << 16) + 1);
  EXPECT_EQ(load_f32(DType::BF16, element), 16777216.0f);
  store_int(DType::F16, element, 100000);
  EXPECT_TRUE(std::isinf(load_f32(DType::F16, element)));
  store_int(DType::F16, element, 2049);  // a tie between 2048 and 2050
  EXPECT_EQ(load_f32(DType::F16, element), 2048.0f);
}

TEST(Elements, FloatLoadAsIntegerTruncates) {
  const Bytes bytes = encode_floats(DType::F32, {-7.75f});
  EXPECT_EQ(load_int(DType::F32, bytes.data()), -7);
}

TEST(Elements, OperandSizesForBoundsChecks) {
  EXPECT_EQ(bcast_operand_elements(Bcast::Full, 3, 5), 15u);
  EXPECT_EQ(bcast_operand_elements(Bcast::Row, 3, 5), 5u);
  EXPECT_EQ(bcast_operand_elements(Bcast::Col, 3, 5), 3u);
  EXPECT_EQ(bcast_operand_elements(Bcast::Scalar, 3, 5), 1u);
  for (const Bcast bcast : {Bcast::Full, Bcast::Row, Bcast::Col, Bcast::Scalar}) {
    EXPECT_EQ(bcast_operand_elements(bcast, 0, 5), 0u);
    EXPECT_EQ(bcast_operand_elements(bcast, 3, 0), 0u);
  }
  EXPECT_EQ(reduce_output_elements(Axis::Axis0, 3, 5), 5u);
  EXPECT_EQ(reduce_output_elements(Axis::Axis1, 3, 5), 3u);
  EXPECT_EQ(reduce_output_elements(Axis::Axis0, 0, 5), 0u);
  EXPECT_EQ(reduce_output_elements(Axis::Axis1, 3, 0), 0u);
}

}  // namespace
}  // namespace npu::sim::functional::test
