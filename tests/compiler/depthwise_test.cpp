// The depthwise convolution compiled for the chip and run through the driver,
// on tiny and base: every output element against a double reference of the
// same f32 arithmetic (each tap's product rounded to f32 and summed in tap
// order; bounds below), with strides 1 and 2, padding, odd sizes, strided
// inputs, a per-channel scale and bias and an epilogue.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernel_runner.h"

namespace npu::compiler {
namespace {

using isa::DType;

class Depthwise : public testing::KernelTest {
 protected:
  // x [N, C, H, W] (optionally with rows of `row_pitch`), kernels KH x KW, the window; bias and scale when asked.
  void check(DType dtype, int64_t n, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t stride, int64_t pad,
             bool bias_and_scale = false, std::vector<OpKind> epilogue = {}, int64_t row_pitch = 0) {
    TensorDesc x = t(dtype, {n, c, h, w});
    if (row_pitch) x.strides = {c * h * row_pitch, h * row_pitch, row_pitch, 1};
    const int64_t oh = (h + 2 * pad - kh) / stride + 1, ow = (w + 2 * pad - kw) / stride + 1;
    OpDesc op{OpKind::DEPTHWISE_CONV, {x, t(dtype, {c, 1, kh, kw})}, t(dtype, {n, c, oh, ow})};
    if (bias_and_scale) op.inputs.push_back(t(DType::F32, {c})), op.inputs.push_back(t(DType::F32, {c}));
    op.window.stride = {stride, stride}, op.window.padding = {pad, pad};
    op.epilogue = epilogue;
    SCOPED_TRACE(op.key());
    std::mt19937 rng(11);
    std::uniform_real_distribution<double> values(-2, 2);
    const testing::KernelRun run = this->run(op, [&](size_t, size_t) { return values(rng); });
    SCOPED_TRACE(run.kernel->plan);
    const size_t e = isa::dtype_size_bytes(dtype);
    const auto in = [&](size_t k, int64_t at) { return testing::load(op.inputs[k].dtype, &run.inputs[k][size_t(at) * isa::dtype_size_bytes(op.inputs[k].dtype)]); };
    int mismatches = 0;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t y = 0; y < oh; ++y)
          for (int64_t xx = 0; xx < ow; ++xx) {
            double sum = 0, magnitude = 0;
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t r = y * stride + i - pad, q = xx * stride + j - pad;
                if (r < 0 || r >= h || q < 0 || q >= w) continue;
                const double p = in(0, b * x.strides[0] + ch * x.strides[1] + r * x.strides[2] + q) * in(1, (ch * kh + i) * kw + j);
                sum += p, magnitude += std::fabs(p);
              }
            double scale = 1;
            if (bias_and_scale) scale = in(3, ch), sum = sum * scale + in(2, ch), magnitude = magnitude * std::fabs(scale) + std::fabs(in(2, ch));
            for (const OpKind k : epilogue) sum = k == OpKind::RELU ? std::max(sum, 0.0) : sum;
            const double got = testing::load(dtype, &run.output[size_t(((b * c + ch) * oh + y) * ow + xx) * e]);
            // f32 products and sums: a rounding per tap; the output's own rounding (bf16: 2^-8 relative, f16 2^-11).
            const int output_bits = dtype == DType::BF16 ? 8 : dtype == DType::F16 ? 11 : 0;
            const double bound = double(kh * kw + 2) * std::ldexp(magnitude, -23) + (output_bits ? std::ldexp(std::fabs(sum), -output_bits) : 0);
            if (!(std::fabs(got - sum) <= bound) && ++mismatches <= 5)
              ADD_FAILURE() << "out[" << b << "," << ch << "," << y << "," << xx << "] = " << got << ", want " << sum << " +- " << bound;
          }
    EXPECT_EQ(mismatches, 0);
    EXPECT_NE(run.kernel->plan.find("zero-padded stage"), std::string::npos) << run.kernel->plan;
  }
};

TEST_P(Depthwise, ThreeByThreeSamePadding) { check(DType::F32, 2, 5, 9, 11, 3, 3, 1, 1); }
TEST_P(Depthwise, FiveByFiveStride2InBf16) { check(DType::BF16, 1, 6, 13, 10, 5, 5, 2, 2); }
TEST_P(Depthwise, Stride2OddSizesNoPadding) { check(DType::F32, 2, 3, 9, 7, 3, 3, 2, 0); }
// Stride 2 reads the stage in phases (rows by the DMA, columns split by v.trans): odd and even sizes and
// kernels, padding, strided rows, a fused scale, bias and activation.
TEST_P(Depthwise, Stride2PhasesWithPaddingStridedRowsAndAnEpilogue) {
  check(DType::BF16, 2, 4, 14, 12, 3, 3, 2, 1, true, {OpKind::RELU}, 15);
  check(DType::F32, 1, 3, 10, 9, 4, 4, 2, 1);
  check(DType::F16, 1, 2, 7, 8, 3, 3, 2, 2);
}
TEST_P(Depthwise, ScaleBiasAndReluOnStridedRows) { check(DType::F32, 2, 4, 8, 6, 3, 3, 1, 1, true, {OpKind::RELU}, 9); }
TEST_P(Depthwise, MobileNetsFirstBlock) { check(DType::BF16, 1, 16, 56, 56, 3, 3, 1, 1, true); }

TEST_P(Depthwise, WhatItCannotDoIsSaidSo) {
  OpDesc dilated{OpKind::DEPTHWISE_CONV, {t(DType::F32, {1, 2, 9, 9}), t(DType::F32, {2, 1, 3, 3})}, t(DType::F32, {1, 2, 5, 5})};
  dilated.window.dilation = {2, 2};
  EXPECT_THROW(compiler_.compile(dilated), UnsupportedOp);
  OpDesc huge{OpKind::DEPTHWISE_CONV, {t(DType::F32, {1, 1, 2000, 2000}), t(DType::F32, {1, 1, 3, 3})}, t(DType::F32, {1, 1, 1998, 1998})};
  EXPECT_THROW(compiler_.compile(huge), UnsupportedOp);  // a plane larger than the scratchpad
  OpDesc wrong{OpKind::DEPTHWISE_CONV, {t(DType::F32, {1, 2, 9, 9}), t(DType::F32, {2, 1, 3, 3})}, t(DType::F32, {1, 2, 9, 9})};
  EXPECT_THROW(compiler_.compile(wrong), std::invalid_argument);  // not the window's output size
}

INSTANTIATE_TEST_SUITE_P(Presets, Depthwise, ::testing::Values("tiny", "base"), testing::preset_name);

}  // namespace
}  // namespace npu::compiler
