// The random ops against a reference computed here: the test's own Philox4x32-10
// gives each element's 32 random bits from (seed, offset + index), and the
// distributions' transforms are recomputed in f32.
#include <cmath>

#include "kernel_runner.h"

namespace npu::compiler::testing {
namespace {

using isa::DType;

// Random123's philox4x32-10, first output word, counter (c, c >> 32, 0, 0), key (k, k >> 32).
uint32_t philox_word0(uint64_t key, uint64_t counter) {
  uint32_t c0 = uint32_t(counter), c1 = uint32_t(counter >> 32), c2 = 0, c3 = 0, k0 = uint32_t(key), k1 = uint32_t(key >> 32);
  for (int round = 0; round < 10; ++round) {
    if (round) k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
    const uint64_t p0 = uint64_t{0xD2511F53u} * c0, p1 = uint64_t{0xCD9E8D57u} * c2;
    const uint32_t n0 = uint32_t(p1 >> 32) ^ c1 ^ k0, n2 = uint32_t(p0 >> 32) ^ c3 ^ k1;
    c1 = uint32_t(p1), c3 = uint32_t(p0), c0 = n0, c2 = n2;
  }
  return c0;
}

// Uniform in [0, 1) with `digits` bits.
float unit(uint64_t seed, uint64_t counter, int digits) {
  return float(philox_word0(seed, counter) >> (32 - digits)) / float(uint32_t{1} << digits);
}

float round_to(DType dtype, float v) { return dtype == DType::BF16 ? isa::bf16_to_f32(isa::f32_to_bf16(v)) : v; }

class RandomTest : public KernelTest {
 protected:
  std::vector<double> generate(OpKind kind, DType dtype, int64_t n, std::array<double, 2> params, uint64_t seed, uint64_t offset) {
    OpDesc op(kind, {}, t(dtype, {n}));
    op.random_params = params;
    const KernelRun r = run_bytes(op, {}, {seed, offset});
    std::vector<double> values(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) values[size_t(i)] = load(dtype, &r.output[size_t(i) * isa::dtype_size_bytes(dtype)]);
    return values;
  }
};

constexpr int64_t kSizes[] = {1, 67, 10007, 100003};

TEST_P(RandomTest, UniformIsThePhiloxBitsScaledAndShifted) {
  const uint64_t seed = 0x5eed'0000'1234ull, offset = (uint64_t{1} << 32) - 100;  // the counter crosses into its high word
  for (const DType dtype : {DType::F32, DType::BF16})
    for (const int64_t n : kSizes)
      for (const std::array<double, 2> range : {std::array<double, 2>{0, 1}, {-3, 5}}) {
        SCOPED_TRACE(std::string(isa::dtype_name(dtype)) + " n=" + std::to_string(n) + " from " + std::to_string(range[0]));
        const std::vector<double> got = generate(OpKind::UNIFORM, dtype, n, range, seed, offset);
        const int digits = dtype == DType::F32 ? 24 : 8;
        for (int64_t i = 0; i < n; ++i) {
          const float u = unit(seed, offset + uint64_t(i), digits);
          const float expected = range == std::array<double, 2>{0, 1} ? u : round_to(dtype, u * 8.0f + -3.0f);
          ASSERT_EQ(got[size_t(i)], expected) << "element " << i;
        }
      }
}

TEST_P(RandomTest, NormalIsBoxMullerOfTwoCounterBlocks) {
  const uint64_t seed = 42, offset = 1000;
  for (const int64_t n : kSizes) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const std::vector<double> got = generate(OpKind::NORMAL, DType::F32, n, {0.5, 2.0}, seed, offset);
    double sum = 0, sum_sq = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float u1 = unit(seed, offset + uint64_t(i), 24), u2 = unit(seed, offset + uint64_t(n + i), 24);
      const double z = std::sqrt(-2.0 * std::log(1.0 - double(u1))) * std::cos(2.0 * M_PI * double(u2));
      // The chip's log, sqrt and cos are f32: a few f32 ulps on r and on cos, absolute near cos's zeros.
      ASSERT_NEAR(got[size_t(i)], 0.5 + 2.0 * z, 1e-5 * (1 + std::fabs(2.0 * z))) << "element " << i;
      sum += got[size_t(i)], sum_sq += got[size_t(i)] * got[size_t(i)];
    }
    if (n >= 10000) {  // 5 standard errors
      const double mean = sum / double(n), sd = std::sqrt(sum_sq / double(n) - mean * mean);
      EXPECT_NEAR(mean, 0.5, 5 * 2.0 / std::sqrt(double(n)));
      EXPECT_NEAR(sd, 2.0, 5 * 2.0 / std::sqrt(2.0 * double(n)));
    }
  }
}

TEST_P(RandomTest, BernoulliIsUniformBelowP) {
  const uint64_t seed = 7, offset = 0;
  for (const DType dtype : {DType::F32, DType::BF16, DType::U8})
    for (const int64_t n : kSizes) {
      SCOPED_TRACE(std::string(isa::dtype_name(dtype)) + " n=" + std::to_string(n));
      const std::vector<double> got = generate(OpKind::BERNOULLI, dtype, n, {0.3, 0}, seed, offset);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[size_t(i)], unit(seed, offset + uint64_t(i), 24) < 0.3f ? 1.0 : 0.0) << i;
    }
}

// arange (the generator kernel without v.rand): i32 in wrapping i32 arithmetic; floats as
// f32(i) * f32(step) + f32(start) rounded once, which is what the test computes too.
TEST_P(RandomTest, ArangeIsStartPlusTheIndexTimesStep) {
  for (const int64_t n : kSizes) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const std::vector<double> ints = generate(OpKind::ARANGE, DType::I32, n, {-7, 3}, 0, 0);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(ints[size_t(i)], double(int32_t(-7 + 3 * i))) << "element " << i;
    for (const DType dtype : {DType::F32, DType::BF16}) {
      const std::vector<double> floats = generate(OpKind::ARANGE, dtype, n, {0.5, 0.1}, 0, 0);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(floats[size_t(i)], round_to(dtype, float(i) * 0.1f + 0.5f)) << "element " << i;
    }
  }
  // Integers below 2^24 are exact in f32: position ids.
  const std::vector<double> positions = generate(OpKind::ARANGE, DType::F32, 100003, {0, 1}, 0, 0);
  for (int64_t i = 0; i < 100003; ++i) ASSERT_EQ(positions[size_t(i)], double(i));
}

TEST_P(RandomTest, RejectsWhatItCannotGenerate) {
  OpDesc ints(OpKind::UNIFORM, {}, t(DType::I32, {8}));
  EXPECT_THROW(compiler_.compile(ints), UnsupportedOp);
  OpDesc strided(OpKind::NORMAL, {}, TensorDesc{DType::F32, {4, 4}, {1, 4}, 0});
  EXPECT_THROW(compiler_.compile(strided), UnsupportedOp);
  EXPECT_THROW(compiler_.compile(OpDesc(OpKind::ARANGE, {}, t(DType::U8, {8}))), UnsupportedOp);
  OpDesc with_input(OpKind::BERNOULLI, {t(DType::F32, {4})}, t(DType::F32, {4}));
  EXPECT_THROW(compiler_.compile(with_input), std::invalid_argument);
}

INSTANTIATE_TEST_SUITE_P(Presets, RandomTest, ::testing::Values("tiny", "base"), preset_name);

}  // namespace
}  // namespace npu::compiler::testing
