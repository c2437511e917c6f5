// softmax and log_softmax along a dim that is not innermost in memory (x's
// last dim strided, its leading dims ending in a contiguous run: softmax over
// a matrix's dim 0, over the keys of scores laid [queries, keys] with the
// keys along dim -2), viewed as outer x L x inner like the column reductions.
//
// A tile is tc contiguous columns of one outer index, its L rows walked in
// chunks of lc, each loaded as lc runs of tc elements (dma ch0; two slots, or
// one where all of L is one chunk).
// Pass 1 keeps each column's running maximum m and sum s of exp(x - m), in
// f32 (online softmax: s is rescaled by exp(m_old - m_new) when m grows); pass
// 2 gives exp(x - m) / s (softmax) or x - m - log(s) (log_softmax), rounded
// once to the output's dtype and stored a chunk at a time (dma ch2, two
// slots). Where one chunk holds all of L (the tile's width chosen so where
// its runs stay a DMA request or longer), pass 2 works on the chunk pass 1
// left and x is read once; else it is read twice. The row kernel would read
// the column an element at a time, or after two transposing copies.
//
// m starts at the lowest finite float, not -inf: a chunk whose values are all
// -inf (a masked block) then rescales s by exp(0) = 1, not by exp(nan).
#include <algorithm>
#include <limits>
#include <sstream>

#include "npusim/compiler/program_builder.h"
#include "npusim/isa/isa.h"
#include "rowwise.h"

namespace npu::compiler {

using isa::DType;
using isa::Opcode;

bool is_column_softmax(const OpDesc& op) {
  if ((op.kind != OpKind::SOFTMAX && op.kind != OpKind::LOG_SOFTMAX) || op.inputs.size() != 1) return false;
  const TensorDesc& x = op.inputs[0];
  for (const TensorDesc* t : {&x, &op.output})
    for (const int64_t s : t->strides)
      if (s < 0) return false;
  const std::optional<ColumnView> in = column_view(x), out = column_view(op.output);
  return in && out && isa::dtype_is_float(x.dtype) && x.shape == op.output.shape && in->outer == out->outer && in->length == out->length &&
         in->inner == out->inner && x.numel() > 0;
}

bool reads_columns(const OpDesc& op) { return is_column_reduction(op) || is_column_softmax(op); }

Kernel lower_column_softmax(const OpDesc& op, const sim::ChipConfig& config) {
  const std::string name = op_name(op.kind);
  const TensorDesc& x = op.inputs[0];
  const TensorDesc& out = op.output;
  if (out.dtype != x.dtype) throw std::invalid_argument(name + ": the output has the input's dtype");
  const ColumnView in_view = *column_view(x), out_view = *column_view(out);
  const int64_t outer = in_view.outer, length = in_view.length, inner = in_view.inner;
  const bool log = op.kind == OpKind::LOG_SOFTMAX;
  const int64_t e = isa::dtype_size_bytes(x.dtype);
  const int64_t scratchpad = static_cast<int64_t>(config.core.scratchpad.size_bytes), request = config.core.dma.request_bytes;
  // Per element of a chunk: the raw slots, the f32 values, two output slots, and for log_softmax the exps
  // apart (its outputs are x - m - log(s), so x - m outlives the sum); softmax takes its exps in place
  // of x - m, which nothing reads after. Two raw slots let the next chunk load while this one is worked
  // on; where a tile's L rows are one chunk, one does: it is free once converted, and the next tile's
  // load overlaps the rest of this one's work.
  const bool exps_apart = log;
  const auto per_element = [&](int64_t raw_slots) { return raw_slots * e + (exps_apart ? 8 : 4) + 2 * e; };
  const int64_t budget = scratchpad - 8 * 4096;
  // The tile's width: the widest (up to runs of 2 KiB) that holds all of L in one chunk with runs of a
  // DMA request or more; where none does, runs of 2 KiB in chunks. Narrower where the cores would
  // otherwise lack tiles.
  const int64_t widest = std::min<int64_t>(inner, std::max<int64_t>(16, 2048 / e)), narrowest = std::min<int64_t>(inner, std::max<int64_t>(1, request / e));
  int64_t tc = widest;
  while (length * tc * per_element(1) > budget && tc / 2 >= narrowest) tc /= 2;
  const bool whole = length * tc * per_element(1) <= budget;
  if (!whole) tc = widest;
  while (tc > 64 && outer * ((inner + tc - 1) / tc) < int64_t(config.num_cores)) tc /= 2;
  const int64_t raw_slots = whole ? 1 : 2;
  const int64_t lc_fits = std::min<int64_t>(length, budget / (tc * per_element(raw_slots)));
  if (lc_fits < 1) throw UnsupportedOp(name + ": a row of the column tile does not fit the scratchpad");
  // Chunks of equal rows (no short last one, whose load the vector unit would wait for).
  const int64_t chunks = (length + lc_fits - 1) / lc_fits, lc = (length + chunks - 1) / chunks;
  const int64_t col_tiles = (inner + tc - 1) / tc, tiles = outer * col_tiles;
  const bool resident = chunks == 1;
  const unsigned cores = static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(config.num_cores, tiles)));
  const unsigned store_channel = std::min<unsigned>(2, config.core.dma.channels - 1);

  // Local layout: the raw slots, the f32 chunk, its exps (log_softmax; softmax's are the chunk's
  // place), two output slots, then m, the new m, s, a partial, a scratch vector and 1/s or log(s), tc each.
  const int64_t raw_bytes = align64(lc * tc * e), work_at = raw_slots * raw_bytes, ex_at = work_at + (exps_apart ? align64(lc * tc * 4) : 0);
  const int64_t out_at = ex_at + align64(lc * tc * 4), out_bytes = align64(lc * tc * e), vec_bytes = align64(tc * 4);
  const int64_t m_at = out_at + 2 * out_bytes, mnew_at = m_at + vec_bytes, s_at = mnew_at + vec_bytes, partial_at = s_at + vec_bytes;
  const int64_t scratch_at = partial_at + vec_bytes, norm_at = scratch_at + vec_bytes, local_bytes = norm_at + vec_bytes;
  if (local_bytes > scratchpad) throw UnsupportedOp(name + ": the column tile does not fit the scratchpad");

  ProgramBuilder b(name + " (generated)");
  const uint16_t out_sym = b.output("out", out.dtype, {uint64_t(std::max<int64_t>(out.storage_extent(), 1))});
  const uint16_t in_sym = b.input("in0", x.dtype, {uint64_t(std::max<int64_t>(x.storage_extent(), 1))});
  enum : int64_t { IN_FULL, IN_FREE, OUT_FULL, OUT_FREE };
  const int64_t kCtl = 0, kDma0 = 1, kVec = 6, kStore = 1 + store_channel;
  const int64_t f32 = int64_t(DType::F32), xdt = int64_t(x.dtype);
  constexpr int64_t kFull = 0, kRow = 1, kAxis0 = 0;

  const Label done = b.label();
  const Reg t = b.reg(), t_end = b.reg();
  b.split_over_cores(tiles, t, t_end);
  b.branch(Opcode::BGE, {t.index, t_end.index}, done);
  const Reg tmp = b.reg(), one = b.reg(), addr = b.reg(), local = b.reg(), work = b.reg(), ex = b.reg();
  const Reg m = b.reg(), mnew = b.reg(), s = b.reg(), partial = b.reg(), scratch = b.reg(), norm = b.reg();
  const Reg n0 = b.reg(), n1 = b.reg(), n2 = b.reg(), ds1 = b.reg(), ss1 = b.reg(), ds2 = b.reg(), ss2 = b.reg();
  const Reg slot = b.reg(), oslot = b.reg(), o = b.reg(), j0 = b.reg(), nt = b.reg(), rows = b.reg(), left = b.reg(), chunk = b.reg();
  b.li(one, 1), b.li(work, work_at), b.li(ex, ex_at), b.li(m, m_at), b.li(mnew, mnew_at), b.li(s, s_at), b.li(partial, partial_at);
  b.li(scratch, scratch_at), b.li(norm, norm_at);
  for (int64_t i = 0; i < raw_slots; ++i) b.emit(Opcode::SIGNAL, {kCtl, IN_FREE});
  for (int i = 0; i < 2; ++i) b.emit(Opcode::SIGNAL, {kCtl, OUT_FREE});
  b.li(slot, 0), b.li(oslot, out_at);
  const auto dma = [&](Opcode opcode, unsigned channel, Reg dst, Reg src) {
    b.emit(opcode, {int64_t(channel), dst.index, src.index, n0.index, n1.index, n2.index, ds1.index, ss1.index, ds2.index, ss2.index});
  };
  const auto tile_address = [&](uint16_t sym, const TensorDesc& td, const ColumnView& view) {
    emit_column_tile_address(b, sym, td, view, e, o, j0, addr, tmp);
  };
  // The chunk's rows x nt of x, as f32 in `work`: loaded into a raw slot (dma ch0), converted.
  const auto load_chunk = [&] {
    b.li(tmp, lc), b.min(rows, left, tmp);
    b.emit(Opcode::WAIT, {kDma0, IN_FREE});
    b.muli(n0, nt, e), b.mov(n1, rows), b.muli(ds1, nt, e), b.li(ss1, in_view.length_stride * e), b.li(n2, 0), b.li(ds2, 0), b.li(ss2, 0);
    b.mov(local, slot);
    dma(Opcode::DMA_LD, 0, local, addr);
    b.emit(Opcode::SIGNAL, {kDma0, IN_FULL});
    b.emit(Opcode::WAIT, {kVec, IN_FULL});
    if (x.dtype == DType::F32) b.emit(Opcode::V_MOV, {f32, work.index, local.index, rows.index, nt.index});
    else b.emit(Opcode::V_CVT, {f32, xdt, work.index, local.index, rows.index, nt.index});
    b.emit(Opcode::SIGNAL, {kVec, IN_FREE});
    if (raw_slots == 2) b.emit(Opcode::XORI, {slot.index, slot.index, raw_bytes});
    b.li(tmp, lc * in_view.length_stride * e), b.add(addr, addr, tmp);
  };

  const Label tile_loop = b.label();
  b.bind(tile_loop);
  emit_column_tile(b, in_view, tc, cores, t, o, j0, nt, tmp);
  b.li(tmp, f32_bits(std::numeric_limits<float>::lowest())), b.emit(Opcode::V_FILL, {f32, m.index, tmp.index, one.index, nt.index});
  b.li(tmp, 0), b.emit(Opcode::V_FILL, {f32, s.index, tmp.index, one.index, nt.index});

  // Pass 1: m and s over the chunks.
  tile_address(in_sym, x, in_view);
  b.li(left, length), b.li(chunk, chunks);
  const Label stats_loop = b.label();
  b.bind(stats_loop);
  load_chunk();
  b.emit(Opcode::V_RMAX, {f32, kAxis0, partial.index, work.index, rows.index, nt.index});
  b.emit(Opcode::V_MAX, {f32, kFull, mnew.index, m.index, partial.index, one.index, nt.index});
  b.emit(Opcode::V_SUB, {f32, kFull, scratch.index, m.index, mnew.index, one.index, nt.index});
  b.emit(Opcode::V_EXP, {f32, scratch.index, scratch.index, one.index, nt.index});
  b.emit(Opcode::V_MUL, {f32, kFull, s.index, s.index, scratch.index, one.index, nt.index});
  b.emit(Opcode::V_MOV, {f32, m.index, mnew.index, one.index, nt.index});
  b.emit(Opcode::V_SUB, {f32, kRow, work.index, work.index, m.index, rows.index, nt.index});
  b.emit(Opcode::V_EXP, {f32, ex.index, work.index, rows.index, nt.index});
  b.emit(Opcode::V_RSUM, {f32, kAxis0, partial.index, ex.index, rows.index, nt.index});
  b.emit(Opcode::V_ADD, {f32, kFull, s.index, s.index, partial.index, one.index, nt.index});
  b.li(tmp, lc), b.sub(left, left, tmp);
  b.branch(Opcode::DBNZ, {chunk.index}, stats_loop);
  b.emit(log ? Opcode::V_LOG : Opcode::V_RECIP, {f32, norm.index, s.index, one.index, nt.index});

  // Pass 2: the outputs, a chunk at a time (the one chunk pass 1 left, where it holds all of L).
  const Reg out_addr = b.reg();
  tile_address(out_sym, out, out_view);
  b.mov(out_addr, addr);
  if (!resident) tile_address(in_sym, x, in_view);
  b.li(left, length), b.li(chunk, chunks);
  const Label out_loop = b.label();
  b.bind(out_loop);
  if (!resident) {
    load_chunk();
    b.emit(Opcode::V_SUB, {f32, kRow, work.index, work.index, m.index, rows.index, nt.index});
    if (!log) b.emit(Opcode::V_EXP, {f32, ex.index, work.index, rows.index, nt.index});
  } else {
    b.li(rows, length);
  }
  const Reg result = log ? work : ex;
  b.emit(log ? Opcode::V_SUB : Opcode::V_MUL, {f32, kRow, result.index, result.index, norm.index, rows.index, nt.index});
  b.emit(Opcode::WAIT, {kVec, OUT_FREE});
  if (out.dtype == DType::F32) b.emit(Opcode::V_MOV, {f32, oslot.index, result.index, rows.index, nt.index});
  else b.emit(Opcode::V_CVT, {xdt, f32, oslot.index, result.index, rows.index, nt.index});
  b.emit(Opcode::SIGNAL, {kVec, OUT_FULL});
  b.emit(Opcode::WAIT, {kStore, OUT_FULL});
  b.muli(n0, nt, e), b.mov(n1, rows), b.li(ds1, out_view.length_stride * e), b.muli(ss1, nt, e), b.li(n2, 0), b.li(ds2, 0), b.li(ss2, 0);
  dma(Opcode::DMA_ST, store_channel, out_addr, oslot);
  b.emit(Opcode::SIGNAL, {kStore, OUT_FREE});
  b.li(tmp, 2 * out_at + out_bytes), b.sub(oslot, tmp, oslot);
  b.li(tmp, lc * out_view.length_stride * e), b.add(out_addr, out_addr, tmp);
  b.li(tmp, lc), b.sub(left, left, tmp);
  b.branch(Opcode::DBNZ, {chunk.index}, out_loop);

  b.addi(t, t, 1);
  b.branch(Opcode::BLT, {t.index, t_end.index}, tile_loop);
  b.bind(done);
  b.emit(Opcode::HALT, {});

  Kernel kernel;
  kernel.program = b.finish();
  kernel.cores = cores;
  std::ostringstream plan;
  plan << name << ": " << x.to_string() << " along its last dim (stride " << in_view.length_stride << ") as " << outer << " x " << length << " x "
       << inner << " (outer x softmax dim x contiguous); tiles of " << tc << " columns, " << tiles << " tiles over " << cores << " cores, "
       << (resident ? "all " + std::to_string(length) + " rows in one chunk: x read once"
                    : std::to_string(chunks) + " chunks of " + std::to_string(lc) + " rows: x read twice (the maxima and sums, then the outputs)")
       << ", in runs of " << tc * e << " bytes; online maxima and sums in f32; " << local_bytes
       << " bytes of scratchpad; loads on dma ch0, stores on dma ch" << store_channel << "\n";
  kernel.plan = plan.str();
  return kernel;
}

}  // namespace npu::compiler
