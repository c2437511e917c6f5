// Lowering of matmul (compiler/ops.def) to tensor-core programs.
#pragma once

#include "npusim/compiler/compiler.h"

namespace npu::compiler {

Kernel lower_matmul(const OpDesc& op, const sim::ChipConfig& config);

}  // namespace npu::compiler
