// Lowering of elementwise ops (compiler/ops.def) to vector-unit programs.
#pragma once

#include "npusim/compiler/compiler.h"

namespace npu::compiler {

Kernel lower_elementwise(const OpDesc& op, const sim::ChipConfig& config);

}  // namespace npu::compiler
