// embedding(table, indices): out[i..., :] = table[indices[i...], :].
//
// The table stays in DRAM: dma.gather fetches the rows a tile of indices
// names (one instruction, a row per index), so a table of any size works
// and only the rows asked for are read.
//
// The indices' index space, with the output's strides over the same dims, is
// collapsed to planes x rows x cols (collapse_index_space). A tile is tr x tc
// indices and td elements of their rows (td < D only for rows longer than an
// eighth of the scratchpad), numbered plane-major with the row chunk
// innermost; core c of P takes tiles [c*T/P, (c+1)*T/P). Per tile, four
// engines over two slots:
//   dma ch0:  wait IDX_FREE, load the indices (dense i32), signal IDX_FULL
//   vector:   wait IDX_FULL, check them, signal IDX_CHECKED
//   dma ch1:  wait IDX_CHECKED, wait ROWS_FREE, dma.gather the rows, signal IDX_FREE, ROWS_FULL
//   dma chS:  wait ROWS_FULL, store the rows, signal ROWS_FREE
//
// The check: dma.gather faults only outside DRAM, so an index past the table
// would read other memory. v.gather faults on an index outside its source
// ("gather index 7 out of range (0..4)"), so the vector unit gathers the
// tile's indices from a source of exactly V one-byte rows: the last V bytes
// of the accumulator (of the scratchpad on a chip without one; only read:
// what they hold does not matter). A table of more rows than that memory has
// bytes cannot be described so; there the indices are clamped to [0, V),
// those that moved kept and the rest set to 0, and gathered from the whole
// memory, a source shorter than V: the fault still names the
// first bad index, but the range it gives is that source's. The rows are
// fetched only after the check, so a bad index faults the launch (v.gather)
// before any row moves.
#include "gather.h"

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "elementwise.h"
#include "npusim/compiler/program_builder.h"
#include "npusim/isa/isa.h"

namespace npu::compiler {
namespace {

using isa::DType;
using isa::Opcode;


// The scratchpad for tiles of up to `count` indices and rows of td elements.
struct Layout {
  int64_t idx = 0, rows = 0;  // slot 0's indices and rows; slot 1 at + slot_bytes
  int64_t slot_bytes = 0;
  // The check: its u8 output; and, when clamping, i32 0 and V - 1, a tile
  // of i32 zeros and the clamped indices.
  int64_t checked = 0, zero = 0, last = 0, zeros = 0, clamped = 0;
  int64_t bytes = 0;

  Layout(int64_t count, int64_t row_bytes, bool clamp) {
    int64_t at = 0;
    const auto take = [&at](int64_t size) {
      const int64_t start = at;
      at += align64(size);
      return start;
    };
    idx = take(count * 4), rows = take(count * row_bytes);
    slot_bytes = at;
    at *= 2;
    checked = take(count);
    if (clamp) zero = take(4), last = take(4), zeros = take(count * 4), clamped = take(count * 4);
    bytes = at;
  }
};

}  // namespace

Kernel lower_embedding(const OpDesc& op, const sim::ChipConfig& config) {
  if (op.inputs.size() != 2)
    throw std::invalid_argument("embedding takes the table and the indices, got " + std::to_string(op.inputs.size()) + " inputs");
  const TensorDesc &table = op.inputs[0], &indices = op.inputs[1], &out = op.output;
  for (const TensorDesc* t : {&table, &indices, &out})
    if (t->strides.size() != t->shape.size()) throw std::invalid_argument("embedding: strides do not match the shape of " + t->to_string());
  if (table.shape.empty()) throw std::invalid_argument("embedding: the table has at least one dim (its rows)");
  if (indices.dtype != DType::I32)
    throw UnsupportedOp("embedding: indices must be i32 (int64 ones as their low words: an i32 view with doubled strides), not " +
                        std::string(isa::dtype_name(indices.dtype)));
  if (out.dtype != table.dtype) throw std::invalid_argument("embedding: the output has the table's dtype");
  std::vector<int64_t> expected = indices.shape;
  expected.insert(expected.end(), table.shape.begin() + 1, table.shape.end());
  if (out.shape != expected)
    throw std::invalid_argument("embedding: the output of " + table.to_string() + " indexed by " + indices.to_string() +
                                " is [indices..., table dims after the first], not " + out.to_string());
  const size_t index_rank = indices.shape.size();
  const int64_t vocabulary = table.shape[0];
  const int64_t e = isa::dtype_size_bytes(table.dtype);
  const int64_t row_stride = table.strides[0];
  if (row_stride < 0) throw UnsupportedOp("embedding: negative strides");

  // A row is the table's dims after the first: one contiguous run in the table and in the output.
  int64_t d = 1;
  for (size_t k = table.shape.size(); k-- > 1;) {
    const int64_t size = table.shape[k];
    if (size == 1) continue;
    if (table.strides[k] != d || out.strides[index_rank + k - 1] != d)
      throw UnsupportedOp("embedding: rows must be contiguous in the table and the output (" + table.to_string() + " -> " + out.to_string() +
                          ")");
    d *= size;
  }

  // The indices' dims with the indices' and the output's strides over them.
  std::vector<std::vector<int64_t>> strides{std::vector<int64_t>(out.strides.begin(), out.strides.begin() + index_rank), indices.strides};
  const IndexSpace space = collapse_index_space("embedding", indices.shape, strides);
  if (space.plane_dims.size() > 1)
    throw UnsupportedOp("embedding: indices with " + std::to_string(space.plane_dims.size() + 2) + " dimensions that do not merge (at most 3)");
  const int64_t planes = space.shape[0], rows = space.shape[1], cols = space.shape[2];
  const std::array<int64_t, 3> os = space.strides[0], is = space.strides[1];
  const int64_t count_total = planes * rows * cols;
  if ((os[2] == 0 && cols > 1) || (os[1] == 0 && rows > 1) || (os[0] == 0 && planes > 1))
    throw std::invalid_argument("the output overlaps itself (a broadcast stride)");
  if (vocabulary == 0 && count_total * d > 0) throw std::invalid_argument("embedding: indices into a table with no rows");

  // Tiles: row chunks of at most an eighth of the scratchpad, then as many
  // indices as two slots of them hold (at most 8192: longer tiles only
  // lengthen the pipeline's start), and no more than a core's share.
  const int64_t scratchpad = static_cast<int64_t>(config.core.scratchpad.size_bytes);
  const int64_t accumulator = static_cast<int64_t>(config.core.accumulator.size_bytes);
  // The index check reads the accumulator where there is one: its size is the
  // chip's, while the scratchpad a kernel is given may stop short of the
  // memory's end (the driver's SRAM pool takes the top), and v.gather's source
  // runs to the end of the memory.
  const bool check_in_accumulator = accumulator > 0;
  const int64_t check_bytes = check_in_accumulator ? accumulator : scratchpad;
  const int64_t check_base = check_in_accumulator ? static_cast<int64_t>(isa::kAccumulatorBase) : 0;
  const bool clamp = vocabulary > check_bytes;
  // Each cut even: the fewest pieces of at most the limit, all of about one size.
  const auto even = [](int64_t size, int64_t limit) { return size == 0 ? 1 : ceil_div(size, ceil_div(size, limit)); };
  const int64_t td = even(d, std::max<int64_t>(1, scratchpad / 8 / e));
  const int64_t per_index = 2 * (4 + td * e) + (clamp ? 9 : 1);
  int64_t count = std::min<int64_t>(8192, (scratchpad - 1024) / per_index);
  count = std::min(count, std::max<int64_t>(1, ceil_div(count_total, config.num_cores)));
  if (count < 1) throw UnsupportedOp("embedding: a tile does not fit the scratchpad");
  const int64_t tc = even(cols, count), tr = even(rows, std::max<int64_t>(1, count / tc));
  const Layout layout(tr * tc, td * e, clamp);
  if (layout.bytes > scratchpad) throw std::logic_error("embedding: the layout outgrew the scratchpad");
  const bool empty = count_total * d == 0;
  const int64_t row_tiles = ceil_div(rows, tr), col_tiles = ceil_div(cols, tc), d_tiles = ceil_div(d, td);
  const int64_t tiles = empty ? 0 : planes * row_tiles * col_tiles * d_tiles;
  const unsigned cores = static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(config.num_cores, tiles)));
  const unsigned gather_channel = std::min<unsigned>(1, config.core.dma.channels - 1);
  const unsigned store_channel = std::min<unsigned>(2, config.core.dma.channels - 1);
  // Whole rows at the output's row pitch: a tile row's rows go out as one run.
  const bool dense_rows = td == d && os[2] == d;

  ProgramBuilder b("embedding (generated)");
  const uint16_t out_symbol = b.output("out", out.dtype, {static_cast<uint64_t>(std::max<int64_t>(out.storage_extent(), 1))});
  const uint16_t table_symbol = b.input("in0", table.dtype, {static_cast<uint64_t>(std::max<int64_t>(table.storage_extent(), 1))});
  const uint16_t idx_symbol = b.input("in1", indices.dtype, {static_cast<uint64_t>(std::max<int64_t>(indices.storage_extent(), 1))});

  constexpr int64_t IDX_FULL = 0, IDX_CHECKED = 1, IDX_FREE = 2, ROWS_FULL = 3, ROWS_FREE = 4;
  const int64_t kDma0 = 1, kVec = 6, kGatherEngine = 1 + gather_channel, kStoreEngine = 1 + store_channel;
  const int64_t i32 = static_cast<int64_t>(DType::I32), u8 = static_cast<int64_t>(DType::U8);
  const int64_t kScalar = 3, kFull = 0;  // bcast operand values
  const Label done = b.label();
  if (tiles == 0) {
    b.emit(Opcode::HALT, {});
    b.bind(done);
  } else {
    const Reg t = b.reg(), t_end = b.reg();
    b.split_over_cores(tiles, t, t_end);
    b.branch(Opcode::BGE, {t.index, t_end.index}, done);
    const Reg table_base = b.reg(), idx_base = b.reg(), out_base = b.reg();
    b.emit(Opcode::LA, {table_base.index, table_symbol});
    if (table.storage_offset) b.addi(table_base, table_base, table.storage_offset * e);
    b.emit(Opcode::LA, {idx_base.index, idx_symbol});
    if (indices.storage_offset) b.addi(idx_base, idx_base, indices.storage_offset * 4);
    b.emit(Opcode::LA, {out_base.index, out_symbol});
    if (out.storage_offset) b.addi(out_base, out_base, out.storage_offset * e);

    const Reg slot = b.reg(), p = b.reg(), i0 = b.reg(), j0 = b.reg(), d0 = b.reg(), mt = b.reg(), nt = b.reg(), dn = b.reg(), n = b.reg(),
              tmp = b.reg();
    const Reg addr = b.reg(), local = b.reg(), idx = b.reg(), n0 = b.reg(), n1 = b.reg(), n2 = b.reg(), ds1 = b.reg(), ss1 = b.reg(),
              ds2 = b.reg(), ss2 = b.reg();
    const Reg one = b.reg(), source = b.reg();
    const auto dma = [&](Opcode opcode, int64_t channel, Reg dst, Reg src) {
      b.emit(opcode, {channel, dst.index, src.index, n0.index, n1.index, n2.index, ds1.index, ss1.index, ds2.index, ss2.index});
    };

    b.li(one, 1);
    // The check's source: V one-byte rows, or (clamping) fewer than V.
    if (!clamp) b.li(source, check_base + check_bytes - vocabulary);
    else b.li(source, check_base);
    if (clamp) {
      b.li(local, layout.zero);
      b.emit(Opcode::V_FILL, {i32, local.index, kZero.index, one.index, one.index});
      b.li(local, layout.last), b.li(tmp, std::min<int64_t>(vocabulary - 1, INT32_MAX));
      b.emit(Opcode::V_FILL, {i32, local.index, tmp.index, one.index, one.index});
      b.li(local, layout.zeros), b.li(tmp, tr * tc);
      b.emit(Opcode::V_FILL, {i32, local.index, kZero.index, one.index, tmp.index});
    }
    // Two tokens in each FREE semaphore: two slots.
    for (int i = 0; i < 2; ++i) {
      b.emit(Opcode::SIGNAL, {kDma0, IDX_FREE});
      b.emit(Opcode::SIGNAL, {kGatherEngine, ROWS_FREE});
    }
    b.li(slot, 0);
    const Label loop = b.label();
    b.bind(loop);
    // Tile t: plane p, index rows i0 .. +mt, index columns j0 .. +nt, row elements d0 .. +dn.
    b.li(tmp, d_tiles);
    b.emit(Opcode::REMU, {d0.index, t.index, tmp.index});
    b.emit(Opcode::DIVU, {p.index, t.index, tmp.index});
    b.li(tmp, col_tiles);
    b.emit(Opcode::REMU, {j0.index, p.index, tmp.index});
    b.emit(Opcode::DIVU, {p.index, p.index, tmp.index});
    b.li(tmp, row_tiles);
    b.emit(Opcode::REMU, {i0.index, p.index, tmp.index});
    b.emit(Opcode::DIVU, {p.index, p.index, tmp.index});
    b.muli(i0, i0, tr), b.muli(j0, j0, tc), b.muli(d0, d0, td);
    b.li(tmp, rows), b.sub(mt, tmp, i0), b.li(tmp, tr), b.min(mt, mt, tmp);
    b.li(tmp, cols), b.sub(nt, tmp, j0), b.li(tmp, tc), b.min(nt, nt, tmp);
    b.li(tmp, d), b.sub(dn, tmp, d0), b.li(tmp, td), b.min(dn, dn, tmp);
    b.mul(n, mt, nt);

    // addr = base + (p*sP + i0*sR + j0*sC) * esize
    const auto tile_address = [&](Reg base, const std::array<int64_t, 3>& s, int64_t esize) {
      b.scaled_address(addr, base, {{p, s[0]}, {i0, s[1]}, {j0, s[2]}}, esize, tmp);
    };

    // The indices, dense, on dma ch0 (an element at a time when strided: int64's low words).
    b.emit(Opcode::WAIT, {kDma0, IDX_FREE});
    tile_address(idx_base, is, 4);
    b.addi(idx, slot, layout.idx);
    b.li(n2, 0), b.li(ds2, 0), b.li(ss2, 0);
    if (is[2] == 1) {
      b.muli(n0, nt, 4), b.mov(n1, mt), b.muli(ds1, nt, 4), b.li(ss1, is[1] * 4);
    } else {
      b.li(n0, 4), b.mov(n1, nt), b.li(ds1, 4), b.li(ss1, is[2] * 4);
      b.mov(n2, mt), b.muli(ds2, nt, 4), b.li(ss2, is[1] * 4);
    }
    dma(Opcode::DMA_LD, 0, idx, addr);
    b.emit(Opcode::SIGNAL, {kDma0, IDX_FULL});

    // The check, on the vector unit: n one-byte rows gathered by index.
    b.emit(Opcode::WAIT, {kVec, IDX_FULL});
    b.li(local, layout.checked);
    if (!clamp) {
      b.emit(Opcode::V_GATHER, {u8, local.index, source.index, idx.index, n.index, one.index});
    } else {
      // clamped = clamp(idx, 0, V - 1); checked = idx != clamped; clamped = checked ? idx : 0.
      const Reg clamped = ds1, zero = ds2, last = ss1, zeros = ss2;  // the DMA shape is dispatched: free again
      b.li(clamped, layout.clamped), b.li(zero, layout.zero), b.li(last, layout.last), b.li(zeros, layout.zeros);
      b.emit(Opcode::V_MAX, {i32, kScalar, clamped.index, idx.index, zero.index, n.index, one.index});
      b.emit(Opcode::V_MIN, {i32, kScalar, clamped.index, clamped.index, last.index, n.index, one.index});
      b.emit(Opcode::V_NE, {i32, kFull, local.index, idx.index, clamped.index, n.index, one.index});
      b.emit(Opcode::V_SEL, {i32, clamped.index, local.index, idx.index, zeros.index, n.index, one.index});
      b.emit(Opcode::V_GATHER, {u8, local.index, source.index, clamped.index, n.index, one.index});
    }
    b.emit(Opcode::SIGNAL, {kVec, IDX_CHECKED});

    // The rows, after the check.
    b.emit(Opcode::WAIT, {kGatherEngine, IDX_CHECKED});
    b.emit(Opcode::WAIT, {kGatherEngine, ROWS_FREE});
    b.muli(addr, d0, e), b.add(addr, addr, table_base);
    b.addi(local, slot, layout.rows);
    b.muli(n0, dn, e), b.li(ss1, row_stride * e);
    b.emit(Opcode::DMA_GATHER, {gather_channel, local.index, addr.index, idx.index, n.index, n0.index, ss1.index});
    b.emit(Opcode::SIGNAL, {kGatherEngine, IDX_FREE});
    b.emit(Opcode::SIGNAL, {kGatherEngine, ROWS_FULL});

    // Store: mt x nt rows of dn elements, dense here, at the output's strides there.
    b.emit(Opcode::WAIT, {kStoreEngine, ROWS_FULL});
    tile_address(out_base, os, e);
    b.muli(tmp, d0, e), b.add(addr, addr, tmp);
    if (dense_rows) {
      b.muli(n0, nt, d * e), b.mov(n1, mt), b.li(n2, 0), b.li(ds1, os[1] * e), b.muli(ss1, nt, d * e), b.li(ds2, 0), b.li(ss2, 0);
    } else {
      b.muli(n0, dn, e), b.mov(n1, nt), b.mov(n2, mt), b.li(ds1, os[2] * e), b.mov(ss1, n0), b.li(ds2, os[1] * e), b.mul(ss2, n0, nt);
    }
    dma(Opcode::DMA_ST, store_channel, addr, local);
    b.emit(Opcode::SIGNAL, {kStoreEngine, ROWS_FREE});

    b.emit(Opcode::XORI, {slot.index, slot.index, layout.slot_bytes});
    b.addi(t, t, 1);
    b.branch(Opcode::BLT, {t.index, t_end.index}, loop);
    b.bind(done);
    b.emit(Opcode::HALT, {});
  }

  Kernel kernel;
  kernel.program = b.finish();
  kernel.cores = cores;
  std::ostringstream plan;
  plan << "embedding: " << table.to_string() << " indexed by " << indices.to_string() << " -> " << out.to_string() << "\n  " << count_total
       << " indices as " << planes << " x " << rows << " x " << cols << " (planes x rows x cols), rows of " << d << "; tiles of " << tr
       << " x " << tc << " indices x " << td << " elements, " << tiles << " tiles over " << cores << " cores; " << layout.bytes
       << " bytes of scratchpad (two slots); indices on dma ch0, rows gathered on dma ch" << gather_channel << ", stored on dma ch"
       << store_channel << "\n  indices checked against " << vocabulary << " rows" << (clamp ? " (clamped first: more rows than the scratchpad has bytes)" : "")
       << (dense_rows ? "" : "; rows stored one at a time") << "\n";
  kernel.plan = plan.str();
  return kernel;
}

}  // namespace npu::compiler
