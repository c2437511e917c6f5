// im2col(x) -> out [N, C, KH, KW, OH, OW]: the sliding windows of a
// convolution or a pooling, on the DMA engine (and the vector unit's fill).
//
// Staged (emit_staged, wherever two slots of one output row fit the
// scratchpad): input rows are loaded whole, each window position's elements
// are picked from them in local memory, and the windows stored a row or more
// at a time, so DRAM sees each input row once and only long requests.
//
// Direct (rows too wide for that), DRAM to DRAM: for one window position (i, j) the input positions that lie inside x form
// one rectangle of output rows [y_lo, y_hi) and columns [x_lo, x_hi), the same
// for every image and channel, known at compile time. So each (i, j) is one
// strided copy of that rectangle (dma.gg) and at most four fills of the band
// around it with the pad value (dma.st from a row of it in the scratchpad,
// read with source stride 0). The work is cut into units of (image, chunk of
// channels), split over the cores; a unit's copies cover its channels in one
// DMA when the rows are contiguous on both sides (n0 = a row, n1 = rows, n2 =
// channels), else an element at a time along rows, a channel at a time. The
// window positions alternate over the DMA channels so that they overlap.
#include "im2col.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "npusim/compiler/program_builder.h"
#include "npusim/isa/isa.h"

namespace npu::compiler {
namespace {

using isa::DType;
using isa::Opcode;

// floor(a / b) for b > 0.
int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// v.fill's operand for the pad value: an f32's bits for float dtypes (rounded to the dtype by v.fill), else the integer.
int64_t pad_value_bits(const OpDesc& op) {
  if (!isa::dtype_is_float(op.output.dtype)) return static_cast<int64_t>(op.pad_value);
  return f32_bits(op.pad_value);
}

// A rectangle of output rows and columns of one window position.
struct Rect {
  int64_t row0 = 0, rows = 0, col0 = 0, cols = 0;
};

// The range [lo, hi) of outputs o in [0, out) whose input o*stride + offset lies in [0, size).
std::pair<int64_t, int64_t> valid_range(int64_t out, int64_t stride, int64_t offset, int64_t size) {
  const int64_t lo = std::max<int64_t>(0, floor_div(-offset + stride - 1, stride));
  const int64_t hi = std::min<int64_t>(out, floor_div(size - 1 - offset, stride) + 1);
  return {lo, std::max(lo, hi)};
}

// The windows of a strided input (stride > 1 along the width, or a strided
// input or output), staged through the scratchpad so that DRAM sees whole rows:
// a unit is (image, channel, block of R output rows), or (image, group of channels) where whole small
// planes fit (below). Per unit, over two slots:
//   vector:   fill the stage with the pad value (only where windows reach past x)
//   dma ch0:  load the input rows the block's windows read, whole rows, into the stage
//   vector:   with a column stride sx > 1, de-interleave the stage: viewed as rows of sx elements,
//             one v.trans puts every sx-th column in a phase of its own, [SH x SW/sx]
//   dma ch1:  per window position, pick its elements from the stage (or its phase) into the tile
//             [KH, KW, R, OW] (dma.cp)
//   dma ch2:  store the tile, rows of OW (or more) at a time
// Picked from the de-interleaved stage, a window position's output row is a run of OW elements,
// one or two DMA requests, where picking every sx-th element of the stage took one request per
// element: ResNet-18's 3 x 3 / 2 max pooling at 112 x 112 x 64 took 460 k cycles so on base, 29 k
// de-interleaved.
// False when not even one output row fits.
bool emit_staged(ProgramBuilder& pb, const OpDesc& op, const sim::ChipConfig& config, uint16_t x_sym, uint16_t out_sym, std::ostringstream& plan,
                 unsigned* cores_used) {
  const TensorDesc &x = op.inputs[0], &out = op.output;
  const Window& w = op.window;
  const int64_t n_images = x.shape[0], channels = x.shape[1], height = x.shape[2], width = x.shape[3];
  const int64_t kh = out.shape[2], kw = out.shape[3], oh = out.shape[4], ow = out.shape[5];
  const int64_t sy = w.stride[0], sx = w.stride[1], py = w.padding[0], px = w.padding[1], dy = w.dilation[0], dx = w.dilation[1];
  const int64_t e = isa::dtype_size_bytes(x.dtype);
  const auto& xs = x.strides;
  const auto& os = out.strides;
  // The stage: SH rows of SW columns; stage column sc holds input column sc - px. The windows read
  // its first needed_w columns; de-interleaved, SW is a multiple of sx.
  const bool deinterleave = sx > 1;
  const int64_t needed_w = (ow - 1) * sx + (kw - 1) * dx + 1;
  const int64_t stage_w = deinterleave ? ceil_div(needed_w, sx) * sx : needed_w, phase_w = stage_w / sx;
  const auto stage_h = [&](int64_t rows) { return (rows - 1) * sy + (kh - 1) * dy + 1; };
  const int64_t scratchpad = static_cast<int64_t>(config.core.scratchpad.size_bytes);
  int64_t block = 0;
  for (int64_t r = oh; r >= 1; r = r > 8 ? r * 3 / 4 : r - 1)
    if (2 * ((deinterleave ? 2 : 1) * align64(stage_h(r) * stage_w * e) + align64(kh * kw * r * ow * e)) <= scratchpad) {
      block = r;
      break;
    }
  if (block == 0) return false;
  // Blocks of one height, and (within twice as many blocks) a count of units that the cores share
  // evenly: the RGB stem's 112 output rows in blocks of 47 were 3 units a channel (47, 47 and 18
  // rows), 9 over 4 cores, one core taking three tall ones; in blocks of 28, 12 units, 3 a core.
  if (block < oh) {
    const int64_t fewest = ceil_div(oh, block), per_block = n_images * channels, cores = int64_t{config.num_cores};
    int64_t count = fewest;
    for (int64_t b = fewest; b <= std::min(oh, 2 * fewest); ++b)
      if (per_block * b % cores == 0) {
        count = b;
        break;
      }
    block = ceil_div(oh, count);
  }
  const int64_t sh = stage_h(block), plane = sh * stage_w, tile_plane = kh * kw * block * ow;
  // Whole small planes: a unit takes a group of cg channels, so that its DMA instructions, fill and
  // semaphores are paid once for them all (each copy takes the channels as its third dimension), while
  // every core still gets two units or more. (One channel where the input's or the output's rows are
  // strided: their copies use that dimension already. A channel per unit, ResNet-18's 3 x 3 convolutions
  // of 512 channels at 7 x 7 took 51 k cycles for im2col on base, nine DMA instructions per 49 outputs.)
  int64_t cg = 1;
  if (block == oh && xs[3] == 1 && os[5] == 1) {
    cg = std::max<int64_t>(1, channels / ceil_div(2 * int64_t{config.num_cores}, n_images));
    while (cg > 1 && 2 * ((deinterleave ? 2 : 1) * align64(cg * plane * e) + align64(cg * tile_plane * e)) > scratchpad) --cg;
  }
  const int64_t stage_bytes = align64(cg * plane * e), tile_bytes = align64(cg * tile_plane * e);
  const int64_t stage0 = 0, phases0 = 2 * stage_bytes, tile0 = (deinterleave ? 4 : 2) * stage_bytes;
  const int64_t groups = ceil_div(channels, cg), blocks = ceil_div(oh, block), units = n_images * groups * blocks;
  const int64_t col_lo = std::max<int64_t>(0, -px), col_hi = std::min<int64_t>(width, needed_w - px);
  const bool needs_fill = py > 0 || px > 0 || (oh - 1) * sy + (kh - 1) * dy - py + 1 > height || needed_w - px > width;
  const unsigned channels_dma = config.core.dma.channels;
  const unsigned ch_load = 0, ch_pick = std::min(1u, channels_dma - 1), ch_store = std::min(2u, channels_dma - 1);
  // Where there is a fourth DMA channel, it picks every other window position: the picks are local
  // copies of a few rows each, a DMA channel's work in series (the RGB stem's 49 positions a unit took
  // three quarters of its im2col on one channel). The second picker has its own semaphores for the
  // source and the tile, and tells the first when its picks are done (PICKS2_DONE).
  const bool two_pickers = channels_dma >= 4;
  const unsigned ch_pick2 = 3;
  const int64_t kCtl = 0, kVec = 6;
  const auto engine_of = [](unsigned ch) { return int64_t{1} + ch; };
  enum : int64_t { STAGE_FREE, STAGE_FILLED, STAGE_FULL, TILE_FREE, TILE_FULL, PHASES_FREE, PHASES_FULL, SOURCE_FULL2, TILE_FREE2, PICKS2_DONE };

  const Reg u = pb.reg(), u_end = pb.reg(), tmp = pb.reg(), image = pb.reg(), channel = pb.reg(), y0 = pb.reg(), rows = pb.reg();
  const Reg row0 = pb.reg(), r_lo = pb.reg(), r_hi = pb.reg(), slot = pb.reg(), stage = pb.reg(), tile = pb.reg(), src = pb.reg(), dst = pb.reg();
  const Reg phases = pb.reg(), group_channels = pb.reg();
  const Reg r_n0 = pb.reg(), r_n1 = pb.reg(), r_n2 = pb.reg(), ds1 = pb.reg(), ss1 = pb.reg(), ds2 = pb.reg(), ss2 = pb.reg();
  pb.split_over_cores(units, u, u_end);
  const Label done = pb.label();
  pb.branch(Opcode::BGE, {u.index, u_end.index}, done);
  for (int i = 0; i < 2; ++i) {
    pb.emit(Opcode::SIGNAL, {kCtl, STAGE_FREE}), pb.emit(Opcode::SIGNAL, {kCtl, TILE_FREE});
    if (deinterleave) pb.emit(Opcode::SIGNAL, {kCtl, PHASES_FREE});
    if (two_pickers) pb.emit(Opcode::SIGNAL, {kCtl, TILE_FREE2});
  }
  pb.li(slot, 0);
  const auto dma = [&](Opcode opcode, unsigned ch, Reg to, Reg from) {
    pb.emit(opcode, {int64_t(ch), to.index, from.index, r_n0.index, r_n1.index, r_n2.index, ds1.index, ss1.index, ds2.index, ss2.index});
  };

  const Label unit = pb.label();
  pb.bind(unit);
  // Unit u: image, channels channel .. channel + group_channels, output rows y0 .. y0 + rows.
  pb.li(tmp, blocks);
  pb.emit(Opcode::REMU, {y0.index, u.index, tmp.index});
  pb.emit(Opcode::DIVU, {channel.index, u.index, tmp.index});
  pb.li(tmp, groups);
  pb.emit(Opcode::DIVU, {image.index, channel.index, tmp.index});
  pb.emit(Opcode::REMU, {channel.index, channel.index, tmp.index});
  pb.muli(channel, channel, cg);
  pb.li(tmp, channels), pb.sub(group_channels, tmp, channel), pb.li(tmp, cg), pb.min(group_channels, group_channels, tmp);
  pb.muli(y0, y0, block);
  pb.li(tmp, oh), pb.sub(rows, tmp, y0), pb.li(tmp, block), pb.min(rows, rows, tmp);
  pb.li(stage, stage_bytes), pb.mul(stage, stage, slot), pb.addi(stage, stage, stage0);
  if (deinterleave) pb.li(phases, stage_bytes), pb.mul(phases, phases, slot), pb.addi(phases, phases, phases0);
  pb.li(tile, tile_bytes), pb.mul(tile, tile, slot);
  pb.li(tmp, tile0), pb.add(tile, tile, tmp);

  // The stage: the pad value, then the input rows [max(row0, 0), min(row0 + SH, H)).
  if (needs_fill) {
    pb.emit(Opcode::WAIT, {kVec, STAGE_FREE});
    pb.li(tmp, pad_value_bits(op)), pb.li(r_n0, cg * sh), pb.li(r_n1, stage_w);
    pb.emit(Opcode::V_FILL, {int64_t(x.dtype), stage.index, tmp.index, r_n0.index, r_n1.index});
    pb.emit(Opcode::SIGNAL, {kVec, STAGE_FILLED});
  }
  pb.emit(Opcode::WAIT, {engine_of(ch_load), needs_fill ? STAGE_FILLED : STAGE_FREE});
  pb.muli(row0, y0, sy), pb.addi(row0, row0, -py);
  pb.emit(Opcode::MAX, {r_lo.index, row0.index, kZero.index});
  pb.addi(r_hi, row0, sh), pb.li(tmp, height), pb.min(r_hi, r_hi, tmp);
  const Label no_rows = pb.label();
  pb.branch(Opcode::BGE, {r_lo.index, r_hi.index}, no_rows);
  if (col_hi > col_lo) {
    pb.emit(Opcode::LA, {src.index, x_sym});
    pb.scaled_address(src, src, {{image, xs[0]}, {channel, xs[1]}, {r_lo, xs[2]}}, e, tmp);
    pb.li(tmp, (x.storage_offset + col_lo * xs[3]) * e), pb.add(src, src, tmp);
    pb.sub(dst, r_lo, row0), pb.muli(dst, dst, stage_w * e), pb.add(dst, dst, stage), pb.addi(dst, dst, (col_lo + px) * e);
    pb.sub(r_hi, r_hi, r_lo);  // rows to load
    if (xs[3] == 1) {  // (the group's channels as the third dimension)
      pb.li(r_n0, (col_hi - col_lo) * e), pb.mov(r_n1, r_hi), pb.mov(r_n2, group_channels);
      pb.li(ds1, stage_w * e), pb.li(ss1, xs[2] * e), pb.li(ds2, plane * e), pb.li(ss2, xs[1] * e);
    } else {
      pb.li(r_n0, e), pb.li(r_n1, col_hi - col_lo), pb.mov(r_n2, r_hi);
      pb.li(ds1, e), pb.li(ss1, xs[3] * e), pb.li(ds2, stage_w * e), pb.li(ss2, xs[2] * e);
    }
    dma(Opcode::DMA_LD, ch_load, dst, src);
  }
  pb.bind(no_rows);
  pb.emit(Opcode::SIGNAL, {engine_of(ch_load), STAGE_FULL});
  if (two_pickers && !deinterleave) pb.emit(Opcode::SIGNAL, {engine_of(ch_load), SOURCE_FULL2});

  if (deinterleave) {
    // Stage element (channel k, y, c) goes to phase c % sx, at (k, y, c / sx) of that phase's [cg x SH x SW/sx].
    pb.emit(Opcode::WAIT, {kVec, STAGE_FULL});
    pb.emit(Opcode::WAIT, {kVec, PHASES_FREE});
    pb.li(r_n0, cg * sh * phase_w), pb.li(r_n1, sx);
    pb.emit(Opcode::V_TRANS, {int64_t(x.dtype), phases.index, stage.index, r_n0.index, r_n1.index});
    pb.emit(Opcode::SIGNAL, {kVec, STAGE_FREE});
    pb.emit(Opcode::SIGNAL, {kVec, PHASES_FULL});
    if (two_pickers) pb.emit(Opcode::SIGNAL, {kVec, SOURCE_FULL2});
  }

  // Pick each window position's elements into the tile [KH, KW, R, OW].
  pb.emit(Opcode::WAIT, {engine_of(ch_pick), deinterleave ? PHASES_FULL : STAGE_FULL});
  pb.emit(Opcode::WAIT, {engine_of(ch_pick), TILE_FREE});
  if (two_pickers) pb.emit(Opcode::WAIT, {engine_of(ch_pick2), SOURCE_FULL2}), pb.emit(Opcode::WAIT, {engine_of(ch_pick2), TILE_FREE2});
  for (int64_t i = 0; i < kh; ++i)
    for (int64_t j = 0; j < kw; ++j) {
      const int64_t si = w.flip ? kh - 1 - i : i, sj = w.flip ? kw - 1 - j : j;  // the rotated kernel reads (KH-1-i, KW-1-j)
      pb.li(tmp, (i * kw + j) * block * ow * e), pb.add(dst, tile, tmp);
      // Output x reads stage column x * sx + sj * dx: de-interleaved, phase (sj * dx) % sx from its
      // column (sj * dx) / sx on. Either way a row of the window position is a run of OW elements.
      const int64_t row_pitch = deinterleave ? phase_w : stage_w;
      const int64_t first = deinterleave ? ((sj * dx) % sx * cg * sh + si * dy) * phase_w + (sj * dx) / sx : si * dy * stage_w + sj * dx;
      pb.li(tmp, first * e), pb.add(src, deinterleave ? phases : stage, tmp);
      pb.li(r_n0, ow * e), pb.mov(r_n1, rows), pb.mov(r_n2, group_channels);
      pb.li(ds1, ow * e), pb.li(ss1, sy * row_pitch * e), pb.li(ds2, tile_plane * e), pb.li(ss2, sh * row_pitch * e);
      dma(Opcode::DMA_CP, two_pickers && (i * kw + j) % 2 ? ch_pick2 : ch_pick, dst, src);
    }
  if (two_pickers) pb.emit(Opcode::SIGNAL, {engine_of(ch_pick2), PICKS2_DONE}), pb.emit(Opcode::WAIT, {engine_of(ch_pick), PICKS2_DONE});
  pb.emit(Opcode::SIGNAL, {engine_of(ch_pick), deinterleave ? PHASES_FREE : STAGE_FREE});
  pb.emit(Opcode::SIGNAL, {engine_of(ch_pick), TILE_FULL});

  // Store the tile.
  pb.emit(Opcode::WAIT, {engine_of(ch_store), TILE_FULL});
  pb.emit(Opcode::LA, {r_lo.index, out_sym});
  pb.scaled_address(r_lo, r_lo, {{image, os[0]}, {channel, os[1]}, {y0, os[4]}}, e, tmp);
  if (out.storage_offset) pb.li(tmp, out.storage_offset * e), pb.add(r_lo, r_lo, tmp);
  const bool whole_rows = os[5] == 1 && os[4] == ow;
  for (int64_t i = 0; i < kh; ++i)
    for (int64_t j = 0; j < (whole_rows ? 1 : kw); ++j) {
      pb.li(tmp, (i * os[2] + j * os[3]) * e), pb.add(dst, r_lo, tmp);
      pb.li(tmp, (i * kw + j) * block * ow * e), pb.add(src, tile, tmp);
      if (whole_rows) {  // rows x OW contiguous per position: a row of KW of them, for each channel of the group
        pb.li(r_n0, ow * e), pb.mul(r_n0, r_n0, rows), pb.li(r_n1, kw), pb.mov(r_n2, group_channels);
        pb.li(ds1, os[3] * e), pb.li(ss1, block * ow * e), pb.li(ds2, os[1] * e), pb.li(ss2, tile_plane * e);
      } else if (os[5] == 1) {
        pb.li(r_n0, ow * e), pb.mov(r_n1, rows), pb.mov(r_n2, group_channels);
        pb.li(ds1, os[4] * e), pb.li(ss1, ow * e), pb.li(ds2, os[1] * e), pb.li(ss2, tile_plane * e);
      } else {  // (one channel per unit)
        pb.li(r_n0, e), pb.li(r_n1, ow), pb.mov(r_n2, rows);
        pb.li(ds1, os[5] * e), pb.li(ss1, e), pb.li(ds2, os[4] * e), pb.li(ss2, ow * e);
      }
      dma(Opcode::DMA_ST, ch_store, dst, src);
    }
  pb.emit(Opcode::SIGNAL, {engine_of(ch_store), TILE_FREE});
  if (two_pickers) pb.emit(Opcode::SIGNAL, {engine_of(ch_store), TILE_FREE2});

  pb.emit(Opcode::XORI, {slot.index, slot.index, 1});
  pb.addi(u, u, 1);
  pb.branch(Opcode::BLT, {u.index, u_end.index}, unit);
  pb.bind(done);
  pb.emit(Opcode::HALT, {});
  *cores_used = static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(config.num_cores, units)));
  plan << "; staged through the scratchpad: " << units << " units of (image, " << (cg > 1 ? std::to_string(cg) + " channels" : std::string("channel"))
       << ", " << block << " output rows) over " << *cores_used
       << " cores; whole input rows loaded" << (needs_fill ? " into a stage filled with the pad value" : "")
       << (deinterleave ? ", de-interleaved by the column stride (v.trans)" : "")
       << ", each window position's elements picked locally (dma.cp), the tile stored " << (whole_rows ? "a window position at a time" : "a row at a time")
       << "\n";
  return true;
}

}  // namespace

Kernel lower_im2col(const OpDesc& op, const sim::ChipConfig& config) {
  if (op.inputs.size() != 1) throw std::invalid_argument("im2col takes one input, got " + std::to_string(op.inputs.size()));
  const TensorDesc &x = op.inputs[0], &out = op.output;
  if (x.shape.size() != 4 || x.strides.size() != 4) throw std::invalid_argument("im2col: the input is [N, C, H, W], got " + x.to_string());
  if (out.shape.size() != 6 || out.strides.size() != 6)
    throw std::invalid_argument("im2col: the output is [N, C, KH, KW, OH, OW], got " + out.to_string());
  if (out.shape[0] != x.shape[0] || out.shape[1] != x.shape[1])
    throw std::invalid_argument("im2col: the output's N and C differ from the input's: " + x.to_string() + " -> " + out.to_string());
  if (x.dtype != out.dtype) throw std::invalid_argument("im2col: the input and the output have one dtype");
  for (const TensorDesc* t : {&x, &out})
    for (const int64_t s : t->strides)
      if (s < 0) throw UnsupportedOp("im2col with negative strides");
  const Window& w = op.window;
  for (int d = 0; d < 2; ++d)
    if (w.stride[d] < 1 || w.dilation[d] < 1) throw std::invalid_argument("im2col: strides and dilations are at least 1");
  const DType dtype = x.dtype;
  const bool is_float = isa::dtype_is_float(dtype);
  if (!is_float && !std::isfinite(op.pad_value)) throw std::invalid_argument("im2col: an integer tensor's pad value is finite");

  const int64_t n_images = x.shape[0], channels = x.shape[1], height = x.shape[2], width = x.shape[3];
  const int64_t kh = out.shape[2], kw = out.shape[3], oh = out.shape[4], ow = out.shape[5];
  const int64_t e = isa::dtype_size_bytes(dtype);
  const auto& xs = x.strides;
  const auto& os = out.strides;

  ProgramBuilder pb("im2col (generated)");
  const uint16_t out_sym = pb.output("out", out.dtype, {uint64_t(std::max<int64_t>(out.storage_extent(), 1))});
  const uint16_t x_sym = pb.input("in0", x.dtype, {uint64_t(std::max<int64_t>(x.storage_extent(), 1))});

  Kernel kernel;
  std::ostringstream plan;
  plan << "im2col: " << x.to_string() << " -> " << out.to_string() << ", window " << kh << " x " << kw << " stride " << w.stride[0] << " x "
       << w.stride[1] << " padding " << w.padding[0] << " x " << w.padding[1] << " dilation " << w.dilation[0] << " x " << w.dilation[1]
       << (w.flip ? ", rotated" : "") << ", pad value " << op.pad_value;
  if (out.numel() == 0) {
    pb.emit(Opcode::HALT, {});
    kernel.program = pb.finish();
    kernel.plan = plan.str() + ": empty, nothing to copy\n";
    return kernel;
  }
  if (align64(ow * e) > static_cast<int64_t>(config.core.scratchpad.size_bytes))
    throw UnsupportedOp("im2col: a row of the pad value does not fit the scratchpad");

  // Units: (image, chunk of channels); at least two per core where there are channels enough.
  const int64_t cores_wanted = 2 * int64_t{config.num_cores};
  const int64_t chunks_per_image = std::min(channels, std::max<int64_t>(1, ceil_div(cores_wanted, n_images)));
  const int64_t chunk = ceil_div(channels, chunks_per_image);
  const int64_t chunks = ceil_div(channels, chunk), units = n_images * chunks;
  const unsigned cores = static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(config.num_cores, units)));
  const unsigned dma_channels = config.core.dma.channels;

  // Per window position: what to copy and what to fill, at compile time.
  struct Position {
    int64_t src_offset = 0, dst_offset = 0;  // elements, from the unit's base
    Rect copy;
    std::vector<Rect> fills;
    unsigned channel = 0;
  };
  std::vector<Position> positions;
  for (int64_t i = 0; i < kh; ++i)
    for (int64_t j = 0; j < kw; ++j) {
      Position p;
      const int64_t si = w.flip ? kh - 1 - i : i, sj = w.flip ? kw - 1 - j : j;
      const int64_t row_offset = si * w.dilation[0] - w.padding[0], col_offset = sj * w.dilation[1] - w.padding[1];
      const auto [y_lo, y_hi] = valid_range(oh, w.stride[0], row_offset, height);
      const auto [x_lo, x_hi] = valid_range(ow, w.stride[1], col_offset, width);
      p.dst_offset = i * os[2] + j * os[3];
      p.channel = static_cast<unsigned>(positions.size() % dma_channels);
      if (y_hi > y_lo && x_hi > x_lo) {
        p.copy = {y_lo, y_hi - y_lo, x_lo, x_hi - x_lo};
        p.src_offset = (y_lo * w.stride[0] + row_offset) * xs[2] + (x_lo * w.stride[1] + col_offset) * xs[3];
        if (y_lo > 0) p.fills.push_back({0, y_lo, 0, ow});
        if (y_hi < oh) p.fills.push_back({y_hi, oh - y_hi, 0, ow});
        if (x_lo > 0) p.fills.push_back({y_lo, y_hi - y_lo, 0, x_lo});
        if (x_hi < ow) p.fills.push_back({y_lo, y_hi - y_lo, x_hi, ow - x_hi});
      } else {
        p.fills.push_back({0, oh, 0, ow});
      }
      positions.push_back(p);
    }
  bool any_fill = false;
  for (const Position& p : positions) any_fill = any_fill || !p.fills.empty();
  // Whole rows in one DMA when they are contiguous on both sides; else through the scratchpad where it fits.
  const bool copy_rows = xs[3] * w.stride[1] == 1 && os[5] == 1;
  const bool fill_rows = os[5] == 1;
  if (emit_staged(pb, op, config, x_sym, out_sym, plan, &kernel.cores)) {
    kernel.program = pb.finish();
    kernel.plan = plan.str();
    return kernel;
  }

  const int64_t kVec = 6;
  const auto engine_of = [](unsigned ch) { return int64_t{1} + ch; };
  enum : int64_t { FILL_READY };

  const Reg u = pb.reg(), u_end = pb.reg(), tmp = pb.reg(), image = pb.reg(), c0 = pb.reg(), cc = pb.reg();
  const Reg src_base = pb.reg(), dst_base = pb.reg(), src = pb.reg(), dst = pb.reg(), fill = pb.reg(), ci = pb.reg();
  const Reg r_n0 = pb.reg(), r_n1 = pb.reg(), r_n2 = pb.reg(), ds1 = pb.reg(), ss1 = pb.reg(), ds2 = pb.reg(), ss2 = pb.reg();
  pb.split_over_cores(units, u, u_end);
  const Label done = pb.label();
  pb.branch(Opcode::BGE, {u.index, u_end.index}, done);
  pb.li(fill, 0);
  if (any_fill) {
    // A row of the pad value at local address 0.
    pb.li(tmp, pad_value_bits(op)), pb.li(r_n0, 1), pb.li(r_n1, ow);
    pb.emit(Opcode::V_FILL, {int64_t(dtype), fill.index, tmp.index, r_n0.index, r_n1.index});
    for (unsigned ch = 0; ch < dma_channels; ++ch) {
      pb.emit(Opcode::SIGNAL, {kVec, FILL_READY});
      pb.emit(Opcode::WAIT, {engine_of(ch), FILL_READY});
    }
  }

  const auto dma = [&](Opcode opcode, unsigned ch, Reg to, Reg from) {
    pb.emit(opcode, {int64_t(ch), to.index, from.index, r_n0.index, r_n1.index, r_n2.index, ds1.index, ss1.index, ds2.index, ss2.index});
  };
  // The DMAs of every position, for `count` channels at once (per_channel false)
  // or for one channel (per_channel true: only those not done at once).
  const auto emit_positions = [&](bool per_channel, Reg count) {
    for (const Position& p : positions) {
      if (p.copy.rows > 0 && copy_rows != per_channel) {
        pb.li(tmp, p.src_offset * e), pb.add(src, src_base, tmp);
        pb.li(tmp, (p.dst_offset + p.copy.row0 * os[4] + p.copy.col0 * os[5]) * e), pb.add(dst, dst_base, tmp);
        if (copy_rows) {
          pb.li(r_n0, p.copy.cols * e), pb.li(r_n1, p.copy.rows), pb.mov(r_n2, count);
          pb.li(ds1, os[4] * e), pb.li(ss1, xs[2] * w.stride[0] * e), pb.li(ds2, os[1] * e), pb.li(ss2, xs[1] * e);
        } else {
          pb.li(r_n0, e), pb.li(r_n1, p.copy.cols), pb.li(r_n2, p.copy.rows);
          pb.li(ds1, os[5] * e), pb.li(ss1, xs[3] * w.stride[1] * e), pb.li(ds2, os[4] * e), pb.li(ss2, xs[2] * w.stride[0] * e);
        }
        dma(Opcode::DMA_GG, p.channel, dst, src);
      }
      if (fill_rows == per_channel) continue;
      for (const Rect& r : p.fills) {
        pb.li(tmp, (p.dst_offset + r.row0 * os[4] + r.col0 * os[5]) * e), pb.add(dst, dst_base, tmp);
        if (fill_rows) {
          pb.li(r_n0, r.cols * e), pb.li(r_n1, r.rows), pb.mov(r_n2, count);
          pb.li(ds1, os[4] * e), pb.li(ss1, 0), pb.li(ds2, os[1] * e), pb.li(ss2, 0);
        } else {
          pb.li(r_n0, e), pb.li(r_n1, r.cols), pb.li(r_n2, r.rows);
          pb.li(ds1, os[5] * e), pb.li(ss1, 0), pb.li(ds2, os[4] * e), pb.li(ss2, 0);
        }
        dma(Opcode::DMA_ST, p.channel, dst, fill);
      }
    }
  };

  const Label unit = pb.label();
  pb.bind(unit);
  // Unit u: image u / chunks, channels c0 .. c0 + cc.
  pb.li(tmp, chunks);
  pb.emit(Opcode::DIVU, {image.index, u.index, tmp.index});
  pb.emit(Opcode::REMU, {c0.index, u.index, tmp.index});
  pb.muli(c0, c0, chunk);
  pb.li(tmp, channels), pb.sub(cc, tmp, c0), pb.li(tmp, chunk), pb.min(cc, cc, tmp);
  pb.emit(Opcode::LA, {src_base.index, x_sym});
  pb.scaled_address(src_base, src_base, {{image, xs[0]}, {c0, xs[1]}}, e, tmp);
  if (x.storage_offset) pb.li(tmp, x.storage_offset * e), pb.add(src_base, src_base, tmp);
  pb.emit(Opcode::LA, {dst_base.index, out_sym});
  pb.scaled_address(dst_base, dst_base, {{image, os[0]}, {c0, os[1]}}, e, tmp);
  if (out.storage_offset) pb.li(tmp, out.storage_offset * e), pb.add(dst_base, dst_base, tmp);
  emit_positions(false, cc);
  if (!copy_rows || !fill_rows) {
    // The rest a channel at a time.
    pb.mov(ci, cc);
    const Label channel = pb.label();
    pb.bind(channel);
    emit_positions(true, kZero);
    pb.li(tmp, xs[1] * e), pb.add(src_base, src_base, tmp);
    pb.li(tmp, os[1] * e), pb.add(dst_base, dst_base, tmp);
    pb.addi(ci, ci, -1);
    pb.branch(Opcode::BLT, {kZero.index, ci.index}, channel);
  }
  pb.addi(u, u, 1);
  pb.branch(Opcode::BLT, {u.index, u_end.index}, unit);
  pb.bind(done);
  pb.emit(Opcode::HALT, {});

  kernel.program = pb.finish();
  kernel.cores = cores;
  plan << "; " << units << " units of (image, " << chunk << " channels) over " << cores << " cores; copies "
       << (copy_rows ? "a row at a time, channels at once" : "an element at a time, a channel at a time") << ", fills "
       << (fill_rows ? "a row at a time" : "an element at a time") << "\n";
  kernel.plan = plan.str();
  return kernel;
}

}  // namespace npu::compiler
