// Lowering of the row ops (softmax, norms, last-dim reductions) to vector-unit programs.
#pragma once

#include <algorithm>
#include <limits>
#include <optional>

#include "npusim/compiler/compiler.h"
#include "npusim/compiler/program_builder.h"

namespace npu::compiler {

Kernel lower_row_op(const OpDesc& op, const sim::ChipConfig& config);

// The row ops that leave one value per row.
inline bool is_row_reduction(OpKind kind) {
  return kind == OpKind::SUM || kind == OpKind::MEAN || kind == OpKind::AMAX || kind == OpKind::AMIN || kind == OpKind::VAR ||
         kind == OpKind::STD || kind == OpKind::ARGMAX || kind == OpKind::ARGMIN;
}

// The row ops that give an input's gradient from an output's (g first, then y or x, ...).
inline bool is_row_backward(OpKind kind) {
  return kind == OpKind::SOFTMAX_BACKWARD || kind == OpKind::LOG_SOFTMAX_BACKWARD || kind == OpKind::LAYER_NORM_BACKWARD ||
         kind == OpKind::RMS_NORM_BACKWARD;
}

// var and std divide the sum of squared deviations by max(0, L - correction): its reciprocal, in f32
// (infinity for a divisor of 0, so that 0 / 0 gives nan and x / 0 inf, as PyTorch does).
inline float variance_scale(int64_t length, double correction) {
  const double divisor = std::max(0.0, double(length) - correction);
  return divisor == 0 ? std::numeric_limits<float>::infinity() : float(1.0 / divisor);
}

// x viewed as rows x length, the output as rows x length (or one element per
// row for the reductions): element strides of both views.
struct RowLayout {
  int64_t rows = 0, length = 0;
  int64_t x_row = 0, x_col = 0, o_row = 0, o_col = 0;
};

// x [..., L] whose L is strided and whose leading dims end in a contiguous run
// (inner) and merge into one stride beyond it (outer): outer x L x inner, the
// column kernels' view; nullopt for other layouts.
struct ColumnView {
  int64_t outer = 1, outer_stride = 0;  // elements
  int64_t length = 0, length_stride = 0;
  int64_t inner = 1;  // contiguous
};
std::optional<ColumnView> column_view(const TensorDesc& x);
// The column kernels' tiles: tc columns of one outer index, tiles numbered outer-major.
// Registers: tile t's outer index o, first column j0 and width nt (tc, or the last tile's rest).
// The column blocks of an outer index are taken from block c % (blocks) on, c the core its
// tiles go to (of `cores`): cores in step otherwise read the same blocks at once, which a
// row stride of a few interleave blocks puts on the same DRAM channels (softmax(dim=1) of
// 32 x 1024 x 256 bf16 on base: 128-column tiles, 512-byte rows, two channels of four).
void emit_column_tile(ProgramBuilder& b, const ColumnView& view, int64_t tc, int64_t cores, Reg t, Reg o, Reg j0, Reg nt, Reg tmp);
// addr = symbol sym (a tensor of td, viewed as `view`) at row 0 of the tile's columns, elements of e bytes.
void emit_column_tile_address(ProgramBuilder& b, uint16_t sym, const TensorDesc& td, const ColumnView& view, int64_t e, Reg o, Reg j0, Reg addr,
                              Reg tmp);

// softmax and log_softmax along such a dim (column_softmax.cpp).
bool is_column_softmax(const OpDesc& op);
Kernel lower_column_softmax(const OpDesc& op, const sim::ChipConfig& config);

// sum, mean, amax or amin along a dim that is not innermost in memory (x's
// last dim strided, its leading dims ending in a contiguous run): read in
// runs along that run instead (column_reduce.cpp).
bool is_column_reduction(const OpDesc& op);
Kernel lower_column_reduction(const OpDesc& op, const sim::ChipConfig& config);

// Rows too long for the scratchpad, in chunks (long_rows.cpp); the op is
// already checked by lower_row_op.
Kernel lower_long_row_op(const OpDesc& op, const sim::ChipConfig& config, const RowLayout& layout);

}  // namespace npu::compiler
