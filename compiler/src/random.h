// Lowering of the random ops (compiler/ops.def: uniform, normal, bernoulli).
#pragma once

#include "npusim/compiler/compiler.h"

namespace npu::compiler {

Kernel lower_random(const OpDesc& op, const sim::ChipConfig& config);

}  // namespace npu::compiler
