// im2col(x) -> out [N, C, KH, KW, OH, OW]: the sliding windows of a
// convolution or a pooling, DRAM to DRAM, on the DMA engine alone.
//
// For one window position (i, j) the input positions that lie inside x form
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
  // Whole rows in one DMA when they are contiguous on both sides.
  const bool copy_rows = xs[3] * w.stride[1] == 1 && os[5] == 1;
  const bool fill_rows = os[5] == 1;

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
    int64_t bits = 0;
    if (is_float) {
      const float value = static_cast<float>(op.pad_value);
      uint32_t word;
      std::memcpy(&word, &value, 4);
      bits = word;
    } else {
      bits = static_cast<int64_t>(op.pad_value);
    }
    pb.li(tmp, bits), pb.li(r_n0, 1), pb.li(r_n1, ow);
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
