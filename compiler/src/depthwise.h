// Lowering of the depthwise convolution (compiler/ops.def) to a vector-unit program.
#pragma once

#include "npusim/compiler/compiler.h"

namespace npu::compiler {

Kernel lower_depthwise(const OpDesc& op, const sim::ChipConfig& config);

}  // namespace npu::compiler
