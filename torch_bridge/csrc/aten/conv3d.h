// 3-D convolutions on the npu as sums of 2-D ones over the kernel's depth (conv3d.cpp).
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <optional>
#include <tuple>

namespace npusim {

// x [N, C, D, H, W] * w [O, C / groups, KD, KH, KW] (+ bias), not transposed; undefined where the chip cannot.
at::Tensor conv3d_forward(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& bias, c10::IntArrayRef stride,
                          c10::IntArrayRef padding, c10::IntArrayRef dilation, int64_t groups);
// Its gradients (input, weight, bias, as `mask` asks); false where the chip cannot.
bool conv3d_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& w, c10::IntArrayRef stride, c10::IntArrayRef padding,
                     c10::IntArrayRef dilation, int64_t groups, std::array<bool, 3> mask,
                     std::tuple<at::Tensor, at::Tensor, at::Tensor>* gradients);

}  // namespace npusim
