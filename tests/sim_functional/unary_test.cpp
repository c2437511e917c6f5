#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include <gtest/gtest.h>

#include "test_util.h"

namespace npu::sim::functional::test {
namespace {

using isa::Opcode;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct UnaryCase {
  Opcode op;
  std::function<double(double)> reference;
  float lo, hi;  // input range; inputs take both signs when lo > 0 and `mirror`
  bool mirror;
};

std::vector<UnaryCase> float_cases() {
  const auto sigmoid = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
  return {
      {Opcode::V_NEG, [](double x) { return -x; }, -100, 100, false},
      {Opcode::V_ABS, [](double x) { return std::fabs(x); }, -100, 100, false},
      {Opcode::V_EXP, [](double x) { return std::exp(x); }, -8, 8, false},
      {Opcode::V_LOG, [](double x) { return std::log(x); }, 0.01f, 100, false},
      {Opcode::V_SQRT, [](double x) { return std::sqrt(x); }, 0.01f, 100, false},
      {Opcode::V_RSQRT, [](double x) { return 1.0 / std::sqrt(x); }, 0.01f, 100, false},
      {Opcode::V_RECIP, [](double x) { return 1.0 / x; }, 0.01f, 100, true},
      {Opcode::V_TANH, [](double x) { return std::tanh(x); }, -5, 5, false},
      {Opcode::V_SIGMOID, sigmoid, -10, 10, false},
      {Opcode::V_RELU, [](double x) { return x > 0 ? x : 0.0; }, -10, 10, false},
      {Opcode::V_GELU, [](double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }, -4, 4, false},
      {Opcode::V_GELUT,
       [](double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }, -4, 4,
       false},
      {Opcode::V_SILU, [sigmoid](double x) { return x * sigmoid(x); }, -10, 10, false},
      {Opcode::V_SIN, [](double x) { return std::sin(x); }, -6, 6, false},
      {Opcode::V_COS, [](double x) { return std::cos(x); }, -6, 6, false},
      {Opcode::V_ERF, [](double x) { return std::erf(x); }, -4, 4, false},
  };
}

const char* mnemonic_of(Opcode op) { return isa::find_instruction(op)->mnemonic.c_str(); }

// Rounding of the f32 computation (a few f32 ulps, plus an absolute floor for
// formulas that cancel, like gelu of a negative input), then one rounding to
// the dtype.
double tolerance(DType dtype, double reference) {
  return (epsilon(dtype) + 8 * epsilon(DType::F32)) * std::fabs(reference) + 2e-6;
}

TEST(VectorUnary, FloatOpsMatchDoubleReference) {
  const size_t rows = 3, cols = 300;  // more than one staging chunk
  for (const UnaryCase& c : float_cases()) {
    for (const DType dtype : kFloatTypes) {
      SCOPED_TRACE(std::string(mnemonic_of(c.op)) + " " + name(dtype));
      Random random(static_cast<uint32_t>(c.op) * 7 + static_cast<uint32_t>(dtype));
      std::vector<float> x = random.floats(dtype, rows * cols, c.lo, c.hi);
      if (c.mirror)
        for (size_t i = 0; i < x.size(); i += 2) x[i] = -x[i];
      const Bytes src = encode_floats(dtype, x);
      Bytes dst(src.size(), 0xcd);
      ASSERT_FALSE(vector_unary(c.op, dtype, dst.data(), src.data(), rows, cols));
      const std::vector<float> got = decode_floats(dtype, dst);
      for (size_t i = 0; i < x.size(); ++i) {
        const double expected = c.reference(x[i]);
        ASSERT_NEAR(got[i], expected, tolerance(dtype, expected)) << "x = " << x[i];
      }
    }
  }
}

struct Special {
  Opcode op;
  float x;
  float expected;  // compared bit for bit, except that any NaN matches NaN
};

TEST(VectorUnary, FloatSpecialValues) {
  const Special specials[] = {
      {Opcode::V_LOG, 0.0f, -kInf},        {Opcode::V_LOG, -1.0f, kNaN},       {Opcode::V_SQRT, -1.0f, kNaN},
      {Opcode::V_RSQRT, 0.0f, kInf},       {Opcode::V_RECIP, -0.0f, -kInf},    {Opcode::V_EXP, -kInf, 0.0f},
      {Opcode::V_EXP, 100.0f, kInf},       {Opcode::V_RELU, kNaN, kNaN},       {Opcode::V_RELU, -0.0f, -0.0f},
      {Opcode::V_RELU, -3.0f, 0.0f},       {Opcode::V_NEG, 0.0f, -0.0f},       {Opcode::V_ABS, -kInf, kInf},
      {Opcode::V_SIGMOID, -100.0f, 0.0f},  {Opcode::V_SIGMOID, 100.0f, 1.0f},  {Opcode::V_SILU, -100.0f, -0.0f},
      {Opcode::V_TANH, kNaN, kNaN},        {Opcode::V_GELU, kInf, kInf},       {Opcode::V_GELU, -kInf, kNaN},
  };
  for (const Special& s : specials) {
    for (const DType dtype : kFloatTypes) {
      SCOPED_TRACE(std::string(mnemonic_of(s.op)) + " " + name(dtype) + " of " + std::to_string(s.x));
      Bytes data = encode_floats(dtype, {s.x});
      ASSERT_FALSE(vector_unary(s.op, dtype, data.data(), data.data(), 1, 1));
      const float got = decode_floats(dtype, data)[0];
      if (std::isnan(s.expected))
        EXPECT_TRUE(std::isnan(got)) << got;
      else
        EXPECT_TRUE(same_bits(got, s.expected)) << got;
    }
  }
}

TEST(VectorUnary, IntegerOpsWrap) {
  for (const DType dtype : kIntTypes) {
    SCOPED_TRACE(name(dtype));
    const std::vector<int64_t> x = {min_of(dtype), min_of(dtype) + 1, -1, 0, 1, 7, max_of(dtype) - 1, max_of(dtype)};
    std::vector<int64_t> in;
    for (const int64_t v : x) in.push_back(wrap(dtype, v));  // u8 has no -1: it becomes 255
    const Bytes src = encode_ints(dtype, in);
    for (const Opcode op : {Opcode::V_NEG, Opcode::V_ABS, Opcode::V_RELU}) {
      SCOPED_TRACE(mnemonic_of(op));
      Bytes dst(src.size());
      ASSERT_FALSE(vector_unary(op, dtype, dst.data(), src.data(), 2, in.size() / 2));
      const std::vector<int64_t> got = decode_ints(dtype, dst);
      for (size_t i = 0; i < in.size(); ++i) {
        const int64_t v = in[i];
        const int64_t expected = op == Opcode::V_NEG ? -v : op == Opcode::V_ABS ? std::abs(v) : std::max<int64_t>(v, 0);
        EXPECT_EQ(got[i], wrap(dtype, expected)) << "x = " << v;
      }
    }
  }
  // The wrapped edge cases spelled out.
  Bytes i8 = encode_ints(DType::I8, {-128});
  ASSERT_FALSE(vector_unary(Opcode::V_ABS, DType::I8, i8.data(), i8.data(), 1, 1));
  EXPECT_EQ(decode_ints(DType::I8, i8)[0], -128);
  Bytes u8 = encode_ints(DType::U8, {5});
  ASSERT_FALSE(vector_unary(Opcode::V_NEG, DType::U8, u8.data(), u8.data(), 1, 1));
  EXPECT_EQ(decode_ints(DType::U8, u8)[0], 251);
}

TEST(VectorUnary, TranscendentalsOnIntegersFaultWithoutWriting) {
  const Opcode float_only[] = {Opcode::V_EXP,  Opcode::V_LOG,     Opcode::V_SQRT, Opcode::V_RSQRT,
                               Opcode::V_RECIP, Opcode::V_TANH,   Opcode::V_SIGMOID, Opcode::V_GELU,
                               Opcode::V_GELUT, Opcode::V_SILU,   Opcode::V_SIN,  Opcode::V_COS, Opcode::V_ERF};
  for (const Opcode op : float_only) {
    for (const DType dtype : kIntTypes) {
      const Bytes src(8, 3);
      Bytes dst(8, 0xee);
      const KernelError error = vector_unary(op, dtype, dst.data(), src.data(), 2, 2);
      ASSERT_TRUE(error);
      EXPECT_EQ(*error, std::string(mnemonic_of(op)) + " needs a float dtype, got " + name(dtype));
      EXPECT_EQ(dst, Bytes(8, 0xee));
    }
  }
}

TEST(VectorUnary, MovCopiesBitsForEveryDtype) {
  for (const DType dtype : kAllTypes) {
    SCOPED_TRACE(name(dtype));
    Bytes src(5 * 7 * size_of(dtype));
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 37 + 11);  // includes NaN patterns
    Bytes dst(src.size());
    ASSERT_FALSE(vector_unary(Opcode::V_MOV, dtype, dst.data(), src.data(), 5, 7));
    EXPECT_EQ(dst, src);
    Bytes in_place = src;
    ASSERT_FALSE(vector_unary(Opcode::V_MOV, dtype, in_place.data(), in_place.data(), 5, 7));
    EXPECT_EQ(in_place, src);
  }
}

TEST(VectorUnary, InPlaceMatchesOutOfPlace) {
  for (const DType dtype : kAllTypes) {
    for (const Opcode op : {Opcode::V_NEG, Opcode::V_ABS, Opcode::V_RELU, Opcode::V_EXP}) {
      if (op == Opcode::V_EXP && !isa::dtype_is_float(dtype)) continue;
      SCOPED_TRACE(std::string(mnemonic_of(op)) + " " + name(dtype));
      Random random(42);
      const Bytes src = isa::dtype_is_float(dtype) ? encode_floats(dtype, random.floats(dtype, 700, -3, 3))
                                                   : encode_ints(dtype, random.ints(700, min_of(dtype), max_of(dtype)));
      Bytes out(src.size());
      ASSERT_FALSE(vector_unary(op, dtype, out.data(), src.data(), 7, 100));
      Bytes in_place = src;
      ASSERT_FALSE(vector_unary(op, dtype, in_place.data(), in_place.data(), 7, 100));
      EXPECT_EQ(in_place, out);
    }
  }
}

TEST(VectorUnary, EmptyTileWritesNothing) {
  Bytes dst(4, 0xab);
  const Bytes src(4, 0);
  EXPECT_FALSE(vector_unary(Opcode::V_EXP, DType::F32, dst.data(), src.data(), 0, 1));
  EXPECT_FALSE(vector_unary(Opcode::V_NEG, DType::I32, dst.data(), src.data(), 1, 0));
  EXPECT_EQ(dst, Bytes(4, 0xab));
}

// v.expsum is v.sub (col), v.exp and v.rsum (axis1) in one pass, and v.cvt to dt: the same bits.
TEST(VectorExpSum, SameBitsAsSubtractExpSumAndConvert) {
  constexpr uint64_t kRows = 7, kCols = 300;
  Random random(7);
  std::vector<float> scores = random.floats(DType::F32, kRows * kCols, -30, 30);
  scores[5] = -kInf;  // a masked score gives 0
  for (uint64_t j = 0; j < kCols; ++j) scores[3 * kCols + j] = -kInf;  // a row masked wholly: m is f32's lowest
  const Bytes src = encode_floats(DType::F32, scores);
  Bytes m(kRows * 4);
  ASSERT_FALSE(vector_reduce(Opcode::V_RMAX, DType::F32, isa::Axis::Axis1, m.data(), src.data(), kRows, kCols));
  const Bytes lowest = encode_floats(DType::F32, {std::numeric_limits<float>::lowest()});
  std::copy(lowest.begin(), lowest.end(), m.begin() + 3 * 4);
  Bytes exps(src.size()), sums(m.size());
  ASSERT_FALSE(vector_binary(Opcode::V_SUB, DType::F32, isa::Bcast::Col, exps.data(), src.data(), m.data(), kRows, kCols));
  ASSERT_FALSE(vector_unary(Opcode::V_EXP, DType::F32, exps.data(), exps.data(), kRows, kCols));
  ASSERT_FALSE(vector_reduce(Opcode::V_RSUM, DType::F32, isa::Axis::Axis1, sums.data(), exps.data(), kRows, kCols));
  EXPECT_EQ(decode_floats(DType::F32, sums)[3], 0.0f);
  for (const DType dtype : kFloatTypes) {
    SCOPED_TRACE(name(dtype));
    Bytes expected(kRows * kCols * size_of(dtype));
    vector_convert(dtype, DType::F32, expected.data(), exps.data(), kRows, kCols);
    Bytes dst(expected.size()), sum(m.size());
    ASSERT_FALSE(vector_expsum(dtype, dst.data(), src.data(), m.data(), sum.data(), kRows, kCols));
    EXPECT_EQ(dst, expected);
    EXPECT_EQ(sum, sums);
    // In place, the sums over m.
    Bytes in_place = src, sum_over_m = m;
    ASSERT_FALSE(vector_expsum(dtype, in_place.data(), in_place.data(), sum_over_m.data(), sum_over_m.data(), kRows, kCols));
    EXPECT_EQ(Bytes(in_place.begin(), in_place.begin() + std::ptrdiff_t(expected.size())), expected);
    EXPECT_EQ(sum_over_m, sums);
  }
}

TEST(VectorExpSum, IntegerDtypeIsAnError) {
  uint8_t element[4] = {};
  const KernelError error = vector_expsum(DType::I32, element, element, element, element, 1, 1);
  ASSERT_TRUE(error);
  EXPECT_EQ(*error, "v.expsum needs a float dtype, got i32");
}

TEST(VectorUnary, RejectsNonUnaryOpcode) {
  uint8_t element[4] = {};
  const KernelError error = vector_unary(Opcode::V_ADD, DType::F32, element, element, 1, 1);
  ASSERT_TRUE(error);
  EXPECT_EQ(*error, "v.add is not a unary vector instruction");
}

}  // namespace
}  // namespace npu::sim::functional::test
