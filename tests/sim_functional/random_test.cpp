#include <cmath>
#include <set>

#include <gtest/gtest.h>

#include "test_util.h"

namespace npu::sim::functional::test {
namespace {

// Random123's known-answer vectors for philox4x32-10 (kat_vectors): counter
// (0, 0, 0, 0) with key (0, 0) gives 6627e8d5 ...; counter all ones with key
// all ones gives 408f276d ...; only the first word is what v.rand uses.
TEST(Philox, MatchesRandom123KnownAnswers) {
  EXPECT_EQ(philox4x32_10_word0(0, 0), 0x6627e8d5u);
  // Counter words 2 and 3 are always 0 in v.rand, so the all-ones vector is out of reach;
  // the pi vector (counter 243f6a88 85a308d3 13198a2e 03707344) likewise. Check instead that
  // the key and both counter words matter.
  EXPECT_NE(philox4x32_10_word0(1, 0), philox4x32_10_word0(0, 0));
  EXPECT_NE(philox4x32_10_word0(uint64_t{1} << 32, 0), philox4x32_10_word0(0, 0));
  EXPECT_NE(philox4x32_10_word0(0, uint64_t{1} << 32), philox4x32_10_word0(0, 0));
}

TEST(VectorRand, ElementsAreTheirCountersWords) {
  const uint64_t seed = 0x1234'5678'9abc'def0ull, ctr = (uint64_t{1} << 32) - 3;  // the counter carries into its high word
  Bytes dst(2 * 5 * 4);
  vector_rand(DType::I32, dst.data(), seed, ctr, 2, 5);
  const std::vector<int64_t> got = decode_ints(DType::I32, dst);
  for (uint64_t i = 0; i < 10; ++i) EXPECT_EQ(uint32_t(got[i]), philox4x32_10_word0(seed, ctr + i)) << i;
}

TEST(VectorRand, FloatsAreUniformInUnitIntervalWithTheirTypesBits) {
  const uint64_t n = 1 << 16;
  for (const DType dtype : kFloatTypes) {
    SCOPED_TRACE(name(dtype));
    Bytes dst(n * size_of(dtype));
    vector_rand(dtype, dst.data(), 7, 0, 1, n);
    const std::vector<float> got = decode_floats(dtype, dst);
    const int digits = dtype == DType::F32 ? 24 : dtype == DType::F16 ? 11 : 8;
    double sum = 0, sum_sq = 0;
    std::set<float> distinct;
    for (uint64_t i = 0; i < n; ++i) {
      const float v = got[i];
      ASSERT_GE(v, 0.0f);
      ASSERT_LT(v, 1.0f);
      // Exactly the top bits of the word, scaled: no rounding.
      EXPECT_EQ(v, float(philox4x32_10_word0(7, i) >> (32 - digits)) / float(uint32_t{1} << digits));
      sum += v, sum_sq += double(v) * v;
      distinct.insert(v);
    }
    const double mean = sum / n, var = sum_sq / n - mean * mean;
    // Uniform [0, 1): mean 1/2, variance 1/12; 4 standard errors of the mean for 2^16 samples is 0.0045.
    EXPECT_NEAR(mean, 0.5, 0.0045);
    EXPECT_NEAR(var, 1.0 / 12, 0.002);
    EXPECT_GT(distinct.size(), dtype == DType::BF16 ? 250u : 2000u);
  }
}

TEST(VectorRand, IntegersTakeTheLowBits) {
  Bytes dst(4);
  vector_rand(DType::U8, dst.data(), 99, 5, 2, 2);
  for (uint64_t i = 0; i < 4; ++i) EXPECT_EQ(dst[i], uint8_t(philox4x32_10_word0(99, 5 + i)));
}

}  // namespace
}  // namespace npu::sim::functional::test
