#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "test_util.h"

namespace npu::sim::functional::test {
namespace {

using isa::Bcast;
using isa::Opcode;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr Bcast kBcasts[] = {Bcast::Full, Bcast::Row, Bcast::Col, Bcast::Scalar};
constexpr size_t kRows = 5, kCols = 131;  // Full spans more than one staging chunk

const char* mnemonic_of(Opcode op) { return isa::find_instruction(op)->mnemonic.c_str(); }
const char* bcast_name(Bcast bcast) {
  return bcast == Bcast::Full ? "full" : bcast == Bcast::Row ? "row" : bcast == Bcast::Col ? "col" : "scalar";
}

size_t b_index(Bcast bcast, size_t i, size_t j, size_t cols) {
  switch (bcast) {
    case Bcast::Full: return i * cols + j;
    case Bcast::Row: return j;
    case Bcast::Col: return i;
    case Bcast::Scalar: return 0;
  }
  return 0;
}

// f32 results of + - * / are the double results rounded once (double is wide
// enough that rounding through it is exact), so float arithmetic is checked
// bit for bit.
double float_reference(Opcode op, double a, double b) {
  switch (op) {
    case Opcode::V_ADD: return a + b;
    case Opcode::V_SUB: return a - b;
    case Opcode::V_MUL: return a * b;
    case Opcode::V_DIV: return a / b;
    case Opcode::V_MAX: return std::max(a, b);
    case Opcode::V_MIN: return std::min(a, b);
    default: return std::pow(a, b);
  }
}

TEST(VectorBinary, FloatArithmeticEveryBroadcast) {
  const Opcode ops[] = {Opcode::V_ADD, Opcode::V_SUB, Opcode::V_MUL, Opcode::V_DIV,
                        Opcode::V_MAX, Opcode::V_MIN, Opcode::V_POW};
  for (const Opcode op : ops) {
    for (const DType dtype : kFloatTypes) {
      for (const Bcast bcast : kBcasts) {
        SCOPED_TRACE(std::string(mnemonic_of(op)) + " " + name(dtype) + " " + bcast_name(bcast));
        Random random(static_cast<uint32_t>(op) + 100 * static_cast<uint32_t>(bcast));
        const bool pow = op == Opcode::V_POW;
        const std::vector<float> a = random.floats(dtype, kRows * kCols, pow ? 0.1f : -50, pow ? 4 : 50);
        const std::vector<float> b =
            random.floats(dtype, bcast_operand_elements(bcast, kRows, kCols), pow ? -3 : 0.5f, pow ? 3 : 50);
        const Bytes a_bytes = encode_floats(dtype, a), b_bytes = encode_floats(dtype, b);
        Bytes dst(a_bytes.size());
        ASSERT_FALSE(vector_binary(op, dtype, bcast, dst.data(), a_bytes.data(), b_bytes.data(), kRows, kCols));
        const std::vector<float> got = decode_floats(dtype, dst);
        for (size_t i = 0; i < kRows; ++i) {
          for (size_t j = 0; j < kCols; ++j) {
            const float x = a[i * kCols + j], y = b[b_index(bcast, i, j, kCols)];
            const double exact = float_reference(op, x, y);
            const float expected = round_to(dtype, static_cast<float>(exact));
            const float actual = got[i * kCols + j];
            if (pow)
              ASSERT_NEAR(actual, exact, (epsilon(dtype) + 4 * epsilon(DType::F32)) * std::fabs(exact)) << x << " ^ " << y;
            else
              ASSERT_TRUE(same_bits(actual, expected)) << x << " op " << y << ": " << actual << " vs " << expected;
          }
        }
      }
    }
  }
}

TEST(VectorBinary, FloatSpecialValues) {
  struct Case {
    Opcode op;
    float a, b, expected;  // NaN matches any NaN; others bit for bit
  };
  const Case cases[] = {
      {Opcode::V_MAX, kNaN, 1.0f, kNaN},   {Opcode::V_MAX, 1.0f, kNaN, kNaN},   {Opcode::V_MIN, kNaN, -kInf, kNaN},
      {Opcode::V_MIN, -kInf, kNaN, kNaN},  {Opcode::V_MAX, -0.0f, 0.0f, 0.0f},  {Opcode::V_MAX, 0.0f, -0.0f, -0.0f},
      {Opcode::V_MIN, -0.0f, 0.0f, 0.0f},  {Opcode::V_MIN, 0.0f, -0.0f, -0.0f}, {Opcode::V_DIV, 1.0f, 0.0f, kInf},
      {Opcode::V_DIV, -1.0f, 0.0f, -kInf}, {Opcode::V_DIV, 0.0f, 0.0f, kNaN},   {Opcode::V_ADD, kInf, -kInf, kNaN},
      {Opcode::V_POW, -2.0f, 3.0f, -8.0f}, {Opcode::V_POW, -2.0f, 0.5f, kNaN},  {Opcode::V_POW, 0.0f, -1.0f, kInf},
      {Opcode::V_POW, kNaN, 0.0f, 1.0f},
  };
  for (const Case& c : cases) {
    for (const DType dtype : kFloatTypes) {
      SCOPED_TRACE(std::string(mnemonic_of(c.op)) + " " + name(dtype) + " " + std::to_string(c.a) + ", " +
                   std::to_string(c.b));
      const Bytes a = encode_floats(dtype, {c.a}), b = encode_floats(dtype, {c.b});
      Bytes dst(a.size());
      ASSERT_FALSE(vector_binary(c.op, dtype, Bcast::Full, dst.data(), a.data(), b.data(), 1, 1));
      const float got = decode_floats(dtype, dst)[0];
      if (std::isnan(c.expected))
        EXPECT_TRUE(std::isnan(got)) << got;
      else
        EXPECT_TRUE(same_bits(got, c.expected)) << got;
    }
  }
}

int64_t wrapped_pow(DType dtype, int64_t base, int64_t exponent) {
  int64_t result = 1;
  for (int64_t e = 0; e < exponent; ++e) result = wrap(dtype, result * base);
  return result;
}

// The bitwise instructions on the dtype's bit pattern, as torch's CPU ops
// compute them: a shift by a count outside [0, bits) gives 0, or the sign for
// a signed right shift.
int64_t bitwise_reference(Opcode op, DType dtype, int64_t a, int64_t b) {
  const int bits = dtype == DType::I32 ? 32 : 8;
  const uint64_t pattern = static_cast<uint64_t>(a) & ((uint64_t{1} << bits) - 1);
  switch (op) {
    case Opcode::V_AND: return wrap(dtype, a & b);
    case Opcode::V_OR: return wrap(dtype, a | b);
    case Opcode::V_XOR: return wrap(dtype, a ^ b);
    case Opcode::V_SHL: return b < 0 || b >= bits ? 0 : wrap(dtype, static_cast<int64_t>(pattern << b));
    default:  // V_SHR
      if (dtype == DType::U8) return b < 0 || b >= bits ? 0 : static_cast<int64_t>(pattern >> b);
      return b < 0 || b >= bits ? (a < 0 ? -1 : 0) : a >> b;
  }
}

int64_t int_reference(Opcode op, DType dtype, int64_t a, int64_t b) {
  switch (op) {
    case Opcode::V_ADD: return wrap(dtype, a + b);
    case Opcode::V_SUB: return wrap(dtype, a - b);
    case Opcode::V_MUL: return wrap(dtype, a * b);
    case Opcode::V_DIV: return wrap(dtype, a / b);
    case Opcode::V_MAX: return std::max(a, b);
    case Opcode::V_MIN: return std::min(a, b);
    case Opcode::V_POW: return wrapped_pow(dtype, a, b);
    default: return bitwise_reference(op, dtype, a, b);
  }
}

TEST(VectorBinary, IntegerArithmeticWrapsEveryBroadcast) {
  const Opcode ops[] = {Opcode::V_ADD, Opcode::V_SUB, Opcode::V_MUL, Opcode::V_DIV, Opcode::V_MAX, Opcode::V_MIN, Opcode::V_POW,
                        Opcode::V_AND, Opcode::V_OR,  Opcode::V_XOR, Opcode::V_SHL, Opcode::V_SHR};
  for (const Opcode op : ops) {
    for (const DType dtype : kIntTypes) {
      for (const Bcast bcast : kBcasts) {
        SCOPED_TRACE(std::string(mnemonic_of(op)) + " " + name(dtype) + " " + bcast_name(bcast));
        Random random(static_cast<uint32_t>(op) * 3 + static_cast<uint32_t>(bcast));
        const std::vector<int64_t> a = random.ints(kRows * kCols, min_of(dtype), max_of(dtype));
        const size_t b_count = bcast_operand_elements(bcast, kRows, kCols);
        // Exponents in [0, 40]; shift counts from below 0 to past the width (u8 counts cannot be negative).
        std::vector<int64_t> b = op == Opcode::V_POW                         ? random.ints(b_count, 0, 40)
                                 : op == Opcode::V_SHL || op == Opcode::V_SHR ? random.ints(b_count, std::max<int64_t>(min_of(dtype), -3), 40)
                                                                              : random.ints(b_count, min_of(dtype), max_of(dtype));
        if (op == Opcode::V_DIV)
          for (int64_t& v : b) v = v == 0 ? 3 : v;
        const Bytes a_bytes = encode_ints(dtype, a), b_bytes = encode_ints(dtype, b);
        Bytes dst(a_bytes.size());
        ASSERT_FALSE(vector_binary(op, dtype, bcast, dst.data(), a_bytes.data(), b_bytes.data(), kRows, kCols));
        const std::vector<int64_t> got = decode_ints(dtype, dst);
        for (size_t i = 0; i < kRows; ++i)
          for (size_t j = 0; j < kCols; ++j) {
            const int64_t x = a[i * kCols + j], y = b[b_index(bcast, i, j, kCols)];
            ASSERT_EQ(got[i * kCols + j], int_reference(op, dtype, x, y)) << x << " op " << y;
          }
      }
    }
  }
}

TEST(VectorBinary, IntegerEdgeCases) {
  struct Case {
    Opcode op;
    DType dtype;
    int64_t a, b, expected;
  };
  const int64_t int_min = std::numeric_limits<int32_t>::min();
  const Case cases[] = {
      {Opcode::V_DIV, DType::I32, int_min, -1, int_min},  // wraps, no trap
      {Opcode::V_DIV, DType::I8, -128, -1, -128},
      {Opcode::V_DIV, DType::I32, -7, 2, -3},  // truncates toward zero
      {Opcode::V_DIV, DType::I8, 7, -2, -3},
      {Opcode::V_MUL, DType::I32, int_min, int_min, 0},
      {Opcode::V_MUL, DType::U8, 16, 17, 16},
      {Opcode::V_ADD, DType::I8, 127, 1, -128},
      {Opcode::V_SUB, DType::U8, 0, 1, 255},
      {Opcode::V_POW, DType::I32, 2, 31, int_min},
      {Opcode::V_POW, DType::I32, 3, 1000003, wrapped_pow(DType::I32, 3, 1000003)},
      {Opcode::V_POW, DType::I32, -1, std::numeric_limits<int32_t>::max(), -1},
      {Opcode::V_POW, DType::I32, 2, 40, 0},
      {Opcode::V_POW, DType::I8, 3, 5, -13},
      {Opcode::V_POW, DType::I8, -2, 7, -128},
      {Opcode::V_POW, DType::U8, 0, 0, 1},
      // Shifts and bitwise ops, as torch 2.13's CPU &, ^, << and >> give them for the same operands.
      {Opcode::V_SHL, DType::I32, -5, 31, std::numeric_limits<int32_t>::min()},
      {Opcode::V_SHL, DType::I32, -5, 32, 0},
      {Opcode::V_SHL, DType::I32, 5, -1, 0},
      {Opcode::V_SHR, DType::I32, -5, -1, -1},
      {Opcode::V_SHR, DType::I32, -128, 3, -16},
      {Opcode::V_SHR, DType::I32, -5, 40, -1},
      {Opcode::V_SHR, DType::I32, 100, 40, 0},
      {Opcode::V_SHL, DType::I8, 100, 3, 32},
      {Opcode::V_SHL, DType::I8, -5, 7, -128},
      {Opcode::V_SHR, DType::I8, -128, 8, -1},
      {Opcode::V_SHL, DType::U8, 251, 3, 216},
      {Opcode::V_SHR, DType::U8, 251, 3, 31},
      {Opcode::V_SHR, DType::U8, 200, 7, 1},
      {Opcode::V_SHR, DType::U8, 200, 8, 0},
      {Opcode::V_XOR, DType::I32, -1, 0x7fffffff, std::numeric_limits<int32_t>::min()},
      {Opcode::V_AND, DType::U8, 0xf0, 0x3c, 0x30},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(mnemonic_of(c.op)) + " " + name(c.dtype) + " " + std::to_string(c.a) + ", " +
                 std::to_string(c.b));
    const Bytes a = encode_ints(c.dtype, {c.a}), b = encode_ints(c.dtype, {c.b});
    Bytes dst(a.size());
    ASSERT_FALSE(vector_binary(c.op, c.dtype, Bcast::Full, dst.data(), a.data(), b.data(), 1, 1));
    EXPECT_EQ(decode_ints(c.dtype, dst)[0], c.expected);
  }
}

TEST(VectorBinary, BitwiseRefusesFloats) {
  const Bytes a = encode_floats(DType::F32, {1.0f}), b = encode_floats(DType::F32, {2.0f});
  Bytes dst(a.size());
  const KernelError error = vector_binary(Opcode::V_AND, DType::F32, Bcast::Full, dst.data(), a.data(), b.data(), 1, 1);
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("v.and needs an integer dtype, got f32"), std::string::npos) << *error;
}

TEST(VectorBinary, IntegerFaultsLeaveDstUntouched) {
  for (const DType dtype : kIntTypes) {
    for (const Bcast bcast : kBcasts) {
      SCOPED_TRACE(name(dtype) + " " + bcast_name(bcast));
      const size_t b_count = bcast_operand_elements(bcast, 4, 6);
      std::vector<int64_t> b(b_count, 2);
      b.back() = 0;  // only the last element is bad: nothing before it may be written
      const Bytes a = encode_ints(dtype, std::vector<int64_t>(24, 9));
      const Bytes b_bytes = encode_ints(dtype, b);
      Bytes dst(a.size(), 0x5a);
      KernelError error = vector_binary(Opcode::V_DIV, dtype, bcast, dst.data(), a.data(), b_bytes.data(), 4, 6);
      ASSERT_TRUE(error);
      EXPECT_EQ(*error, "integer division by zero");
      EXPECT_EQ(dst, Bytes(a.size(), 0x5a));
      if (dtype == DType::U8) continue;  // no negative exponents
      b.back() = -1;
      const Bytes exponents = encode_ints(dtype, b);
      error = vector_binary(Opcode::V_POW, dtype, bcast, dst.data(), a.data(), exponents.data(), 4, 6);
      ASSERT_TRUE(error);
      EXPECT_EQ(*error, "integer to a negative power");
      EXPECT_EQ(dst, Bytes(a.size(), 0x5a));
    }
  }
}

TEST(VectorBinary, FloatDivisionByZeroIsNotAFault) {
  const Bytes a = encode_floats(DType::F32, {1.0f}), b = encode_floats(DType::F32, {0.0f});
  Bytes dst(4);
  EXPECT_FALSE(vector_binary(Opcode::V_DIV, DType::F32, Bcast::Scalar, dst.data(), a.data(), b.data(), 1, 1));
}

bool compare_reference(Opcode op, double a, double b) {
  switch (op) {
    case Opcode::V_EQ: return a == b;
    case Opcode::V_NE: return a != b;
    case Opcode::V_LT: return a < b;
    case Opcode::V_LE: return a <= b;
    case Opcode::V_GT: return a > b;
    default: return a >= b;
  }
}

constexpr Opcode kComparisons[] = {Opcode::V_EQ, Opcode::V_NE, Opcode::V_LT, Opcode::V_LE, Opcode::V_GT, Opcode::V_GE};

TEST(VectorBinary, FloatComparisonsWriteU8IncludingNaN) {
  // Every pair of these values, as a Full operand pair.
  const std::vector<float> values = {kNaN, -kInf, -1.5f, -0.0f, 0.0f, 1.5f, kInf};
  std::vector<float> a, b;
  for (const float x : values)
    for (const float y : values) {
      a.push_back(x);
      b.push_back(y);
    }
  for (const Opcode op : kComparisons) {
    for (const DType dtype : kFloatTypes) {
      SCOPED_TRACE(std::string(mnemonic_of(op)) + " " + name(dtype));
      const Bytes a_bytes = encode_floats(dtype, a), b_bytes = encode_floats(dtype, b);
      Bytes dst(a.size() + 8, 0x77);  // guard bytes: exactly rows*cols u8 are written
      ASSERT_FALSE(vector_binary(op, dtype, Bcast::Full, dst.data(), a_bytes.data(), b_bytes.data(), values.size(),
                                 values.size()));
      for (size_t i = 0; i < a.size(); ++i)
        EXPECT_EQ(dst[i], compare_reference(op, a[i], b[i]) ? 1 : 0) << a[i] << " vs " << b[i];
      for (size_t i = a.size(); i < dst.size(); ++i) EXPECT_EQ(dst[i], 0x77);
    }
  }
}

TEST(VectorBinary, IntegerComparisonsEveryBroadcast) {
  for (const Opcode op : kComparisons) {
    for (const DType dtype : kIntTypes) {
      for (const Bcast bcast : kBcasts) {
        SCOPED_TRACE(std::string(mnemonic_of(op)) + " " + name(dtype) + " " + bcast_name(bcast));
        Random random(static_cast<uint32_t>(op));
        // A narrow range makes equal pairs common.
        const int64_t lo = dtype == DType::U8 ? 0 : -3;
        const std::vector<int64_t> a = random.ints(kRows * kCols, lo, lo + 6);
        const std::vector<int64_t> b = random.ints(bcast_operand_elements(bcast, kRows, kCols), lo, lo + 6);
        const Bytes a_bytes = encode_ints(dtype, a), b_bytes = encode_ints(dtype, b);
        Bytes dst(kRows * kCols);
        ASSERT_FALSE(vector_binary(op, dtype, bcast, dst.data(), a_bytes.data(), b_bytes.data(), kRows, kCols));
        for (size_t i = 0; i < kRows; ++i)
          for (size_t j = 0; j < kCols; ++j) {
            const int64_t x = a[i * kCols + j], y = b[b_index(bcast, i, j, kCols)];
            ASSERT_EQ(dst[i * kCols + j], compare_reference(op, static_cast<double>(x), static_cast<double>(y)) ? 1 : 0);
          }
      }
    }
  }
}

TEST(VectorBinary, InPlaceOnEitherOperand) {
  for (const DType dtype : kAllTypes) {
    for (const Bcast bcast : kBcasts) {
      for (const Opcode op : {Opcode::V_SUB, Opcode::V_LT}) {
        SCOPED_TRACE(std::string(mnemonic_of(op)) + " " + name(dtype) + " " + bcast_name(bcast));
        Random random(7);
        const bool is_float = isa::dtype_is_float(dtype);
        const size_t b_count = bcast_operand_elements(bcast, kRows, kCols);
        const Bytes a = is_float ? encode_floats(dtype, random.floats(dtype, kRows * kCols, -9, 9))
                                 : encode_ints(dtype, random.ints(kRows * kCols, min_of(dtype), max_of(dtype)));
        const Bytes b = is_float ? encode_floats(dtype, random.floats(dtype, b_count, -9, 9))
                                 : encode_ints(dtype, random.ints(b_count, min_of(dtype), max_of(dtype)));
        const size_t out_bytes = op == Opcode::V_LT ? kRows * kCols : a.size();
        Bytes expected(out_bytes);
        ASSERT_FALSE(vector_binary(op, dtype, bcast, expected.data(), a.data(), b.data(), kRows, kCols));

        Bytes on_a = a;
        ASSERT_FALSE(vector_binary(op, dtype, bcast, on_a.data(), on_a.data(), b.data(), kRows, kCols));
        EXPECT_EQ(Bytes(on_a.begin(), on_a.begin() + static_cast<ptrdiff_t>(out_bytes)), expected);
        if (bcast != Bcast::Full) continue;
        Bytes on_b = b;
        ASSERT_FALSE(vector_binary(op, dtype, bcast, on_b.data(), a.data(), on_b.data(), kRows, kCols));
        EXPECT_EQ(Bytes(on_b.begin(), on_b.begin() + static_cast<ptrdiff_t>(out_bytes)), expected);
      }
    }
  }
}

TEST(VectorBinary, EmptyTileReadsAndWritesNothing) {
  Bytes dst(4, 0xab);
  const Bytes zero(4, 0);
  // A zero divisor is not even looked at when nothing is computed.
  EXPECT_FALSE(vector_binary(Opcode::V_DIV, DType::I32, Bcast::Scalar, dst.data(), zero.data(), zero.data(), 0, 3));
  EXPECT_EQ(dst, Bytes(4, 0xab));
}

TEST(VectorBinary, RejectsNonBinaryOpcode) {
  uint8_t element[4] = {};
  const KernelError error = vector_binary(Opcode::V_EXP, DType::F32, Bcast::Full, element, element, element, 1, 1);
  ASSERT_TRUE(error);
  EXPECT_EQ(*error, "v.exp is not a binary vector instruction");
}

}  // namespace
}  // namespace npu::sim::functional::test

namespace npu::sim::functional::test {
namespace {

// v.fma: one rounding in f32 (the reference: the exact product and sum in double, which holds a
// product of two f32 and its sum with a third exactly enough for the f32 rounding to be the fused
// one's: std::fma), then to dt; integers wrap; dst may be a or c.
TEST(VectorFma, FusedInF32EveryBroadcastAndIntegersWrap) {
  for (const DType dtype : kAllTypes) {
    for (const Bcast bcast : kBcasts) {
      SCOPED_TRACE(name(dtype) + " " + bcast_name(bcast));
      Random random(11 + static_cast<uint32_t>(bcast));
      const bool is_float = isa::dtype_is_float(dtype);
      const size_t n = kRows * kCols, b_count = bcast_operand_elements(bcast, kRows, kCols);
      if (is_float) {
        const std::vector<float> a = random.floats(dtype, n, -30, 30), b = random.floats(dtype, b_count, -30, 30), c = random.floats(dtype, n, -30, 30);
        const Bytes a_bytes = encode_floats(dtype, a), b_bytes = encode_floats(dtype, b), c_bytes = encode_floats(dtype, c);
        Bytes dst(a_bytes.size());
        vector_fma(dtype, bcast, dst.data(), a_bytes.data(), b_bytes.data(), c_bytes.data(), kRows, kCols);
        const std::vector<float> got = decode_floats(dtype, dst);
        for (size_t i = 0; i < kRows; ++i)
          for (size_t j = 0; j < kCols; ++j) {
            const size_t k = i * kCols + j;
            const float expected = round_to(dtype, std::fma(a[k], b[b_index(bcast, i, j, kCols)], c[k]));
            ASSERT_TRUE(same_bits(got[k], expected)) << a[k] << " * " << b[b_index(bcast, i, j, kCols)] << " + " << c[k];
          }
        Bytes on_c = c_bytes;  // in place on the addend: an accumulator
        vector_fma(dtype, bcast, on_c.data(), a_bytes.data(), b_bytes.data(), on_c.data(), kRows, kCols);
        EXPECT_EQ(on_c, dst);
      } else {
        const std::vector<int64_t> a = random.ints(n, min_of(dtype), max_of(dtype)), b = random.ints(b_count, min_of(dtype), max_of(dtype)),
                                   c = random.ints(n, min_of(dtype), max_of(dtype));
        const Bytes a_bytes = encode_ints(dtype, a), b_bytes = encode_ints(dtype, b), c_bytes = encode_ints(dtype, c);
        Bytes dst(a_bytes.size());
        vector_fma(dtype, bcast, dst.data(), a_bytes.data(), b_bytes.data(), c_bytes.data(), kRows, kCols);
        const std::vector<int64_t> got = decode_ints(dtype, dst);
        for (size_t i = 0; i < kRows; ++i)
          for (size_t j = 0; j < kCols; ++j) {
            const size_t k = i * kCols + j;
            ASSERT_EQ(got[k], wrap(dtype, a[k] * b[b_index(bcast, i, j, kCols)] + c[k]));
          }
      }
    }
  }
}

TEST(VectorFma, RoundsOnceWhereAMultiplyThenAnAddRoundsTwice) {
  // (1 + 2^-12)^2 - 1 in f32: the product's 2^-24 term survives the fused form and not the other.
  const float x = 1.0f + std::ldexp(1.0f, -12);
  const Bytes a = encode_floats(DType::F32, {x}), c = encode_floats(DType::F32, {-1.0f});
  Bytes dst(4);
  vector_fma(DType::F32, Bcast::Scalar, dst.data(), a.data(), a.data(), c.data(), 1, 1);
  EXPECT_EQ(decode_floats(DType::F32, dst)[0], std::ldexp(1.0f, -11) + std::ldexp(1.0f, -24));
}

}  // namespace
}  // namespace npu::sim::functional::test
