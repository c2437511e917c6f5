// Lowering of fused scaled-dot-product attention (compiler/ops.def,
// NPU_ATTENTION_OP) to one tensor-core and vector-unit program.
#pragma once

#include "npusim/compiler/compiler.h"

namespace npu::compiler {

Kernel lower_attention(const OpDesc& op, const sim::ChipConfig& config);

}  // namespace npu::compiler
