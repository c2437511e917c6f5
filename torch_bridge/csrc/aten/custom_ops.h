// The npu kernels of the npusim:: custom ops, for the ATen kernels that reuse them.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>
#include <vector>

#include "npusim/compiler/op.h"

namespace npusim {

// npusim::gemm on the npu: epilogue(alpha * a @ b + beta * bias), one kernel.
at::Tensor gemm_npu(const at::Tensor& a, const at::Tensor& b, const std::optional<at::Tensor>& bias, double alpha, double beta,
                    const std::vector<std::string>& epilogue, const std::optional<at::Tensor>& residual = std::nullopt);

// The compiler op of a gemm or conv2d epilogue step by name (relu, gelu, gelu_tanh,
// silu, tanh, sigmoid); a c10::Error naming the allowed ones otherwise.
npu::compiler::OpKind epilogue_kind(const std::string& name);

// (The epilogue names are owning strings: a c10::ArrayRef<c10::string_view> argument
// points into the boxed call's list, which PyTorch frees while it unboxes later
// arguments, so a list of names followed by another argument read freed memory.)

// npusim::conv2d: epilogue(conv2d(x, weight) * scale + bias + residual), scale and bias per
// output channel (an eval batch norm folded in), the residual the output's shape (a residual
// block's skip connection), in f32, rounded once to x's dtype.
at::Tensor conv2d_cpu(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias, c10::IntArrayRef stride,
                      c10::IntArrayRef padding, c10::IntArrayRef dilation, int64_t groups, const std::vector<std::string>& epilogue,
                      const std::optional<at::Tensor>& scale, const std::optional<at::Tensor>& residual);
// The same on the npu: im2col and one matmul whose epilogue scales, adds and applies the steps (conv.cpp).
at::Tensor conv2d_npu(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias, c10::IntArrayRef stride,
                      c10::IntArrayRef padding, c10::IntArrayRef dilation, int64_t groups, const std::vector<std::string>& epilogue,
                      const std::optional<at::Tensor>& scale, const std::optional<at::Tensor>& residual);

// npusim::layer_norm on the npu: over the last dim, one kernel (the CPU's result when the compiler declines);
// the result in `dtype` (x's or f32) when given.
at::Tensor layer_norm_npu(const at::Tensor& x, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias, double eps,
                          std::optional<at::ScalarType> dtype = std::nullopt);

}  // namespace npusim
