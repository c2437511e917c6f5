// where(cond, a, b) compiled for the chip and run through the driver, on tiny
// and base. The kernel only moves elements, so every output element must be
// the selected input's bits: a and b hold random bit patterns (NaNs with
// payloads, -0, infinities, subnormals), compared byte for byte.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "kernel_runner.h"

namespace npu::compiler {
namespace {

using isa::DType;

TensorDesc strided(DType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides, int64_t offset = 0) {
  TensorDesc t = TensorDesc::contiguous(dtype, std::move(shape));
  t.strides = std::move(strides);
  t.storage_offset = offset;
  return t;
}

// Storage offset of output index `index` in a view broadcast to it (size-1 dims and missing leading dims read element 0).
int64_t offset_of(const TensorDesc& t, const std::vector<int64_t>& index) {
  int64_t offset = t.storage_offset;
  for (size_t i = 0; i < t.shape.size(); ++i) {
    const size_t d = index.size() - t.shape.size() + i;
    offset += (t.shape[i] == 1 ? 0 : index[d]) * t.strides[i];
  }
  return offset;
}

class Where : public testing::KernelTest {
 protected:
  // Runs where(cond, a, b) -> out with random conditions and random bits, and
  // checks every output element. `fill` may set chosen inputs' storage instead.
  testing::KernelRun check(TensorDesc cond, TensorDesc a, TensorDesc b, TensorDesc out, uint32_t seed = 1,
                           const std::function<void(std::vector<std::vector<uint8_t>>&)>& fill = nullptr) {
    const OpDesc op{OpKind::WHERE, {cond, a, b}, out};
    SCOPED_TRACE(op.key());
    std::mt19937 rng(seed);
    std::vector<std::vector<uint8_t>> storage;
    for (const TensorDesc& t : op.inputs) {
      std::vector<uint8_t> bytes(size_t(std::max<int64_t>(t.storage_extent(), 1)) * isa::dtype_size_bytes(t.dtype));
      for (uint8_t& byte : bytes) byte = &t == &op.inputs[0] ? uint8_t(rng() % 2) : uint8_t(rng());
      storage.push_back(std::move(bytes));
    }
    if (fill) fill(storage);
    const testing::KernelRun run = run_bytes(op, storage);

    const size_t e = isa::dtype_size_bytes(out.dtype), rank = out.shape.size();
    std::vector<int64_t> index(rank, 0);
    int mismatches = 0;
    for (int64_t n = 0; n < out.numel(); ++n) {
      const bool take_a = run.inputs[0][size_t(offset_of(op.inputs[0], index))] != 0;
      const size_t from = take_a ? 1 : 2;
      const uint8_t* want = &run.inputs[from][size_t(offset_of(op.inputs[from], index)) * e];
      const uint8_t* got = &run.output[size_t(offset_of(out, index)) * e];
      if (std::memcmp(want, got, e) != 0 && ++mismatches <= 5) ADD_FAILURE() << "element " << n << " differs from " << (take_a ? "a" : "b");
      for (size_t d = rank; d-- > 0;) {
        if (++index[d] < out.shape[d]) break;
        index[d] = 0;
      }
    }
    EXPECT_EQ(mismatches, 0) << run.kernel->plan;
    return run;
  }

  void check_same_shape(DType dtype, const std::vector<int64_t>& shape) {
    check(t(DType::U8, shape), t(dtype, shape), t(dtype, shape), t(dtype, shape));
  }
};

TEST_P(Where, EveryDtypeAndShapesIncludingOnesPrimesAndLarge) {
  for (const DType dtype : {DType::F32, DType::BF16, DType::F16, DType::I32, DType::I8, DType::U8})
    for (const auto& shape : std::vector<std::vector<int64_t>>{{1}, {7}, {37, 29}, {3, 1, 5}, {2, 3, 4, 5}})
      check_same_shape(dtype, shape);
  check_same_shape(DType::F32, {131, 257});
  check_same_shape(DType::BF16, {300, 1100});
  check_same_shape(DType::F32, {100003});  // one long run of a prime length
  check_same_shape(DType::U8, {8192 * 5});  // one long run, folded into rows
}

TEST_P(Where, ScalarOperandsAreBroadcastWithoutACopy) {
  // torch.where(mask, scores, -inf): the scalar is loaded once and made a full tile once.
  const auto minus_inf = [](std::vector<std::vector<uint8_t>>& storage) {
    const float v = -INFINITY;
    std::memcpy(storage[2].data(), &v, 4);
  };
  const testing::KernelRun masked = check(t(DType::U8, {37, 53}), t(DType::F32, {37, 53}), t(DType::F32, {}), t(DType::F32, {37, 53}), 2, minus_inf);
  EXPECT_NE(masked.kernel->plan.find("b: f32[] strides [] offset 0: strides 0, 0, 0; one element (made full once)"), std::string::npos) << masked.kernel->plan;
  // where(cond, 0, x) with a zero-dim a, and a [1, 1] one.
  check(t(DType::U8, {45, 67}), t(DType::BF16, {}), t(DType::BF16, {45, 67}), t(DType::BF16, {45, 67}));
  check(t(DType::U8, {45, 67}), t(DType::I32, {1, 1}), t(DType::I32, {45, 67}), t(DType::I32, {45, 67}));
  // Both scalars, and everything a scalar but the condition.
  check(t(DType::U8, {300, 1100}), t(DType::F16, {}), t(DType::F16, {1}), t(DType::F16, {300, 1100}));
  check(t(DType::U8, {1}), t(DType::I8, {}), t(DType::I8, {}), t(DType::I8, {1}));
  // A scalar per plane: a [B, 1, 1] into [B, M, N] is an element per tile.
  check(t(DType::U8, {3, 17, 19}), t(DType::F32, {3, 1, 1}), t(DType::F32, {3, 17, 19}), t(DType::F32, {3, 17, 19}));
}

TEST_P(Where, RowColumnAndConditionBroadcasts) {
  check(t(DType::U8, {29, 31}), t(DType::F32, {31}), t(DType::F32, {29, 31}), t(DType::F32, {29, 31}));        // a row
  check(t(DType::U8, {29, 31}), t(DType::F32, {29, 31}), t(DType::F32, {29, 1}), t(DType::F32, {29, 31}));     // b a column
  check(t(DType::U8, {29, 1}), t(DType::BF16, {29, 31}), t(DType::BF16, {29, 31}), t(DType::BF16, {29, 31}));  // cond a column
  check(t(DType::U8, {31}), t(DType::U8, {29, 31}), t(DType::U8, {29, 31}), t(DType::U8, {29, 31}));           // cond a row
  check(t(DType::U8, {29, 1}), t(DType::I32, {1, 31}), t(DType::I32, {}), t(DType::I32, {29, 31}));             // all three
  // A causal mask [L, S] over scores [B, H, L, S], and a column per batch element.
  check(t(DType::U8, {40, 40}), t(DType::F32, {2, 3, 40, 40}), t(DType::F32, {}), t(DType::F32, {2, 3, 40, 40}));
  check(t(DType::U8, {3, 1, 70}), t(DType::F16, {3, 50, 1}), t(DType::F16, {3, 50, 70}), t(DType::F16, {3, 50, 70}));
  // Wide rows and tall columns: more than one tile of columns, rows over the cores.
  check(t(DType::U8, {1, 5000}), t(DType::F32, {700, 1}), t(DType::F32, {700, 5000}), t(DType::F32, {700, 5000}));
}

TEST_P(Where, StridedViewsAreReadAndWrittenInPlace) {
  // a transposed, b sliced with an offset, cond every other byte, the output rows in rows of 40.
  const TensorDesc cond = strided(DType::U8, {29, 37}, {74, 2}, 1);
  const TensorDesc a = strided(DType::F32, {29, 37}, {1, 29});
  const TensorDesc b = strided(DType::F32, {29, 37}, {37, 1}, 11);
  const TensorDesc out = strided(DType::F32, {29, 37}, {40, 1}, 3);
  check(cond, a, b, out);
  // A strided row and column broadcast, and a column-strided output.
  check(t(DType::U8, {23, 19}), strided(DType::BF16, {1, 19}, {0, 3}, 2), strided(DType::BF16, {23, 1}, {5, 0}, 1),
        strided(DType::BF16, {23, 19}, {1, 23}));
}

TEST_P(Where, FourAndFiveDimsThatDoNotMerge) {
  check(t(DType::U8, {2, 3, 4, 5}), strided(DType::F32, {2, 3, 4, 5}, {1000, 100, 10, 1}), strided(DType::F32, {2, 3, 4, 5}, {1, 2, 6, 24}),
        t(DType::F32, {2, 3, 4, 5}));
  check(strided(DType::U8, {2, 2, 3, 4, 5}, {0, 60, 20, 5, 1}), t(DType::BF16, {2, 2, 3, 4, 5}), t(DType::BF16, {1, 2, 1, 1, 5}),
        strided(DType::BF16, {2, 2, 3, 4, 5}, {2, 1, 200, 50, 10}));
}

TEST_P(Where, EmptyTensorsGiveProgramsThatHalt) {
  for (const auto& shape : std::vector<std::vector<int64_t>>{{0}, {3, 0}, {0, 5}}) {
    const auto kernel = compiler_.compile({OpKind::WHERE, {t(DType::U8, shape), t(DType::F32, shape), t(DType::F32, {})}, t(DType::F32, shape)});
    EXPECT_EQ(kernel->program.code.at(0).words.size(), 1u);  // halt
    check(t(DType::U8, shape), t(DType::F32, shape), t(DType::F32, shape), t(DType::F32, shape));
  }
}

TEST_P(Where, TheOpIsKnownByNameAndSpreadOverTheCores) {
  OpKind kind;
  ASSERT_TRUE(find_op("where", &kind));
  EXPECT_EQ(kind, OpKind::WHERE);
  EXPECT_FALSE(is_elementwise(OpKind::WHERE));
  EXPECT_FALSE(is_row_op(OpKind::WHERE));
  EXPECT_EQ(op_arity(OpKind::WHERE), 3u);
  const auto kernel = compiler_.compile({OpKind::WHERE, {t(DType::U8, {256, 256}), t(DType::F32, {256, 256}), t(DType::F32, {})}, t(DType::F32, {256, 256})});
  EXPECT_EQ(kernel->cores, device_->info().num_cores);
  const std::string listing = Compiler::listing(*kernel);
  EXPECT_NE(listing.find("v.sel f32"), std::string::npos) << listing;
}

TEST_P(Where, WhatItCannotDoIsSaidSo) {
  const TensorDesc f = t(DType::F32, {4, 5});
  EXPECT_THROW(compiler_.compile({OpKind::WHERE, {t(DType::F32, {4, 5}), f, f}, f}), std::invalid_argument);  // the condition is not bool
  EXPECT_THROW(compiler_.compile({OpKind::WHERE, {t(DType::U8, {4, 5}), f, t(DType::BF16, {4, 5})}, f}), std::invalid_argument);
  EXPECT_THROW(compiler_.compile({OpKind::WHERE, {t(DType::U8, {4, 5}), f}, f}), std::invalid_argument);
  EXPECT_THROW(compiler_.compile({OpKind::WHERE, {t(DType::U8, {4, 6}), f, f}, f}), std::invalid_argument);  // does not broadcast
  TensorDesc seven = t(DType::F32, {2, 2, 2, 2, 2, 2, 2});
  seven.strides = {1000, 300, 100, 30, 10, 3, 1};  // seven dimensions that do not merge
  try {
    compiler_.compile({OpKind::WHERE, {t(DType::U8, {2, 2, 2, 2, 2, 2, 2}), seven, seven}, t(DType::F32, {2, 2, 2, 2, 2, 2, 2})});
    ADD_FAILURE() << "seven dims that do not merge compiled";
  } catch (const UnsupportedOp& e) {
    EXPECT_NE(std::string(e.what()).find("where: 7 dimensions that do not merge (at most 6)"), std::string::npos) << e.what();
  }
  const TensorDesc backwards = strided(DType::F32, {4, 5}, {5, -1}, 4);
  EXPECT_THROW(compiler_.compile({OpKind::WHERE, {t(DType::U8, {4, 5}), backwards, f}, f}), UnsupportedOp);
}

INSTANTIATE_TEST_SUITE_P(Presets, Where, ::testing::Values("tiny", "base"), testing::preset_name);

}  // namespace
}  // namespace npu::compiler
