// Lowering of the 2-D convolution with implicit im2col (compiler/ops.def) to a tensor-core program.
#pragma once

#include "npusim/compiler/compiler.h"

namespace npu::compiler {

Kernel lower_conv2d(const OpDesc& op, const sim::ChipConfig& config);

}  // namespace npu::compiler
