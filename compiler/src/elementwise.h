// Lowering of elementwise ops (compiler/ops.def) to vector-unit programs, and
// the index-space collapse that the other elementwise-shaped kernels share.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "npusim/compiler/compiler.h"

namespace npu::compiler {

Kernel lower_elementwise(const OpDesc& op, const sim::ChipConfig& config);

// The vector instruction of a unary elementwise op (for epilogues).
isa::Opcode unary_opcode(OpKind kind);

// An index space collapsed to at most three dimensions.
struct IndexSpace {
  std::array<int64_t, 3> shape{};               // planes, rows, cols
  std::vector<std::array<int64_t, 3>> strides;  // per operand, in elements; 0 broadcasts
};

// An input's strides over the output's dims `shape` (0 where it broadcasts);
// std::invalid_argument, naming `op`, where it does not broadcast.
std::vector<int64_t> broadcast_strides(const std::string& op, const TensorDesc& input, const std::vector<int64_t>& shape);

// `dims` with every operand's strides over them, collapsed: dims of size 1
// dropped, neighbours merged wherever every operand's strides allow, padded
// to planes x rows x cols, and one long run folded into rows of a power of
// two. UnsupportedOp for negative strides or more than 3 dims that do not merge.
IndexSpace collapse_index_space(const std::string& op, const std::vector<int64_t>& dims, const std::vector<std::vector<int64_t>>& strides);

}  // namespace npu::compiler
