// Lowering of the row ops (softmax, norms, last-dim reductions) to vector-unit programs.
#pragma once

#include "npusim/compiler/compiler.h"

namespace npu::compiler {

Kernel lower_row_op(const OpDesc& op, const sim::ChipConfig& config);

// x viewed as rows x length, the output as rows x length (or one element per
// row for the reductions): element strides of both views.
struct RowLayout {
  int64_t rows = 0, length = 0;
  int64_t x_row = 0, x_col = 0, o_row = 0, o_col = 0;
};

// Rows too long for the scratchpad, in chunks (long_rows.cpp); the op is
// already checked by lower_row_op.
Kernel lower_long_row_op(const OpDesc& op, const sim::ChipConfig& config, const RowLayout& layout);

}  // namespace npu::compiler
