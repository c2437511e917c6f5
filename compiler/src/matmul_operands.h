// What both matmul schedules share: how an operand lies in memory, and the
// code that addresses its tiles and loads them dense into local memory.
// (matmul.cpp: every core loads its own tiles; matmul_shared.cpp: the cores
// of a group share B's tiles over the NoC.)
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "npusim/compiler/program_builder.h"
#include "npusim/isa/isa.h"
#include "npusim/sim/chip_config.h"
#include "npusim/sim/chip_peaks.h"

namespace npu::compiler {

// How a matrix operand lies in memory, in elements.
struct Matrix {
  int64_t batch_stride = 0;
  // Two batch dims that do not merge (a grouped convolution's images and groups, its weights shared
  // over the images): batch element b is (b / batch_inner, b % batch_inner), the first at this stride.
  int64_t batch_inner = 0;  // 0: one batch dim
  int64_t outer_batch_stride = 0;
  int64_t row_stride = 0;  // along its first matrix dim (M for A, K for B, M for C)
  int64_t col_stride = 0;  // along its second (K, N, N)
  int64_t offset = 0;
  int64_t esize = 0;
  isa::DType dtype = isa::DType::F32;
  bool transposed() const { return col_stride != 1 && row_stride == 1; }
};

inline std::string layout(const Matrix& m) {
  return m.col_stride == 1 ? "row-major" : m.transposed() ? "transposed (tensor-core flag)" : "strided (element DMA)";
}

// The shape operands of a 3-D DMA instruction (dma.ld, dma.st).
struct DmaShape {
  Reg n0, n1, n2, dst_s1, src_s1, dst_s2, src_s2;
};

// `shape` copies a rows x cols tile of `mx` dense into local memory: row by
// row, transposed operands as they lie (cols x rows), any other strides an
// element at a time along each row.
inline void emit_tile_shape(ProgramBuilder& pb, const Matrix& mx, Reg rows, Reg cols, const DmaShape& shape) {
  pb.li(shape.n2, 0), pb.li(shape.dst_s2, 0), pb.li(shape.src_s2, 0);
  if (mx.col_stride == 1) {
    pb.muli(shape.n0, cols, mx.esize), pb.mov(shape.n1, rows), pb.muli(shape.dst_s1, cols, mx.esize), pb.li(shape.src_s1, mx.row_stride * mx.esize);
  } else if (mx.transposed()) {
    pb.muli(shape.n0, rows, mx.esize), pb.mov(shape.n1, cols), pb.muli(shape.dst_s1, rows, mx.esize), pb.li(shape.src_s1, mx.col_stride * mx.esize);
  } else {
    pb.li(shape.n0, mx.esize), pb.mov(shape.n1, cols), pb.li(shape.dst_s1, mx.esize), pb.li(shape.src_s1, mx.col_stride * mx.esize);
    pb.mov(shape.n2, rows), pb.muli(shape.dst_s2, cols, mx.esize), pb.li(shape.src_s2, mx.row_stride * mx.esize);
  }
}

inline void emit_dma(ProgramBuilder& pb, isa::Opcode opcode, unsigned channel, Reg dst, Reg src, const DmaShape& shape) {
  pb.emit(opcode, {int64_t(channel), dst.index, src.index, shape.n0.index, shape.n1.index, shape.n2.index, shape.dst_s1.index,
                   shape.src_s1.index, shape.dst_s2.index, shape.src_s2.index});
}

// out = the global address of element (row, col) of batch element `batch` of
// `mx`, whose buffer is `symbol`; tmp is scratch.
// out += the offset of batch element `batch` of `mx`, in bytes; tmp is scratch.
inline void emit_batch_offset(ProgramBuilder& pb, Reg out, const Matrix& mx, Reg batch, Reg tmp) {
  if (batch.index == 0) return;
  if (mx.batch_inner == 0) {
    if (mx.batch_stride) pb.li(tmp, mx.batch_stride * mx.esize), pb.mul(tmp, tmp, batch), pb.add(out, out, tmp);
    return;
  }
  const Reg part = pb.reg();
  pb.li(tmp, mx.batch_inner);
  pb.emit(isa::Opcode::REMU, {part.index, batch.index, tmp.index});
  if (mx.batch_stride) pb.li(tmp, mx.batch_stride * mx.esize), pb.mul(tmp, tmp, part), pb.add(out, out, tmp);
  pb.li(tmp, mx.batch_inner);
  pb.emit(isa::Opcode::DIVU, {part.index, batch.index, tmp.index});
  if (mx.outer_batch_stride) pb.li(tmp, mx.outer_batch_stride * mx.esize), pb.mul(tmp, tmp, part), pb.add(out, out, tmp);
  pb.release(part);
}

inline void emit_element_address(ProgramBuilder& pb, Reg out, uint16_t symbol, const Matrix& mx, Reg batch, Reg row, Reg col, Reg tmp) {
  pb.emit(isa::Opcode::LA, {out.index, symbol});
  emit_batch_offset(pb, out, mx, batch, tmp);
  const std::pair<Reg, int64_t> terms[] = {{row, mx.row_stride}, {col, mx.col_stride}};
  for (const auto& [index, stride] : terms) {
    if (stride == 0 || index.index == 0) continue;
    pb.li(tmp, stride * mx.esize);
    pb.mul(tmp, tmp, index);
    pb.add(out, out, tmp);
  }
  if (mx.offset) pb.addi(out, out, mx.offset * mx.esize);
}

// The tensor core's cycles for a tm x tn output tile over depth k: weight-stationary
// folds of max(tm, array rows) rows, and one fill and drain (the K steps' tc.mm run
// back to back, overlapping theirs, when their operands are there in time); a fill and
// drain per fold without weight double buffering. Several arrays take the slowest one's share of
// the folds, as the simulator times them (TensorCoreConfig::array_share).
// With the K of the product cut into steps of tk, one tc.mm each: every step folds its own K over the
// array's rows, so a step shallower than the array leaves rows idle (K steps of 64 on a 128-row array
// take as many folds as steps of 128: the split f32 1024^3 GEMM's tiles of 256 x 256 x 64 ran the
// array at half its peak).
inline double tensor_core_tile_cycles(const sim::ChipConfig& config, int64_t tm, int64_t tn, int64_t k, int64_t tk) {
  const int64_t array_rows = config.core.tensor_core.rows, array_cols = config.core.tensor_core.cols;
  const auto folds_of = [&](int64_t depth) {
    const sim::TensorCoreConfig::ArrayShare share = config.core.tensor_core.array_share(uint64_t(tn), uint64_t(depth));
    return double((int64_t(share.n) + array_cols - 1) / array_cols) * double((int64_t(share.row_extent) + array_rows - 1) / array_rows);
  };
  tk = tk <= 0 ? k : std::min(tk, k);
  const double folds = tk == 0 ? 0.0 : double(k / tk) * folds_of(tk) + (k % tk ? folds_of(k % tk) : 0.0);
  return config.core.tensor_core.weight_double_buffering ? folds * double(std::max(tm, array_rows)) + double(2 * array_rows + array_cols)
                                                         : folds * double(tm + 2 * array_rows + array_cols);
}

// Tiles of at most `most` rows over `m`: as few as that allows, all of one height (but the last,
// one row less at most). 777 rows in tiles of up to 512 are two tiles of 389 rather than 512 and
// 265: a core with a tall one took twice as long as one with a short one, and the estimates,
// which price every tile at the full height, could not tell the two apart.
inline int64_t balanced_tile(int64_t m, int64_t most) { return m <= most ? m : ceil_div(m, ceil_div(m, most)); }

// The DRAM bandwidth a matmul's estimate counts on: the channels' peak less refresh, and less
// what in-order service loses with a matmul's strided tile rows (a request waits for its bank
// and the bus idles behind it: on the former base, 128 GB/s, the row kernels reached the refresh
// limit, the GEMMs 69-85% of the peak; 85% of what refresh leaves).
inline double matmul_dram_bytes_per_cycle(const sim::ChipConfig& config) {
  const sim::DramConfig& dram = config.dram;
  const double refresh = dram.refresh_interval_cycles ? double(dram.refresh_cycles) / dram.refresh_interval_cycles : 0.0;
  return double(sim::peak_dram_bytes_per_cycle(config)) * (1.0 - refresh) * 0.85;
}

// The share of that bandwidth that a tile's rows reach when each row, row_bytes long, lies in
// a DRAM row of its own (rows a matrix row apart): every request then opens a row, which keeps
// its bank busy (conflict - hit) cycles, so a channel's banks open at most banks / (conflict -
// hit) rows a cycle. Rows of 32 bytes on base move at 14 of a channel's 128 bytes a cycle.
inline double dram_row_share(const sim::ChipConfig& config, int64_t row_bytes) {
  const sim::DramConfig& dram = config.dram;
  const double activation = double(dram.row_conflict_cycles) - double(dram.row_hit_cycles);
  if (activation <= 0 || row_bytes <= 0) return 1.0;
  return std::min(1.0, double(row_bytes) * dram.banks_per_channel / (activation * dram.bytes_per_cycle_per_channel));
}

}  // namespace npu::compiler
