// Lowering of the row ops (softmax, norms, last-dim reductions) to vector-unit programs.
#pragma once

#include "npusim/compiler/compiler.h"

namespace npu::compiler {

Kernel lower_row_op(const OpDesc& op, const sim::ChipConfig& config);

}  // namespace npu::compiler
