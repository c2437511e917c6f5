// Lowering of im2col (compiler/ops.def): the windows of a convolution or a pooling, on the DMA engine.
#pragma once

#include "npusim/compiler/compiler.h"

namespace npu::compiler {

Kernel lower_im2col(const OpDesc& op, const sim::ChipConfig& config);

}  // namespace npu::compiler
