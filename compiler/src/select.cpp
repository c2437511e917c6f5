// where(cond, a, b): out = cond != 0 ? a : b, on the vector unit (v.sel).
//
// The output's index space is collapsed to planes x rows x cols as for the
// other elementwise ops (collapse_index_space), cut into tiles of tr x tc,
// and run by the same three-engine pipeline over two slots:
//   dma ch0:  wait IN_FREE, load the inputs' tiles, signal IN_FULL
//   vector:   wait IN_FULL, wait OUT_FREE, select, signal IN_FREE, OUT_FULL
//   dma chS:  wait OUT_FULL, store the output tile, signal OUT_FREE
//
// v.sel takes no broadcast operand, so an input broadcast along rows,
// columns or both is loaded as the row, column or element the tile needs and
// made a full tile on the vector unit by copies alone, so every bit (NaN
// payloads, -0) comes through:
//   row    (1 x nt):  v.gather with all-zero indices repeats it mt times
//   column (mt x 1):  v.gather repeats it nt times as a row (nt x mt), v.trans turns that over
//   scalar (1 x 1):   v.gather makes a row of nt, a second one mt rows of that row
// An input that is one element for the whole op (torch.where(mask, x, -inf))
// is loaded and made a full tile once, before the first tile.
#include "select.h"

#include <algorithm>
#include <array>
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


// How an input's tile is loaded: whole, or what it is broadcast from.
enum class Mode { Full, Row, Col, Scalar, Constant };

const char* mode_name(Mode mode) {
  switch (mode) {
    case Mode::Full: return "full";
    case Mode::Row: return "row (made full)";
    case Mode::Col: return "column (made full)";
    case Mode::Scalar: return "one element per plane (made full)";
    case Mode::Constant: return "one element (made full once)";
  }
  return "";
}

struct Operand {
  DType dtype = DType::F32;
  int64_t esize = 4;
  int64_t offset = 0;                // storage offset, elements
  std::array<int64_t, 3> stride{};   // planes, rows, cols; elements
  Mode mode = Mode::Full;
  uint16_t symbol = 0;
  int64_t local = 0;  // its loaded tile (row, column, element) in slot 0, slot 1 at + slot_bytes; a constant's element (no slots)
  int64_t full = 0;   // broadcast inputs: the full tile made from it, one for both slots (only the vector unit uses it)
};

// Bytes a slot holds of an operand's tile of tr x tc.
int64_t loaded_bytes(const Operand& o, int64_t tr, int64_t tc) {
  switch (o.mode) {
    case Mode::Full: return tr * tc * o.esize;
    case Mode::Row: return tc * o.esize;
    case Mode::Col: return tr * o.esize;
    case Mode::Scalar: return o.esize;
    case Mode::Constant: return 0;
  }
  return 0;
}

// The scratchpad for tiles of tr x tc: two slots of the loaded tiles, then
// what the vector unit alone uses. Sets the operands' addresses.
struct Layout {
  int64_t slot_bytes = 0;
  int64_t zeros = 0;  // i32 zeros, max(tr, tc) of them: the indices that repeat a row
  int64_t tmp = 0;    // a staging tile: nt x mt for a column, 1 x nt for a scalar
  int64_t bytes = 0;  // all of it
};

Layout plan_layout(std::vector<Operand>& operands, int64_t tr, int64_t tc) {
  Layout l;
  int64_t at = 0;
  for (Operand& o : operands) o.local = at, at += align64(loaded_bytes(o, tr, tc));
  l.slot_bytes = at;
  at *= 2;
  int64_t tmp_bytes = 0;
  bool broadcast = false;
  for (Operand& o : operands) {
    if (o.mode == Mode::Full) continue;
    broadcast = true;
    o.full = at, at += align64(tr * tc * o.esize);
    if (o.mode == Mode::Constant) o.local = at, at += align64(o.esize);
    tmp_bytes = std::max(tmp_bytes, o.mode == Mode::Col ? tr * tc * o.esize : o.mode == Mode::Row ? 0 : tc * o.esize);
  }
  l.zeros = at;
  if (broadcast) at += align64(std::max(tr, tc) * 4);
  l.tmp = at;
  at += align64(tmp_bytes);
  l.bytes = at;
  return l;
}

}  // namespace

Kernel lower_where(const OpDesc& op, const sim::ChipConfig& config) {
  if (op.inputs.size() != 3) throw std::invalid_argument("where takes cond, a and b, got " + std::to_string(op.inputs.size()) + " inputs");
  const TensorDesc& out = op.output;
  const DType dtype = out.dtype;
  if (op.inputs[0].dtype != DType::U8) throw std::invalid_argument("where: the condition must be u8 0/1 (bool), not " + op.inputs[0].to_string());
  if (op.inputs[1].dtype != dtype || op.inputs[2].dtype != dtype)
    throw std::invalid_argument("where: a, b and the output have one dtype (cast first)");
  if (out.strides.size() != out.shape.size()) throw std::invalid_argument("output strides do not match its shape");

  std::vector<std::vector<int64_t>> strides{out.strides};  // [operand][dim]; operand 0 is the output
  for (const TensorDesc& input : op.inputs) strides.push_back(broadcast_strides("where", input, out.shape));
  const IndexSpace space = collapse_index_space("where", out.shape, strides);
  const int64_t planes = space.shape[0], rows = space.shape[1], cols = space.shape[2];
  if (space.strides[0][2] == 0 && cols > 1) throw std::invalid_argument("the output overlaps itself (a broadcast stride)");

  std::vector<Operand> operands;  // 0: output, then cond, a, b
  for (size_t k = 0; k < 4; ++k) {
    const TensorDesc& tensor = k == 0 ? out : op.inputs[k - 1];
    Operand o;
    o.dtype = tensor.dtype;
    o.esize = isa::dtype_size_bytes(tensor.dtype);
    o.offset = tensor.storage_offset;
    o.stride = space.strides[k];
    // Dims of size 1 have stride 0 after the collapse, so a broadcast is a 0 stride on a longer dim.
    const bool col_bcast = o.stride[2] == 0 && cols > 1, row_bcast = o.stride[1] == 0 && rows > 1;
    if (k > 0 && col_bcast) o.mode = row_bcast || rows == 1 ? (o.stride[0] == 0 ? Mode::Constant : Mode::Scalar) : Mode::Col;
    else if (k > 0 && row_bcast) o.mode = Mode::Row;
    operands.push_back(o);
  }

  // Tiles: the widest (up to 2048 columns) that still leaves 8 rows, as deep as the scratchpad allows.
  const int64_t scratchpad = static_cast<int64_t>(config.core.scratchpad.size_bytes);
  const bool empty = planes * rows * cols == 0;
  int64_t tc = std::max<int64_t>(1, std::min<int64_t>(cols, 2048)), tr = 1;
  for (; !empty; tc = std::max<int64_t>(1, tc / 2)) {
    int64_t lo = 0, hi = rows;  // the deepest tile that fits: lo fits (0 trivially), hi + 1 does not
    while (lo < hi) {
      const int64_t mid = (lo + hi + 1) / 2;
      if (plan_layout(operands, mid, tc).bytes <= scratchpad) lo = mid;
      else hi = mid - 1;
    }
    tr = lo;
    if (tr >= std::min<int64_t>(rows, 8) || tc == 1) break;
  }
  if (tr < 1) throw UnsupportedOp("where: a tile does not fit the scratchpad");
  // Every core gets work when there are rows enough: no tile deeper than a core's share.
  if (planes * ((cols + tc - 1) / tc) < config.num_cores) tr = std::min(tr, std::max<int64_t>(1, (rows + config.num_cores - 1) / config.num_cores));
  const Layout layout = plan_layout(operands, tr, tc);
  const int64_t row_tiles = empty ? 0 : (rows + tr - 1) / tr, col_tiles = empty ? 0 : (cols + tc - 1) / tc;
  const int64_t tiles = planes * row_tiles * col_tiles;
  const unsigned cores = static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(config.num_cores, tiles)));
  const unsigned store_channel = std::min<unsigned>(2, config.core.dma.channels - 1);

  ProgramBuilder b("where (generated)");
  operands[0].symbol = b.output("out", out.dtype, {static_cast<uint64_t>(std::max<int64_t>(out.storage_extent(), 1))});
  for (size_t k = 1; k < operands.size(); ++k)
    operands[k].symbol = b.input("in" + std::to_string(k - 1), op.inputs[k - 1].dtype,
                                 {static_cast<uint64_t>(std::max<int64_t>(op.inputs[k - 1].storage_extent(), 1))});

  constexpr int64_t IN_FULL = 0, IN_FREE = 1, OUT_FULL = 2, OUT_FREE = 3, CONSTANTS_FULL = 4;
  const int64_t kDma0 = 1, kVec = 6, kStoreEngine = 1 + store_channel;
  const int64_t i32 = static_cast<int64_t>(DType::I32);
  const bool any_broadcast = std::any_of(operands.begin(), operands.end(), [](const Operand& o) { return o.mode != Mode::Full; });
  const bool any_constant = std::any_of(operands.begin(), operands.end(), [](const Operand& o) { return o.mode == Mode::Constant; });
  const Label done = b.label();
  if (tiles == 0) {
    b.emit(Opcode::HALT, {});
    b.bind(done);
  } else {
    // This core's tiles [t, t_end).
    const Reg t = b.reg(), t_end = b.reg();
    b.split_over_cores(tiles, t, t_end);
    b.branch(Opcode::BGE, {t.index, t_end.index}, done);
    std::vector<Reg> base;
    for (const Operand& o : operands) {
      const Reg r = b.reg();
      b.emit(Opcode::LA, {r.index, o.symbol});
      if (o.offset) b.addi(r, r, o.offset * o.esize);
      base.push_back(r);
    }
    const Reg slot = b.reg();  // 0 or slot_bytes
    const Reg p = b.reg(), i0 = b.reg(), j0 = b.reg(), mt = b.reg(), nt = b.reg(), tmp = b.reg();
    const Reg addr = b.reg(), local = b.reg(), n0 = b.reg(), n1 = b.reg(), n2 = b.reg(), ds1 = b.reg(), ss1 = b.reg(), ds2 = b.reg(),
              ss2 = b.reg();
    const Reg zeros = b.reg(), staging = b.reg(), full = b.reg();

    // The DMA shape of an input's tile (or of its row, column or element).
    const auto dma_shape = [&](const Operand& o, Mode mode) {
      const TileRead read = mode == Mode::Scalar || mode == Mode::Constant ? TileRead::Scalar
                            : mode == Mode::Col                           ? TileRead::Col
                            : mode == Mode::Row                           ? TileRead::Row
                                                                          : TileRead::Full;
      emit_tile_dma_shape(b, {n0, n1, n2, ds1, ss1, ds2, ss2}, read, o.stride, o.esize, mt, nt);
    };
    const auto dma = [&](Opcode opcode, int64_t channel, Reg dst, Reg src) {
      b.emit(opcode, {channel, dst.index, src.index, n0.index, n1.index, n2.index, ds1.index, ss1.index, ds2.index, ss2.index});
    };
    // A broadcast input's mt x nt tile at `full`, from what was loaded at `src`, by copies.
    const auto make_full = [&](const Operand& o, Reg src) {
      const int64_t dt = static_cast<int64_t>(o.dtype);
      b.li(full, o.full);
      if (o.mode == Mode::Row) {
        b.emit(Opcode::V_GATHER, {dt, full.index, src.index, zeros.index, mt.index, nt.index});
      } else if (o.mode == Mode::Col) {
        b.emit(Opcode::V_GATHER, {dt, staging.index, src.index, zeros.index, nt.index, mt.index});
        b.emit(Opcode::V_TRANS, {dt, full.index, staging.index, nt.index, mt.index});
      } else {
        b.li(n0, 1);
        b.emit(Opcode::V_GATHER, {dt, staging.index, src.index, zeros.index, nt.index, n0.index});
        b.emit(Opcode::V_GATHER, {dt, full.index, staging.index, zeros.index, mt.index, nt.index});
      }
    };

    b.li(zeros, layout.zeros), b.li(staging, layout.tmp);
    if (any_broadcast) {
      b.li(n0, 1), b.li(tmp, std::max(tr, tc));
      b.emit(Opcode::V_FILL, {i32, zeros.index, kZero.index, n0.index, tmp.index});
    }
    // One-element inputs: loaded and made full tiles once.
    if (any_constant) {
      for (size_t k = 1; k < operands.size(); ++k) {
        if (operands[k].mode != Mode::Constant) continue;
        dma_shape(operands[k], Mode::Constant);
        b.li(local, operands[k].local);
        dma(Opcode::DMA_LD, 0, local, base[k]);
      }
      b.emit(Opcode::SIGNAL, {kDma0, CONSTANTS_FULL});
      b.emit(Opcode::WAIT, {kVec, CONSTANTS_FULL});
      b.li(mt, tr), b.li(nt, tc);
      for (size_t k = 1; k < operands.size(); ++k) {
        if (operands[k].mode != Mode::Constant) continue;
        b.li(local, operands[k].local);
        make_full(operands[k], local);
      }
    }
    // Two tokens in each FREE semaphore: two slots.
    for (int i = 0; i < 2; ++i) {
      b.emit(Opcode::SIGNAL, {kDma0, IN_FREE});
      b.emit(Opcode::SIGNAL, {kVec, OUT_FREE});
    }
    b.li(slot, 0);
    const Label loop = b.label();
    b.bind(loop);
    // Tile t: plane p, rows i0 .. +mt, columns j0 .. +nt.
    b.tile_origin(t, rows, cols, tr, tc, p, i0, j0, mt, nt, tmp);

    // addr = base + (p*sP + i0*sR + j0*sC) * esize
    const auto global_address = [&](size_t k) {
      const Operand& o = operands[k];
      b.tile_address(addr, base[k], p, space.plane_dims, space.plane_strides[k], {{i0, o.stride[1]}, {j0, o.stride[2]}}, o.esize, tmp);
    };

    // Loads, on dma ch0.
    b.emit(Opcode::WAIT, {kDma0, IN_FREE});
    for (size_t k = 1; k < operands.size(); ++k) {
      const Operand& o = operands[k];
      if (o.mode == Mode::Constant) continue;
      global_address(k);
      b.addi(local, slot, o.local);
      dma_shape(o, o.mode);
      dma(Opcode::DMA_LD, 0, local, addr);
    }
    b.emit(Opcode::SIGNAL, {kDma0, IN_FULL});

    // Select, on the vector unit.
    b.emit(Opcode::WAIT, {kVec, IN_FULL});
    b.emit(Opcode::WAIT, {kVec, OUT_FREE});
    const Reg cond_local = b.reg(), a_local = b.reg(), b_local = b.reg(), o_local = b.reg();
    const Reg input_local[] = {cond_local, a_local, b_local};
    for (size_t k = 1; k < operands.size(); ++k) {
      const Operand& o = operands[k];
      const Reg r = input_local[k - 1];
      if (o.mode == Mode::Full) {
        b.addi(r, slot, o.local);
        continue;
      }
      if (o.mode != Mode::Constant) {
        b.addi(local, slot, o.local);
        make_full(o, local);
      }
      b.li(r, o.full);
    }
    b.addi(o_local, slot, operands[0].local);
    b.emit(Opcode::V_SEL, {static_cast<int64_t>(dtype), o_local.index, cond_local.index, a_local.index, b_local.index, mt.index, nt.index});
    b.emit(Opcode::SIGNAL, {kVec, IN_FREE});
    b.emit(Opcode::SIGNAL, {kVec, OUT_FULL});

    // Store, on the store channel.
    b.emit(Opcode::WAIT, {kStoreEngine, OUT_FULL});
    global_address(0);
    dma_shape(operands[0], Mode::Full);
    // A store's source is the dense local tile, its destination strided: swap the strides.
    b.mov(tmp, ds1), b.mov(ds1, ss1), b.mov(ss1, tmp);
    b.mov(tmp, ds2), b.mov(ds2, ss2), b.mov(ss2, tmp);
    dma(Opcode::DMA_ST, store_channel, addr, o_local);
    b.emit(Opcode::SIGNAL, {kStoreEngine, OUT_FREE});

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
  plan << "where: " << out.to_string() << " as " << planes << " x " << rows << " x " << cols << " (planes x rows x cols); tiles of " << tr
       << " x " << tc << ", " << tiles << " tiles over " << cores << " cores; " << layout.bytes
       << " bytes of scratchpad (two slots); loads on dma ch0, stores on dma ch" << store_channel << "\n";
  const char* names[] = {"cond", "a", "b"};
  for (size_t k = 1; k < operands.size(); ++k)
    plan << "  " << names[k - 1] << ": " << op.inputs[k - 1].to_string() << ": strides " << operands[k].stride[0] << ", "
         << operands[k].stride[1] << ", " << operands[k].stride[2] << "; " << mode_name(operands[k].mode)
         << (operands[k].mode != Mode::Constant && operands[k].stride[2] > 1 ? ", strided columns" : "") << "\n";
  kernel.plan = plan.str();
  return kernel;
}

}  // namespace npu::compiler
