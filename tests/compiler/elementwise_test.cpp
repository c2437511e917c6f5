// Elementwise ops compiled for the chip and run through the driver, against
// a reference computed here, on tiny and base. Tolerances: arithmetic,
// min/max and comparisons are exact (the vector unit computes each element
// in f32, or in the integer type, and rounds once, as the reference does);
// transcendentals within torch.testing.assert_close's defaults for the dtype
// (f32: rtol 1.3e-6, atol 1e-5; bf16: rtol 1.6e-2, atol 1e-5), since the
// model and the reference evaluate the same function by different formulas
// (GELU near its cancellation for negative inputs shows it).
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <thread>
#include <tuple>
#include <vector>

#include "kernel_runner.h"

namespace npu::compiler {
namespace {

using isa::DType;
using testing::load;
using testing::store;

// The reference, elementwise, in float (what the hardware rounds to) or integers.
double reference(OpKind kind, DType dtype, double a, double b) {
  const bool fl = isa::dtype_is_float(dtype);
  const float x = float(a), y = float(b);
  switch (kind) {
    case OpKind::NEG: return -a;
    case OpKind::ABS: return std::fabs(a);
    case OpKind::EXP: return std::exp(x);
    case OpKind::LOG: return std::log(x);
    case OpKind::SQRT: return std::sqrt(x);
    case OpKind::RSQRT: return 1.0f / std::sqrt(x);
    case OpKind::RECIPROCAL: return 1.0f / x;
    case OpKind::TANH: return std::tanh(x);
    case OpKind::SIGMOID: return 1.0f / (1.0f + std::exp(-x));
    case OpKind::RELU: return a > 0 ? a : 0;
    case OpKind::GELU: return x * 0.5f * (1.0f + std::erf(x / std::sqrt(2.0f)));
    case OpKind::GELU_TANH: return 0.5f * x * (1.0f + std::tanh(std::sqrt(2.0f / 3.14159265358979f) * (x + 0.044715f * x * x * x)));
    case OpKind::SILU: return x / (1.0f + std::exp(-x));
    case OpKind::SIN: return std::sin(x);
    case OpKind::COS: return std::cos(x);
    case OpKind::COPY: return a;
    case OpKind::CAST: return a;  // store() rounds to the output's dtype
    case OpKind::ADD: return fl ? double(x + y) : a + b;
    case OpKind::SUB: return fl ? double(x - y) : a - b;
    case OpKind::MUL: return fl ? double(x * y) : a * b;
    case OpKind::DIV: return x / y;
    case OpKind::MAXIMUM: return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
    case OpKind::MINIMUM: return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
    case OpKind::POW: return std::pow(x, y);
    case OpKind::EQ: return a == b;
    case OpKind::NE: return a != b;
    case OpKind::LT: return a < b;
    case OpKind::LE: return a <= b;
    case OpKind::GT: return a > b;
    case OpKind::GE: return a >= b;
    // Bitwise ops and shifts of i32 (the values tested are within it); a count outside [0, 32)
    // shifts every bit out, as torch's CPU shifts do.
    case OpKind::BITWISE_AND: return double(int64_t(a) & int64_t(b));
    case OpKind::BITWISE_OR: return double(int64_t(a) | int64_t(b));
    case OpKind::BITWISE_XOR: return double(int64_t(a) ^ int64_t(b));
    case OpKind::SHIFT_LEFT: return b < 0 || b >= 32 ? 0.0 : double(int32_t(uint32_t(int32_t(a)) << int(b)));
    case OpKind::SHIFT_RIGHT: return b < 0 || b >= 32 ? (a < 0 ? -1.0 : 0.0) : double(int32_t(a) >> int(b));
    default: break;
  }
  return 0;
}

bool exact_op(OpKind kind) {
  switch (kind) {
    case OpKind::NEG: case OpKind::ABS: case OpKind::RELU: case OpKind::COPY: case OpKind::CAST: case OpKind::ADD: case OpKind::SUB: case OpKind::MUL:
    case OpKind::DIV: case OpKind::MAXIMUM: case OpKind::MINIMUM: case OpKind::EQ: case OpKind::NE: case OpKind::LT: case OpKind::LE:
    case OpKind::GT: case OpKind::GE: case OpKind::BITWISE_AND: case OpKind::BITWISE_OR: case OpKind::BITWISE_XOR: case OpKind::SHIFT_LEFT:
    case OpKind::SHIFT_RIGHT:
      return true;
    default:
      return false;
  }
}

class Elementwise : public testing::KernelTest {
 protected:
  // Runs `op` on the chip with random inputs and checks every output element.
  void check(OpKind kind, std::vector<TensorDesc> inputs, TensorDesc output, uint32_t seed = 1) {
    OpDesc op{kind, inputs, output};
    SCOPED_TRACE(op.key());
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> values(-3, 3);
    const testing::KernelRun run = KernelTest::run(op, [&](size_t k, size_t) {
      const double v = isa::dtype_is_float(inputs[k].dtype) ? values(rng) : double(int(rng() % 200) - 100);
      return inputs[k].dtype == DType::I32 || kind != OpKind::POW ? v : std::round(v * 2) / 2;  // pow: bases and exponents in halves
    });
    const std::shared_ptr<const Kernel>& kernel = run.kernel;
    const std::vector<std::vector<uint8_t>>& storage = run.inputs;
    const std::vector<uint8_t>& result = run.output;
    const size_t oe = isa::dtype_size_bytes(output.dtype);

    // Walk the output's index space.
    const size_t rank = output.shape.size();
    std::vector<int64_t> index(rank, 0);
    int mismatches = 0;
    for (int64_t n = 0; n < output.numel(); ++n) {
      double in[2] = {0, 0};
      for (size_t k = 0; k < inputs.size(); ++k) {
        const TensorDesc& t = inputs[k];
        int64_t offset = t.storage_offset;
        for (size_t i = 0; i < t.shape.size(); ++i) {
          const size_t d = rank - t.shape.size() + i;
          offset += (t.shape[i] == 1 ? 0 : index[d]) * t.strides[i];
        }
        in[k] = load(t.dtype, &storage[k][size_t(offset) * isa::dtype_size_bytes(t.dtype)]);
      }
      int64_t out_offset = output.storage_offset;
      for (size_t d = 0; d < rank; ++d) out_offset += index[d] * output.strides[d];
      const double got = load(output.dtype, &result[size_t(out_offset) * oe]);
      uint8_t rounded[4];
      store(output.dtype, reference(kind, inputs[0].dtype, in[0], in[1]), rounded);
      const double want = load(output.dtype, rounded);
      bool ok = (std::isnan(got) && std::isnan(want)) || got == want;
      if (!ok && !exact_op(kind) && std::isfinite(want)) {
        const double rtol = output.dtype == DType::BF16 ? 1.6e-2 : 1.3e-6, atol = 1e-5;
        ok = std::fabs(got - want) <= atol + rtol * std::fabs(want);
      }
      if (!ok && ++mismatches <= 5) ADD_FAILURE() << "element " << n << ": got " << got << ", want " << want << " (inputs " << in[0] << ", " << in[1] << ")";
      for (size_t d = rank; d-- > 0;) {
        if (++index[d] < output.shape[d]) break;
        index[d] = 0;
      }
    }
    EXPECT_EQ(mismatches, 0) << kernel->plan;
  }

};

TEST_P(Elementwise, EveryUnaryOpOnF32) {
  for (const OpKind kind : {OpKind::NEG, OpKind::ABS, OpKind::EXP, OpKind::LOG, OpKind::SQRT, OpKind::RSQRT, OpKind::RECIPROCAL, OpKind::TANH,
                            OpKind::SIGMOID, OpKind::RELU, OpKind::GELU, OpKind::GELU_TANH, OpKind::SILU, OpKind::SIN, OpKind::COS, OpKind::COPY})
    check(kind, {t(DType::F32, {37, 29})}, t(DType::F32, {37, 29}));
}

TEST_P(Elementwise, UnaryShapesIncludingOnesPrimesAndLarge) {
  for (const auto& shape : std::vector<std::vector<int64_t>>{{1}, {7}, {1, 1, 5}, {3, 1, 5}, {131, 257}, {2, 3, 4, 5}, {300, 1100}})
    check(OpKind::SIGMOID, {t(DType::F32, shape)}, t(DType::F32, shape));
  check(OpKind::EXP, {t(DType::BF16, {513, 67})}, t(DType::BF16, {513, 67}));
}

TEST_P(Elementwise, BinaryOpsAndBroadcasts) {
  for (const OpKind kind : {OpKind::ADD, OpKind::SUB, OpKind::MUL, OpKind::DIV, OpKind::MAXIMUM, OpKind::MINIMUM, OpKind::POW})
    check(kind, {t(DType::F32, {19, 23}), t(DType::F32, {19, 23})}, t(DType::F32, {19, 23}));
  check(OpKind::ADD, {t(DType::F32, {5, 7}), t(DType::F32, {7})}, t(DType::F32, {5, 7}));          // row
  check(OpKind::SUB, {t(DType::F32, {5, 7}), t(DType::F32, {5, 1})}, t(DType::F32, {5, 7}));       // column
  check(OpKind::DIV, {t(DType::F32, {4, 6}), t(DType::F32, {})}, t(DType::F32, {4, 6}));           // scalar
  check(OpKind::SUB, {t(DType::F32, {}), t(DType::F32, {4, 6})}, t(DType::F32, {4, 6}));           // scalar first operand
  check(OpKind::DIV, {t(DType::F32, {6, 1}), t(DType::F32, {6, 5})}, t(DType::F32, {6, 5}));       // column first operand
  check(OpKind::SUB, {t(DType::F32, {1, 9}), t(DType::F32, {8, 9})}, t(DType::F32, {8, 9}));       // row first operand
  check(OpKind::MUL, {t(DType::F32, {3, 1, 4}), t(DType::F32, {2, 4})}, t(DType::F32, {3, 2, 4}));  // both broadcast
  check(OpKind::ADD, {t(DType::BF16, {33, 65}), t(DType::BF16, {65})}, t(DType::BF16, {33, 65}));
  check(OpKind::MUL, {t(DType::I32, {10, 12}), t(DType::I32, {10, 1})}, t(DType::I32, {10, 12}));
}

TEST_P(Elementwise, CastsRoundToNearestEven) {
  check(OpKind::CAST, {t(DType::F32, {45, 67})}, t(DType::BF16, {45, 67}));
  check(OpKind::CAST, {t(DType::BF16, {45, 67})}, t(DType::F32, {45, 67}));
  check(OpKind::CAST, {t(DType::I32, {10, 10})}, t(DType::F32, {10, 10}));
}

TEST_P(Elementwise, ComparisonsGiveBooleans) {
  for (const OpKind kind : {OpKind::EQ, OpKind::NE, OpKind::LT, OpKind::LE, OpKind::GT, OpKind::GE})
    check(kind, {t(DType::I32, {9, 11}), t(DType::I32, {11})}, t(DType::U8, {9, 11}));
  check(OpKind::GT, {t(DType::F32, {40, 3}), t(DType::F32, {})}, t(DType::U8, {40, 3}));
}

TEST_P(Elementwise, BitwiseOpsAndShiftsOnIntegers) {
  // Values in [-100, 100): shift counts below 0 and past 31 included.
  for (const OpKind kind : {OpKind::BITWISE_AND, OpKind::BITWISE_OR, OpKind::BITWISE_XOR, OpKind::SHIFT_LEFT, OpKind::SHIFT_RIGHT})
    check(kind, {t(DType::I32, {17, 31}), t(DType::I32, {17, 31})}, t(DType::I32, {17, 31}));
  check(OpKind::BITWISE_XOR, {t(DType::I32, {6, 5}), t(DType::I32, {})}, t(DType::I32, {6, 5}));       // scalar
  check(OpKind::SHIFT_RIGHT, {t(DType::I32, {6, 5}), t(DType::I32, {6, 1})}, t(DType::I32, {6, 5}));   // column
  EXPECT_THROW(compiler_.compile({OpKind::BITWISE_AND, {t(DType::F32, {4}), t(DType::F32, {4})}, t(DType::F32, {4})}), UnsupportedOp);
}

TEST_P(Elementwise, TruncatingIntegerDivision) {
  // Both signs of dividend and divisor (never 0), each column's divisor broadcast along the rows.
  const OpDesc op{OpKind::TRUNC_DIV, {t(DType::I32, {13, 17}), t(DType::I32, {17})}, t(DType::I32, {13, 17})};
  const auto value = [](size_t input, size_t i) {
    return input == 0 ? double(int64_t(i * 7919 % 2001) - 1000) : double((i % 2 ? 1 : -1) * int64_t(1 + i % 37));
  };
  const testing::KernelRun result = run(op, value);
  for (size_t i = 0; i < 13 * 17; ++i) {
    const int64_t a = int64_t(value(0, i)), b = int64_t(value(1, i % 17));
    ASSERT_EQ(load(DType::I32, &result.output[i * 4]), double(a / b)) << a << " / " << b;
  }
  EXPECT_THROW(compiler_.compile({OpKind::TRUNC_DIV, {t(DType::F32, {4}), t(DType::F32, {4})}, t(DType::F32, {4})}), UnsupportedOp);
}

TEST_P(Elementwise, StridedViewsAreReadInPlace) {
  // A transposed input (column stride 37), an input with a storage offset, an output slice.
  TensorDesc transposed = t(DType::F32, {29, 37});
  transposed.strides = {1, 29};
  TensorDesc offset = t(DType::F32, {29, 37});
  offset.storage_offset = 11;
  TensorDesc out = t(DType::F32, {29, 37});
  out.strides = {40, 1};  // rows of 37 in rows of 40
  out.storage_offset = 3;
  check(OpKind::ADD, {transposed, offset}, out);
  check(OpKind::NEG, {transposed}, t(DType::F32, {29, 37}));
}

// A permutation made contiguous reads its input along the input's contiguous dim (runs of whole
// DMA requests) and turns each tile over on the vector unit, instead of an element at a time:
// NCHW -> NHWC, a 3-D reversal whose unit-stride dim is the output's first, and an add of a
// transposed operand to a contiguous one, each over several tiles with partial ones at the edges.
TEST_P(Elementwise, LayoutChangesReadTheirInputInRunsAndTurnTilesOver) {
  TensorDesc nchw_as_nhwc = t(DType::BF16, {2, 30, 70, 24});
  nchw_as_nhwc.strides = {24 * 30 * 70, 70, 1, 30 * 70};
  TensorDesc reversed = t(DType::I8, {300, 3, 130});
  reversed.strides = {1, 300, 900};
  TensorDesc transposed = t(DType::F32, {333, 517});
  transposed.strides = {1, 333};
  for (const auto& [kind, inputs, output] : std::vector<std::tuple<OpKind, std::vector<TensorDesc>, TensorDesc>>{
           {OpKind::COPY, {nchw_as_nhwc}, t(DType::BF16, {2, 30, 70, 24})},
           {OpKind::COPY, {reversed}, t(DType::I8, {300, 3, 130})},
           {OpKind::ADD, {transposed, t(DType::F32, {333, 517})}, t(DType::F32, {333, 517})}}) {
    check(kind, inputs, output);
    // (A copy alone is a blocked transpose: LayoutChangesAreBlockedTransposes.)
    const std::string plan = compiler().compile(OpDesc{kind, inputs, output})->plan;
    EXPECT_NE(plan.find(kind == OpKind::COPY ? "as blocked transposes" : "turned over (v.trans)"), std::string::npos) << plan;
  }
}

// Columns a few elements apart (a strided slice, x[:, ::s]) are read as whole runs and every s-th
// element kept on the vector unit; wider strides are read an element at a time.
TEST_P(Elementwise, ColumnsAFewElementsApartAreReadAsRuns) {
  for (const auto& [dtype, stride] : std::vector<std::pair<DType, int64_t>>{{DType::BF16, 2}, {DType::F32, 3}, {DType::I8, 8}}) {
    TensorDesc sliced = t(dtype, {37, 300});
    sliced.strides = {300 * stride + 5, stride};
    sliced.storage_offset = 1;
    check(OpKind::COPY, {sliced}, t(dtype, {37, 300}));
    if (dtype != DType::I8) check(OpKind::ADD, {sliced, t(dtype, {37, 300})}, t(dtype, {37, 300}));  // (i8 sums would overflow)
    const std::string plan = compiler().compile(OpDesc{OpKind::COPY, {sliced}, t(dtype, {37, 300})})->plan;
    EXPECT_NE(plan.find("one element in " + std::to_string(stride) + " kept"), std::string::npos) << plan;
  }
  TensorDesc wide = t(DType::F32, {5, 40});
  wide.strides = {400, 10};
  check(OpKind::COPY, {wide}, t(DType::F32, {5, 40}));
  EXPECT_NE(compiler().compile(OpDesc{OpKind::COPY, {wide}, t(DType::F32, {5, 40})})->plan.find("strided columns"), std::string::npos);
}

// Planes smaller than a tile (a head split's [B, L, H, D] from [B, H, L, D]; a small image's NCHW ->
// NHWC) are moved several to a tile by 3-D DMA, each turned over on its own where read transposed.
TEST_P(Elementwise, SmallPlanesShareATile) {
  TensorDesc heads = t(DType::BF16, {4, 10, 6, 16});
  heads.strides = {6 * 10 * 16, 16, 10 * 16, 1};
  TensorDesc small_image = t(DType::F32, {8, 5, 4, 6});
  small_image.strides = {6 * 5 * 4, 4, 1, 5 * 4};
  // permute(1, 2, 0, 3) of [3, 4, 5, 16]: the planes (4 x 5) lie closer in memory than the rows (3),
  // so the DMA walks the planes inside each row.
  TensorDesc far_rows = t(DType::BF16, {4, 5, 3, 16});
  far_rows.strides = {5 * 16, 16, 4 * 5 * 16, 1};
  for (const TensorDesc& input : {heads, small_image, far_rows}) {
    const TensorDesc output = t(input.dtype, input.shape);
    check(OpKind::COPY, {input}, output);
    check(OpKind::MUL, {input, output}, output);  // a second operand read contiguously
    // (A copy of the small image is one blocked transpose, its 8 images a batch of a tile.)
    const std::string plan = compiler().compile(OpDesc{OpKind::MUL, {input, output}, output})->plan;
    EXPECT_NE(plan.find(" planes x "), std::string::npos) << plan;
  }
}

// Layout changes whose runs are short in one tensor or the other go as blocked transposes (runs of a
// DRAM interleave period on both sides where the dims allow): a 2-D transpose, permutes of 4-D tensors
// (one that grows its tile along the input's next dim, one that takes a batch of a third dim), NCHW ->
// NHWC in f32. A transpose with runs shorter than a DMA request stays with the elementwise kernel.
TEST_P(Elementwise, LayoutChangesAreBlockedTransposes) {
  const auto permuted = [&](DType dtype, std::vector<int64_t> shape, std::vector<size_t> order) {
    TensorDesc input = t(dtype, shape);
    TensorDesc view = input;
    for (size_t d = 0; d < order.size(); ++d) view.shape[d] = input.shape[order[d]], view.strides[d] = input.strides[order[d]];
    return view;
  };
  const std::vector<TensorDesc> inputs = {
      permuted(DType::BF16, {384, 256}, {1, 0}),
      permuted(DType::BF16, {8, 4, 32, 64}, {1, 2, 3, 0}),
      permuted(DType::BF16, {4, 8, 64, 64}, {0, 1, 3, 2}),
      permuted(DType::F32, {2, 64, 28, 28}, {0, 2, 3, 1}),
  };
  for (const TensorDesc& input : inputs) {
    TensorDesc output = t(input.dtype, input.shape);
    check(OpKind::COPY, {input}, output);
    const std::string plan = compiler().compile(OpDesc{OpKind::COPY, {input}, output})->plan;
    EXPECT_NE(plan.find("as blocked transposes"), std::string::npos) << plan;
    output.storage_offset = 96;  // (a copy into a view that starts past its storage's start)
    check(OpKind::COPY, {input}, output);
  }
  // [4, 16, 16, 8] from [8, 4, 16, 16]: the input's runs (16) and the output's (8) both continue into H,
  // which only one side could take: tiles of three dims, [N][H][W] turned over twice into [W][H][N].
  // With the image's rows 4 apart in the output, 16 rows and 8 columns, and then blocks of H (the second).
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{8, 4, 16, 16}, std::vector<int64_t>{8, 4, 64, 16}}) {
    const TensorDesc short_runs = permuted(DType::BF16, shape, {1, 3, 2, 0});
    check(OpKind::COPY, {short_runs}, t(DType::BF16, short_runs.shape));
    const std::string plan = compiler().compile(OpDesc{OpKind::COPY, {short_runs}, t(DType::BF16, short_runs.shape)})->plan;
    EXPECT_NE(plan.find("as three-dim transposes"), std::string::npos) << plan;
  }
  // (0, 3, 2, 1) of [N, C, H, W]: [N, W, H, C], the same with C the output's run and N the tiles' loop.
  const TensorDesc nwhc = permuted(DType::BF16, {3, 8, 32, 16}, {0, 3, 2, 1});
  check(OpKind::COPY, {nwhc}, t(DType::BF16, nwhc.shape));
}

// A pixel shuffle (a 2 x 2 / 2 transposed convolution's output, [N, C, H, 2, W, 2] from [N, H, W, C, 2, 2])
// shares its innermost run of 2 on both sides: that run moves as one element of 4 bytes (2 bf16, or 4 i8)
// and the rest is a blocked transpose. Two f32 (8 bytes) have no element that wide: the elementwise kernel.
TEST_P(Elementwise, AShortRunBothSidesShareMovesAsOneElement) {
  const auto shuffled = [&](DType dtype, int64_t k) {
    TensorDesc products = t(dtype, {2, 6, 32, 16, k, k});  // [N, H, W, C, KH, KW]
    TensorDesc view = products;
    const std::vector<size_t> order = {0, 3, 1, 4, 2, 5};
    for (size_t d = 0; d < order.size(); ++d) view.shape[d] = products.shape[order[d]], view.strides[d] = products.strides[order[d]];
    return view;
  };
  for (const auto& [input, folded] : std::vector<std::pair<TensorDesc, bool>>{
           {shuffled(DType::BF16, 2), true}, {shuffled(DType::I8, 4), true}, {shuffled(DType::F32, 2), false}}) {
    const TensorDesc output = t(input.dtype, input.shape);
    check(OpKind::COPY, {input}, output);
    const std::string plan = compiler().compile(OpDesc{OpKind::COPY, {input}, output})->plan;
    EXPECT_EQ(plan.find("elements of 4 bytes: the run both sides share") != std::string::npos, folded) << plan;
  }
  // permute(2, 1, 0, 3): a shared run of 32 bytes, shorter than a DMA request on both presets, moves as a
  // piece; the store's DMA puts the pieces in the output's order.
  for (const auto& [dtype, run] : std::vector<std::pair<DType, int64_t>>{{DType::BF16, 16}, {DType::F32, 8}}) {
    const TensorDesc x = t(dtype, {8, 16, 32, run});
    TensorDesc input = x;
    const std::vector<size_t> order = {2, 1, 0, 3};
    for (size_t d = 0; d < order.size(); ++d) input.shape[d] = x.shape[order[d]], input.strides[d] = x.strides[order[d]];
    TensorDesc output = t(dtype, input.shape);
    check(OpKind::COPY, {input}, output);
    const std::string plan = compiler().compile(OpDesc{OpKind::COPY, {input}, output})->plan;
    EXPECT_NE(plan.find("pieces of 32 bytes"), std::string::npos) << plan;
    output.storage_offset = 48;
    check(OpKind::COPY, {input}, output);
  }
}

TEST_P(Elementwise, TheCacheReturnsTheSameKernelAndTheConfigShapesIt) {
  const OpDesc op{OpKind::ADD, {t(DType::F32, {256, 256}), t(DType::F32, {256, 256})}, t(DType::F32, {256, 256})};
  const auto first = compiler_.compile(op);
  const auto second = compiler_.compile(op);
  EXPECT_EQ(first, second);
  EXPECT_EQ(compiler_.cache_stats().hits, 1u);
  EXPECT_EQ(compiler_.cache_stats().misses, 1u);
  EXPECT_EQ(first->cores, device_->info().num_cores);  // enough tiles for every core
  const std::string listing = Compiler::listing(*first);
  EXPECT_NE(listing.find("# add: f32[256,256]"), std::string::npos) << listing;
  EXPECT_NE(listing.find("v.add f32, full"), std::string::npos) << listing;
}

// Threads that compile the same op at once all get the one cached kernel: callers key what they derive from a
// kernel (the bridge's loaded programs) by its identity, and a private copy, once freed, let another kernel take
// its address and run the wrong program.
TEST_P(Elementwise, ThreadsCompilingTheSameOpAtOnceGetOneKernel) {
  for (int round = 0; round < 20; ++round) {
    const OpDesc op{OpKind::MUL, {t(DType::F32, {64, 100 + round}), t(DType::F32, {64, 100 + round})}, t(DType::F32, {64, 100 + round})};
    std::vector<std::shared_ptr<const Kernel>> kernels(8);
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    for (size_t i = 0; i < kernels.size(); ++i)
      threads.emplace_back([&, i] {
        ++ready;
        while (ready.load() < int(kernels.size())) std::this_thread::yield();
        kernels[i] = compiler_.compile(op);
      });
    for (std::thread& thread : threads) thread.join();
    for (size_t i = 1; i < kernels.size(); ++i) EXPECT_EQ(kernels[i], kernels[0]) << "round " << round << ", thread " << i;
  }
  EXPECT_EQ(compiler_.cache_stats().misses, 20u);
  EXPECT_EQ(compiler_.cache_stats().entries, 20u);
}

TEST_P(Elementwise, EmptyTensorsGiveProgramsThatHalt) {
  for (const auto& shape : std::vector<std::vector<int64_t>>{{0}, {1, 0, 3}, {3, 0}, {0, 5}}) {
    const auto kernel = compiler_.compile({OpKind::COS, {t(DType::F32, shape)}, t(DType::F32, shape)});
    EXPECT_EQ(kernel->program.code.at(0).words.size(), 1u);  // halt
    check(OpKind::ADD, {t(DType::F32, shape), t(DType::F32, shape)}, t(DType::F32, shape));
  }
}

// Views whose dims do not merge (a head transpose of [B, L, H, D], a slice of a slice): the
// dims before the last two are planes, split into their own strides on the core.
TEST_P(Elementwise, UpToSixDimsThatDoNotMerge) {
  TensorDesc four = t(DType::F32, {2, 3, 4, 5});
  four.strides = {1000, 100, 10, 1};
  check(OpKind::ADD, {four, four}, t(DType::F32, {2, 3, 4, 5}));
  TensorDesc heads = t(DType::BF16, {3, 4, 7, 16});  // [B, H, L, D] read from a contiguous [B, L, H, D]
  heads.strides = {7 * 4 * 16, 16, 4 * 16, 1};
  check(OpKind::COPY, {heads}, t(DType::BF16, {3, 4, 7, 16}));
  TensorDesc transposed_out = t(DType::F32, {3, 4, 7, 16});
  transposed_out.strides = {7 * 4 * 16, 16, 4 * 16, 1};
  check(OpKind::MUL, {t(DType::F32, {3, 4, 7, 16}), t(DType::F32, {4, 1, 16})}, transposed_out);  // a broadcast second operand
  TensorDesc six = t(DType::F32, {2, 3, 2, 3, 4, 5});
  six.strides = {5000, 1000, 300, 60, 12, 2};  // every dim strided apart
  TensorDesc six_out = t(DType::F32, {2, 3, 2, 3, 4, 5});
  six_out.storage_offset = 7;
  check(OpKind::SUB, {six, t(DType::F32, {2, 1, 2, 1, 4, 5})}, six_out);
}

TEST_P(Elementwise, WhatItCannotDoIsSaidSo) {
  TensorDesc seven = t(DType::F32, {2, 2, 2, 2, 2, 2, 2});
  seven.strides = {1000, 300, 100, 30, 10, 3, 1};  // seven dimensions that do not merge
  EXPECT_THROW(compiler_.compile({OpKind::ADD, {seven, seven}, t(DType::F32, {2, 2, 2, 2, 2, 2, 2})}), UnsupportedOp);
  EXPECT_THROW(compiler_.compile({OpKind::EXP, {t(DType::I32, {4})}, t(DType::I32, {4})}), UnsupportedOp);
  EXPECT_THROW(compiler_.compile({OpKind::ADD, {t(DType::F32, {4}), t(DType::F32, {5})}, t(DType::F32, {4})}), std::invalid_argument);
  EXPECT_THROW(compiler_.compile({OpKind::ADD, {t(DType::F32, {4}), t(DType::BF16, {4})}, t(DType::F32, {4})}), std::invalid_argument);
}

// A chain runs its steps one after another on each element, each rounded to the
// dtype: the reference does the same with reference() and store().
class ElementwiseChain : public testing::KernelTest {
 protected:
  // in_f32: the chain over bf16 or f16 inputs computed in f32 (OpDesc::chain_in_f32): every step and
  // constant rounded to f32, the result once to the output's dtype.
  void check(const std::string& text, std::vector<TensorDesc> inputs, TensorDesc output, uint32_t seed = 1, bool in_f32 = false) {
    OpDesc op{OpKind::ELEMENTWISE_CHAIN, inputs, output};
    op.chain = parse_chain(text, inputs.size());
    op.chain_in_f32 = in_f32;
    SCOPED_TRACE(op.key());
    bool exact = true;
    for (const ChainStep& step : op.chain) exact = exact && exact_op(step.kind);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> values(-3, 3);
    const testing::KernelRun run = KernelTest::run(op, [&](size_t k, size_t) {
      return isa::dtype_is_float(inputs[k].dtype) ? values(rng) : double(int(rng() % 200) - 100);
    });
    const DType dtype = output.dtype, step_dtype = in_f32 ? DType::F32 : dtype;
    const size_t oe = isa::dtype_size_bytes(dtype), rank = output.shape.size();
    std::vector<int64_t> index(rank, 0);
    int mismatches = 0;
    for (int64_t n = 0; n < output.numel(); ++n) {
      std::vector<double> in, result;
      for (size_t k = 0; k < inputs.size(); ++k) {
        const TensorDesc& t = inputs[k];
        int64_t offset = t.storage_offset;
        for (size_t i = 0; i < t.shape.size(); ++i) offset += (t.shape[i] == 1 ? 0 : index[rank - t.shape.size() + i]) * t.strides[i];
        in.push_back(load(t.dtype, &run.inputs[k][size_t(offset) * isa::dtype_size_bytes(t.dtype)]));
      }
      for (const ChainStep& step : op.chain) {
        double arg[2] = {0, 0};
        for (size_t a = 0; a < op_arity(step.kind); ++a) {
          const ChainValue& v = step.args[a];
          uint8_t rounded[4];
          store(step_dtype, step.constant, rounded);  // a constant is the dtype's value of it
          arg[a] = v.kind == ChainValue::Kind::Input ? in[size_t(v.index)]
                   : v.kind == ChainValue::Kind::Step ? result[size_t(v.index)]
                                                      : load(step_dtype, rounded);
        }
        uint8_t rounded[4];
        store(step_dtype, reference(step.kind, step_dtype, arg[0], arg[1]), rounded);
        result.push_back(load(step_dtype, rounded));
      }
      uint8_t final_rounding[4];
      store(dtype, result.back(), final_rounding);
      result.back() = load(dtype, final_rounding);
      int64_t out_offset = output.storage_offset;
      for (size_t d = 0; d < rank; ++d) out_offset += index[d] * output.strides[d];
      const double got = load(dtype, &run.output[size_t(out_offset) * oe]), want = result.back();
      bool ok = (std::isnan(got) && std::isnan(want)) || got == want;
      if (!ok && !exact && std::isfinite(want)) {  // transcendentals by another formula, carried through the later steps
        const double rtol = dtype == DType::BF16 ? 3e-2 : 1e-5, atol = 1e-5;
        ok = std::fabs(got - want) <= atol + rtol * std::fabs(want);
      }
      if (!ok && ++mismatches <= 5) ADD_FAILURE() << "element " << n << ": got " << got << ", want " << want;
      for (size_t d = rank; d-- > 0;) {
        if (++index[d] < output.shape[d]) break;
        index[d] = 0;
      }
    }
    EXPECT_EQ(mismatches, 0) << run.kernel->plan;
  }
};

TEST_P(ElementwiseChain, StepsRoundAsTheOpsAloneWould) {
  // GELU's tanh form written out, a constant first operand (1 - x), a result read twice.
  check("mul(in0, 0.5); mul(in0, 0.7978845608); tanh(%1); add(%2, 1); mul(%0, %3); sub(1, %4); mul(%5, in1)",
        {t(DType::F32, {37, 29}), t(DType::F32, {37, 29})}, t(DType::F32, {37, 29}));
  check("exp(in0); add(%0, in1); mul(%1, 0.5)", {t(DType::BF16, {129, 67}), t(DType::BF16, {129, 67})}, t(DType::BF16, {129, 67}));
  check("neg(in0); add(%0, in1); mul(%1, %1); sub(%2, %0); maximum(%3, -2)", {t(DType::F32, {300, 1100}), t(DType::F32, {300, 1100})},
        t(DType::F32, {300, 1100}));
  check("mul(in0, 3); add(%0, in1); sub(%1, in0)", {t(DType::I32, {10, 12}), t(DType::I32, {10, 1})}, t(DType::I32, {10, 12}));
  // A value read twice by its last reader (t * t) frees its tile once: twice, it was handed to two later
  // steps, and 1 - t^2 (a constant first operand filling the tile t^2 was in) gave 0.
  check("tanh(in0); mul(%0, %0); sub(1, %1); mul(%2, in1)", {t(DType::F32, {37, 29}), t(DType::F32, {37, 29})}, t(DType::F32, {37, 29}));
}

TEST_P(ElementwiseChain, HalfPrecisionChainsComputeInF32AndRoundOnce) {
  // tanh's backward, g * (1 - y * y), as ATen's CPU kernel computes bf16: in f32, rounded once.
  check("mul(in1, in1); sub(1, %0); mul(in0, %1)", {t(DType::BF16, {37, 29}), t(DType::BF16, {37, 29})}, t(DType::BF16, {37, 29}), 1, true);
  // Every broadcast mode converted (a row, a column made a full tile, a scalar, a column read second).
  check("sub(in1, in0); mul(%0, in2); div(in2, %1); maximum(%2, in3); add(%3, in4)",
        {t(DType::F16, {23, 41}), t(DType::F16, {41}), t(DType::F16, {23, 1}), t(DType::F16, {}), t(DType::F16, {23, 1})},
        t(DType::F16, {23, 41}), 2, true);
  check("exp(in0)", {t(DType::BF16, {300, 1100})}, t(DType::BF16, {300, 1100}), 3, true);
  // (x + 1) - 1 keeps x in f32 where bf16 steps would lose its low bits: the output is x again.
  OpDesc op{OpKind::ELEMENTWISE_CHAIN, {t(DType::BF16, {64, 64})}, t(DType::BF16, {64, 64})};
  op.chain = parse_chain("add(in0, 1); sub(%0, 1)", 1);
  op.chain_in_f32 = true;
  const testing::KernelRun run = KernelTest::run(op, [](size_t, size_t i) { return std::ldexp(1.0 + double(i % 7) / 8, -int(i % 9) - 1); });
  EXPECT_EQ(run.output, run.inputs[0]);
  EXPECT_NE(run.kernel->plan.find("in f32"), std::string::npos) << run.kernel->plan;
  // Only chains, of float inputs and output.
  OpDesc int_inputs{OpKind::ELEMENTWISE_CHAIN, {t(DType::I32, {4})}, t(DType::F32, {4})};
  int_inputs.chain = parse_chain("neg(in0)", 1);
  int_inputs.chain_in_f32 = true;
  EXPECT_THROW(compiler_.compile(int_inputs), std::invalid_argument);
  OpDesc bool_output{OpKind::ELEMENTWISE_CHAIN, {t(DType::BF16, {4})}, t(DType::U8, {4})};
  bool_output.chain = parse_chain("neg(in0)", 1);
  bool_output.chain_in_f32 = true;
  EXPECT_THROW(compiler_.compile(bool_output), std::invalid_argument);
  OpDesc single{OpKind::EXP, {t(DType::BF16, {4})}, t(DType::BF16, {4})};
  single.chain_in_f32 = true;
  EXPECT_THROW(compiler_.compile(single), std::invalid_argument);
}

// In f32 the inputs may mix dtypes and the output may be any float: a cast before the chain (an eval
// batch norm of x.float(): x bf16, its per-channel scale and shift f32) or after it costs no kernel.
TEST_P(ElementwiseChain, ChainsInF32MixInputDtypesAndChooseTheirOutputs) {
  check("mul(in0, in1); add(%0, in2)", {t(DType::BF16, {37, 29}), t(DType::F32, {37, 1}), t(DType::F32, {37, 1})}, t(DType::F32, {37, 29}), 4,
        true);
  check("exp(in0)", {t(DType::F16, {300, 1100})}, t(DType::F32, {300, 1100}), 5, true);
  check("sub(in1, in0); mul(%0, in2); div(in2, %1); maximum(%2, in3)",
        {t(DType::F32, {23, 41}), t(DType::BF16, {41}), t(DType::F16, {23, 1}), t(DType::F32, {})}, t(DType::BF16, {23, 41}), 6, true);
  check("add(in0, 1); mul(%0, in0)", {t(DType::F32, {64, 64})}, t(DType::F16, {64, 64}), 7, true);  // (f32 in, half out: a cast after)
}

TEST_P(ElementwiseChain, InputsBroadcastWhereverTheyAreRead) {
  // in1 a row read first (a full tile through DMA), in2 a column read first and
  // second (made a full tile), in3 a scalar, in4 a column read second only.
  check("sub(in1, in0); mul(%0, in2); div(in2, %1); maximum(%2, in3); add(%3, in4)",
        {t(DType::F32, {23, 41}), t(DType::F32, {41}), t(DType::F32, {23, 1}), t(DType::F32, {}), t(DType::F32, {23, 1})},
        t(DType::F32, {23, 41}));
  TensorDesc transposed = t(DType::F32, {19, 31});
  transposed.strides = {1, 19};
  check("mul(in0, in1); add(%0, in0)", {transposed, t(DType::F32, {3, 19, 31})}, t(DType::F32, {3, 19, 31}));
}

TEST_P(ElementwiseChain, EightInputs) {
  std::vector<TensorDesc> inputs(8, t(DType::F32, {17, 45}));
  check("add(in0, in1); mul(%0, in2); sub(%1, in3); add(%2, in4); mul(%3, in5); sub(%4, in6); div(%5, in7)", inputs, t(DType::F32, {17, 45}));
}

TEST_P(ElementwiseChain, TheTextFormRoundTripsAndBadChainsAreRefused) {
  const std::string text = "mul(in0, 0.5); tanh(%0); add(%1, in1); sub(1, %2)";
  EXPECT_EQ(chain_to_string(parse_chain(text, 2)), text);
  const std::pair<const char*, const char*> bad[] = {
      {"mul(in0)", "takes 2 argument"},        {"add(in0, %1)", "not an earlier step"}, {"eq(in0, in1)", "inputs' dtype"},
      {"add(in0, in2)", "the chain has 2 inputs"}, {"add(1, 2)", "at most one constant"}, {"exp(2)", "unary op of a constant"},
      {"", "not NAME(ARG)"},                   {"frobnicate(in0)", "not an elementwise op"}};
  for (const auto& [chain, message] : bad) {
    try {
      parse_chain(chain, 2);
      ADD_FAILURE() << chain << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << chain << ": " << e.what();
    }
  }
  OpDesc unused{OpKind::ELEMENTWISE_CHAIN, {t(DType::F32, {4}), t(DType::F32, {4})}, t(DType::F32, {4})};
  unused.chain = parse_chain("exp(in0)", 2);
  EXPECT_THROW(compiler_.compile(unused), std::invalid_argument);
}

TEST_P(ElementwiseChain, IntegerStepsWithMasksAndShifts) {
  // (int64 multiplication's high word is such a chain over the operands' i32 words.)
  check("bitwise_and(in0, 65535); bitwise_right_shift(in1, 3); mul(%0, %1); bitwise_xor(%2, in0); bitwise_left_shift(%3, 2)",
        {t(DType::I32, {23, 41}), t(DType::I32, {41})}, t(DType::I32, {23, 41}));
}

TEST_P(ElementwiseChain, IntermediatesNeverReachDram) {
  OpDesc op{OpKind::ELEMENTWISE_CHAIN, {t(DType::F32, {256, 256})}, t(DType::F32, {256, 256})};
  op.chain = parse_chain("mul(in0, 0.5); exp(%0); add(%1, 1); mul(%2, in0)", 1);
  const std::string listing = Compiler::listing(*compiler_.compile(op));
  size_t loads = 0, stores = 0;
  for (size_t at = 0; (at = listing.find("dma.ld ", at)) != std::string::npos; ++at) ++loads;
  for (size_t at = 0; (at = listing.find("dma.st ", at)) != std::string::npos; ++at) ++stores;
  EXPECT_EQ(loads, 1u) << listing;  // one load of in0 per tile, one store of the output
  EXPECT_EQ(stores, 1u) << listing;
  EXPECT_NE(listing.find("1 intermediate tile(s)"), std::string::npos) << listing;
}

INSTANTIATE_TEST_SUITE_P(Presets, ElementwiseChain, ::testing::Values("tiny", "base"), testing::preset_name);

INSTANTIATE_TEST_SUITE_P(Presets, Elementwise, ::testing::Values("tiny", "base"), testing::preset_name);

// On large the DRAM interleave's period is 4 KiB: permute(3, 2, 0, 1) of [16, 32, 64, 64] has an input
// run of 64 bf16 (128 bytes) that continues into the dim just before the output's unit-stride one. The
// output's side must leave that dim to the input's, so that both sides move runs of 512 bytes or more
// (it took it, and the copy fell back to the elementwise kernel's runs of 128 bytes).
class ElementwiseOnLarge : public Elementwise {};

TEST_P(ElementwiseOnLarge, AShortInputRunKeepsTheDimThatContinuesIt) {
  TensorDesc input = t(DType::BF16, {16, 32, 64, 64});
  TensorDesc view = input;
  const std::vector<size_t> order = {3, 2, 0, 1};
  for (size_t d = 0; d < order.size(); ++d) view.shape[d] = input.shape[order[d]], view.strides[d] = input.strides[order[d]];
  const TensorDesc output = t(DType::BF16, view.shape);
  const std::string plan = compiler().compile(OpDesc{OpKind::COPY, {view}, output})->plan;
  EXPECT_NE(plan.find("as blocked transposes"), std::string::npos) << plan;
  EXPECT_NE(plan.find("read in runs of 1024 bytes"), std::string::npos) << plan;
  check(OpKind::COPY, {view}, output);
}

INSTANTIATE_TEST_SUITE_P(Large, ElementwiseOnLarge, ::testing::Values("large"), testing::preset_name);

}  // namespace
}  // namespace npu::compiler
