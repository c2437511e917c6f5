// Lowering of matmul (compiler/ops.def) to tensor-core programs.
#pragma once

#include <optional>

#include "matmul_operands.h"
#include "npusim/compiler/compiler.h"

namespace npu::compiler {

Kernel lower_matmul(const OpDesc& op, const sim::ChipConfig& config);

// A matmul's operands as lower_matmul has read them: out[b] = A[b] @ B[b], M x K by K x N.
struct MatmulShape {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  Matrix a, b, c;
  bool integer = false;  // i8 operands, i32 sums
  bool split = false;    // f32 as bf16 parts on a tensor core without f32
  // A bias that is one row of N (op.inputs[2]) in A's dtype, with unit stride: `bias` then lies
  // as that row (its col_stride 1). Other biases, scales and residuals are not described here.
  bool bias_row = false;
  Matrix bias;
};

// The schedule that shares B's tiles between cores over the NoC
// (matmul_shared.cpp), where it applies and its estimate of time is clearly
// below `tiled_cycles`, the estimate of the schedule in which every core
// loads its own tiles; nullopt otherwise.
std::optional<Kernel> lower_matmul_shared(const OpDesc& op, const MatmulShape& shape, const sim::ChipConfig& config, double tiled_cycles);

}  // namespace npu::compiler
