#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "test_util.h"

namespace npu::sim::functional::test {
namespace {

using isa::Axis;
using isa::Opcode;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr Opcode kReductions[] = {Opcode::V_RSUM, Opcode::V_RMAX, Opcode::V_RMIN, Opcode::V_ARGMAX, Opcode::V_ARGMIN};

const char* mnemonic_of(Opcode op) { return isa::find_instruction(op)->mnemonic.c_str(); }
bool is_arg(Opcode op) { return op == Opcode::V_ARGMAX || op == Opcode::V_ARGMIN; }

// One reduced line (a row for axis1, a column for axis0), as doubles that
// hold either dtype's values exactly.
struct Expected {
  double value;
  int64_t index;
};

// Straight loops: floats sum in f32 from +0 in index order; integers sum
// exactly and wrap at the end; extremes keep the first, and the first NaN wins.
Expected reduce_line(Opcode op, DType dtype, const std::vector<double>& line) {
  if (op == Opcode::V_RSUM) {
    if (isa::dtype_is_float(dtype)) {
      float sum = 0.0f;
      for (const double v : line) sum += static_cast<float>(v);
      return {round_to(dtype, sum), 0};
    }
    int64_t sum = 0;
    for (const double v : line) sum += static_cast<int64_t>(v);
    return {static_cast<double>(wrap(dtype, sum)), 0};
  }
  const bool max = op == Opcode::V_RMAX || op == Opcode::V_ARGMAX;
  Expected best{line[0], 0};
  for (size_t i = 1; i < line.size(); ++i) {
    if (std::isnan(best.value)) break;
    if (std::isnan(line[i]) || (max ? line[i] > best.value : line[i] < best.value)) best = {line[i], static_cast<int64_t>(i)};
  }
  return best;
}

std::vector<double> random_tile(DType dtype, size_t count, uint32_t seed) {
  Random random(seed);
  std::vector<double> values;
  if (isa::dtype_is_float(dtype)) {
    for (const float v : random.floats(dtype, count, -1000, 1000)) values.push_back(v);
  } else {
    for (const int64_t v : random.ints(count, min_of(dtype), max_of(dtype))) values.push_back(static_cast<double>(v));
  }
  return values;
}

Bytes encode(DType dtype, const std::vector<double>& values) {
  if (isa::dtype_is_float(dtype)) return encode_floats(dtype, std::vector<float>(values.begin(), values.end()));
  std::vector<int64_t> ints(values.begin(), values.end());
  return encode_ints(dtype, ints);
}

std::vector<double> decode(DType dtype, const Bytes& bytes) {
  if (isa::dtype_is_float(dtype)) {
    const std::vector<float> floats = decode_floats(dtype, bytes);
    return {floats.begin(), floats.end()};
  }
  const std::vector<int64_t> ints = decode_ints(dtype, bytes);
  return {ints.begin(), ints.end()};
}

// Runs op on the tile and compares every output with reduce_line; checks that
// nothing past the outputs is written.
void check(Opcode op, DType dtype, Axis axis, const std::vector<double>& tile, size_t rows, size_t cols) {
  const size_t outputs = axis == Axis::Axis1 ? rows : cols;
  const DType out_dtype = is_arg(op) ? DType::I32 : dtype;
  const Bytes src = encode(dtype, tile);
  Bytes dst(outputs * size_of(out_dtype) + 4, 0x3c);
  ASSERT_FALSE(vector_reduce(op, dtype, axis, dst.data(), src.data(), rows, cols));
  EXPECT_EQ(Bytes(dst.end() - 4, dst.end()), Bytes(4, 0x3c));
  const std::vector<double> got = decode(out_dtype, Bytes(dst.begin(), dst.end() - 4));
  for (size_t o = 0; o < outputs; ++o) {
    std::vector<double> line;
    if (axis == Axis::Axis1)
      line.assign(tile.begin() + static_cast<ptrdiff_t>(o * cols), tile.begin() + static_cast<ptrdiff_t>((o + 1) * cols));
    else
      for (size_t i = 0; i < rows; ++i) line.push_back(tile[i * cols + o]);
    const Expected expected = reduce_line(op, dtype, line);
    if (is_arg(op))
      ASSERT_EQ(got[o], static_cast<double>(expected.index)) << "output " << o;
    else if (std::isnan(expected.value))
      ASSERT_TRUE(std::isnan(got[o])) << "output " << o;
    else
      ASSERT_TRUE(got[o] == expected.value && std::signbit(got[o]) == std::signbit(expected.value))
          << "output " << o << ": " << got[o] << " vs " << expected.value;
  }
}

TEST(VectorReduce, EveryOpDtypeAndAxis) {
  const std::pair<size_t, size_t> shapes[] = {{1, 1}, {1, 37}, {37, 1}, {7, 300}, {300, 7}};
  for (const Opcode op : kReductions)
    for (const DType dtype : kAllTypes)
      for (const Axis axis : {Axis::Axis0, Axis::Axis1})
        for (const auto& [rows, cols] : shapes) {
          SCOPED_TRACE(std::string(mnemonic_of(op)) + " " + name(dtype) + (axis == Axis::Axis0 ? " axis0 " : " axis1 ") +
                       std::to_string(rows) + "x" + std::to_string(cols));
          check(op, dtype, axis, random_tile(dtype, rows * cols, static_cast<uint32_t>(rows * 1000 + cols)), rows, cols);
        }
}

TEST(VectorReduce, FloatSumAccumulatesInF32InOrder) {
  // In f32, 2^24 + 1 + 1 + ... stays 2^24; a wider or reordered sum would not.
  std::vector<double> line = {16777216.0};
  for (int i = 0; i < 8; ++i) line.push_back(1.0);
  const Bytes src = encode(DType::F32, line);
  Bytes dst(4);
  ASSERT_FALSE(vector_reduce(Opcode::V_RSUM, DType::F32, Axis::Axis1, dst.data(), src.data(), 1, line.size()));
  EXPECT_EQ(decode_floats(DType::F32, dst)[0], 16777216.0f);
  // A sum of -0s is +0, as in torch.
  const Bytes zeros = encode_floats(DType::F32, {-0.0f, -0.0f});
  ASSERT_FALSE(vector_reduce(Opcode::V_RSUM, DType::F32, Axis::Axis0, dst.data(), zeros.data(), 2, 1));
  EXPECT_TRUE(same_bits(decode_floats(DType::F32, dst)[0], 0.0f));
}

TEST(VectorReduce, TiesPickTheFirstIndex) {
  // Few distinct values: every line has repeated extremes.
  for (const DType dtype : kAllTypes) {
    for (const Axis axis : {Axis::Axis0, Axis::Axis1}) {
      SCOPED_TRACE(name(dtype));
      Random random(11);
      std::vector<double> tile;
      for (const int64_t v : random.ints(40 * 40, 0, 2)) tile.push_back(static_cast<double>(v));
      check(Opcode::V_ARGMAX, dtype, axis, tile, 40, 40);
      check(Opcode::V_ARGMIN, dtype, axis, tile, 40, 40);
    }
  }
  // -0 and +0 are equal: the first one stays.
  check(Opcode::V_RMAX, DType::F32, Axis::Axis1, {-0.0, 0.0}, 1, 2);
  check(Opcode::V_RMIN, DType::F32, Axis::Axis1, {0.0, -0.0}, 1, 2);
}

TEST(VectorReduce, NaNIsTheExtreme) {
  for (const DType dtype : kFloatTypes) {
    for (const Axis axis : {Axis::Axis0, Axis::Axis1}) {
      SCOPED_TRACE(name(dtype));
      // Line 0 has NaN after the max, line 1 before it, line 2 twice, line 3 none.
      const std::vector<double> lines = {1, 5, kNaN, 2, kNaN, 9, 3, 1, kNaN, 0, kNaN, 7, 4, 8, 2, 6};
      std::vector<double> tile(16);
      for (size_t l = 0; l < 4; ++l)
        for (size_t e = 0; e < 4; ++e) (axis == Axis::Axis1 ? tile[l * 4 + e] : tile[e * 4 + l]) = lines[l * 4 + e];
      for (const Opcode op : kReductions) {
        SCOPED_TRACE(mnemonic_of(op));
        check(op, dtype, axis, tile, 4, 4);
      }
      const Bytes src = encode(dtype, tile);
      Bytes indices(16);
      ASSERT_FALSE(vector_reduce(Opcode::V_ARGMAX, dtype, axis, indices.data(), src.data(), 4, 4));
      EXPECT_EQ(decode_ints(DType::I32, indices), (std::vector<int64_t>{2, 0, 0, 1}));
    }
  }
}

TEST(VectorReduce, IntegerSumWraps) {
  const Bytes src = encode_ints(DType::I8, {100, 100, -128, -128});
  Bytes dst(2);
  ASSERT_FALSE(vector_reduce(Opcode::V_RSUM, DType::I8, Axis::Axis1, dst.data(), src.data(), 2, 2));
  EXPECT_EQ(decode_ints(DType::I8, dst), (std::vector<int64_t>{-56, 0}));
}

TEST(VectorReduce, InPlace) {
  for (const Opcode op : kReductions)
    for (const DType dtype : kAllTypes)
      for (const Axis axis : {Axis::Axis0, Axis::Axis1}) {
        SCOPED_TRACE(std::string(mnemonic_of(op)) + " " + name(dtype));
        const size_t rows = 6, cols = 9;
        const Bytes src = encode(dtype, random_tile(dtype, rows * cols, 99));
        const size_t out_bytes = reduce_output_elements(axis, rows, cols) * size_of(is_arg(op) ? DType::I32 : dtype);
        Bytes expected(out_bytes);
        ASSERT_FALSE(vector_reduce(op, dtype, axis, expected.data(), src.data(), rows, cols));
        Bytes buffer = src;
        buffer.resize(std::max(src.size(), out_bytes));
        ASSERT_FALSE(vector_reduce(op, dtype, axis, buffer.data(), buffer.data(), rows, cols));
        EXPECT_EQ(Bytes(buffer.begin(), buffer.begin() + static_cast<ptrdiff_t>(out_bytes)), expected);
      }
}

TEST(VectorReduce, EmptyExtentWritesNothing) {
  Bytes dst(8, 0xab);
  const Bytes src(8, 1);
  for (const Opcode op : kReductions)
    for (const Axis axis : {Axis::Axis0, Axis::Axis1}) {
      EXPECT_FALSE(vector_reduce(op, DType::F32, axis, dst.data(), src.data(), 0, 2));
      EXPECT_FALSE(vector_reduce(op, DType::I32, axis, dst.data(), src.data(), 2, 0));
    }
  EXPECT_EQ(dst, Bytes(8, 0xab));
}

TEST(VectorReduce, RejectsOtherOpcodes) {
  uint8_t element[4] = {};
  const KernelError error = vector_reduce(Opcode::V_ADD, DType::F32, Axis::Axis0, element, element, 1, 1);
  ASSERT_TRUE(error);
  EXPECT_EQ(*error, "v.add is not a reduction");
}

}  // namespace
}  // namespace npu::sim::functional::test
