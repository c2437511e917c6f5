// Lowering of elementwise ops (compiler/ops.def) to vector-unit programs.
#pragma once

#include "npusim/compiler/compiler.h"

namespace npu::compiler {

Kernel lower_elementwise(const OpDesc& op, const sim::ChipConfig& config);

// The vector instruction of a unary elementwise op (for epilogues).
isa::Opcode unary_opcode(OpKind kind);

}  // namespace npu::compiler
