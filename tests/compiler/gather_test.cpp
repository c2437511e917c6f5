// embedding(table, indices) compiled for the chip and run through the driver,
// on tiny and base. The kernel copies rows, so every output element must be
// the picked row's bits: tables hold random bit patterns, compared byte for
// byte. Out-of-range indices fault the launch, named by the device error.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "kernel_runner.h"
#include "npusim/driver/errors.h"

namespace npu::compiler {
namespace {

using isa::DType;

TensorDesc strided(DType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides, int64_t offset = 0) {
  TensorDesc t = TensorDesc::contiguous(dtype, std::move(shape));
  t.strides = std::move(strides);
  t.storage_offset = offset;
  return t;
}

std::vector<int64_t> concat(std::vector<int64_t> a, const std::vector<int64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// PyTorch's int64 indices [shape], contiguous, seen as their low i32 words: strides and offset doubled.
TensorDesc long_indices(std::vector<int64_t> shape, int64_t offset_longs = 0) {
  TensorDesc t = TensorDesc::contiguous(DType::I32, std::move(shape));
  for (int64_t& s : t.strides) s *= 2;
  t.storage_offset = 2 * offset_longs;
  return t;
}

class Embedding : public testing::KernelTest {
 protected:
  int64_t scratchpad_bytes() const { return int64_t(compiler_.config().core.scratchpad.size_bytes); }

  // The indices' storage: index(i) for the i-th element of the view (in
  // row-major order), written at its place; int64 views (`as_long`) get the
  // high words too (0, or -1 for negative values), other places hold junk.
  static std::vector<uint8_t> index_storage(const TensorDesc& indices, const std::function<int64_t(int64_t)>& index, bool as_long) {
    std::vector<int32_t> words(size_t(std::max<int64_t>(indices.storage_extent(), 1) + (as_long ? 1 : 0)), 0x5a5a5a5a);
    std::vector<int64_t> at(indices.shape.size(), 0);
    for (int64_t n = 0; n < indices.numel(); ++n) {
      int64_t offset = indices.storage_offset;
      for (size_t d = 0; d < at.size(); ++d) offset += at[d] * indices.strides[d];
      const int64_t value = index(n);
      words[size_t(offset)] = int32_t(value);
      if (as_long) words[size_t(offset) + 1] = value < 0 ? -1 : 0;
      for (size_t d = at.size(); d-- > 0;) {
        if (++at[d] < indices.shape[d]) break;
        at[d] = 0;
      }
    }
    std::vector<uint8_t> bytes(words.size() * 4);
    std::memcpy(bytes.data(), words.data(), bytes.size());
    return bytes;
  }

  // Runs embedding(table, indices) -> out and checks every output element.
  testing::KernelRun check(const TensorDesc& table, const TensorDesc& indices, const TensorDesc& out, const std::function<int64_t(int64_t)>& index,
                           bool as_long = false, uint32_t seed = 1) {
    const OpDesc op{OpKind::EMBEDDING, {table, indices}, out};
    SCOPED_TRACE(op.key());
    std::mt19937 rng(seed);
    std::vector<uint8_t> table_bytes(size_t(std::max<int64_t>(table.storage_extent(), 1)) * isa::dtype_size_bytes(table.dtype));
    for (uint8_t& byte : table_bytes) byte = uint8_t(rng());
    const testing::KernelRun run = run_bytes(op, {std::move(table_bytes), index_storage(indices, index, as_long)});

    const size_t e = isa::dtype_size_bytes(table.dtype);
    // The row: the table's dims after the first, walked in order (contiguous in the test's tables).
    std::vector<int64_t> row_shape(table.shape.begin() + 1, table.shape.end());
    int64_t d = 1;
    for (const int64_t s : row_shape) d *= s;
    const size_t index_rank = indices.shape.size();
    std::vector<int64_t> at(index_rank, 0);
    int mismatches = 0;
    for (int64_t n = 0; n < indices.numel(); ++n) {
      int64_t out_offset = out.storage_offset;
      for (size_t k = 0; k < index_rank; ++k) out_offset += at[k] * out.strides[k];
      const int64_t v = index(n);
      for (int64_t j = 0; j < d; ++j) {
        // Element j of the row, in the table and in the output.
        int64_t rest = j, table_offset = table.storage_offset + v * table.strides[0], out_element = out_offset;
        for (size_t k = row_shape.size(); k-- > 0;) {
          table_offset += (rest % row_shape[k]) * table.strides[k + 1];
          out_element += (rest % row_shape[k]) * out.strides[index_rank + k];
          rest /= row_shape[k];
        }
        if (std::memcmp(&run.inputs[0][size_t(table_offset) * e], &run.output[size_t(out_element) * e], e) != 0 && ++mismatches <= 5)
          ADD_FAILURE() << "index " << n << " (row " << v << "), element " << j << " differs";
      }
      for (size_t k = index_rank; k-- > 0;) {
        if (++at[k] < indices.shape[k]) break;
        at[k] = 0;
      }
    }
    EXPECT_EQ(mismatches, 0) << run.kernel->plan;
    return run;
  }

  // Contiguous table [v, d...] picked by contiguous i32 indices of `shape`, random rows.
  testing::KernelRun check_random(DType dtype, int64_t v, std::vector<int64_t> row, std::vector<int64_t> shape, uint32_t seed = 1) {
    std::mt19937 rng(seed);
    const TensorDesc indices = t(DType::I32, shape);
    std::vector<int64_t> values(size_t(indices.numel()));
    for (int64_t& value : values) value = int64_t(rng() % uint64_t(v));
    return check(t(dtype, concat({v}, row)), indices, t(dtype, concat(shape, row)), [&](int64_t n) { return values[size_t(n)]; }, false, seed);
  }

  // The fault an embedding with these index values gives.
  DeviceError fault(const TensorDesc& table, const std::vector<int64_t>& values) {
    const TensorDesc indices = t(DType::I32, {int64_t(values.size())});
    try {
      check(table, indices, t(table.dtype, concat({int64_t(values.size())}, std::vector<int64_t>(table.shape.begin() + 1, table.shape.end()))),
            [&](int64_t n) { return values[size_t(n)]; });
    } catch (const DeviceError& e) {
      return e;
    }
    ADD_FAILURE() << "no fault";
    return DeviceError(DeviceFault{});
  }

  // The index check's fault: the driver names v.gather on the vector unit (the
  // chip's own record, which npu-sim prints, adds "gather index 5 out of range (0..4)").
  static void expect_index_fault(const DeviceError& e) {
    EXPECT_EQ(e.kind(), "execution error") << e.what();
    EXPECT_EQ(e.engine(), "vector unit") << e.what();
    EXPECT_EQ(e.instruction().rfind("v.gather u8", 0), 0u) << e.what();
  }
};

TEST_P(Embedding, EveryDtypeAndShapesIncludingOnesPrimesAndLarge) {
  for (const DType dtype : {DType::F32, DType::BF16, DType::F16, DType::I32, DType::I8, DType::U8})
    for (const int64_t d : {1, 17, 64})
      for (const auto& shape : std::vector<std::vector<int64_t>>{{1}, {13}, {4, 9}, {2, 3, 5}}) check_random(dtype, 50, {d}, shape);
  check_random(DType::BF16, 1, {768}, {7});  // one row
  check_random(DType::F32, 1000, {300}, {3001});
  check_random(DType::BF16, 50257, {96}, {8, 257});  // GPT-2's vocabulary
  check_random(DType::F32, 97, {}, {41});           // a 1-D table: index_select of elements
  check_random(DType::F16, 40, {4, 6}, {5, 3});     // rows of two dims
  check(t(DType::F32, {10, 8}), t(DType::I32, {}), t(DType::F32, {8}), [](int64_t) { return 7; });  // a zero-dim index
}

TEST_P(Embedding, Int64IndicesAsTheirLowWordsWithStrideTwo) {
  std::mt19937 rng(3);
  std::vector<int64_t> values(55 * 3);
  for (int64_t& v : values) v = int64_t(rng() % 1000);
  const auto value = [&](int64_t n) { return values[size_t(n)]; };
  check(t(DType::BF16, {1000, 48}), long_indices({5, 11}), t(DType::BF16, {5, 11, 48}), value, true);
  check(t(DType::F32, {1000, 3}), long_indices({7}, 4), t(DType::F32, {7, 3}), value, true);  // with a storage offset
  // A transposed int64 view: [11, 5] of a [5, 11] tensor, in longs strides [1, 11].
  check(t(DType::I8, {1000, 33}), strided(DType::I32, {11, 5}, {2, 22}), t(DType::I8, {11, 5, 33}), value, true);
  // Many of them: a tile's indices come an element at a time.
  check(t(DType::F16, {1000, 64}), long_indices({4000}), t(DType::F16, {4000, 64}), [&](int64_t n) { return values[size_t(n) % values.size()]; }, true);
}

TEST_P(Embedding, RepeatedIndices) {
  check(t(DType::F32, {20, 33}), t(DType::I32, {500}), t(DType::F32, {500, 33}), [](int64_t) { return 19; });
  check(t(DType::BF16, {20, 33}), t(DType::I32, {6, 70}), t(DType::BF16, {6, 70, 33}), [](int64_t n) { return n % 3; });
}

TEST_P(Embedding, TablesLargerThanTheScratchpadStayInDram) {
  const int64_t d = 96, v = scratchpad_bytes() / (d * 4) + 37;  // f32 rows: the table is bigger than the scratchpad
  check_random(DType::F32, v, {d}, {2500}, 5);
  // Rows longer than an eighth of the scratchpad are fetched in pieces.
  const int64_t long_row = scratchpad_bytes() / 8 / 4 + 1111;
  const testing::KernelRun run = check_random(DType::F32, 5, {long_row}, {9}, 6);
  EXPECT_NE(run.kernel->plan.find("rows stored one at a time"), std::string::npos) << run.kernel->plan;
}

TEST_P(Embedding, MoreRowsThanTheScratchpadHasBytesAreCheckedToo) {
  const int64_t v = scratchpad_bytes() + 1000;
  const TensorDesc table = t(DType::U8, {v, 3});
  const testing::KernelRun run = check(table, t(DType::I32, {6}), t(DType::U8, {6, 3}), [&](int64_t n) { return (v - 1) - n * 977; });
  EXPECT_NE(run.kernel->plan.find("clamped first"), std::string::npos) << run.kernel->plan;
  expect_index_fault(fault(table, {0, 5, v, 2}));
  expect_index_fault(fault(table, {1, -7}));
}

TEST_P(Embedding, StridedTableRowsAndOutputs) {
  std::mt19937 rng(9);
  std::vector<int64_t> values(200);
  for (int64_t& v : values) v = int64_t(rng() % 30);
  const auto value = [&](int64_t n) { return values[size_t(n) % values.size()]; };
  // Rows of 21 at a pitch of 26, with an offset (a column slice of a wider table).
  check(strided(DType::BF16, {30, 21}, {26, 1}, 3), t(DType::I32, {40}), t(DType::BF16, {40, 21}), value);
  // Output rows at a pitch of 24, then the index dims and the row dims of a [8, 5, D] output permuted.
  check(t(DType::F32, {30, 21}), t(DType::I32, {40}), strided(DType::F32, {40, 21}, {24, 1}, 2), value);
  check(t(DType::I32, {30, 7}), t(DType::I32, {8, 5}), strided(DType::I32, {8, 5, 7}, {7, 56, 1}), value);
  // Strided i32 indices: every third of a buffer, and a transposed view.
  check(t(DType::U8, {30, 9}), strided(DType::I32, {50}, {3}, 1), t(DType::U8, {50, 9}), value);
  check(t(DType::U8, {30, 9}), strided(DType::I32, {6, 7}, {1, 6}), t(DType::U8, {6, 7, 9}), value);
}

TEST_P(Embedding, OutOfRangeIndicesFaultTheLaunchOnTheVectorUnit) {
  const TensorDesc table = t(DType::F32, {5, 8});
  expect_index_fault(fault(table, {0, 1, 2, 5}));
  expect_index_fault(fault(table, {4, -1, 0}));
  expect_index_fault(fault(table, {2147483647}));
  // The device runs on after the faults.
  check_random(DType::F32, 5, {8}, {4});
}

TEST_P(Embedding, EmptyOnesGiveProgramsThatHalt) {
  for (const auto& [v, d, n] : std::vector<std::array<int64_t, 3>>{{5, 8, 0}, {5, 0, 4}, {0, 8, 0}}) {
    const OpDesc op{OpKind::EMBEDDING, {t(DType::F32, {v, d}), t(DType::I32, {n})}, t(DType::F32, {n, d})};
    EXPECT_EQ(compiler_.compile(op)->program.code.at(0).words.size(), 1u);  // halt
  }
}

TEST_P(Embedding, TheOpIsKnownByNameAndSpreadOverTheCores) {
  OpKind kind;
  ASSERT_TRUE(find_op("embedding", &kind));
  EXPECT_EQ(kind, OpKind::EMBEDDING);
  EXPECT_FALSE(is_elementwise(OpKind::EMBEDDING));
  EXPECT_EQ(op_arity(OpKind::EMBEDDING), 2u);
  const auto kernel = compiler_.compile({OpKind::EMBEDDING, {t(DType::BF16, {1000, 64}), t(DType::I32, {512})}, t(DType::BF16, {512, 64})});
  EXPECT_EQ(kernel->cores, device_->info().num_cores);
  const std::string listing = Compiler::listing(*kernel);
  EXPECT_NE(listing.find("dma.gather"), std::string::npos) << listing;
}

TEST_P(Embedding, WhatItCannotDoIsSaidSo) {
  const TensorDesc table = t(DType::F32, {10, 8}), idx = t(DType::I32, {4}), out = t(DType::F32, {4, 8});
  const auto unsupported = [&](const OpDesc& op, const std::string& says) {
    try {
      compiler_.compile(op);
      ADD_FAILURE() << op.key() << " compiled";
    } catch (const UnsupportedOp& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  unsupported({OpKind::EMBEDDING, {table, t(DType::U8, {4})}, out}, "indices must be i32");
  unsupported({OpKind::EMBEDDING, {table, t(DType::F32, {4})}, out}, "indices must be i32");
  unsupported({OpKind::EMBEDDING, {strided(DType::F32, {10, 8}, {1, 10}), idx}, out}, "rows must be contiguous");  // a transposed table
  unsupported({OpKind::EMBEDDING, {table, idx}, strided(DType::F32, {4, 8}, {1, 4})}, "rows must be contiguous");
  TensorDesc four = t(DType::I32, {2, 3, 4, 5});
  four.strides = {1000, 100, 10, 1};  // four index dims that do not merge
  unsupported({OpKind::EMBEDDING, {table, four}, t(DType::F32, {2, 3, 4, 5, 8})}, "4 dimensions that do not merge");
  EXPECT_THROW(compiler_.compile({OpKind::EMBEDDING, {table, idx}, t(DType::F32, {4, 9})}), std::invalid_argument);  // not [4, 8]
  EXPECT_THROW(compiler_.compile({OpKind::EMBEDDING, {table, idx}, t(DType::BF16, {4, 8})}), std::invalid_argument);
  EXPECT_THROW(compiler_.compile({OpKind::EMBEDDING, {table}, out}), std::invalid_argument);
  EXPECT_THROW(compiler_.compile({OpKind::EMBEDDING, {t(DType::F32, {0, 8}), idx}, out}), std::invalid_argument);  // no rows to pick
}

INSTANTIATE_TEST_SUITE_P(Presets, Embedding, ::testing::Values("tiny", "base"), testing::preset_name);

}  // namespace
}  // namespace npu::compiler
