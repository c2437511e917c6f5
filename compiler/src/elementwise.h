// Lowering of elementwise ops (compiler/ops.def) to vector-unit programs, and
// the index-space collapse that the other elementwise-shaped kernels share.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "npusim/compiler/compiler.h"
#include "npusim/compiler/program_builder.h"

namespace npu::compiler {

Kernel lower_elementwise(const OpDesc& op, const sim::ChipConfig& config);

// A copy that changes the layout, as blocked 2-D transposes with long DRAM runs on both sides
// (transpose_copy.cpp); nullopt where it does not apply (lower_elementwise then copies).
std::optional<Kernel> lower_transpose_copy(const OpDesc& op, const sim::ChipConfig& config);

// The vector instruction of a unary elementwise op (for epilogues).
isa::Opcode unary_opcode(OpKind kind);

// An index space collapsed to planes x rows x cols. Planes may stand for
// several dims that do not merge (plane_dims, outermost first, their product
// shape[0]), each with its own stride per operand (plane_strides); with one,
// strides[k][0] is its stride.
struct IndexSpace {
  std::array<int64_t, 3> shape{};               // planes, rows, cols
  std::vector<std::array<int64_t, 3>> strides;  // per operand, in elements; 0 broadcasts
  std::vector<int64_t> plane_dims;
  std::vector<std::vector<int64_t>> plane_strides;  // per operand
};

// The most dims a collapsed index space holds (planes of up to kMaxIndexDims - 2 dims).
inline constexpr size_t kMaxIndexDims = 6;

// An input's strides over the output's dims `shape` (0 where it broadcasts);
// std::invalid_argument, naming `op`, where it does not broadcast.
std::vector<int64_t> broadcast_strides(const std::string& op, const TensorDesc& input, const std::vector<int64_t>& shape);

// `dims` with every operand's strides over them, collapsed: dims of size 1
// dropped, neighbours merged wherever every operand's strides allow, padded
// to planes x rows x cols, and one long run folded into rows of a power of
// two; the dims before the last two are the planes. UnsupportedOp for
// negative strides or more than kMaxIndexDims dims that do not merge.
IndexSpace collapse_index_space(const std::string& op, const std::vector<int64_t>& dims, const std::vector<std::vector<int64_t>>& strides);

// How a kernel reads an operand's mt x nt tile: all of it, one row (the operand
// broadcast over rows), one column (broadcast over columns), or one element.
enum class TileRead { Full, Row, Col, Scalar };
// The registers of a DMA's shape operands.
struct DmaShapeRegs {
  Reg n0, n1, n2, ds1, ss1, ds2, ss2;
};
// Sets `regs` to the DMA shape that reads an operand's mt x nt tile densely
// into local memory, from its row and column strides (`stride[1]`, `stride[2]`,
// elements of `esize_bytes`): rows at once when the columns are contiguous,
// else an element at a time along each row, rows as planes.
void emit_tile_dma_shape(ProgramBuilder& b, const DmaShapeRegs& regs, TileRead read, const std::array<int64_t, 3>& stride, int64_t esize_bytes,
                         Reg mt, Reg nt);

}  // namespace npu::compiler
