// im2col compiled for the chip and run through the driver, on tiny and base:
// every output element against the window read in the test (a copy, so
// exact), for convolution and pooling shapes: strides, padding, dilation,
// rotated kernels, cropping (negative padding), strided inputs and outputs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "kernel_runner.h"

namespace npu::compiler {
namespace {

using isa::DType;

TensorDesc strided(DType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides) {
  TensorDesc t = TensorDesc::contiguous(dtype, std::move(shape));
  t.strides = std::move(strides);
  return t;
}

class Im2col : public testing::KernelTest {
 protected:
  // Runs im2col(x) -> out with the window and checks every element.
  testing::KernelRun check(const TensorDesc& x, const TensorDesc& out, const Window& window, double pad_value = 0.0) {
    OpDesc op{OpKind::IM2COL, {x}, out};
    op.window = window;
    op.pad_value = pad_value;
    SCOPED_TRACE(op.key());
    std::mt19937 rng(7);
    std::uniform_int_distribution<int> small(-100, 100);
    const testing::KernelRun run = this->run(op, [&](size_t, size_t) { return double(small(rng)) / 4; });
    const size_t e = isa::dtype_size_bytes(x.dtype);
    const auto& s = out.shape;
    const int64_t H = x.shape[2], W = x.shape[3];
    int64_t mismatches = 0;
    for (int64_t n = 0; n < s[0]; ++n)
      for (int64_t c = 0; c < s[1]; ++c)
        for (int64_t i = 0; i < s[2]; ++i)
          for (int64_t j = 0; j < s[3]; ++j)
            for (int64_t y = 0; y < s[4]; ++y)
              for (int64_t xx = 0; xx < s[5]; ++xx) {
                const int64_t si = window.flip ? s[2] - 1 - i : i, sj = window.flip ? s[3] - 1 - j : j;
                const int64_t h = y * window.stride[0] + si * window.dilation[0] - window.padding[0];
                const int64_t w = xx * window.stride[1] + sj * window.dilation[1] - window.padding[1];
                double want = pad_value;
                if (h >= 0 && h < H && w >= 0 && w < W) {
                  const int64_t at = x.storage_offset + n * x.strides[0] + c * x.strides[1] + h * x.strides[2] + w * x.strides[3];
                  want = testing::load(x.dtype, &run.inputs[0][size_t(at) * e]);
                }
                const int64_t at = out.storage_offset + n * out.strides[0] + c * out.strides[1] + i * out.strides[2] + j * out.strides[3] +
                                   y * out.strides[4] + xx * out.strides[5];
                const double got = testing::load(out.dtype, &run.output[size_t(at) * e]);
                if (got != want && mismatches++ < 5)
                  ADD_FAILURE() << "out[" << n << "," << c << "," << i << "," << j << "," << y << "," << xx << "] = " << got << ", want " << want;
              }
    EXPECT_EQ(mismatches, 0);
    return run;
  }

  static int64_t out_size(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dilation) {
    return (in + 2 * pad - dilation * (k - 1) - 1) / stride + 1;
  }
  // A convolution's windows: contiguous [N, C, KH, KW, OH, OW].
  void conv(DType dtype, int64_t n, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, Window window, double pad_value = 0.0) {
    const int64_t oh = out_size(h, kh, window.stride[0], window.padding[0], window.dilation[0]);
    const int64_t ow = out_size(w, kw, window.stride[1], window.padding[1], window.dilation[1]);
    check(t(dtype, {n, c, h, w}), t(dtype, {n, c, kh, kw, oh, ow}), window, pad_value);
  }
};

Window make_window(int64_t stride, int64_t padding, int64_t dilation = 1, bool flip = false) {
  Window w;
  w.stride = {stride, stride}, w.padding = {padding, padding}, w.dilation = {dilation, dilation}, w.flip = flip;
  return w;
}

TEST_P(Im2col, SamePadding3x3) { conv(DType::F32, 2, 3, 5, 7, 3, 3, make_window(1, 1)); }

TEST_P(Im2col, ResNetStem7x7Stride2) { conv(DType::BF16, 1, 3, 13, 11, 7, 7, make_window(2, 3)); }

TEST_P(Im2col, DilatedNonSquareWithoutPadding) {
  Window w;
  w.dilation = {2, 3}, w.stride = {1, 2};
  conv(DType::F32, 1, 5, 9, 17, 2, 3, w);
}

TEST_P(Im2col, OneByOneStride2) { conv(DType::BF16, 3, 8, 7, 7, 1, 1, make_window(2, 0)); }

TEST_P(Im2col, MaxPoolPadsWithMinusInfinity) {
  conv(DType::BF16, 2, 4, 9, 9, 3, 3, make_window(2, 1), -std::numeric_limits<double>::infinity());
}

// A column stride: the stage is de-interleaved (v.trans) so that each window position's row is one run.
// Strides 2 and 3, dilations 1 and 2, widths that are not multiples of the stride, 1-, 2- and 4-byte
// elements, the rotated kernel; and ResNet-18's max pooling at a size a test can check.
TEST_P(Im2col, AColumnStrideDeinterleavesTheStage) {
  for (const DType dtype : {DType::I8, DType::BF16, DType::F32})
    for (const int64_t stride : {2, 3})
      for (const int64_t dilation : {1, 2}) {
        SCOPED_TRACE(std::to_string(stride) + " " + std::to_string(dilation));
        const Window window = make_window(stride, 1, dilation, dilation == 2);
        const int64_t h = 10, w = 13, k = 3;
        const int64_t oh = out_size(h, k, stride, 1, dilation), ow = out_size(w, k, stride, 1, dilation);
        const auto run = check(t(dtype, {2, 3, h, w}), t(dtype, {2, 3, k, k, oh, ow}), window, dtype == DType::I8 ? 0.0 : -1.5);
        EXPECT_NE(run.kernel->plan.find("de-interleaved by the column stride"), std::string::npos) << run.kernel->plan;
      }
  conv(DType::F32, 1, 4, 112, 112, 3, 3, make_window(2, 1), -std::numeric_limits<double>::infinity());
}

// Small planes of many channels: a unit takes a group of channels (the last group partial), with a
// column stride (de-interleaved) and without, and with an output laid out for the weight gradient.
TEST_P(Im2col, SmallPlanesGoInGroupsOfChannels) {
  for (const int64_t stride : {1, 2}) {
    const int64_t o = (9 + 2 - 3) / stride + 1;
    const auto run = check(t(DType::BF16, {2, 37, 9, 9}), t(DType::BF16, {2, 37, 3, 3, o, o}), make_window(stride, 1), -1.5);
    EXPECT_NE(run.kernel->plan.find(" channels, " + std::to_string(o) + " output rows"), std::string::npos) << run.kernel->plan;
  }
  const int64_t n = 2, c = 19, k = 3, oh = 5, ow = 5;
  const std::vector<int64_t> strides = {oh * ow, k * k * n * oh * ow, k * n * oh * ow, n * oh * ow, ow, 1};
  const auto gradient = check(t(DType::F32, {n, c, 5, 5}), strided(DType::F32, {n, c, k, k, oh, ow}, strides), make_window(1, 1));
  EXPECT_NE(gradient.kernel->plan.find(" channels, "), std::string::npos) << gradient.kernel->plan;
}

// Output rows in blocks of one height, as many as share the cores evenly: the RGB stem at 224 x 224 on
// base is 3 channels of 112 rows, 12 units of 28 rows over 4 cores (the tallest block that fits, 47, left
// 9 units, one core with three, and blocks of 47, 47 and 18). The window positions are picked by two
// DMA channels where there are four.
TEST_P(Im2col, RowBlocksOfOneHeightShareTheCoresEvenly) {
  const auto run = check(t(DType::BF16, {1, 3, 224, 224}), t(DType::BF16, {1, 3, 7, 7, 112, 112}), make_window(2, 3));
  if (GetParam() == "base") {
    EXPECT_NE(run.kernel->plan.find("12 units of (image, channel, 28 output rows) over 4 cores"), std::string::npos) << run.kernel->plan;
    const std::string listing = Compiler::listing(*run.kernel);
    EXPECT_NE(listing.find("dma.cp ch3,"), std::string::npos) << listing;
  }
}

TEST_P(Im2col, IntegersPadWithTheirValue) { conv(DType::I32, 1, 2, 4, 5, 2, 2, make_window(1, 1), 7); }

// A convolution's input gradient: the rotated kernel over the output
// gradient padded by dilation * (K - 1) - padding, cropped where that is negative.
TEST_P(Im2col, RotatedKernelForTheInputGradient) {
  Window w = make_window(1, 2, 1, true);
  check(t(DType::F32, {1, 3, 4, 6}), t(DType::F32, {1, 3, 3, 3, 6, 8}), w);
  Window crop = make_window(1, -1, 1, true);
  check(t(DType::F32, {1, 2, 8, 8}), t(DType::F32, {1, 2, 3, 3, 4, 4}), crop);
}

// Rows too wide for two slots of the scratchpad (tiny's 256 KiB; base's 2 MiB takes them) skip the
// staging: DRAM-to-DRAM copies, a row (or an element) at a time.
TEST_P(Im2col, RowsTooWideForTheScratchpadAreCopiedDramToDram) {
  for (const int64_t stride : {1, 2}) {
    const int64_t w = 4000 * stride;
    Window window = make_window(stride, 1, 1, stride == 1);  // the rotated kernel too
    const auto run = check(t(DType::F32, {1, 2, 3, w}), t(DType::F32, {1, 2, 3, 3, (3 + 2 - 3) / stride + 1, (w + 2 - 3) / stride + 1}), window);
    const bool staged = run.kernel->plan.find("staged through the scratchpad") != std::string::npos;
    EXPECT_EQ(staged, GetParam() == std::string("base")) << run.kernel->plan;
  }
}

TEST_P(Im2col, ManyChannelsSplitOverCores) { conv(DType::BF16, 1, 67, 6, 6, 3, 3, make_window(1, 1)); }

TEST_P(Im2col, ChannelsLastInput) {
  const int64_t n = 2, c = 3, h = 6, w = 5;
  // [N, C, H, W] stored as [N, H, W, C].
  check(strided(DType::F32, {n, c, h, w}, {h * w * c, 1, w * c, c}), t(DType::F32, {n, c, 3, 3, 6, 5}), make_window(1, 1));
}

TEST_P(Im2col, OutputLaidOutForTheWeightGradient) {
  // [N, C, KH, KW, OH, OW] stored as [C, KH, KW, N, OH, OW]: the layout of
  // cols^T in the weight gradient's single matmul.
  const int64_t n = 2, c = 3, k = 3, oh = 4, ow = 4;
  const std::vector<int64_t> strides = {oh * ow, k * k * n * oh * ow, k * n * oh * ow, n * oh * ow, ow, 1};
  check(t(DType::F32, {n, c, 4, 4}), strided(DType::F32, {n, c, k, k, oh, ow}, strides), make_window(1, 1));
}

TEST_P(Im2col, EmptyOutputHalts) {
  const auto run = check(t(DType::F32, {0, 3, 4, 4}), t(DType::F32, {0, 3, 3, 3, 2, 2}), make_window(1, 0));
  EXPECT_NE(run.kernel->plan.find("nothing to copy"), std::string::npos);
}

TEST_P(Im2col, IllFormedOpsAreRejected) {
  OpDesc op{OpKind::IM2COL, {t(DType::F32, {1, 3, 4, 4})}, t(DType::F32, {1, 2, 3, 3, 2, 2})};
  EXPECT_THROW(compiler_.compile(op), std::invalid_argument);  // C differs
  op.output = t(DType::F32, {1, 3, 3, 3, 2, 2});
  op.window.stride = {0, 1};
  EXPECT_THROW(compiler_.compile(op), std::invalid_argument);
  op.window.stride = {1, 1};
  op.inputs[0].dtype = op.output.dtype = DType::I32;
  op.pad_value = -std::numeric_limits<double>::infinity();
  EXPECT_THROW(compiler_.compile(op), std::invalid_argument);
}

INSTANTIATE_TEST_SUITE_P(Presets, Im2col, ::testing::Values("tiny", "base"), testing::preset_name);

}  // namespace
}  // namespace npu::compiler
