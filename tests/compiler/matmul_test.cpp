// Matmul compiled for the chip and run through the driver, against a
// reference in double. Bound: the device multiplies exactly (bf16 and f32
// products are exact in f32... for f32 inputs the product rounds once) and
// adds in f32, so |acc - exact| <= K * 2^-24 * sum |a*b| (+ 2^-24 |a*b| per
// product for f32 inputs); alpha, the bias and the epilogue act on that in
// f32 (each within 1e-6 relative, the epilogue's slope at most 1.13), and
// the output rounds once (half an ulp of its dtype). f32 on base's tensor
// core (no f32) multiplies bf16 parts of the operands: each product is then
// off by at most 2^-21 (3 parts), 2^-14 (2) or 2^-7 (1) of its magnitude.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "kernel_runner.h"

namespace npu::compiler {
namespace {

using isa::DType;
using testing::load;

double activation(OpKind kind, double x) {
  switch (kind) {
    case OpKind::RELU: return x > 0 ? x : 0;
    case OpKind::GELU: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case OpKind::SILU: return x / (1 + std::exp(-x));
    case OpKind::TANH: return std::tanh(x);
    default: throw std::logic_error("activation not in these tests");
  }
}

TensorDesc contiguous(DType dtype, std::vector<int64_t> shape) { return TensorDesc::contiguous(dtype, std::move(shape)); }
// A [rows x cols] view of a contiguous [cols x rows] tensor: its transpose.
TensorDesc transposed(DType dtype, int64_t rows, int64_t cols) {
  TensorDesc t = contiguous(dtype, {rows, cols});
  t.strides = {1, rows};
  return t;
}

class Matmul : public testing::KernelTest {
 protected:
  // Element (batch b, i, j) of a matrix operand's view (batch dims flattened, broadcast by size).
  static int64_t offset_of(const TensorDesc& t, const std::vector<int64_t>& out_batch, int64_t i, int64_t j) {
    int64_t off = t.storage_offset;
    const size_t r = t.shape.size();
    if (r >= 1) off += (t.shape[r - 1] == 1 ? 0 : j) * t.strides[r - 1];
    if (r >= 2) off += (t.shape[r - 2] == 1 ? 0 : i) * t.strides[r - 2];
    for (size_t d = 0; d + 2 < r; ++d) {
      const size_t od = out_batch.size() - (r - 2) + d;
      off += (t.shape[d] == 1 ? 0 : out_batch[od]) * t.strides[d];
    }
    return off;
  }

  void check(OpDesc op, uint32_t seed = 1) {
    SCOPED_TRACE(op.key());
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> values(-1, 1);
    const testing::KernelRun run = KernelTest::run(op, [&](size_t, size_t) { return values(rng); });
    SCOPED_TRACE(run.kernel->plan);
    const std::vector<std::vector<uint8_t>>& storage = run.inputs;
    const std::vector<uint8_t>& result = run.output;
    const TensorDesc& out = op.output;
    const size_t oe = isa::dtype_size_bytes(out.dtype);
    const TensorDesc &a = op.inputs[0], &b = op.inputs[1];
    const int64_t m = out.shape[out.shape.size() - 2], n = out.shape.back(), k = a.shape.back();
    std::vector<int64_t> batch(out.shape.begin(), out.shape.end() - 2), index(batch.size(), 0);
    int64_t batches = 1;
    for (const int64_t d : batch) batches *= d;
    int mismatches = 0;
    for (int64_t bi = 0; bi < batches; ++bi) {
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double exact = 0, magnitude = 0;
          for (int64_t p = 0; p < k; ++p) {
            const double product = load(a.dtype, &storage[0][size_t(offset_of(a, index, i, p)) * isa::dtype_size_bytes(a.dtype)]) *
                                   load(b.dtype, &storage[1][size_t(offset_of(b, index, p, j)) * isa::dtype_size_bytes(b.dtype)]);
            exact += product;
            magnitude += std::fabs(product);
          }
          const double gamma = (double(k + (a.dtype == DType::F32 ? 1 : 0)) * std::ldexp(1.0, -24) + split_error(op)) * magnitude;
          // Inputs after A and B: [bias [, scale]] [, residual].
          const size_t vectors = op.inputs.size() - 2 - (op.residual ? 1 : 0);
          double scale = 1;
          if (vectors == 2) {
            const TensorDesc& t = op.inputs[3];
            scale = load(t.dtype, &storage[3][size_t(offset_of(t, index, i, j)) * isa::dtype_size_bytes(t.dtype)]);
          }
          double value = op.alpha * exact * scale, bias = 0;
          if (vectors >= 1) {
            const TensorDesc& t = op.inputs[2];
            bias = op.beta * load(t.dtype, &storage[2][size_t(offset_of(t, index, i, j)) * isa::dtype_size_bytes(t.dtype)]);
            value += bias;
          }
          double residual = 0;
          if (op.residual) {
            const TensorDesc& t = op.inputs.back();
            residual = load(t.dtype, &storage.back()[size_t(offset_of(t, index, i, j)) * isa::dtype_size_bytes(t.dtype)]);
            value += residual;
          }
          double bound = std::fabs(op.alpha * scale) * gamma +
                         1e-6 * (std::fabs(op.alpha * exact * scale) + std::fabs(bias) + std::fabs(residual));
          for (const OpKind e : op.epilogue) value = activation(e, value), bound = 1.13 * bound + 1e-6 * std::fabs(value);
          const double ulp = std::ldexp(std::fabs(value) + 1e-30, out.dtype == DType::F32 ? -23 : -7);
          bound += ulp;  // the output rounds once (half an ulp), with room for the f32 steps before it
          int64_t out_offset = out.storage_offset + i * out.strides[out.shape.size() - 2] + j * out.strides.back();
          for (size_t d = 0; d < batch.size(); ++d) out_offset += index[d] * out.strides[d];
          const double got = load(out.dtype, &result[size_t(out_offset) * oe]);
          if (!(std::fabs(got - value) <= bound) && ++mismatches <= 5)
            ADD_FAILURE() << "C[" << bi << "][" << i << "][" << j << "] = " << got << ", want " << value << " +- " << bound;
        }
      for (size_t d = batch.size(); d-- > 0;) {
        if (++index[d] < batch[d]) break;
        index[d] = 0;
      }
    }
    EXPECT_EQ(mismatches, 0);
  }

  OpDesc mm(DType dtype, int64_t m, int64_t n, int64_t k) {
    return OpDesc{OpKind::MATMUL, {contiguous(dtype, {m, k}), contiguous(dtype, {k, n})}, contiguous(dtype, {m, n})};
  }
  double split_error(const OpDesc& op) const { return testing::f32_split_error(op, GetParam()); }
  DType dtype() const { return GetParam() == "tiny" ? DType::F32 : DType::BF16; }  // base's tensor core takes no f32
};

TEST_P(Matmul, ShapesIncludingOnesPrimesAndNonMultiplesOfTheTiles) {
  for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {7, 13, 5}, {33, 17, 65}, {1, 300, 70}, {130, 3, 257}})
    check(mm(dtype(), m, n, k));
  check(mm(DType::BF16, 150, 100, 200));
}

TEST_P(Matmul, LargeEnoughForEveryCoreAndSeveralKSteps) { check(mm(DType::BF16, 256, 384, 1100)); }

TEST_P(Matmul, TransposedAndStridedOperandsAreReadInPlace) {
  const DType dt = dtype();
  // linear: x [M, K] @ W^T with W [N, K] contiguous.
  check(OpDesc{OpKind::MATMUL, {contiguous(dt, {20, 48}), transposed(dt, 48, 36)}, contiguous(dt, {20, 36})});
  // A transposed.
  check(OpDesc{OpKind::MATMUL, {transposed(dt, 24, 40), contiguous(dt, {40, 16})}, contiguous(dt, {24, 16})});
  // A every other column of a wider tensor (element DMA), into rows of a wider output.
  TensorDesc a = contiguous(dt, {12, 20});
  a.strides = {41, 2};
  a.storage_offset = 1;
  TensorDesc c = contiguous(dt, {12, 9});
  c.strides = {16, 1};
  check(OpDesc{OpKind::MATMUL, {a, contiguous(dt, {20, 9})}, c});
}

TEST_P(Matmul, BatchedAndBroadcastOverTheBatch) {
  const DType dt = dtype();
  check(OpDesc{OpKind::MATMUL, {contiguous(dt, {3, 20, 30}), contiguous(dt, {3, 30, 10})}, contiguous(dt, {3, 20, 10})});
  check(OpDesc{OpKind::MATMUL, {contiguous(dt, {2, 3, 8, 16}), contiguous(dt, {16, 24})}, contiguous(dt, {2, 3, 8, 24})});
}

TEST_P(Matmul, BiasScalesAndEpiloguesAreFused) {
  const DType dt = dtype();
  OpDesc linear{OpKind::MATMUL, {contiguous(dt, {33, 64}), transposed(dt, 64, 40), contiguous(dt, {40})}, contiguous(dt, {33, 40})};
  linear.epilogue = {OpKind::RELU};
  check(linear);
  OpDesc addmm{OpKind::MATMUL, {contiguous(dt, {17, 23}), contiguous(dt, {23, 29}), contiguous(DType::F32, {17, 29})}, contiguous(dt, {17, 29})};
  addmm.alpha = 0.5, addmm.beta = 2;
  check(addmm);
  OpDesc column{OpKind::MATMUL, {contiguous(dt, {18, 10}), contiguous(dt, {10, 12}), contiguous(dt, {18, 1})}, contiguous(dt, {18, 12})};
  column.epilogue = {OpKind::GELU, OpKind::TANH};
  check(column);
  OpDesc scalar{OpKind::MATMUL, {contiguous(dt, {5, 6}), contiguous(dt, {6, 7}), contiguous(dt, {})}, contiguous(dt, {5, 7})};
  scalar.epilogue = {OpKind::SILU};
  check(scalar);
}

// A batch norm in eval mode after a convolution's matmul: a scale and a shift per output row.
TEST_P(Matmul, AScaleMultipliesTheProductBeforeTheBias) {
  const DType dt = dtype();
  OpDesc channels{OpKind::MATMUL,
                  {contiguous(dt, {2, 24, 40}), contiguous(dt, {2, 40, 70}), contiguous(DType::F32, {24, 1}), contiguous(DType::F32, {24, 1})},
                  contiguous(dt, {2, 24, 70})};
  channels.epilogue = {OpKind::RELU};
  check(channels);
  OpDesc rows{OpKind::MATMUL, {contiguous(dt, {9, 33}), contiguous(dt, {33, 300}), contiguous(dt, {300}), contiguous(dt, {300})},
              contiguous(dt, {9, 300})};
  rows.alpha = 0.5, rows.beta = 3;
  check(rows);
  OpDesc one{OpKind::MATMUL, {contiguous(dt, {5, 6}), contiguous(dt, {6, 7}), contiguous(dt, {}), contiguous(DType::F32, {})}, contiguous(dt, {5, 7})};
  check(one);
  EXPECT_NE(compiler_.compile(one)->plan.find("scaled"), std::string::npos);
}

// A residual block's skip connection, added after the bias (and the scale) and before the
// activations: varying over the batch, broadcast over it, strided, alone.
TEST_P(Matmul, AResidualIsAddedAfterTheBiasAndBeforeTheEpilogue) {
  const DType dt = dtype();
  OpDesc linear{OpKind::MATMUL, {contiguous(dt, {33, 64}), transposed(dt, 64, 40), contiguous(dt, {40}), contiguous(dt, {33, 40})},
                contiguous(dt, {33, 40})};
  linear.residual = true;
  check(linear);
  EXPECT_NE(compiler_.compile(linear)->plan.find("plus a residual"), std::string::npos) << compiler_.compile(linear)->plan;
  // A convolution's matmul: the weights broadcast over the batch, a batch norm's scale and
  // shift per channel, the block's input added, then ReLU.
  TensorDesc weights = contiguous(dt, {24, 40});
  weights.shape = {2, 24, 40}, weights.strides = {0, 40, 1};
  OpDesc conv{OpKind::MATMUL,
              {weights, contiguous(dt, {2, 40, 70}), contiguous(DType::F32, {24, 1}), contiguous(DType::F32, {24, 1}), contiguous(dt, {2, 24, 70})},
              contiguous(dt, {2, 24, 70})};
  conv.residual = true;
  conv.epilogue = {OpKind::RELU};
  check(conv);
  // Broadcast over the batch, rows at a stride, with an offset; no bias.
  TensorDesc rows = contiguous(DType::F32, {20, 10});
  rows.strides = {13, 1}, rows.storage_offset = 5;
  OpDesc batched{OpKind::MATMUL, {contiguous(dt, {3, 20, 30}), contiguous(dt, {3, 30, 10}), rows}, contiguous(dt, {3, 20, 10})};
  batched.residual = true;
  batched.alpha = 0.5;
  check(batched);
  // Large enough for every core and a resident panel of A.
  OpDesc panel{OpKind::MATMUL, {contiguous(dt, {130, 96}), contiguous(dt, {96, 1100}), contiguous(dt, {1100}), contiguous(dt, {130, 1100})},
               contiguous(dt, {130, 1100})};
  panel.residual = true;
  panel.epilogue = {OpKind::GELU};
  check(panel);
  // A residual needs the flag to be one; without a residual the flag has nothing to name.
  OpDesc flagged = mm(dt, 4, 4, 4);
  flagged.residual = true;
  EXPECT_THROW(compiler_.compile(flagged), std::invalid_argument);
}

// A grouped convolution's matmul, every group in one launch: batch dims [images, groups] that do not
// merge (the weights are shared over the images, not over the groups), with a scale and a bias per
// group and channel, and a residual, each varying over the groups.
TEST_P(Matmul, TwoBatchDimsThatDoNotMergeWithVectorsVaryingOverTheBatch) {
  const DType dt = dtype();
  TensorDesc weights = contiguous(dt, {3, 4, 5});  // [groups, Cout/G, depth]
  weights.shape = {2, 3, 4, 5}, weights.strides = {0, 20, 5, 1};
  OpDesc grouped{OpKind::MATMUL,
                 {weights, contiguous(dt, {2, 3, 5, 37}), contiguous(DType::F32, {3, 4, 1}), contiguous(DType::F32, {3, 4, 1}),
                  contiguous(dt, {2, 3, 4, 37})},
                 contiguous(dt, {2, 3, 4, 37})};
  grouped.residual = true;
  grouped.epilogue = {OpKind::RELU};
  check(grouped);
  // A depthwise convolution's: one output channel per group, large enough for every core.
  TensorDesc depthwise = contiguous(dt, {6, 1, 9});
  depthwise.shape = {3, 6, 1, 9}, depthwise.strides = {0, 9, 9, 1};
  check(OpDesc{OpKind::MATMUL, {depthwise, contiguous(dt, {3, 6, 9, 300}), contiguous(dt, {6, 1, 1})}, contiguous(dt, {3, 6, 1, 300})});
  // Three that do not merge are refused, saying so.
  TensorDesc three = contiguous(dt, {2, 3, 4, 5});
  three.shape = {2, 2, 3, 4, 5}, three.strides = {0, 60, 20, 5, 1};
  TensorDesc b = contiguous(dt, {2, 2, 3, 5, 6});
  b.strides = {90, 0, 30, 6, 1};
  EXPECT_THROW(compiler_.compile(OpDesc{OpKind::MATMUL, {three, b}, contiguous(dt, {2, 2, 3, 4, 6})}), UnsupportedOp);
}

// i8 operands on the tensor core: exact products summed in i32, wrapping as the CPU's int32
// arithmetic does; transposed and batched operands as for floats.
// bf16 operands may keep their f32 sums (a split-K's partial products): small integers, whose products
// and sums f32 holds exactly, give exactly the integer sums, in either schedule.
TEST_P(Matmul, Bf16OperandsMayKeepTheirF32Sums) {
  for (const MatmulSchedule schedule : {MatmulSchedule::OwnTiles, MatmulSchedule::SharedB}) {
    OpDesc op{OpKind::MATMUL, {contiguous(DType::BF16, {130, 700}), contiguous(DType::BF16, {700, 260})}, contiguous(DType::F32, {130, 260})};
    op.schedule = schedule;
    SCOPED_TRACE(op.key());
    const auto value = [](size_t input, size_t at) { return double(int64_t((at * 2654435761u + input) >> 7) % 7 - 3); };
    const testing::KernelRun run = KernelTest::run(op, value);
    int mismatches = 0;
    for (int64_t i = 0; i < 130; ++i)
      for (int64_t j = 0; j < 260; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < 700; ++p) sum += load(DType::BF16, &run.inputs[0][size_t(i * 700 + p) * 2]) * load(DType::BF16, &run.inputs[1][size_t(p * 260 + j) * 2]);
        const double got = load(DType::F32, &run.output[size_t(i * 260 + j) * 4]);
        if (got != sum && ++mismatches <= 5) ADD_FAILURE() << "C[" << i << "][" << j << "] = " << got << ", want " << sum;
      }
    EXPECT_EQ(mismatches, 0);
  }
}

TEST_P(Matmul, Int8OperandsSumExactlyIntoInt32) {
  const auto check_exact = [&](const OpDesc& op, const std::function<double(size_t, size_t)>& value) {
    SCOPED_TRACE(op.key());
    const testing::KernelRun run = KernelTest::run(op, value);
    const TensorDesc &a = op.inputs[0], &b = op.inputs[1], &c = op.output;
    const size_t r = c.shape.size();
    const int64_t batches = r == 3 ? c.shape[0] : 1, m = c.shape[r - 2], n = c.shape[r - 1], k = a.shape.back();
    const auto at = [](const TensorDesc& t, int64_t bi, int64_t i, int64_t j) {
      const size_t rank = t.shape.size();
      return t.storage_offset + (rank == 3 ? bi * t.strides[0] : 0) + i * t.strides[rank - 2] + j * t.strides[rank - 1];
    };
    int mismatches = 0;
    for (int64_t bi = 0; bi < batches; ++bi)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          int64_t sum = 0;
          for (int64_t p = 0; p < k; ++p) sum += int64_t(int8_t(run.inputs[0][size_t(at(a, bi, i, p))])) * int8_t(run.inputs[1][size_t(at(b, bi, p, j))]);
          const int32_t expected = int32_t(uint32_t(uint64_t(sum)));  // modulo 2^32
          const double got = load(DType::I32, &run.output[size_t(at(c, bi, i, j)) * 4]);
          if (got != expected && ++mismatches <= 5) ADD_FAILURE() << "C[" << bi << "][" << i << "][" << j << "] = " << got << ", want " << expected;
        }
    EXPECT_EQ(mismatches, 0);
  };
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> bytes(-128, 127);
  const auto random = [&](size_t, size_t) { return double(bytes(rng)); };
  for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {7, 13, 5}, {33, 17, 65}, {130, 70, 300}})
    check_exact(OpDesc{OpKind::MATMUL, {contiguous(DType::I8, {m, k}), contiguous(DType::I8, {k, n})}, contiguous(DType::I32, {m, n})}, random);
  check_exact(OpDesc{OpKind::MATMUL, {contiguous(DType::I8, {3, 20, 48}), transposed(DType::I8, 48, 36)}, contiguous(DType::I32, {3, 20, 36})},
              random);
  OpDesc shared{OpKind::MATMUL, {contiguous(DType::I8, {100, 300}), contiguous(DType::I8, {300, 200})}, contiguous(DType::I32, {100, 200})};
  shared.schedule = MatmulSchedule::SharedB;  // (base: B shared over the NoC)
  check_exact(shared, random);
  // 140,000 products of -128 * -128 = 2^14 each: 2.29e9, past 2^31, wraps to a negative sum.
  check_exact(OpDesc{OpKind::MATMUL, {contiguous(DType::I8, {2, 140000}), contiguous(DType::I8, {140000, 3})}, contiguous(DType::I32, {2, 3})},
              [](size_t, size_t) { return -128.0; });
  EXPECT_NE(compiler_.compile(OpDesc{OpKind::MATMUL, {contiguous(DType::I8, {4, 4}), contiguous(DType::I8, {4, 4})}, contiguous(DType::I32, {4, 4})})
                ->plan.find("i32 accumulation"), std::string::npos);
  // An epilogue works in f32: not for integers; nor an i8 output.
  OpDesc relu{OpKind::MATMUL, {contiguous(DType::I8, {4, 4}), contiguous(DType::I8, {4, 4})}, contiguous(DType::I32, {4, 4})};
  relu.epilogue = {OpKind::RELU};
  EXPECT_THROW(compiler_.compile(relu), UnsupportedOp);
  EXPECT_THROW(compiler_.compile(OpDesc{OpKind::MATMUL, {contiguous(DType::I8, {4, 4}), contiguous(DType::I8, {4, 4})}, contiguous(DType::I8, {4, 4})}),
               std::invalid_argument);
}

// Rows of tiles that share a resident panel of A, rows split between cores (each core
// rotates its share of a row), partial edge tiles, a batch and a bias.
TEST_P(Matmul, AResidentPanelOfAServesItsRowOfTiles) {
  const DType dt = dtype();
  OpDesc op{OpKind::MATMUL, {contiguous(dt, {3, 40, 96}), contiguous(dt, {96, 1100}), contiguous(DType::F32, {1100})}, contiguous(dt, {3, 40, 1100})};
  op.epilogue = {OpKind::RELU};
  EXPECT_NE(compiler_.compile(op)->plan.find("A panel resident"), std::string::npos) << compiler_.compile(op)->plan;
  check(op);
  const OpDesc tall = mm(DType::BF16, 520, 1100, 40);
  EXPECT_NE(compiler_.compile(tall)->plan.find("A panel resident"), std::string::npos) << compiler_.compile(tall)->plan;
  check(tall);
}

// A the same for every batch element (a 1 x 1 convolution: the weights against each image's channels x
// pixels): a row of tiles runs over the whole batch, so the panel is loaded once for every image.
TEST_P(Matmul, APanelTheSameForEveryBatchElementServesTheWholeBatch) {
  const DType dt = dtype();
  TensorDesc weights = contiguous(dt, {5, 96, 64});
  weights.strides = {0, 64, 1};  // broadcast over the 5 images
  OpDesc op{OpKind::MATMUL, {weights, contiguous(dt, {5, 64, 300})}, contiguous(dt, {5, 96, 300})};
  const std::string plan = compiler_.compile(op)->plan;
  EXPECT_NE(plan.find("A panel resident"), std::string::npos) << plan;
  EXPECT_NE(plan.find("its columns of every batch element"), std::string::npos) << plan;
  check(op);
  // Two batch dims, A the same over both (broadcast from [M, K]).
  weights = contiguous(dt, {2, 3, 40, 48});
  weights.strides = {0, 0, 48, 1};
  check(OpDesc{OpKind::MATMUL, {weights, contiguous(dt, {2, 3, 48, 700})}, contiguous(dt, {2, 3, 40, 700})});
}

// A linear layer's weight W [N, K] read as B = W^T: the rows of a B tile are K-tile-long runs, K elements
// apart. With K * 4 bytes a multiple of base's four channels x 256-byte interleave, K tiles of 64 put
// every request of every core on one DRAM channel at a time (GPT-2's LM head ran at 37% of DRAM's peak);
// the tile choice counts the channels the cores' loads reach, so the K tile covers them all. (On tiny this
// layer is the tensor core's, 16 x 16: 422 k cycles of MACs against about 150 k of DRAM, and its tiles are
// those the 256 KiB scratchpad fits best, whichever channels they reach: the values are checked there.)
TEST_P(Matmul, TheTilesOfALinearLayerReachEveryDramChannel) {
  const int64_t m = 128, k = 768, n = 1100;
  TensorDesc weight_t = contiguous(DType::F32, {k, n});
  weight_t.strides = {1, k};
  const OpDesc linear{OpKind::MATMUL, {contiguous(DType::F32, {m, k}), weight_t}, contiguous(DType::F32, {m, n})};
  const std::string plan = compiler_.compile(linear)->plan;
  const size_t at = plan.find(" (M x N x K)");
  ASSERT_NE(at, std::string::npos) << plan;
  const int64_t tk = std::stoll(plan.substr(plan.rfind(" x ", at) + 3));
  const sim::DramConfig dram = sim::load_chip_config(GetParam()).dram;
  if (GetParam() == "base") {
    EXPECT_GE(tk * 4, int64_t(std::min<uint64_t>(uint64_t(k) * 4, uint64_t(dram.channels) * dram.interleave_bytes))) << plan;
  }
  check(linear);
}

// A tile whose rows are a matrix row apart opens a DRAM row per row: rows of 32 bytes (16 bf16) move
// at a fraction of a channel's bandwidth (base: 16 banks busy 36 cycles per row opened, 14 of a
// channel's 128 bytes a cycle). The tile choice counts that. Without it, the former base's (128 GB/s,
// configs/base_lpddr5x.pbtxt) im2col GEMM of a 3x3 convolution
// of 64 channels at 56 x 56 (3136 x 64 x 576) took B shared over the NoC in 16-column tiles (four
// columns per round for four cores): 69.6 k cycles, where its own 64-column tiles take 42.7 k.
TEST_P(Matmul, NarrowTilesPayForTheDramRowsTheyOpen) {
  for (const OpDesc& op : {mm(DType::BF16, 3136, 64, 576), mm(DType::BF16, 1024, 1024, 1024)}) {
    const std::string plan = compiler_.compile(op)->plan;
    const size_t at = plan.find(" (M x N x K)");
    ASSERT_NE(at, std::string::npos) << plan;
    const size_t tn_at = plan.rfind(" x ", plan.rfind(" x ", at) - 1) + 3;
    EXPECT_GE(std::stoll(plan.substr(tn_at)) * 2, 64) << plan;
  }
}

// With fewer columns of tiles than cores, the cores work on different rows of tiles at the same K
// step. A's rows of 4 KiB (2048 bf16) then put every core's loads of a K tile on the same channels,
// as many of them as the tile's row covers: the K tiles must cover them all (tiles of 256 took two
// of base's four, and on the former base 2048 x 64 x 2048 ran 55% longer). (On large no K tile covers its 16 channels'
// 4 KiB: its largest, 1024, takes half of them.)
// 1024 x 512 x 512 on base: tiles of 512 x 128 (columns of 256 bytes, a row of B and of C 1 KiB apart,
// so each column of tiles on one channel), 8 tiles, half a row per core: with the core id modulo 2 as
// their start, cores 0 and 2 (and 1 and 3) would load and store the same columns' channels at once. Each
// core starts instead at the column on the channels its predecessors use least, which must still visit
// every tile once.
TEST_P(Matmul, CoresStartTheirRowsOnTheChannelsTheOthersUseLeast) {
  OpDesc op = mm(dtype(), 1024, 512, 512);
  op.schedule = MatmulSchedule::OwnTiles;
  const std::string plan = compiler_.compile(op)->plan;
  EXPECT_EQ(plan.find("each core starts its part of a row") != std::string::npos, GetParam() == "base") << plan;
  check(op);
}

TEST(MatmulPlan, CoresOnRowsOfTilesReadAFromEveryChannel) {
  const sim::ChipConfig chip = sim::load_chip_config("base");
  Compiler compiler(chip);
  OpDesc op{OpKind::MATMUL, {contiguous(DType::BF16, {2048, 2048}), contiguous(DType::BF16, {2048, 64})}, contiguous(DType::BF16, {2048, 64})};
  op.schedule = MatmulSchedule::OwnTiles;
  const std::string plan = compiler.compile(op)->plan;
  const size_t at = plan.find(" (M x N x K)");
  ASSERT_NE(at, std::string::npos) << plan;
  const int64_t tk = std::stoll(plan.substr(plan.rfind(" x ", at) + 3));
  EXPECT_GE(tk * 2, int64_t{chip.dram.channels} * chip.dram.interleave_bytes) << plan;
}

// Rows of tiles all of one height: 777 rows in tiles of up to 512 are two of 389, not 512 and 265 (cores
// with the tall tiles took twice as long as the others), in both schedules.
TEST(MatmulPlan, RowsOfTilesAreOfOneHeight) {
  Compiler compiler(sim::load_chip_config("base"));
  OpDesc own = OpDesc{OpKind::MATMUL, {contiguous(DType::BF16, {777, 513}), contiguous(DType::BF16, {513, 3001})}, contiguous(DType::BF16, {777, 3001})};
  own.schedule = MatmulSchedule::OwnTiles;
  std::string plan = compiler.compile(own)->plan;
  EXPECT_NE(plan.find("tiles 389 x "), std::string::npos) << plan;
  OpDesc shared = OpDesc{OpKind::MATMUL, {contiguous(DType::BF16, {1000, 1000}), contiguous(DType::BF16, {1000, 1000})}, contiguous(DType::BF16, {1000, 1000})};
  shared.schedule = MatmulSchedule::SharedB;
  plan = compiler.compile(shared)->plan;
  EXPECT_NE(plan.find("tiles 250 x "), std::string::npos) << plan;
}

// Where two A panels fit, a member's next row loads its panel while this row's products run (with one,
// a row of a single K step waited for its whole panel: conv_transpose's GEMM, 8 x [784 x 256] @ [256 x
// 512], went from 49.5 k to 42.0 k cycles on base). Rows alternate between the panels, over a single K
// step and over several. (On tiny, one core and no group: the other schedule, the same values.)
TEST_P(Matmul, TwoPanelsOfALetTheNextRowLoadDuringThisOne) {
  for (OpDesc op : {mm(dtype(), 2000, 600, 100), mm(dtype(), 1500, 300, 600)}) {
    op.schedule = MatmulSchedule::SharedB;
    const std::string plan = compiler_.compile(op)->plan;
    EXPECT_EQ(plan.find("A panel resident (two") != std::string::npos, GetParam() == "base") << plan;
    check(op);
  }
}

TEST_P(Matmul, TheTilesFollowTheChip) {
  const auto kernel = compiler_.compile(mm(DType::BF16, 512, 512, 512));
  EXPECT_EQ(kernel->cores, device_->info().num_cores);
  EXPECT_NE(Compiler::listing(*kernel).find("tc.mm bf16"), std::string::npos);
  std::printf("%s", kernel->plan.c_str());
}

// The schedule that shares B's tiles over the NoC (four cores of base in one group): rows of
// tiles that do not fill the group's last round (members with no row still send their tiles),
// columns past N in the last round (empty tiles), narrow tiles whose round spreads over the DRAM channels, a batch over one B, B transposed (a linear
// layer's weight), A strided, alpha and an epilogue, one row, a bias (int8: Int8OperandsSumExactlyIntoInt32); and a size where each
// member loads the columns its own DRAM controller serves. On tiny (one core) there is no group:
// the other schedule, the same values.
TEST_P(Matmul, BSharedOverTheNoCByTheCoresOfAGroup) {
  const bool base = GetParam() == "base";
  const DType dt = dtype();
  const auto shared = [&](OpDesc op) {
    op.schedule = MatmulSchedule::SharedB;
    const bool is_shared = compiler_.compile(op)->plan.find("B shared over the NoC") != std::string::npos;
    EXPECT_EQ(is_shared, base) << compiler_.compile(op)->plan;
    return op;
  };
  check(shared(mm(dt, 300, 130, 200)));
  check(shared(OpDesc{OpKind::MATMUL, {contiguous(dt, {3, 70, 96}), contiguous(dt, {96, 260})}, contiguous(dt, {3, 70, 260})}), 2);
  OpDesc linear{OpKind::MATMUL, {transposed(dt, 90, 150), transposed(dt, 150, 200)}, contiguous(dt, {90, 200})};
  linear.alpha = 0.5, linear.epilogue = {OpKind::GELU};
  check(shared(linear), 3);
  TensorDesc strided_a = contiguous(dt, {33, 64});
  strided_a.strides = {128, 2};  // every other column of a [33, 128] tensor
  check(shared(OpDesc{OpKind::MATMUL, {strided_a, contiguous(dt, {64, 700})}, contiguous(dt, {33, 700})}), 4);
  check(shared(mm(dt, 1, 300, 64)), 5);
  // A linear layer: B transposed, a bias row (added on the tensor core as ones @ bias), an epilogue;
  // and a bias with K and N not multiples of the tiles.
  OpDesc with_bias{OpKind::MATMUL, {contiguous(dt, {90, 150}), transposed(dt, 150, 200), contiguous(dt, {200})}, contiguous(dt, {90, 200})};
  with_bias.epilogue = {OpKind::GELU};
  check(shared(with_bias), 8);
  check(shared(OpDesc{OpKind::MATMUL, {contiguous(dt, {300, 600}), contiguous(dt, {600, 130}), contiguous(dt, {1, 130})}, contiguous(dt, {300, 130})}), 9);
  check(shared(mm(dt, 512, 512, 512)), 6);
  // The last column of tiles partial, the last row of tiles partial and K a single short step.
  // (Rounds whose tiles are half a DRAM interleave block wide: MatmulOnLpddr below.)
  for (const OpDesc& partial : {shared(mm(dt, 1024, 600, 256)), shared(mm(dt, 2000, 600, 100))}) check(partial, 10);
  // A streamed a tile per K step (a ring of three) instead of resident as a panel: K partial in its
  // last step, members without a row, B transposed with a bias row, a single K step.
  const auto streamed = [&](OpDesc op) {
    op.schedule = MatmulSchedule::SharedBStreamedA;
    const std::string plan = compiler_.compile(op)->plan;
    EXPECT_EQ(plan.find("A streamed") != std::string::npos, base) << plan;
    return op;
  };
  check(streamed(mm(dt, 300, 260, 700)), 12);
  OpDesc streamed_bias{OpKind::MATMUL, {contiguous(dt, {90, 600}), transposed(dt, 600, 200), contiguous(dt, {200})}, contiguous(dt, {90, 200})};
  streamed_bias.epilogue = {OpKind::GELU};
  check(streamed(streamed_bias), 13);
  check(streamed(mm(dt, 130, 300, 100)), 14);
  if (base) {
    // The compiler's own choice: shared where its estimate is at least 10% below, so not for a matmul of
    // few rows (128 x 768 x 768: estimated at 2.3 times its own tiles' cycles shared, measured 1.7 times).
    const auto big = compiler_.compile(mm(DType::BF16, 1024, 1024, 1024));
    EXPECT_NE(big->plan.find("B shared over the NoC"), std::string::npos);
    EXPECT_TRUE(big->cores_exchange_data);
    EXPECT_NE(Compiler::listing(*big).find("exactly cores 0..3"), std::string::npos);
    EXPECT_NE(Compiler::listing(*big).find("# code for cores 3\n"), std::string::npos);  // one section per member
    EXPECT_EQ(compiler_.compile(mm(DType::BF16, 128, 768, 768))->plan.find("B shared over the NoC"), std::string::npos);
    OpDesc own = mm(DType::BF16, 1024, 1024, 1024);
    own.schedule = MatmulSchedule::OwnTiles;
    EXPECT_EQ(compiler_.compile(own)->plan.find("B shared over the NoC"), std::string::npos);
  }
}

TEST_P(Matmul, AnEmptyOutputGivesAProgramThatHalts) {
  for (const auto& [m, n] : std::vector<std::pair<int64_t, int64_t>>{{0, 5}, {4, 0}, {0, 0}}) {
    const auto kernel = compiler_.compile(mm(DType::BF16, m, n, 8));
    EXPECT_EQ(kernel->program.code.at(0).words.size(), 1u);
  }
}

// On base, f32 runs as bf16 parts: each precision within its own bound, and
// the bounds are tight enough that fewer products than the precision asks
// for would fail (one bf16 product is off by about 2^-8).
TEST_P(Matmul, F32AtEachMatmulPrecision) {
  for (const F32MatmulPrecision precision : {F32MatmulPrecision::Highest, F32MatmulPrecision::High, F32MatmulPrecision::Medium}) {
    OpDesc plain = mm(DType::F32, 37, 61, 129);
    plain.f32_precision = precision;
    check(plain);
    OpDesc addmm{OpKind::MATMUL, {transposed(DType::F32, 19, 300), contiguous(DType::F32, {300, 23}), contiguous(DType::F32, {23})},
                 contiguous(DType::F32, {19, 23})};
    addmm.f32_precision = precision, addmm.epilogue = {OpKind::GELU};
    check(addmm, 7);
  }
  if (GetParam() == "base") {
    OpDesc highest = mm(DType::F32, 64, 64, 64), medium = highest;
    medium.f32_precision = F32MatmulPrecision::Medium;
    EXPECT_NE(compiler_.compile(highest)->plan.find("3 bf16 parts (6 tensor-core products"), std::string::npos) << compiler_.compile(highest)->plan;
    EXPECT_NE(compiler_.compile(medium)->plan.find("1 bf16 parts (1 tensor-core products"), std::string::npos);
  }
}

TEST_P(Matmul, WhatItCannotDoIsSaidSo) {
  EXPECT_THROW(compiler_.compile(mm(DType::I32, 4, 4, 4)), UnsupportedOp);  // i32 products: the tensor core takes i8
  EXPECT_THROW(compiler_.compile(OpDesc{OpKind::MATMUL, {contiguous(DType::BF16, {4, 5}), contiguous(DType::BF16, {6, 4})},
                                        contiguous(DType::BF16, {4, 4})}),
               std::invalid_argument);
  OpDesc bad = mm(DType::BF16, 4, 4, 4);
  bad.epilogue = {OpKind::ADD};
  EXPECT_THROW(compiler_.compile(bad), std::invalid_argument);
  EXPECT_THROW(compiler_.compile(mm(DType::BF16, 4, 4, 0)), UnsupportedOp);  // K = 0: the caller fills with zeros
}

INSTANTIATE_TEST_SUITE_P(Presets, Matmul, ::testing::Values("tiny", "base"), testing::preset_name);

// A streamed in a ring of three tiles, with one output slot where a scratchpad of 768 KiB has no room
// for two next to the three A tiles and three B slots (a compiler for that chip; the kernel runs on
// base): K partial in its last step, the last column of tiles partial, a member without a row (the second).
class MatmulInLessScratchpad : public Matmul {
 protected:
  MatmulInLessScratchpad() : small_([] {
    sim::ChipConfig config = sim::load_chip_config(GetParam());
    config.core.scratchpad.size_bytes = 768 * 1024;
    return config;
  }()) {}
  Compiler& compiler() override { return small_; }
  Compiler small_;
};

TEST_P(MatmulInLessScratchpad, ARingOfThreeTilesAndOneOutputSlot) {
  for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{{1000, 500, 900}, {700, 600, 1100}}) {
    OpDesc op = mm(DType::BF16, m, n, k);
    op.schedule = MatmulSchedule::SharedBStreamedA;
    const std::string plan = compiler().compile(op)->plan;
    EXPECT_NE(plan.find("A streamed (a tile per K step of each round); a ring of 3 A tiles; one output slot"), std::string::npos) << plan;
    check(op, 31);
  }
}

INSTANTIATE_TEST_SUITE_P(Base, MatmulInLessScratchpad, ::testing::Values("base"), testing::preset_name);

// On large (16 cores on a 4 x 4 mesh) B is shared by four groups of four, each over its own rows (in
// the first shape every group has members without a row): every output tile comes once, with its
// values. The groups are the mesh's 2 x 2 blocks, whose busiest link carries 2 of the sends against 4
// in a row of four: member m runs on the cores at (x, y) with (x % 2) + 2 (y % 2) = m.
class MatmulInGroups : public Matmul {};

TEST_P(MatmulInGroups, FourGroupsShareBEachOverItsOwnRows) {
  for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{{1100, 700, 300}, {520, 1000, 128}}) {
    OpDesc op = mm(DType::BF16, m, n, k);
    op.schedule = MatmulSchedule::SharedB;
    const auto kernel = compiler_.compile(op);
    EXPECT_NE(kernel->plan.find("B shared over the NoC by groups of 4 cores (2 x 2 blocks of the mesh)"), std::string::npos) << kernel->plan;
    EXPECT_EQ(kernel->cores, 16u);
    ASSERT_EQ(kernel->program.code.size(), 4u);
    // Cores 0, 2, 8, 10; 1, 3, 9, 11; 4, 6, 12, 14; 5, 7, 13, 15.
    EXPECT_EQ(kernel->program.code[0].core_mask, 0x0505u);
    EXPECT_EQ(kernel->program.code[1].core_mask, 0x0a0au);
    EXPECT_EQ(kernel->program.code[2].core_mask, 0x5050u);
    EXPECT_EQ(kernel->program.code[3].core_mask, 0xa0a0u);
    check(op, 11);
  }
}

// Both operands shared (a 2-D schedule): the four groups split the columns, and the four cores of
// each member index (one per group) share A, each loading a quarter of a step's A tile. Shapes: rows
// that do not fill the last round (members without a row) and a last row tile shorter than a
// quarter's start (parts with no rows), columns that leave some groups a round of empty tiles, K a
// single short step, a bias row with B transposed and an epilogue; one program per core.
TEST_P(MatmulInGroups, BothOperandsSharedInTwoDimensions) {
  const auto both = [&](OpDesc op) {
    op.schedule = MatmulSchedule::SharedAB;
    const auto kernel = compiler_.compile(op);
    EXPECT_NE(kernel->plan.find("A shared over the NoC too, by the 4 cores of each member index"), std::string::npos) << kernel->plan;
    EXPECT_EQ(kernel->program.code.size(), 16u);
    for (unsigned core = 0; core < 16; ++core) EXPECT_EQ(kernel->program.code[core].core_mask, uint64_t{1} << core);
    return op;
  };
  check(both(mm(DType::BF16, 1100, 700, 300)), 21);
  check(both(mm(DType::BF16, 300, 1000, 128)), 22);
  check(both(mm(DType::BF16, 70, 2100, 600)), 23);
  OpDesc with_bias{OpKind::MATMUL, {contiguous(DType::BF16, {90, 600}), transposed(DType::BF16, 600, 520), contiguous(DType::BF16, {520})},
                   contiguous(DType::BF16, {90, 520})};
  with_bias.epilogue = {OpKind::GELU};
  check(both(with_bias), 24);
  check(both(OpDesc{OpKind::MATMUL, {contiguous(DType::BF16, {3, 130, 96}), contiguous(DType::BF16, {96, 260})}, contiguous(DType::BF16, {3, 130, 260})}), 25);
}

INSTANTIATE_TEST_SUITE_P(Large, MatmulInGroups, ::testing::Values("large"), testing::preset_name);

// base with the LPDDR5X DRAM it had until 2026-12 (configs/base_lpddr5x.pbtxt, 128 GB/s): there DRAM
// bounds a GEMM, and B shared over the NoC takes tiles of half a DRAM interleave block (64 bf16
// columns): a round's columns lie a block apart, the round after takes the columns between them; the
// last column of tiles is partial, the last block of columns mostly empty tiles (the first), the last
// row of tiles partial and K a single short step (the second). (On base and large the compiler's
// estimate takes 128 columns or more for these.)
class MatmulOnLpddr : public Matmul {};

TEST_P(MatmulOnLpddr, BSharedInTilesHalfAnInterleaveBlockWide) {
  for (OpDesc spread : {mm(DType::BF16, 1024, 600, 256), mm(DType::BF16, 2000, 600, 100)}) {
    spread.schedule = MatmulSchedule::SharedB;
    const std::string plan = compiler_.compile(spread)->plan;
    EXPECT_NE(plan.find("B shared over the NoC"), std::string::npos) << plan;
    EXPECT_NE(plan.find("apart (one per DRAM interleave block)"), std::string::npos) << plan;
    check(spread, 10);
  }
}

INSTANTIATE_TEST_SUITE_P(BaseWithLpddr, MatmulOnLpddr, ::testing::Values(NPUSIM_SOURCE_DIR "/configs/base_lpddr5x.pbtxt"),
                         [](const ::testing::TestParamInfo<std::string>&) { return std::string("base_lpddr5x"); });

}  // namespace
}  // namespace npu::compiler
