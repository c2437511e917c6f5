// Row ops whose rows do not fit the scratchpad: each row is walked in chunks,
// once per pass, and only per-row statistics stay on the core between
// passes. A reduction (sum, mean, amax, amin) is one pass; the others read x
// again for each statistic they need, then once more to write the output:
//   softmax, log_softmax  max; sum of exp(x - max); output
//   layer_norm            sum (the mean); sum of (x - mean)^2; output
//   var, std              sum (the mean); sum of (x - mean)^2
//   rms_norm              sum of x^2; output
// (the statistics the one-tile kernel computes, in the same order, so results
// differ from it only in how the f32 sums are grouped); var and std are
// layer_norm's first two passes; argmax and argmin one pass keeping the
// extremum so far and its position. Rows are split over
// the cores; a core walks its rows one after another. Chunks go through two
// slots as in the one-tile kernel: dma ch0 loads (x, and for a norm's output
// pass its weight and bias chunks), the vector unit computes in f32, dma ch2
// stores.
#include <algorithm>
#include <cstring>
#include <limits>
#include <sstream>

#include "npusim/compiler/program_builder.h"
#include "npusim/isa/isa.h"
#include "rowwise.h"

namespace npu::compiler {

using isa::DType;
using isa::Opcode;

Kernel lower_long_row_op(const OpDesc& op, const sim::ChipConfig& config, const RowLayout& layout) {
  const std::string name = op_name(op.kind);
  const TensorDesc& x = op.inputs[0];
  const TensorDesc& out = op.output;
  const int64_t length = layout.length, rows = layout.rows;
  const bool reduction = is_row_reduction(op.kind);
  const bool arg = op.kind == OpKind::ARGMAX || op.kind == OpKind::ARGMIN;
  const size_t params = op.inputs.size() - 1;  // weight, bias
  const int64_t e = isa::dtype_size_bytes(x.dtype), eo = isa::dtype_size_bytes(out.dtype);
  const bool convert = x.dtype != DType::F32;

  // The passes over a row: each accumulates one statistic, the last of a non-reduction writes the output.
  enum class Pass { Sum, SumOfSquares, Max, Min, ArgMax, ArgMin, SumExp, SquaredDeviations, Output };
  const auto passes_of = [](OpKind kind) -> std::vector<Pass> {
    switch (kind) {
      case OpKind::SUM:
      case OpKind::MEAN: return {Pass::Sum};
      case OpKind::AMAX: return {Pass::Max};
      case OpKind::AMIN: return {Pass::Min};
      case OpKind::ARGMAX: return {Pass::ArgMax};
      case OpKind::ARGMIN: return {Pass::ArgMin};
      case OpKind::SOFTMAX:
      case OpKind::LOG_SOFTMAX: return {Pass::Max, Pass::SumExp, Pass::Output};
      case OpKind::LAYER_NORM: return {Pass::Sum, Pass::SquaredDeviations, Pass::Output};
      case OpKind::VAR:
      case OpKind::STD: return {Pass::Sum, Pass::SquaredDeviations};
      case OpKind::RMS_NORM: return {Pass::SumOfSquares, Pass::Output};
      default: throw std::logic_error("not a row op");
    }
  };
  const std::vector<Pass> passes = passes_of(op.kind);

  // Per slot and element of a chunk: x as loaded (when converting), x in f32, the output, and each
  // parameter's chunk (as loaded when not f32, and in f32).
  int64_t per_element = (convert ? e : 0) + 4 + (reduction ? 0 : eo);
  for (size_t i = 1; i <= params; ++i) {
    const int64_t pe = isa::dtype_size_bytes(op.inputs[i].dtype);
    per_element += 4 + (op.inputs[i].dtype == DType::F32 ? 0 : pe);
  }
  // Statistics and constants: 64 bytes each, then the two slots (each buffer 64-byte aligned).
  // (argmax / argmin: kAccumulator the extremum so far, kSecond its position (i32), kChunk and kChunkIndex
  // the chunk's, kOffset the chunk's first position, kTake whether the chunk's wins, kNan a scratch flag.)
  enum Stat : int64_t { kInvLength, kEpsilon, kInvDivisor, kAccumulator, kSecond, kChunk, kResultA, kResultB,
                        kChunkIndex, kOffset, kTake, kNan, kStats };
  const int64_t stats_bytes = kStats * 64;
  const int64_t budget = static_cast<int64_t>(config.core.scratchpad.size_bytes) - stats_bytes - 2 * 8 * 64;
  // Chunks of whole 64-element vectors, no longer than 32 Ki elements: beyond that a chunk
  // only delays the pipeline's start.
  int64_t chunk = std::min<int64_t>({length, int64_t{32768}, budget / 2 / per_element / 64 * 64});
  if (chunk < 64 && chunk < length) throw UnsupportedOp(name + ": the scratchpad is too small for even a 64-element chunk");
  const int64_t chunks = ceil_div(length, chunk);

  int64_t at = stats_bytes;
  const auto take = [&](int64_t bytes) {
    const int64_t offset = at;
    at += align64(bytes);
    return offset;
  };
  const int64_t raw0 = convert ? take(chunk * e) : -1, work0 = take(chunk * 4);
  const int64_t out0 = take(reduction ? eo : chunk * eo);
  std::vector<int64_t> param_raw0, param_f320;
  for (size_t i = 1; i <= params; ++i) {
    param_raw0.push_back(op.inputs[i].dtype == DType::F32 ? -1 : take(chunk * isa::dtype_size_bytes(op.inputs[i].dtype)));
    param_f320.push_back(take(chunk * 4));
  }
  const int64_t slot_bytes = at - stats_bytes;  // slot 1 is slot 0 moved by this much

  ProgramBuilder b(name + " (generated, rows in chunks)");
  const uint16_t out_sym = b.output("out", out.dtype, {uint64_t(std::max<int64_t>(out.storage_extent(), 1))});
  std::vector<uint16_t> in_syms;
  for (size_t i = 0; i < op.inputs.size(); ++i)
    in_syms.push_back(b.input("in" + std::to_string(i), op.inputs[i].dtype, {uint64_t(std::max<int64_t>(op.inputs[i].storage_extent(), 1))}));
  enum : int64_t { IN_FULL, IN_FREE, OUT_FULL, OUT_FREE };
  const unsigned store_channel = std::min<unsigned>(2, config.core.dma.channels - 1);
  const int64_t kCtl = 0, kLoad = 1, kVec = 6, kStore = 1 + store_channel;
  const int64_t f32 = int64_t(DType::F32);
  constexpr int64_t kScalar = 3, kFull = 0, kAxis1 = 1;
  const unsigned cores = static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(config.num_cores, rows)));

  const Label done = b.label();
  const Reg r = b.reg(), r_end = b.reg();
  b.split_over_cores(rows, r, r_end);
  b.branch(Opcode::BGE, {r.index, r_end.index}, done);
  const Reg tmp = b.reg(), one = b.reg(), cn = b.reg(), c = b.reg(), left = b.reg(), addr = b.reg(), local = b.reg();
  const Reg n0 = b.reg(), n1 = b.reg(), n2 = b.reg(), ds1 = b.reg(), ss1 = b.reg(), ds2 = b.reg(), ss2 = b.reg();
  const Reg in_slot = b.reg(), out_slot = b.reg(), w = b.reg(), s0 = b.reg(), s1 = b.reg(), s2 = b.reg();
  b.li(one, 1);
  const auto stat = [&](Reg reg, Stat which) { b.li(reg, which * 64); };
  const auto fill_f32 = [&](Stat which, float value) {
    b.li(tmp, f32_bits(value)), stat(s0, which);
    b.emit(Opcode::V_FILL, {f32, s0.index, tmp.index, one.index, one.index});
  };
  fill_f32(kInvLength, 1.0f / float(length));
  fill_f32(kEpsilon, float(op.epsilon));
  fill_f32(kInvDivisor, variance_scale(length, op.correction));
  const auto dma = [&](Opcode opcode, unsigned channel, Reg dst, Reg src) {
    b.emit(opcode, {int64_t(channel), dst.index, src.index, n0.index, n1.index, n2.index, ds1.index, ss1.index, ds2.index, ss2.index});
  };
  // cn elements of a row with element stride `stride` into a dense local chunk (or back, swapped).
  const auto shape_chunk = [&](int64_t stride, int64_t esize, bool store) {
    b.li(n2, 0), b.li(ds2, 0), b.li(ss2, 0);
    if (stride == 1) {
      b.muli(n0, cn, esize), b.li(n1, 1), b.li(ds1, 0), b.li(ss1, 0);
    } else {
      b.li(n0, esize), b.mov(n1, cn), b.li(ds1, esize), b.li(ss1, stride * esize);
      if (store) b.mov(tmp, ds1), b.mov(ds1, ss1), b.mov(ss1, tmp);
    }
  };
  // addr = symbol + (storage offset + row * row_stride + c * col_stride) * esize.
  const auto element_address = [&](uint16_t sym, const TensorDesc& t, int64_t row_stride, int64_t col_stride, int64_t esize) {
    b.emit(Opcode::LA, {addr.index, sym});
    if (t.storage_offset) b.addi(addr, addr, t.storage_offset * esize);
    b.li(tmp, row_stride * esize), b.mul(tmp, tmp, r), b.add(addr, addr, tmp);
    b.li(tmp, col_stride * esize), b.mul(tmp, tmp, c), b.add(addr, addr, tmp);
  };
  const auto v1 = [&](Opcode opcode, Reg dst, Reg src, Reg rows_reg, Reg cols) {
    b.emit(opcode, {f32, dst.index, src.index, rows_reg.index, cols.index});
  };
  const auto v2 = [&](Opcode opcode, int64_t bc, Reg dst, Reg a, Reg bb, Reg cols) {
    b.emit(opcode, {f32, bc, dst.index, a.index, bb.index, one.index, cols.index});
  };

  for (int i = 0; i < 2; ++i) b.emit(Opcode::SIGNAL, {kCtl, IN_FREE}), b.emit(Opcode::SIGNAL, {kCtl, OUT_FREE});
  b.li(in_slot, 0), b.li(out_slot, 0);
  const Label row_loop = b.label();
  b.bind(row_loop);
  // A row's statistics start from the identity of their combination.
  const float infinity = std::numeric_limits<float>::infinity();
  switch (passes.front()) {
    case Pass::Max:
    case Pass::ArgMax: fill_f32(kAccumulator, -infinity); break;
    case Pass::Min:
    case Pass::ArgMin: fill_f32(kAccumulator, infinity); break;
    default: fill_f32(kAccumulator, 0.0f);
  }
  fill_f32(kSecond, 0.0f);  // (0.0f's bits: position 0 for argmax and argmin)
  for (const Pass pass : passes) {
    const bool output = pass == Pass::Output;
    b.li(c, 0);
    const Label chunk_loop = b.label();
    b.bind(chunk_loop);
    b.li(left, length), b.sub(left, left, c), b.li(tmp, chunk), b.min(cn, left, tmp);

    // Load x's chunk, and the parameters' chunks for a norm's output.
    b.emit(Opcode::WAIT, {kLoad, IN_FREE});
    element_address(in_syms[0], x, layout.x_row, layout.x_col, e);
    shape_chunk(layout.x_col, e, false);
    b.addi(local, in_slot, convert ? raw0 : work0);
    dma(Opcode::DMA_LD, 0, local, addr);
    if (output)
      for (size_t i = 1; i <= params; ++i) {
        const int64_t pe = isa::dtype_size_bytes(op.inputs[i].dtype);
        element_address(in_syms[i], op.inputs[i], 0, 1, pe);
        shape_chunk(1, pe, false);
        b.addi(local, in_slot, param_raw0[i - 1] >= 0 ? param_raw0[i - 1] : param_f320[i - 1]);
        dma(Opcode::DMA_LD, 0, local, addr);
      }
    b.emit(Opcode::SIGNAL, {kLoad, IN_FULL});

    // Compute in f32 on the vector unit.
    b.emit(Opcode::WAIT, {kVec, IN_FULL});
    b.addi(w, in_slot, work0);
    if (convert) b.addi(local, in_slot, raw0), b.emit(Opcode::V_CVT, {f32, int64_t(x.dtype), w.index, local.index, one.index, cn.index});
    stat(s0, kAccumulator), stat(s1, kSecond), stat(s2, kChunk);
    const auto accumulate = [&](Opcode reduce, Opcode combine, Reg into) {
      b.emit(reduce, {f32, kAxis1, s2.index, w.index, one.index, cn.index});
      v2(combine, kScalar, into, into, s2, one);
    };
    switch (pass) {
      case Pass::Sum: accumulate(Opcode::V_RSUM, Opcode::V_ADD, s0); break;
      case Pass::Max: accumulate(Opcode::V_RMAX, Opcode::V_MAX, s0); break;
      case Pass::Min: accumulate(Opcode::V_RMIN, Opcode::V_MIN, s0); break;
      case Pass::ArgMax:
      case Pass::ArgMin: {
        // The chunk's extremum and its position (plus the chunk's start); it replaces the row's so far when
        // strictly beyond it (the first of equal extrema stays), or when it is the row's first NaN (as PyTorch).
        const bool max = pass == Pass::ArgMax;
        const int64_t i32 = int64_t(DType::I32), u8 = int64_t(DType::U8);
        const Reg index = local, wins = left, flag = tmp;
        b.emit(max ? Opcode::V_RMAX : Opcode::V_RMIN, {f32, kAxis1, s2.index, w.index, one.index, cn.index});
        stat(index, kChunkIndex);
        b.emit(max ? Opcode::V_ARGMAX : Opcode::V_ARGMIN, {f32, kAxis1, index.index, w.index, one.index, cn.index});
        stat(flag, kOffset);
        b.emit(Opcode::V_FILL, {i32, flag.index, c.index, one.index, one.index});
        b.emit(Opcode::V_ADD, {i32, kScalar, index.index, index.index, flag.index, one.index, one.index});
        stat(wins, kTake);
        v2(max ? Opcode::V_GT : Opcode::V_LT, kScalar, wins, s2, s0, one);
        stat(flag, kNan);
        v2(Opcode::V_NE, kScalar, flag, s2, s2, one);     // the chunk's extremum is NaN
        b.emit(Opcode::V_MAX, {u8, kScalar, wins.index, wins.index, flag.index, one.index, one.index});
        v2(Opcode::V_EQ, kScalar, flag, s0, s0, one);     // and the row's so far is not
        b.emit(Opcode::V_MIN, {u8, kScalar, wins.index, wins.index, flag.index, one.index, one.index});
        b.emit(Opcode::V_SEL, {i32, s1.index, wins.index, index.index, s1.index, one.index, one.index});
        b.emit(Opcode::V_SEL, {f32, s0.index, wins.index, s2.index, s0.index, one.index, one.index});
        break;
      }
      case Pass::SumOfSquares:
        v2(Opcode::V_MUL, kFull, w, w, w, cn);
        accumulate(Opcode::V_RSUM, Opcode::V_ADD, s0);
        break;
      case Pass::SumExp:  // s0: the row's max
        v2(Opcode::V_SUB, kScalar, w, w, s0, cn);
        v1(Opcode::V_EXP, w, w, one, cn);
        accumulate(Opcode::V_RSUM, Opcode::V_ADD, s1);
        break;
      case Pass::SquaredDeviations:  // s0: the row's mean
        v2(Opcode::V_SUB, kScalar, w, w, s0, cn);
        v2(Opcode::V_MUL, kFull, w, w, w, cn);
        accumulate(Opcode::V_RSUM, Opcode::V_ADD, s1);
        break;
      case Pass::Output: {
        for (size_t i = 1; i <= params; ++i)
          if (param_raw0[i - 1] >= 0) {
            b.addi(local, in_slot, param_raw0[i - 1]), b.addi(tmp, in_slot, param_f320[i - 1]);
            b.emit(Opcode::V_CVT, {f32, int64_t(op.inputs[i].dtype), tmp.index, local.index, one.index, cn.index});
          }
        stat(s2, kResultA);
        switch (op.kind) {
          case OpKind::SOFTMAX:  // s0: max, kResultA: 1 / sum of exp
            v2(Opcode::V_SUB, kScalar, w, w, s0, cn);
            v1(Opcode::V_EXP, w, w, one, cn);
            v2(Opcode::V_MUL, kScalar, w, w, s2, cn);
            break;
          case OpKind::LOG_SOFTMAX:  // kResultA: max + log(sum of exp)
            v2(Opcode::V_SUB, kScalar, w, w, s2, cn);
            break;
          default:  // the norms: kResultA the mean (0 for rms_norm), kResultB 1 / sqrt(variance + eps)
            if (op.kind == OpKind::LAYER_NORM) v2(Opcode::V_SUB, kScalar, w, w, s2, cn);
            stat(s2, kResultB), v2(Opcode::V_MUL, kScalar, w, w, s2, cn);
            for (size_t i = 1; i <= params; ++i) {
              b.addi(tmp, in_slot, param_f320[i - 1]);
              v2(i == 1 ? Opcode::V_MUL : Opcode::V_ADD, kFull, w, w, tmp, cn);
            }
        }
        b.emit(Opcode::WAIT, {kVec, OUT_FREE});
        b.addi(local, out_slot, out0);
        if (out.dtype == DType::F32) v1(Opcode::V_MOV, local, w, one, cn);
        else b.emit(Opcode::V_CVT, {int64_t(out.dtype), f32, local.index, w.index, one.index, cn.index});
        b.emit(Opcode::SIGNAL, {kVec, OUT_FULL});
        break;
      }
    }
    b.emit(Opcode::SIGNAL, {kVec, IN_FREE});
    if (output) {
      b.emit(Opcode::WAIT, {kStore, OUT_FULL});
      element_address(out_sym, out, layout.o_row, layout.o_col, eo);
      shape_chunk(layout.o_col, eo, true);
      b.addi(local, out_slot, out0);
      dma(Opcode::DMA_ST, store_channel, addr, local);
      b.emit(Opcode::SIGNAL, {kStore, OUT_FREE});
      b.emit(Opcode::XORI, {out_slot.index, out_slot.index, slot_bytes});
    }
    b.emit(Opcode::XORI, {in_slot.index, in_slot.index, slot_bytes});
    b.li(tmp, chunk), b.add(c, c, tmp);
    b.li(tmp, length);
    b.branch(Opcode::BLT, {c.index, tmp.index}, chunk_loop);

    // The pass's statistic is complete: derive what the next pass reads (on the vector unit, in order).
    stat(s0, kAccumulator), stat(s1, kSecond), stat(s2, kInvLength), stat(tmp, kEpsilon), stat(local, kResultA), stat(w, kResultB);
    switch (pass) {
      case Pass::Sum:
        if (op.kind != OpKind::SUM) v2(Opcode::V_MUL, kScalar, s0, s0, s2, one);  // the mean
        break;
      case Pass::SumExp:
        if (op.kind == OpKind::SOFTMAX) {
          v1(Opcode::V_RECIP, local, s1, one, one);
        } else {
          v1(Opcode::V_LOG, local, s1, one, one);
          v2(Opcode::V_ADD, kScalar, local, local, s0, one);
        }
        break;
      case Pass::SquaredDeviations:
        if (reduction) {  // var, std: into the accumulator, which the reduction stores
          stat(s2, kInvDivisor), v2(Opcode::V_MUL, kScalar, s0, s1, s2, one);
          if (op.kind == OpKind::STD) v1(Opcode::V_SQRT, s0, s0, one, one);
          break;
        }
        [[fallthrough]];
      case Pass::SumOfSquares: {
        const Reg sum = pass == Pass::SumOfSquares ? s0 : s1;
        v2(Opcode::V_MUL, kScalar, w, sum, s2, one);  // the variance (mean square for rms_norm)
        v2(Opcode::V_ADD, kScalar, w, w, tmp, one);
        v1(Opcode::V_RSQRT, w, w, one, one);
        if (op.kind == OpKind::LAYER_NORM) v1(Opcode::V_MOV, local, s0, one, one);
        break;
      }
      default: break;
    }
  }
  if (reduction) {
    // One value per row, from the accumulator (argmax and argmin: the position).
    b.emit(Opcode::WAIT, {kVec, OUT_FREE});
    stat(s0, arg ? kSecond : kAccumulator), b.addi(local, out_slot, out0);
    if (arg) b.emit(Opcode::V_MOV, {int64_t(DType::I32), local.index, s0.index, one.index, one.index});
    else if (out.dtype == DType::F32) v1(Opcode::V_MOV, local, s0, one, one);
    else b.emit(Opcode::V_CVT, {int64_t(out.dtype), f32, local.index, s0.index, one.index, one.index});
    b.emit(Opcode::SIGNAL, {kVec, OUT_FULL});
    b.emit(Opcode::WAIT, {kStore, OUT_FULL});
    b.li(c, 0), element_address(out_sym, out, 1, 0, eo);
    b.li(n0, eo), b.li(n1, 1), b.li(n2, 0), b.li(ds1, 0), b.li(ss1, 0), b.li(ds2, 0), b.li(ss2, 0);
    dma(Opcode::DMA_ST, store_channel, addr, local);
    b.emit(Opcode::SIGNAL, {kStore, OUT_FREE});
    b.emit(Opcode::XORI, {out_slot.index, out_slot.index, slot_bytes});
  }
  b.addi(r, r, 1);
  b.branch(Opcode::BLT, {r.index, r_end.index}, row_loop);
  b.bind(done);
  b.emit(Opcode::HALT, {});

  Kernel kernel;
  kernel.program = b.finish();
  kernel.cores = cores;
  std::ostringstream plan;
  plan << name << ": " << x.to_string() << " as " << rows << " rows of " << length << ", each too long for the scratchpad: "
       << chunks << " chunks of up to " << chunk << " elements, " << passes.size() << (passes.size() == 1 ? " pass" : " passes")
       << " over x per row; rows over " << cores << " cores; " << stats_bytes + 2 * slot_bytes
       << " bytes of scratchpad (two slots), computed in f32\n";
  kernel.plan = plan.str();
  return kernel;
}

}  // namespace npu::compiler
