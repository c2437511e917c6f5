// Lowering of embedding(table, indices) (compiler/ops.def): rows of a table
// in DRAM picked by indices, with dma.gather.
#pragma once

#include "npusim/compiler/compiler.h"

namespace npu::compiler {

Kernel lower_embedding(const OpDesc& op, const sim::ChipConfig& config);

}  // namespace npu::compiler
