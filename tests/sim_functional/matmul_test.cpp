#include <cmath>
#include <limits>
#include <memory>
#include <thread>

#include <gtest/gtest.h>

#include "test_util.h"

namespace npu::sim::functional::test {
namespace {

struct Shape {
  size_t m, n, k;
};

// 1s, primes, non-square, exact multiples of the kernel's 6 x 8 register tile,
// and k beyond one 256-deep block.
constexpr Shape kShapes[] = {{1, 1, 1},  {7, 13, 5},  {33, 17, 65}, {1, 40, 3},  {40, 1, 3},
                             {12, 16, 9}, {13, 29, 300}, {6, 8, 513}, {64, 48, 32}};

constexpr MatmulIsa kEveryMatmulIsa[] = {MatmulIsa::Sse2, MatmulIsa::Avx2, MatmulIsa::Avx512, MatmulIsa::Avx512Bf16};

// Back to the default after a test chose a kernel.
void use_widest_matmul_isa() {
  for (auto isa = std::rbegin(kEveryMatmulIsa); isa != std::rend(kEveryMatmulIsa); ++isa)
    if (use_matmul_isa(*isa)) return;
}

std::string describe(const Shape& s, uint32_t flags) {
  return std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k) + " flags " + std::to_string(flags);
}

// The logical matrix `rows x cols` stored as given, or transposed when `transposed`.
template <typename T>
std::vector<T> stored(const std::vector<T>& matrix, size_t rows, size_t cols, bool transposed) {
  if (!transposed) return matrix;
  std::vector<T> result(matrix.size());
  for (size_t i = 0; i < rows; ++i)
    for (size_t j = 0; j < cols; ++j) result[j * rows + i] = matrix[i * cols + j];
  return result;
}

struct FloatProblem {
  std::vector<float> a, b, old;  // logical A (m x k), B (k x n), and the prior accumulator
  Bytes a_bytes, b_bytes;
};

FloatProblem float_problem(DType dtype, const Shape& s, uint32_t flags, uint32_t seed) {
  Random random(seed);
  FloatProblem p;
  p.a = random.floats(dtype, s.m * s.k, -2, 2);
  p.b = random.floats(dtype, s.k * s.n, -2, 2);
  p.old = random.floats(DType::F32, s.m * s.n, -10, 10);
  p.a_bytes = encode_floats(dtype, stored(p.a, s.m, s.k, (flags & isa::kTcTransposeA) != 0));
  p.b_bytes = encode_floats(dtype, stored(p.b, s.k, s.n, (flags & isa::kTcTransposeB) != 0));
  return p;
}

std::vector<float> run_float(DType dtype, uint32_t flags, const FloatProblem& p, const Shape& s) {
  Bytes acc = encode_floats(DType::F32, p.old);
  const KernelError error = tensor_matmul(dtype, flags, acc.data(), p.a_bytes.data(), p.b_bytes.data(), s.m, s.n, s.k);
  EXPECT_FALSE(error) << *error;
  return decode_floats(DType::F32, acc);
}

TEST(TensorMatmul, FloatsMatchDoubleReferenceEveryFlag) {
  const double u = std::ldexp(1.0, -24);
  for (const DType dtype : kFloatTypes) {
    for (uint32_t flags = 0; flags < 8; ++flags) {
      for (const Shape& s : kShapes) {
        SCOPED_TRACE(name(dtype) + " " + describe(s, flags));
        const FloatProblem p = float_problem(dtype, s, flags, flags * 31 + static_cast<uint32_t>(s.k));
        const std::vector<float> got = run_float(dtype, flags, p, s);
        const bool acc = (flags & isa::kTcAcc) != 0;
        for (size_t i = 0; i < s.m; ++i) {
          for (size_t j = 0; j < s.n; ++j) {
            double exact = acc ? p.old[i * s.n + j] : 0.0, magnitude = std::fabs(exact);
            for (size_t kk = 0; kk < s.k; ++kk) {
              const double product = static_cast<double>(p.a[i * s.k + kk]) * p.b[kk * s.n + j];
              exact += product;
              magnitude += std::fabs(product);
            }
            // Recursive f32 summation of k rounded products, then the accumulator.
            const double bound = static_cast<double>(s.k + 2) * u * magnitude;
            ASSERT_NEAR(got[i * s.n + j], exact, bound) << "at " << i << ", " << j;
          }
        }
      }
    }
  }
}

// The summation order spelled out: for each output, s = 0; s += a*b for k
// ascending, in f32; then acc + s or s. The kernel must agree bit for bit.
std::vector<float> straight_loops(const FloatProblem& p, const Shape& s, bool acc) {
  std::vector<float> result(s.m * s.n);
  for (size_t i = 0; i < s.m; ++i)
    for (size_t j = 0; j < s.n; ++j) {
      float sum = 0.0f;
      for (size_t kk = 0; kk < s.k; ++kk) sum += p.a[i * s.k + kk] * p.b[kk * s.n + j];
      result[i * s.n + j] = acc ? p.old[i * s.n + j] + sum : sum;
    }
  return result;
}

TEST(TensorMatmul, FloatsEqualStraightF32LoopsBitForBit) {
  for (const DType dtype : kFloatTypes) {
    for (uint32_t flags = 0; flags < 8; ++flags) {
      for (const Shape& s : kShapes) {
        SCOPED_TRACE(name(dtype) + " " + describe(s, flags));
        const FloatProblem p = float_problem(dtype, s, flags, flags + 7 * static_cast<uint32_t>(s.m));
        const std::vector<float> got = run_float(dtype, flags, p, s);
        const std::vector<float> expected = straight_loops(p, s, (flags & isa::kTcAcc) != 0);
        for (size_t e = 0; e < got.size(); ++e)
          ASSERT_TRUE(same_bits(got[e], expected[e])) << "element " << e << ": " << got[e] << " vs " << expected[e];
      }
    }
  }
}

TEST(TensorMatmul, LargeBf16EqualsStraightLoops) {
  // Several row, column and k blocks of the blocked kernel.
  const Shape s{100, 70, 600};
  const FloatProblem p = float_problem(DType::BF16, s, isa::kTcAcc, 1);
  const std::vector<float> got = run_float(DType::BF16, isa::kTcAcc, p, s);
  const std::vector<float> expected = straight_loops(p, s, true);
  for (size_t e = 0; e < got.size(); ++e) ASSERT_TRUE(same_bits(got[e], expected[e])) << "element " << e;
}

// Every host kernel (SSE2, AVX2, AVX-512, as far as this host has them) gives the
// straight loops' bits, also when the product is large enough for two threads.
TEST(TensorMatmul, EveryHostKernelGivesTheSameBits) {
  const Shape shapes[] = {{300, 200, 300}, {37, 45, 70}};
  int kernels = 0;
  for (const MatmulIsa isa : kEveryMatmulIsa) {
    if (!use_matmul_isa(isa)) continue;
    ++kernels;
    for (const Shape& s : shapes)
      for (const uint32_t flags : {0u, uint32_t{isa::kTcAcc | isa::kTcTransposeB}, uint32_t{isa::kTcTransposeA}}) {
        SCOPED_TRACE("kernel " + std::to_string(int(isa)) + " " + describe(s, flags));
        const FloatProblem p = float_problem(DType::BF16, s, flags, 3);
        const std::vector<float> got = run_float(DType::BF16, flags, p, s);
        if (isa == MatmulIsa::Avx512Bf16) {
          EXPECT_EQ(last_matmul_path(), MatmulPath::Bf16Pairs);
        }
        const std::vector<float> expected = straight_loops(p, s, (flags & isa::kTcAcc) != 0);
        for (size_t e = 0; e < got.size(); ++e) ASSERT_TRUE(same_bits(got[e], expected[e])) << "element " << e;
      }
  }
  EXPECT_GE(kernels, 1);
  // Back to the widest.
  use_widest_matmul_isa();
}

// A product below f32's normal range rounds before it is added (the documented order), where a
// fused multiply-add would not: 2^-125 + RN(1.25 * 2^-149) is a tie that stays at 2^-125, while
// RN(2^-125 + 1.25 * 2^-149) would be 2^-125 + 2^-148. Every host kernel must keep the rounding.
TEST(TensorMatmul, ProductsBelowTheNormalRangeRoundBeforeTheyAreAdded) {
  const Shape s{1, 1, 2};
  const std::vector<float> a = {std::ldexp(1.0f, -62), std::ldexp(1.25f, -75)}, b = {std::ldexp(1.0f, -63), std::ldexp(1.0f, -74)};
  const float expected = std::ldexp(1.0f, -125);
  for (const MatmulIsa isa : kEveryMatmulIsa) {
    if (!use_matmul_isa(isa)) continue;
    for (const DType dtype : {DType::BF16, DType::F32}) {
      Bytes acc = encode_floats(DType::F32, {0.0f});
      const Bytes a_bytes = encode_floats(dtype, a), b_bytes = encode_floats(dtype, b);
      ASSERT_FALSE(tensor_matmul(dtype, 0, acc.data(), a_bytes.data(), b_bytes.data(), s.m, s.n, s.k));
      EXPECT_TRUE(same_bits(decode_floats(DType::F32, acc)[0], expected)) << "kernel " << int(isa) << " " << name(dtype);
    }
  }
  use_widest_matmul_isa();
}

// Normal products can cancel to a denormal sum: 1.5 * 2^-126 - 2^-126 = 2^-127. The documented
// order keeps it; AVX512-BF16's pair instruction would flush it to zero, so such a problem must not
// reach that kernel. Ordinary values do.
TEST(TensorMatmul, ADenormalPartialSumStaysOffTheFlushingPairKernel) {
  const Shape s{1, 1, 2};
  const Bytes a = encode_floats(DType::BF16, {std::ldexp(1.5f, -63), -std::ldexp(1.0f, -63)});
  const Bytes b = encode_floats(DType::BF16, {std::ldexp(1.0f, -63), std::ldexp(1.0f, -63)});
  const Bytes ordinary = encode_floats(DType::BF16, {0.375f, -2.5f});
  for (const MatmulIsa isa : kEveryMatmulIsa) {
    if (!use_matmul_isa(isa)) continue;
    Bytes acc = encode_floats(DType::F32, {0.0f});
    ASSERT_FALSE(tensor_matmul(DType::BF16, 0, acc.data(), a.data(), b.data(), s.m, s.n, s.k));
    EXPECT_TRUE(same_bits(decode_floats(DType::F32, acc)[0], std::ldexp(1.0f, -127))) << "kernel " << int(isa);
    EXPECT_NE(last_matmul_path(), MatmulPath::Bf16Pairs);
    ASSERT_FALSE(tensor_matmul(DType::BF16, 0, acc.data(), ordinary.data(), ordinary.data(), s.m, s.n, s.k));
    EXPECT_EQ(decode_floats(DType::F32, acc)[0], 0.375f * 0.375f + 2.5f * 2.5f);
    if (isa == MatmulIsa::Avx512Bf16) {
      EXPECT_EQ(last_matmul_path(), MatmulPath::Bf16Pairs);
    }
  }
  use_widest_matmul_isa();
}

TEST(TensorMatmul, InfinitiesAndNaNPropagateOnlyWhereTheyBelong) {
  const float inf = std::numeric_limits<float>::infinity();
  const Shape s{7, 9, 3};  // edge tiles in both directions: padding must stay out of the results
  FloatProblem p = float_problem(DType::F32, s, 0, 3);
  p.a[0] = inf;  // row 0 of A
  p.b[0 * s.n + 4] = 0.0f;  // inf * 0 = NaN at (0, 4) only
  p.a_bytes = encode_floats(DType::F32, p.a);
  p.b_bytes = encode_floats(DType::F32, p.b);
  const std::vector<float> got = run_float(DType::F32, 0, p, s);
  const std::vector<float> expected = straight_loops(p, s, false);
  for (size_t e = 0; e < got.size(); ++e) {
    if (std::isnan(expected[e]))
      EXPECT_TRUE(std::isnan(got[e])) << e;
    else
      EXPECT_TRUE(same_bits(got[e], expected[e])) << e << ": " << got[e];
  }
  EXPECT_TRUE(std::isnan(got[4]));
  EXPECT_TRUE(std::isinf(got[0]));
}

TEST(TensorMatmul, Int8AccumulatesInWrappingI32) {
  for (uint32_t flags = 0; flags < 8; ++flags) {
    for (const Shape& s : kShapes) {
      SCOPED_TRACE(describe(s, flags));
      Random random(flags * 5 + static_cast<uint32_t>(s.n));
      const std::vector<int64_t> a = random.ints(s.m * s.k, -128, 127);
      const std::vector<int64_t> b = random.ints(s.k * s.n, -128, 127);
      // Accumulators near the i32 limits, so that adding the products wraps.
      std::vector<int64_t> old = random.ints(s.m * s.n, -2000, 2000);
      for (size_t e = 0; e < old.size(); ++e) old[e] += e % 2 ? std::numeric_limits<int32_t>::max() - 2000 : std::numeric_limits<int32_t>::min() + 2000;
      const Bytes a_bytes = encode_ints(DType::I8, stored(a, s.m, s.k, (flags & isa::kTcTransposeA) != 0));
      const Bytes b_bytes = encode_ints(DType::I8, stored(b, s.k, s.n, (flags & isa::kTcTransposeB) != 0));
      Bytes acc = encode_ints(DType::I32, old);
      ASSERT_FALSE(tensor_matmul(DType::I8, flags, acc.data(), a_bytes.data(), b_bytes.data(), s.m, s.n, s.k));
      const std::vector<int64_t> got = decode_ints(DType::I32, acc);
      for (size_t i = 0; i < s.m; ++i)
        for (size_t j = 0; j < s.n; ++j) {
          int64_t sum = (flags & isa::kTcAcc) ? old[i * s.n + j] : 0;
          for (size_t kk = 0; kk < s.k; ++kk) sum += a[i * s.k + kk] * b[kk * s.n + j];
          ASSERT_EQ(got[i * s.n + j], wrap(DType::I32, sum)) << "at " << i << ", " << j;
        }
    }
  }
}

// The products summed ahead (sum_packed), on another thread, then added to the
// accumulator (multiply_packed): the bits of tensor_matmul. One problem after
// another, so that reused packed buffers start afresh.
TEST(TensorMatmul, ProductsSummedAheadOnAnotherThreadGiveTheSameBits) {
  for (const DType dtype : {DType::F32, DType::BF16, DType::F16, DType::I8}) {
    for (const uint32_t flags : {0u, uint32_t{isa::kTcAcc}, uint32_t{isa::kTcAcc | isa::kTcTransposeB}}) {
      for (const Shape& s : kShapes) {
        SCOPED_TRACE(name(dtype) + " " + describe(s, flags));
        Random random(flags + 11 * static_cast<uint32_t>(s.k));
        const Bytes a = dtype == DType::I8 ? encode_ints(dtype, random.ints(s.m * s.k, -128, 127)) : encode_floats(dtype, random.floats(dtype, s.m * s.k, -2, 2));
        const Bytes b = dtype == DType::I8 ? encode_ints(dtype, random.ints(s.k * s.n, -128, 127)) : encode_floats(dtype, random.floats(dtype, s.k * s.n, -2, 2));
        const Bytes old = encode_floats(DType::F32, random.floats(DType::F32, s.m * s.n, -10, 10));
        Bytes expected = old, got = old;
        ASSERT_FALSE(tensor_matmul(dtype, flags, expected.data(), a.data(), b.data(), s.m, s.n, s.k));
        std::shared_ptr<PackedMatmul> packed;
        ASSERT_FALSE(pack_matmul(dtype, flags, a.data(), b.data(), s.m, s.n, s.k, &packed));
        std::thread([&packed] { sum_packed(*packed); }).join();
        multiply_packed(*packed, got.data());
        ASSERT_EQ(got, expected);
      }
    }
  }
}

TEST(TensorMatmul, Int8LongSumsStayExactAndWrap) {
  // 2051 odd products of -127 * 127: the sum needs more than f32's 24 bits,
  // and on top of an accumulator near INT32_MIN it wraps.
  const size_t k = 2051;
  const Bytes a = encode_ints(DType::I8, std::vector<int64_t>(k, -127));
  const Bytes b = encode_ints(DType::I8, std::vector<int64_t>(k, 127));
  const int64_t old = int64_t{std::numeric_limits<int32_t>::min()} + 5;
  Bytes acc = encode_ints(DType::I32, {old});
  ASSERT_FALSE(tensor_matmul(DType::I8, isa::kTcAcc, acc.data(), a.data(), b.data(), 1, 1, k));
  EXPECT_EQ(decode_ints(DType::I32, acc)[0], wrap(DType::I32, old - 16129 * static_cast<int64_t>(k)));
  ASSERT_FALSE(tensor_matmul(DType::I8, 0, acc.data(), a.data(), b.data(), 1, 1, k));
  EXPECT_EQ(decode_ints(DType::I32, acc)[0], -16129 * static_cast<int64_t>(k));
}

TEST(TensorMatmul, UnsupportedDtypesFaultWithoutWriting) {
  for (const DType dtype : {DType::I32, DType::U8}) {
    const Bytes a(16, 1);
    Bytes acc(16, 0x42);
    const KernelError error = tensor_matmul(dtype, 0, acc.data(), a.data(), a.data(), 2, 2, 1);
    ASSERT_TRUE(error);
    EXPECT_EQ(*error, "tc.mm does not support " + name(dtype));
    EXPECT_EQ(acc, Bytes(16, 0x42));
  }
}

TEST(TensorMatmul, EmptyShapes) {
  const Bytes operand(64, 0x3f);
  // k = 0: the sums are +0, so acc leaves old + 0 and overwrite leaves zeros.
  Bytes acc = encode_floats(DType::F32, {1.5f, -2.0f, 3.0f, -0.0f});
  ASSERT_FALSE(tensor_matmul(DType::BF16, isa::kTcAcc, acc.data(), operand.data(), operand.data(), 2, 2, 0));
  EXPECT_EQ(decode_floats(DType::F32, acc), (std::vector<float>{1.5f, -2.0f, 3.0f, 0.0f}));
  EXPECT_TRUE(same_bits(decode_floats(DType::F32, acc)[3], 0.0f));
  ASSERT_FALSE(tensor_matmul(DType::BF16, 0, acc.data(), operand.data(), operand.data(), 2, 2, 0));
  EXPECT_EQ(decode_floats(DType::F32, acc), std::vector<float>(4, 0.0f));
  // m = 0 or n = 0: nothing to write.
  Bytes untouched(16, 0x42);
  ASSERT_FALSE(tensor_matmul(DType::F32, 0, untouched.data(), operand.data(), operand.data(), 0, 2, 3));
  ASSERT_FALSE(tensor_matmul(DType::I8, 0, untouched.data(), operand.data(), operand.data(), 2, 0, 3));
  EXPECT_EQ(untouched, Bytes(16, 0x42));
}

TEST(TensorMatmul, AccumulatorMayAliasAnOperand) {
  const Shape s{9, 9, 9};
  const FloatProblem p = float_problem(DType::F32, s, isa::kTcAcc, 8);
  Bytes expected = p.a_bytes;
  ASSERT_FALSE(tensor_matmul(DType::F32, isa::kTcAcc, expected.data(), p.a_bytes.data(), p.b_bytes.data(), s.m, s.n, s.k));
  Bytes shared = p.a_bytes;
  ASSERT_FALSE(tensor_matmul(DType::F32, isa::kTcAcc, shared.data(), shared.data(), p.b_bytes.data(), s.m, s.n, s.k));
  EXPECT_EQ(shared, expected);
}

}  // namespace
}  // namespace npu::sim::functional::test
