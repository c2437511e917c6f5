// Resampling helpers other ops use (resampling.cpp).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

namespace npusim {

// Adaptive average pooling of x over its last dim (and the one before, where rows_out is given), any
// sizes: each output the mean of ATen's window [floor(o in / out), ceil((o + 1) in / out)), as f32
// products with averaging matrices. The result is f32.
at::Tensor adaptive_average_f32(const at::Tensor& x, std::optional<int64_t> rows_out, int64_t cols_out);
// Its gradient: the output's gradient through the transposed matrices (input sizes given), in f32.
at::Tensor adaptive_average_backward_f32(const at::Tensor& grad, std::optional<int64_t> rows_in, int64_t cols_in);

}  // namespace npusim
