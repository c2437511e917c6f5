// Reductions over a dim that is not innermost in memory: sum, mean, amax and
// amin of x [..., L] whose L is strided and whose leading dims end in a
// contiguous run (a matrix's dim 0, an image's channels), viewed as
// outer x L x inner.
//
// A tile is tc contiguous columns of one outer index. Its L rows are walked
// in chunks of lc, each loaded as lc runs of tc elements (dma ch0, two slots)
// and reduced along its rows (v.rsum / v.rmax / v.rmin along axis0) into the
// tile's 1 x tc accumulator, in f32 (i32 for i32 sums, maxima and minima,
// as the row kernel). The tile's result (a mean's times 1/L) is rounded to
// the output's dtype and stored (dma ch2, two slots). x is read once, in
// runs of tc elements: the row kernel would read it an element at a time,
// or after a transposing copy.
#include <algorithm>
#include <limits>
#include <optional>
#include <sstream>

#include "npusim/compiler/program_builder.h"
#include "npusim/isa/isa.h"
#include "rowwise.h"

namespace npu::compiler {

using isa::DType;
using isa::Opcode;

std::optional<ColumnView> column_view(const TensorDesc& x) {
  if (x.shape.size() < 2) return std::nullopt;
  ColumnView v;
  v.length = x.shape.back(), v.length_stride = x.strides.back();
  if (v.length <= 1 || v.length_stride == 1) return std::nullopt;
  size_t d = x.shape.size() - 1;
  // inner: the innermost leading dims, contiguous
  while (d > 0 && (x.shape[d - 1] == 1 || x.strides[d - 1] == v.inner)) {
    v.inner *= x.shape[d - 1];
    --d;
  }
  if (v.inner <= 1) return std::nullopt;
  int64_t expected = -1;  // the stride the next-outer dim must have to merge
  for (; d > 0; --d) {
    const int64_t size = x.shape[d - 1], stride = x.strides[d - 1];
    if (size == 1) continue;
    if (expected < 0) v.outer_stride = stride;
    else if (stride != expected) return std::nullopt;
    v.outer *= size;
    expected = stride * size;
  }
  return v;
}

void emit_column_tile(ProgramBuilder& b, const ColumnView& view, int64_t tc, int64_t cores, Reg t, Reg o, Reg j0, Reg nt, Reg tmp) {
  const int64_t col_tiles = (view.inner + tc - 1) / tc;
  b.li(tmp, col_tiles);
  b.emit(Opcode::DIVU, {o.index, t.index, tmp.index});
  b.emit(Opcode::REMU, {j0.index, t.index, tmp.index});
  if (col_tiles > 1 && cores > 1 && view.outer > 1) {  // + the outer's core, o * cores / outer (nt: scratch until below)
    b.li(tmp, cores), b.mul(nt, o, tmp), b.li(tmp, view.outer), b.emit(Opcode::DIVU, {nt.index, nt.index, tmp.index});
    b.add(j0, j0, nt), b.li(tmp, col_tiles), b.emit(Opcode::REMU, {j0.index, j0.index, tmp.index});
  }
  b.muli(j0, j0, tc);
  b.li(nt, view.inner), b.sub(nt, nt, j0), b.li(tmp, tc), b.min(nt, nt, tmp);
}

void emit_column_tile_address(ProgramBuilder& b, uint16_t sym, const TensorDesc& td, const ColumnView& view, int64_t e, Reg o, Reg j0, Reg addr,
                              Reg tmp) {
  b.emit(Opcode::LA, {addr.index, sym});
  if (td.storage_offset) b.addi(addr, addr, td.storage_offset * e);
  b.li(tmp, view.outer_stride * e), b.mul(tmp, tmp, o), b.add(addr, addr, tmp);
  b.muli(tmp, j0, e), b.add(addr, addr, tmp);
}

bool is_column_reduction(const OpDesc& op) {
  if (op.kind != OpKind::SUM && op.kind != OpKind::MEAN && op.kind != OpKind::AMAX && op.kind != OpKind::AMIN) return false;
  if (op.inputs.size() != 1) return false;
  for (const int64_t s : op.inputs[0].strides)
    if (s < 0) return false;
  const std::optional<ColumnView> v = column_view(op.inputs[0]);
  return v && v->outer * v->inner * v->length > 0;
}

Kernel lower_column_reduction(const OpDesc& op, const sim::ChipConfig& config) {
  const std::string name = op_name(op.kind);
  const TensorDesc& x = op.inputs[0];
  const TensorDesc& out = op.output;
  const ColumnView view = *column_view(x);
  const int64_t outer = view.outer, length = view.length, inner = view.inner;
  const bool int_rows = x.dtype == DType::I32 && op.kind != OpKind::MEAN;
  if (!isa::dtype_is_float(x.dtype) && !int_rows) throw UnsupportedOp(name + " on " + std::string(isa::dtype_name(x.dtype)) + ": floats only");
  const bool f32_result = (op.kind == OpKind::SUM || op.kind == OpKind::MEAN) && out.dtype == DType::F32;
  if (out.dtype != x.dtype && !f32_result) throw std::invalid_argument(name + ": the output has the input's dtype");
  if (out.numel() != outer * inner) throw std::invalid_argument(name + ": the output has one element per row");
  if (out.strides != TensorDesc::contiguous(out.dtype, out.shape).strides) throw UnsupportedOp(name + " into a non-contiguous output");

  const int64_t e = isa::dtype_size_bytes(x.dtype), eo = isa::dtype_size_bytes(out.dtype);
  const DType work_dtype = int_rows ? DType::I32 : DType::F32;
  const bool convert = x.dtype != work_dtype;
  const unsigned cores_available = config.num_cores;
  // Columns per tile: runs of 2 KiB, fewer where there would be fewer tiles than cores.
  int64_t tc = std::min<int64_t>(inner, std::max<int64_t>(16, 2048 / e));
  while (tc > 64 && outer * ((inner + tc - 1) / tc) < int64_t(cores_available)) tc /= 2;
  // Rows per chunk: two raw slots and the converted chunk in half the scratchpad.
  const int64_t scratchpad = static_cast<int64_t>(config.core.scratchpad.size_bytes);
  const int64_t per_row = 2 * tc * e + (convert ? tc * 4 : 0);
  const int64_t lc = std::min<int64_t>(length, std::max<int64_t>(1, (scratchpad / 2) / per_row));
  const int64_t chunks = (length + lc - 1) / lc, col_tiles = (inner + tc - 1) / tc, tiles = outer * col_tiles;
  const unsigned cores = static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(cores_available, tiles)));
  const unsigned store_channel = std::min<unsigned>(2, config.core.dma.channels - 1);

  // Local layout: two raw chunk slots, the converted chunk, the partial and the accumulator, two output slots, 1/L.
  const int64_t raw_bytes = align64(lc * tc * e), work_at = 2 * raw_bytes, work_bytes = convert ? align64(lc * tc * 4) : 0;
  const int64_t partial_at = work_at + work_bytes, acc_at = partial_at + align64(tc * 4), out_bytes = align64(tc * eo);
  const int64_t out_at = acc_at + align64(tc * 4), inv_at = out_at + 2 * out_bytes, local_bytes = inv_at + 64;
  if (local_bytes > scratchpad) throw UnsupportedOp(name + ": the column tile does not fit the scratchpad");

  ProgramBuilder b(name + " (generated)");
  const uint16_t out_sym = b.output("out", out.dtype, {uint64_t(std::max<int64_t>(out.storage_extent(), 1))});
  const uint16_t in_sym = b.input("in0", x.dtype, {uint64_t(std::max<int64_t>(x.storage_extent(), 1))});
  enum : int64_t { IN_FULL, IN_FREE, OUT_FULL, OUT_FREE };
  const int64_t kCtl = 0, kDma0 = 1, kVec = 6, kStore = 1 + store_channel;
  const int64_t wdt = int64_t(work_dtype), xdt = int64_t(x.dtype), odt = int64_t(out.dtype);
  constexpr int64_t kFull = 0, kScalar = 3, kAxis0 = 0;
  const Opcode reduce = op.kind == OpKind::AMAX ? Opcode::V_RMAX : op.kind == OpKind::AMIN ? Opcode::V_RMIN : Opcode::V_RSUM;
  const Opcode combine = op.kind == OpKind::AMAX ? Opcode::V_MAX : op.kind == OpKind::AMIN ? Opcode::V_MIN : Opcode::V_ADD;
  // The accumulator's start: the reduction's identity.
  const int64_t identity = op.kind == OpKind::SUM || op.kind == OpKind::MEAN ? 0
                           : int_rows ? (op.kind == OpKind::AMAX ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int32_t>::max())
                                      : f32_bits(op.kind == OpKind::AMAX ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity());

  const Label done = b.label();
  const Reg t = b.reg(), t_end = b.reg();
  b.split_over_cores(tiles, t, t_end);
  b.branch(Opcode::BGE, {t.index, t_end.index}, done);
  const Reg tmp = b.reg(), one = b.reg(), addr = b.reg(), local = b.reg(), work = b.reg(), partial = b.reg(), acc = b.reg();
  const Reg n0 = b.reg(), n1 = b.reg(), n2 = b.reg(), ds1 = b.reg(), ss1 = b.reg(), ds2 = b.reg(), ss2 = b.reg();
  const Reg slot = b.reg(), oslot = b.reg(), o = b.reg(), j0 = b.reg(), nt = b.reg(), rows = b.reg(), left = b.reg(), chunk = b.reg();
  b.li(one, 1), b.li(work, work_at), b.li(partial, partial_at), b.li(acc, acc_at);
  if (op.kind == OpKind::MEAN) b.li(tmp, f32_bits(1.0f / float(length))), b.li(addr, inv_at), b.emit(Opcode::V_FILL, {wdt, addr.index, tmp.index, one.index, one.index});
  for (int i = 0; i < 2; ++i) b.emit(Opcode::SIGNAL, {kCtl, IN_FREE}), b.emit(Opcode::SIGNAL, {kCtl, OUT_FREE});
  b.li(slot, 0), b.li(oslot, 0);
  const auto dma = [&](Opcode opcode, unsigned channel, Reg dst, Reg src) {
    b.emit(opcode, {int64_t(channel), dst.index, src.index, n0.index, n1.index, n2.index, ds1.index, ss1.index, ds2.index, ss2.index});
  };

  const Label tile_loop = b.label();
  b.bind(tile_loop);
  emit_column_tile(b, view, tc, cores, t, o, j0, nt, tmp);
  b.li(tmp, identity);
  b.emit(Opcode::V_FILL, {wdt, acc.index, tmp.index, one.index, nt.index});
  emit_column_tile_address(b, in_sym, x, view, e, o, j0, addr, tmp);
  b.li(left, length), b.li(chunk, chunks);

  const Label chunk_loop = b.label();
  b.bind(chunk_loop);
  b.li(tmp, lc), b.min(rows, left, tmp);
  // Load the chunk: rows runs of nt elements.
  b.emit(Opcode::WAIT, {kDma0, IN_FREE});
  b.muli(n0, nt, e), b.mov(n1, rows), b.muli(ds1, nt, e), b.li(ss1, view.length_stride * e), b.li(n2, 0), b.li(ds2, 0), b.li(ss2, 0);
  b.mov(local, slot);
  dma(Opcode::DMA_LD, 0, local, addr);
  b.emit(Opcode::SIGNAL, {kDma0, IN_FULL});
  // Reduce it into the accumulator.
  b.emit(Opcode::WAIT, {kVec, IN_FULL});
  const Reg source = convert ? work : local;
  if (convert) b.emit(Opcode::V_CVT, {wdt, xdt, work.index, local.index, rows.index, nt.index});
  b.emit(reduce, {wdt, kAxis0, partial.index, source.index, rows.index, nt.index});
  b.emit(Opcode::SIGNAL, {kVec, IN_FREE});
  b.emit(combine, {wdt, kFull, acc.index, acc.index, partial.index, one.index, nt.index});
  b.emit(Opcode::XORI, {slot.index, slot.index, raw_bytes});
  b.li(tmp, lc * view.length_stride * e), b.add(addr, addr, tmp);
  b.li(tmp, lc), b.sub(left, left, tmp);
  b.branch(Opcode::DBNZ, {chunk.index}, chunk_loop);

  // The tile's result, rounded once, and stored.
  b.emit(Opcode::WAIT, {kVec, OUT_FREE});
  if (op.kind == OpKind::MEAN) b.li(tmp, inv_at), b.emit(Opcode::V_MUL, {wdt, kScalar, acc.index, acc.index, tmp.index, one.index, nt.index});
  b.addi(local, oslot, out_at);
  if (out.dtype == work_dtype) b.emit(Opcode::V_MOV, {wdt, local.index, acc.index, one.index, nt.index});
  else b.emit(Opcode::V_CVT, {odt, wdt, local.index, acc.index, one.index, nt.index});
  b.emit(Opcode::SIGNAL, {kVec, OUT_FULL});
  b.emit(Opcode::WAIT, {kStore, OUT_FULL});
  b.emit(Opcode::LA, {addr.index, out_sym});
  if (out.storage_offset) b.addi(addr, addr, out.storage_offset * eo);
  b.li(tmp, inner * eo), b.mul(tmp, tmp, o), b.add(addr, addr, tmp);
  b.muli(tmp, j0, eo), b.add(addr, addr, tmp);
  b.muli(n0, nt, eo), b.li(n1, 1), b.li(ds1, 0), b.li(ss1, 0), b.li(n2, 0), b.li(ds2, 0), b.li(ss2, 0);
  dma(Opcode::DMA_ST, store_channel, addr, local);
  b.emit(Opcode::SIGNAL, {kStore, OUT_FREE});
  b.emit(Opcode::XORI, {oslot.index, oslot.index, out_bytes});
  b.addi(t, t, 1);
  b.branch(Opcode::BLT, {t.index, t_end.index}, tile_loop);
  b.bind(done);
  b.emit(Opcode::HALT, {});

  Kernel kernel;
  kernel.program = b.finish();
  kernel.cores = cores;
  std::ostringstream plan;
  plan << name << ": " << x.to_string() << " reduced along its last dim (stride " << view.length_stride << ") as " << outer << " x "
       << length << " x " << inner << " (outer x reduced x contiguous); tiles of " << tc << " columns, " << tiles << " tiles over " << cores
       << " cores, the reduced dim in chunks of " << lc << " rows (" << chunks << " per tile), each loaded as runs of " << tc * e
       << " bytes and reduced along its rows into the tile's accumulator in " << isa::dtype_name(work_dtype) << "; " << local_bytes
       << " bytes of scratchpad; loads on dma ch0, stores on dma ch" << store_channel << "\n";
  kernel.plan = plan.str();
  return kernel;
}

}  // namespace npu::compiler
