// The 2-D convolution with implicit im2col compiled for the chip and run
// through the driver, on tiny and base: every output element against a double
// reference (bf16 products are exact in f32; the tensor core sums them in f32
// in its own order, bounded below), with padding, several bands of rows (the
// first and last clipped by the padding), more channels than the array has
// rows, two tiles of output channels, strided input rows, a per-channel scale
// and bias, a residual and an epilogue.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernel_runner.h"

namespace npu::compiler {
namespace {

using isa::DType;

class Conv : public testing::KernelTest {
 protected:
  struct Case {
    int64_t n, c, h, w, cout, kh, kw, ph, pw;
    bool bias_and_scale = false, residual = false;
    std::vector<OpKind> epilogue = {};
    int64_t row_pitch = 0;
    int64_t sy = 1, sx = 1;
  };
  void check(const Case& k) {
    TensorDesc x = t(DType::BF16, {k.n, k.c, k.h, k.w});
    if (k.row_pitch) x.strides = {k.c * k.h * k.row_pitch, k.h * k.row_pitch, k.row_pitch, 1};
    const int64_t oh = (k.h + 2 * k.ph - k.kh) / k.sy + 1, ow = (k.w + 2 * k.pw - k.kw) / k.sx + 1;
    OpDesc op{OpKind::CONV2D, {x, t(DType::BF16, {k.c, k.kh, k.kw, k.cout})}, t(DType::BF16, {k.n, k.cout, oh, ow})};
    if (k.bias_and_scale) op.inputs.push_back(t(DType::F32, {k.cout})), op.inputs.push_back(t(DType::F32, {k.cout}));
    if (k.residual) op.inputs.push_back(t(DType::BF16, {k.n, k.cout, oh, ow})), op.residual = true;
    op.window.padding = {k.ph, k.pw};
    op.window.stride = {k.sy, k.sx};
    op.epilogue = k.epilogue;
    SCOPED_TRACE(op.key());
    std::mt19937 rng(5);
    std::uniform_real_distribution<double> values(-2, 2);
    const testing::KernelRun run = this->run(op, [&](size_t, size_t) { return values(rng); });
    SCOPED_TRACE(run.kernel->plan);
    const auto in = [&](size_t i, int64_t at) {
      return testing::load(op.inputs[i].dtype, &run.inputs[i][size_t(at) * isa::dtype_size_bytes(op.inputs[i].dtype)]);
    };
    int mismatches = 0;
    for (int64_t b = 0; b < k.n; ++b)
      for (int64_t co = 0; co < k.cout; ++co)
        for (int64_t y = 0; y < oh; ++y)
          for (int64_t xx = 0; xx < ow; ++xx) {
            double sum = 0, magnitude = 0;
            for (int64_t i = 0; i < k.kh; ++i)
              for (int64_t j = 0; j < k.kw; ++j)
                for (int64_t ch = 0; ch < k.c; ++ch) {
                  const int64_t r = y * k.sy + i - k.ph, q = xx * k.sx + j - k.pw;
                  if (r < 0 || r >= k.h || q < 0 || q >= k.w) continue;
                  const double p = in(0, b * x.strides[0] + ch * x.strides[1] + r * x.strides[2] + q) * in(1, ((ch * k.kh + i) * k.kw + j) * k.cout + co);
                  sum += p, magnitude += std::fabs(p);
                }
            if (k.bias_and_scale) {
              const double scale = in(3, co);
              sum = sum * scale + in(2, co), magnitude = magnitude * std::fabs(scale) + std::fabs(in(2, co));
            }
            if (k.residual) {
              const double res = in(op.inputs.size() - 1, ((b * k.cout + co) * oh + y) * ow + xx);
              sum += res, magnitude += std::fabs(res);
            }
            for (const OpKind e : k.epilogue) sum = e == OpKind::RELU ? std::max(sum, 0.0) : sum;
            const double got = testing::load(DType::BF16, &run.output[size_t(((b * k.cout + co) * oh + y) * ow + xx) * 2]);
            // f32 sums in the tensor core's order; the output's rounding to bf16 (2^-8 relative).
            const double bound = double(k.c * k.kh * k.kw + 3) * std::ldexp(magnitude, -23) + std::ldexp(std::fabs(sum), -8);
            if (!(std::fabs(got - sum) <= bound) && ++mismatches <= 5)
              ADD_FAILURE() << "out[" << b << "," << co << "," << y << "," << xx << "] = " << got << ", want " << sum << " +- " << bound;
          }
    EXPECT_EQ(mismatches, 0);
    EXPECT_NE(run.kernel->plan.find("implicit im2col"), std::string::npos) << run.kernel->plan;
  }
};

TEST_P(Conv, ThreeByThreeSamePadding) { check({2, 16, 9, 11, 24, 3, 3, 1, 1}); }
TEST_P(Conv, FiveByFiveScaleBiasReluOnStridedRows) { check({1, 7, 10, 9, 5, 5, 5, 2, 2, true, false, {OpKind::RELU}, 13}); }
TEST_P(Conv, ManyChannelsTwoTilesOfOutputChannelsAndAResidual) { check({1, 130, 12, 12, 256, 3, 3, 0, 0, true, true, {OpKind::RELU}}); }
TEST_P(Conv, OneByThreeKernel) { check({2, 8, 6, 20, 16, 1, 3, 0, 1}); }
TEST_P(Conv, BandsOfRowsClippedByThePadding) {
  check({3, 4, 100, 70, 32, 3, 3, 1, 1, false, true});  // (3 images: the cores of base reuse their stage slots)
  EXPECT_EQ(compiler_.compile([] {
                  OpDesc op{OpKind::CONV2D, {t(DType::BF16, {1, 4, 100, 70}), t(DType::BF16, {4, 3, 3, 32})}, t(DType::BF16, {1, 32, 100, 70})};
                  op.window.padding = {1, 1};
                  return op;
                }())
                ->plan.find("a band of 100 rows"),
            std::string::npos);
}

// Strides read the stage in phases: rows by the DMA, columns split by v.trans (ResNet's 3 x 3 / 2 and
// 7 x 7 / 2 and 1 x 1 / 2; a stride in one dim only; a stride of 3 past the kernel's size; odd widths).
TEST_P(Conv, ThreeByThreeStrideTwo) {
  check({2, 16, 11, 12, 24, 3, 3, 1, 1, false, false, {}, 0, 2, 2});
  check({3, 4, 150, 71, 32, 3, 3, 1, 1, false, true, {}, 0, 2, 2});  // bands of rows, the first and last clipped
}
TEST_P(Conv, SevenBySevenStrideTwoWithAResidualOnStridedRows) {
  check({1, 6, 23, 21, 8, 7, 7, 3, 3, true, true, {OpKind::RELU}, 25, 2, 2});
}
TEST_P(Conv, OneByOneStrideTwo) { check({2, 40, 10, 9, 32, 1, 1, 0, 0, true, false, {}, 0, 2, 2}); }
TEST_P(Conv, StrideInOneDimOnly) {
  check({1, 8, 9, 13, 16, 3, 3, 1, 0, false, false, {}, 0, 2, 1});
  check({1, 8, 9, 13, 16, 3, 3, 0, 1, false, false, {}, 0, 1, 3});
}
TEST_P(Conv, StridePastTheKernel) { check({1, 8, 14, 14, 16, 2, 2, 0, 1, false, false, {}, 0, 3, 3}); }

// Short rows move as runs: a band's image rows of up to a DRAM bus cycle's bytes, each channel's loaded as
// one run and placed in the stage by dma.cp; output rows of up to half one gathered by dma.cp and stored
// as a run per channel; longer rows, or strided ones, move a row a request as before.
TEST_P(Conv, ShortRowsMoveAsARunPerChannel) {
  const int64_t short_w = int64_t(sim::load_chip_config(GetParam()).dram.bytes_per_cycle_per_channel) / 4;  // bf16: half a bus cycle
  const auto plan = [&](int64_t w, int64_t pitch) {
    OpDesc op{OpKind::CONV2D, {t(DType::BF16, {2, 8, 12, w}), t(DType::BF16, {8, 3, 3, 16})}, t(DType::BF16, {2, 16, 6, (w + 1) / 2})};
    op.window.padding = {1, 1};
    op.window.stride = {2, 2};
    if (pitch) op.inputs[0].strides = {8 * 12 * pitch, 12 * pitch, pitch, 1};
    return compiler_.compile(op)->plan;
  };
  const std::string short_rows = plan(short_w, 0), long_rows = plan(300, 0), strided_rows = plan(short_w, short_w + 12);
  EXPECT_NE(short_rows.find("each channel's rows loaded as one run"), std::string::npos) << short_rows;
  EXPECT_NE(short_rows.find("stored as a run per channel"), std::string::npos) << short_rows;
  EXPECT_EQ(long_rows.find("as one run"), std::string::npos) << long_rows;
  EXPECT_EQ(long_rows.find("a run per channel"), std::string::npos) << long_rows;
  EXPECT_EQ(strided_rows.find("as one run"), std::string::npos) << strided_rows;
  EXPECT_NE(strided_rows.find("a run per channel"), std::string::npos) << strided_rows;
  const std::string bus_rows = plan(2 * short_w, 0), past_bus_rows = plan(2 * short_w + 1, 0);
  EXPECT_NE(bus_rows.find("each channel's rows loaded as one run"), std::string::npos) << bus_rows;
  EXPECT_EQ(past_bus_rows.find("as one run"), std::string::npos) << past_bus_rows;
  check({2, 8, 12, short_w, 16, 3, 3, 1, 1, true, true, {OpKind::RELU}, 0, 2, 2});
  check({2, 8, 12, short_w, 16, 3, 3, 1, 1, false, false, {}, short_w + 12, 2, 2});
  check({3, 4, 300, short_w, 32, 3, 3, 1, 1, false, true, {}, 0, 1, 1});  // stride 1, bands of rows clipped by the padding
  OpDesc tall{OpKind::CONV2D, {t(DType::BF16, {3, 4, 300, short_w}), t(DType::BF16, {4, 3, 3, 32})}, t(DType::BF16, {3, 32, 300, short_w})};
  tall.window.padding = {1, 1};
  const std::string tall_plan = compiler_.compile(tall)->plan;
  EXPECT_EQ(tall_plan.find("a band of 300 rows"), std::string::npos) << tall_plan;
  EXPECT_NE(tall_plan.find("loaded as one run"), std::string::npos) << tall_plan;
}

// A core of one tile loads its band's runs into one buffer, not two: ResNet-18's last 3 x 3 (512
// channels at 7 x 7, with a residual) in base's scratchpad less the bridge's SRAM pool (a quarter) then
// fits bands of 7 rows, a tile a core. Deeper than the array's rows, the weights load and multiply a
// block of its rows of channels at a time.
TEST_P(Conv, OneTileACoreLoadsItsRunsIntoOneBuffer) {
  check({1, 300, 7, 7, 32, 3, 3, 1, 1, true, true, {OpKind::RELU}});  // 3 blocks of channels on base, 19 on tiny
  sim::ChipConfig pooled = sim::load_chip_config(GetParam());
  if (pooled.core.tensor_core.rows != 128) return;  // (the plan below is sized for base's 2 MiB and 128 rows)
  pooled.core.scratchpad.size_bytes -= pooled.core.scratchpad.size_bytes / 4;
  Compiler compiler(pooled);
  OpDesc op{OpKind::CONV2D,
            {t(DType::BF16, {1, 512, 7, 7}), t(DType::BF16, {512, 3, 3, 512}), t(DType::F32, {512}), t(DType::F32, {512}), t(DType::BF16, {1, 512, 7, 7})},
            t(DType::BF16, {1, 512, 7, 7})};
  op.residual = true;
  op.window.padding = {1, 1};
  const std::string plan = compiler.compile(op)->plan;
  EXPECT_NE(plan.find("a band of 7 rows of one image, 4 tiles over 4 cores"), std::string::npos) << plan;
  EXPECT_NE(plan.find("loaded as one run"), std::string::npos) << plan;
}

// Where the tallest band leaves cores idle, shorter bands spread one image over the cores.
TEST_P(Conv, OneImageSpreadsOverTheCores) {
  OpDesc op{OpKind::CONV2D, {t(DType::BF16, {1, 16, 24, 24}), t(DType::BF16, {16, 3, 3, 16})}, t(DType::BF16, {1, 16, 24, 24})};
  op.window.padding = {1, 1};
  const std::string plan = compiler_.compile(op)->plan;
  if (sim::load_chip_config(GetParam()).num_cores > 1) {
    EXPECT_EQ(plan.find("a band of 24 rows"), std::string::npos) << plan;
    EXPECT_EQ(plan.find("over 1 cores"), std::string::npos) << plan;
  }
  check({1, 16, 24, 24, 16, 3, 3, 1, 1, true, true, {OpKind::RELU}});
}

// Few channels pack the taps: dma.cp gathers every tap's planes into one operand of C * KH * KW rows,
// one tc.mm a tile (an RGB stem's 49 products of depth 3 are 2 folds of the array). The copies go to
// two DMA channels, whole (an even number: 7 kernel rows x 2 column phases) or each in two halves of the
// channels (an odd number: 3 kernel rows); one channel, or one input channel, takes them whole.
TEST_P(Conv, FewChannelsPackTheTapsIntoOneProduct) {
  const auto plan = [&](int64_t c, int64_t k, int64_t stride) {
    const int64_t size = 28, out = (size + 2 * (k / 2) - k) / stride + 1;
    OpDesc op{OpKind::CONV2D, {t(DType::BF16, {1, c, size, size}), t(DType::BF16, {c, k, k, 32})}, t(DType::BF16, {1, 32, out, out})};
    op.window.padding = {k / 2, k / 2};
    op.window.stride = {stride, stride};
    return compiler_.compile(op)->plan;
  };
  const int64_t rows = sim::load_chip_config(GetParam()).core.tensor_core.rows;
  const std::string stem = plan(3, 7, 2), wide = plan(rows, 3, 1);
  EXPECT_NE(stem.find("the taps packed by dma.cp (14 copies on ch3 and ch1) into one tc.mm per tile"), std::string::npos) << stem;
  EXPECT_NE(stem.find(" x 147 by 147 x 32)"), std::string::npos) << stem;
  EXPECT_EQ(wide.find("packed"), std::string::npos) << wide;  // (a tap's product fills the array's rows)
  check({1, 3, 30, 28, 8, 7, 7, 3, 3, true, true, {OpKind::RELU}, 0, 2, 2});
  check({2, 5, 13, 11, 16, 3, 3, 1, 1, false, true, {}, 17});
  check({1, 1, 9, 10, 8, 3, 3, 1, 1});
  check({2, 3, 12, 12, 8, 3, 3, 1, 1, false, false, {}, 0, 1, 2});
  // On a tensor core of several arrays a packed product keeps to one, so under 16 channels the kernel
  // declines (the bridge's im2col and matmul spread over them); 16 channels (on base) still run implicit.
  sim::ChipConfig arrays = sim::load_chip_config(GetParam());
  arrays.core.tensor_core.arrays = 4;
  Compiler several(arrays);
  const auto conv = [](int64_t c) {
    OpDesc op{OpKind::CONV2D, {t(DType::BF16, {1, c, 28, 28}), t(DType::BF16, {c, 3, 3, 32})}, t(DType::BF16, {1, 32, 28, 28})};
    op.window.padding = {1, 1};
    return op;
  };
  EXPECT_THROW(several.compile(conv(rows / 8 - 1)), UnsupportedOp);
  EXPECT_NE(several.compile(conv(rows / 8))->plan.find("implicit im2col"), std::string::npos);
}

// The same with every copy on one DMA channel: a kernel compiled for a chip of one channel (it runs on
// the preset, whose other channels it leaves idle).
class ConvOnOneDmaChannel : public Conv {
 protected:
  ConvOnOneDmaChannel() : one_channel_([] {
    sim::ChipConfig config = sim::load_chip_config(GetParam());
    config.core.dma.channels = 1;
    return config;
  }()) {}
  Compiler& compiler() override { return one_channel_; }
  Compiler one_channel_;
};

TEST_P(ConvOnOneDmaChannel, PacksTheTapsOnChannelZero) {
  OpDesc op{OpKind::CONV2D, {t(DType::BF16, {1, 3, 20, 20}), t(DType::BF16, {3, 7, 7, 8})}, t(DType::BF16, {1, 8, 10, 10})};
  op.window.padding = {3, 3};
  op.window.stride = {2, 2};
  const std::string plan = compiler().compile(op)->plan;
  EXPECT_NE(plan.find("(14 copies on ch0)"), std::string::npos) << plan;
  check({1, 3, 20, 20, 8, 7, 7, 3, 3, true, true, {OpKind::RELU}, 0, 2, 2});
  check({2, 5, 13, 11, 16, 3, 3, 1, 1, false, true, {}, 17});
}

TEST_P(Conv, WhatItCannotDoIsSaidSo) {
  OpDesc strided{OpKind::CONV2D, {t(DType::BF16, {1, 2, 19, 19}), t(DType::BF16, {2, 3, 3, 4})}, t(DType::BF16, {1, 4, 4, 4})};
  strided.window.stride = {5, 5};
  EXPECT_THROW(compiler_.compile(strided), UnsupportedOp);
  OpDesc in_f32{OpKind::CONV2D, {t(DType::F32, {1, 2, 9, 9}), t(DType::F32, {2, 3, 3, 4})}, t(DType::F32, {1, 4, 7, 7})};
  EXPECT_THROW(compiler_.compile(in_f32), UnsupportedOp);
  OpDesc wrong{OpKind::CONV2D, {t(DType::BF16, {1, 2, 9, 9}), t(DType::BF16, {2, 3, 3, 4})}, t(DType::BF16, {1, 4, 9, 9})};
  EXPECT_THROW(compiler_.compile(wrong), std::invalid_argument);  // not the window's output size
}

INSTANTIATE_TEST_SUITE_P(Presets, Conv, ::testing::Values("tiny", "base"), testing::preset_name);
INSTANTIATE_TEST_SUITE_P(Presets, ConvOnOneDmaChannel, ::testing::Values("tiny", "base"), testing::preset_name);

}  // namespace
}  // namespace npu::compiler
