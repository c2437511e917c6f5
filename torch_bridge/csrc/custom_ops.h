// The npu kernels of the npusim:: custom ops, for the ATen kernels that reuse them.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

namespace npusim {

// npusim::layer_norm on the npu: over the last dim, one kernel (the CPU's result when the compiler declines).
at::Tensor layer_norm_npu(const at::Tensor& x, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias, double eps);

}  // namespace npusim
