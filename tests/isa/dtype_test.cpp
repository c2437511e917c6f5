#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "npusim/isa/dtype.h"

namespace npu::isa {
namespace {

TEST(DType, SizesAndNames) {
  EXPECT_EQ(dtype_size_bytes(DType::F32), 4u);
  EXPECT_EQ(dtype_size_bytes(DType::BF16), 2u);
  EXPECT_EQ(dtype_size_bytes(DType::I8), 1u);
  EXPECT_EQ(dtype_name(DType::BF16), "bf16");
  EXPECT_EQ(dtype_from_name("i32"), DType::I32);
  EXPECT_FALSE(dtype_from_name("f64"));
}

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is exactly halfway between bf16 1.0 and 1.0078125: ties to even (1.0).
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x3f808000)), 0x3f80);
  // Just above halfway rounds up.
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x3f808001)), 0x3f81);
  // Halfway with an odd lower neighbour rounds up to even.
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x3f818000)), 0x3f82);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // overflows to inf
  EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(f32_from_bits(0x7f800001)))));  // low-payload NaN stays NaN
  EXPECT_EQ(bf16_to_f32(0x4049), 3.140625f);
}

TEST(DType, F16RoundsToNearestEvenIncludingSubnormals) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);  // below the rounding boundary
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // rounds to infinity
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // halfway to it: ties to even (0)
  EXPECT_EQ(f32_to_f16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 ulp: ties to even (2)
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // halfway: even
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(3.0f, -11)), 0x3c02);  // halfway: up to even
  EXPECT_EQ(f32_to_f16(-2.0f), 0xc000);
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(NAN))));
}

TEST(DType, F16ToF32IsExactForEveryBitPattern) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const float value = f16_to_f32(static_cast<uint16_t>(bits));
    if (std::isnan(value)) {
      EXPECT_EQ(bits & 0x7c00, 0x7c00u);
      continue;
    }
    EXPECT_EQ(f32_to_f16(value), bits) << std::hex << bits;  // every half value survives a round trip
  }
}

}  // namespace
}  // namespace npu::isa
