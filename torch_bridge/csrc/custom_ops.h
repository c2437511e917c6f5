// The npu kernels of the npusim:: custom ops, for the ATen kernels that reuse them.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

namespace npusim {

// npusim::gemm on the npu: epilogue(alpha * a @ b + beta * bias), one kernel.
at::Tensor gemm_npu(const at::Tensor& a, const at::Tensor& b, const std::optional<at::Tensor>& bias, double alpha, double beta,
                    c10::ArrayRef<c10::string_view> epilogue);

// npusim::layer_norm on the npu: over the last dim, one kernel (the CPU's result when the compiler declines).
at::Tensor layer_norm_npu(const at::Tensor& x, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias, double eps);

}  // namespace npusim
