// Ops along the last dim, a whole row at a time: softmax, log_softmax,
// layer_norm, rms_norm, and sum / mean / amax / amin over the last dim.
//
// x [..., L] is viewed as rows x L (its leading dims must merge into one row
// stride; L may be strided). Tiles of tr whole rows, sized so that two slots
// fit the scratchpad, are split over the cores; dma ch0 loads, the vector
// unit computes in f32 (converting the tile first when x is not f32, with
// per-row statistics in rows x 1 columns), dma ch2 stores: the pipeline of
// the elementwise kernels. The norms' weight and bias are loaded and
// converted to f32 once per core. Rows that do not fit the scratchpad go to
// the chunked kernel (long_rows.cpp). The backward ops load a second row
// tensor (y or x) and, for the norms', the statistics the forward saved (one
// per row) with each tile, on the same channel. topk keeps i32 keys in the
// work tile and takes k rounds over it.
#include "rowwise.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "npusim/compiler/program_builder.h"
#include "npusim/isa/isa.h"

namespace npu::compiler {
namespace {

using isa::DType;
using isa::Opcode;


// rows x L view of a tensor whose last dim is L: (row stride, column stride), or false.
bool row_view(const TensorDesc& t, int64_t* row_stride, int64_t* col_stride) {
  if (t.shape.empty()) return false;
  *col_stride = t.shape.back() == 1 ? 1 : t.strides.back();
  *row_stride = 0;
  int64_t expected = -1;  // stride the next-outer dim must have to merge
  for (size_t d = t.shape.size() - 1; d-- > 0;) {
    if (t.shape[d] == 1) continue;
    if (expected < 0) *row_stride = t.strides[d];
    else if (t.strides[d] != expected) return false;
    expected = t.strides[d] * t.shape[d];
  }
  return true;
}

}  // namespace

Kernel lower_row_op(const OpDesc& op, const sim::ChipConfig& config) {
  const std::string name = op_name(op.kind);
  if (op.inputs.empty() || op.inputs.size() > op_arity(op.kind)) throw std::invalid_argument(name + ": wrong number of inputs");
  const TensorDesc& x = op.inputs[0];
  const TensorDesc& out = op.output;
  // amax / amin / sum of i32 (int64's words) compute on the integers themselves (a sum wraps modulo 2^32,
  // which is what int64's sums built from word parts need); every other row op computes in f32.
  const bool int_rows = (op.kind == OpKind::AMAX || op.kind == OpKind::AMIN || op.kind == OpKind::SUM) && x.dtype == DType::I32;
  if (!isa::dtype_is_float(x.dtype) && !int_rows)
    throw UnsupportedOp(name + " on " + std::string(isa::dtype_name(x.dtype)) + ": floats only");
  if (int_rows && out.dtype != DType::I32) throw std::invalid_argument(name + " of i32: the output is i32");
  // A sum or mean may also be kept in f32 (PyTorch's sum(dtype=float32) of a bf16 tensor): the kernel
  // accumulates in f32 anyway and skips the final rounding.
  const bool arg = op.kind == OpKind::ARGMAX || op.kind == OpKind::ARGMIN;
  const bool topk = op.kind == OpKind::TOPK;
  const bool backward = is_row_backward(op.kind);
  // Inputs: the row tensors (x, or g then y / x), the backward norms' per-row statistics, then the [L] parameters.
  const size_t row_inputs = backward ? 2 : 1;
  const size_t stat_inputs = op.kind == OpKind::LAYER_NORM_BACKWARD ? 2 : op.kind == OpKind::RMS_NORM_BACKWARD ? 1 : 0;  // mean, rstd
  const size_t first_param = row_inputs + stat_inputs;
  if (op.inputs.size() < first_param) throw std::invalid_argument(name + ": wrong number of inputs");
  // So may the row ops that compute in f32 after converting x on the chip (softmax(x, half_to_float=True),
  // a norm of x.float()): an f32 output is the result before its rounding. (A maximum or minimum has
  // nothing to round, and no op that asks for it in f32.)
  const bool f32_result = !arg && !topk && !backward && !int_rows && op.kind != OpKind::AMAX && op.kind != OpKind::AMIN &&
                          out.dtype == DType::F32;
  if ((arg || topk) && out.dtype != DType::I32) throw std::invalid_argument(name + ": the output is i32 (positions)");
  if (!arg && !topk && !backward && out.dtype != x.dtype && !f32_result) throw std::invalid_argument(name + ": the output has the input's dtype");
  if (backward && !isa::dtype_is_float(out.dtype)) throw std::invalid_argument(name + ": the output is float");
  if (x.shape.empty()) throw UnsupportedOp(name + " of a 0-dim tensor");
  for (const int64_t s : x.strides)
    if (s < 0) throw UnsupportedOp("negative strides");
  const bool reduction = is_row_reduction(op.kind);
  if (is_column_reduction(op)) return lower_column_reduction(op, config);
  if (is_column_softmax(op)) return lower_column_softmax(op, config);
  const int64_t length = x.shape.back(), rows = length == 0 ? 0 : x.numel() / length;
  int64_t x_row = 0, x_col = 0, o_row = 0, o_col = 0;
  if (!row_view(x, &x_row, &x_col)) throw UnsupportedOp(name + ": the input's leading dims do not merge into rows");
  int64_t y_row = 0, y_col = 0;
  if (backward) {
    const TensorDesc& y = op.inputs[1];
    if (y.shape != x.shape) throw std::invalid_argument(name + ": the two row inputs have one shape");
    if (!isa::dtype_is_float(y.dtype)) throw UnsupportedOp(name + " on " + std::string(isa::dtype_name(y.dtype)) + ": floats only");
    if (!row_view(y, &y_row, &y_col)) throw UnsupportedOp(name + ": the second input's leading dims do not merge into rows");
  }
  for (size_t i = row_inputs; i < first_param; ++i) {
    const TensorDesc& stat = op.inputs[i];
    if (stat.numel() != rows) throw std::invalid_argument(name + ": the statistics have one element per row");
    if (stat.strides != TensorDesc::contiguous(stat.dtype, stat.shape).strides) throw UnsupportedOp(name + ": the statistics are contiguous");
    if (!isa::dtype_is_float(stat.dtype)) throw std::invalid_argument(name + ": the statistics are float");
  }
  // topk: k positions per row, contiguous.
  const int64_t k = topk && !out.shape.empty() ? out.shape.back() : 1;
  const int64_t out_cols = topk ? k : reduction ? 1 : length;
  if (topk) {
    if (out.shape.size() != x.shape.size() || !std::equal(x.shape.begin(), x.shape.end() - 1, out.shape.begin()) || k < 1 || k > length)
      throw std::invalid_argument(name + ": the output is x's shape with k, 1 <= k <= L, last");
    if (out.strides != TensorDesc::contiguous(out.dtype, out.shape).strides) throw UnsupportedOp(name + " into a non-contiguous output");
    o_row = k;
  } else if (reduction) {
    if (out.numel() != rows) throw std::invalid_argument(name + ": the output has one element per row");
    if (out.strides != TensorDesc::contiguous(out.dtype, out.shape).strides) throw UnsupportedOp(name + " into a non-contiguous output");
    o_row = 1;
  } else {
    if (out.shape != x.shape) throw std::invalid_argument(name + ": the output has the input's shape");
    if (!row_view(out, &o_row, &o_col)) throw UnsupportedOp(name + ": the output's leading dims do not merge into rows");
  }
  const bool norm = op.kind == OpKind::LAYER_NORM || op.kind == OpKind::RMS_NORM;
  const bool has_weight = (norm || stat_inputs > 0) && op.inputs.size() > first_param;
  const bool has_bias = op.kind == OpKind::LAYER_NORM && op.inputs.size() == 3;
  for (size_t i = first_param; i < op.inputs.size(); ++i) {
    const TensorDesc& p = op.inputs[i];
    if (p.shape != std::vector<int64_t>{length} || (length > 1 && p.strides[0] != 1))
      throw UnsupportedOp(name + ": weight and bias are contiguous [L]");
    if (!isa::dtype_is_float(p.dtype)) throw std::invalid_argument(name + ": weight and bias are float");
  }

  const int64_t e = isa::dtype_size_bytes(x.dtype), eo = isa::dtype_size_bytes(out.dtype);
  const bool convert = x.dtype != DType::F32 && !int_rows;
  const DType y_dtype = backward ? op.inputs[1].dtype : DType::F32;
  const int64_t ye = isa::dtype_size_bytes(y_dtype);
  const bool convert_y = y_dtype != DType::F32;
  const bool needs_scratch = op.kind == OpKind::LOG_SOFTMAX || norm || op.kind == OpKind::SOFTMAX_BACKWARD || stat_inputs > 0 || topk;
  // Per slot, per row: the raw tile (when converting), the f32 work tile, those of the second row input, a scratch tile,
  // two statistics and the backward norms' saved ones (raw and in f32), the output.
  const int64_t per_row = (convert ? length * e : 0) + length * 4 + (backward ? (convert_y ? length * ye : 0) + length * 4 : 0) +
                          (needs_scratch ? length * 4 : 0) + 8 + 8 * int64_t(stat_inputs) + out_cols * eo +
                          // topk: a u8 mask and the positions (k x rows) per slot; the core's position and sentinel tiles
                          // (counted in each slot: a slot's rows bound them).
                          (topk ? length + 4 * k + 8 * length + 4 : 0);
  int64_t params = topk ? 384 : 192;  // 1/L, epsilon, the variance's 1 / (L - correction); topk's INT32_MIN, 0, L
  for (size_t i = first_param; i < op.inputs.size(); ++i)
    params += align64(length * 4) + align64(length * isa::dtype_size_bytes(op.inputs[i].dtype));
  // (Alignment: up to 64 bytes per buffer of a slot.)
  const int64_t budget = static_cast<int64_t>(config.core.scratchpad.size_bytes) / 2 - params / 2 - (6 + (backward ? 2 : 0) + 2 * int64_t(stat_inputs) + (topk ? 5 : 0)) * 64;
  int64_t tr = std::min<int64_t>(rows, budget / std::max<int64_t>(per_row, 1));
  if (rows > 0 && tr < 1 && (backward || topk)) throw UnsupportedOp(name + ": rows of " + std::to_string(length) + " do not fit the scratchpad");
  if (rows > 0 && tr < 1 && int_rows) throw UnsupportedOp(name + " of i32: rows of " + std::to_string(length) + " do not fit the scratchpad");
  if (rows > 0 && tr < 1) return lower_long_row_op(op, config, RowLayout{rows, length, x_row, x_col, o_row, o_col});
  // At least kTilesPerCore tiles per core where the rows allow: the first load and the last store of a core
  // overlap nothing, so a core with one or two huge tiles spends most of its time unpipelined.
  constexpr int64_t kTilesPerCore = 8;
  tr = std::min(tr, std::max<int64_t>(1, (rows + config.num_cores * kTilesPerCore - 1) / (config.num_cores * kTilesPerCore)));
  const int64_t tiles = rows == 0 ? 0 : (rows + tr - 1) / tr;
  const unsigned cores = static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(config.num_cores, tiles)));
  const unsigned store_channel = std::min<unsigned>(2, config.core.dma.channels - 1);

  // Local layout: slot buffers, then the parameters.
  const int64_t raw_bytes = convert ? align64(tr * length * e) : 0, work_bytes = align64(tr * length * 4);
  const int64_t y_raw_bytes = backward && convert_y ? align64(tr * length * ye) : 0, y_work_bytes = backward ? work_bytes : 0;
  const int64_t scratch_bytes = needs_scratch ? align64(tr * length * 4) : 0, stat_bytes = align64(tr * 4);
  const int64_t out_bytes = align64(tr * out_cols * eo);
  const int64_t raw0 = 0, work0 = raw0 + raw_bytes, y_raw0 = work0 + work_bytes, y_work0 = y_raw0 + y_raw_bytes;
  const int64_t scratch0 = y_work0 + y_work_bytes, stat0 = scratch0 + scratch_bytes, stat1 = stat0 + stat_bytes;
  // The backward norms' statistics (layer_norm's mean and rstd, rms_norm's rstd): raw as loaded, then in f32.
  const int64_t stat_raw0 = stat1 + stat_bytes, stat_f32_0 = stat_raw0 + int64_t(stat_inputs) * stat_bytes;
  const int64_t mean0 = stat_f32_0, rstd0 = stat_f32_0 + (stat_inputs == 2 ? stat_bytes : 0);  // (rstd comes last)
  const int64_t out0 = stat_f32_0 + int64_t(stat_inputs) * stat_bytes;
  // topk's mask and positions (k rows of mt, transposed into the output at the end).
  const int64_t mask0 = out0 + out_bytes, positions0 = mask0 + (topk ? align64(tr * length) : 0);
  const int64_t slot_bytes = positions0 + (topk ? align64(tr * k * 4) : 0);
  const int64_t inv_length_at = 2 * slot_bytes, eps_at = inv_length_at + 64, inv_divisor_at = eps_at + 64;
  // topk's per-core tiles: each element's flat position i * L + j, the masked-out key, each row's i * L; two i32 constants.
  const int64_t flat_at = inv_divisor_at + 64, sentinel_at = flat_at + (topk ? align64(tr * length * 4) : 0);
  const int64_t row_base_at = sentinel_at + (topk ? align64(tr * length * 4) : 0), int_min_at = row_base_at + (topk ? align64(tr * 4) : 0);
  const int64_t zero_at = int_min_at + 64, length_at = zero_at + 64;
  int64_t param_at = length_at + 64;
  std::vector<int64_t> param_f32, param_raw;
  for (size_t i = first_param; i < op.inputs.size(); ++i) {
    param_f32.push_back(param_at), param_at += align64(length * 4);
    param_raw.push_back(param_at), param_at += align64(length * isa::dtype_size_bytes(op.inputs[i].dtype));
  }

  ProgramBuilder b(name + " (generated)");
  const uint16_t out_sym = b.output("out", out.dtype, {uint64_t(std::max<int64_t>(out.storage_extent(), 1))});
  std::vector<uint16_t> in_syms;
  for (size_t i = 0; i < op.inputs.size(); ++i)
    in_syms.push_back(b.input("in" + std::to_string(i), op.inputs[i].dtype, {uint64_t(std::max<int64_t>(op.inputs[i].storage_extent(), 1))}));
  enum : int64_t { IN_FULL, IN_FREE, OUT_FULL, OUT_FREE, PARAMS_FULL };
  const int64_t kCtl = 0, kDma0 = 1, kVec = 6, kStore = 1 + store_channel;
  const int64_t f32 = int64_t(DType::F32), dt = int64_t(x.dtype);
  constexpr int64_t kFull = 0, kRow = 1, kCol = 2, kScalar = 3, kAxis1 = 1;

  const Label done = b.label();
  if (tiles == 0) {
    b.emit(Opcode::HALT, {});
    b.bind(done);
  } else {
    const Reg t = b.reg(), t_end = b.reg();
    b.split_over_cores(tiles, t, t_end);
    b.branch(Opcode::BGE, {t.index, t_end.index}, done);
    const Reg tmp = b.reg(), one = b.reg(), len = b.reg(), addr = b.reg(), a0 = b.reg(), a1 = b.reg(), a2 = b.reg(), a3 = b.reg();
    const Reg n0 = b.reg(), n1 = b.reg(), n2 = b.reg(), ds1 = b.reg(), ss1 = b.reg(), ds2 = b.reg(), ss2 = b.reg();
    const Reg slot = b.reg(), row0 = b.reg(), mt = b.reg(), inv_at = b.reg(), eps_reg = b.reg(), wy = b.reg();
    b.li(one, 1), b.li(len, length), b.li(inv_at, inv_length_at), b.li(eps_reg, eps_at);
    const auto fill_f32 = [&](Reg at, float value) {
      b.li(tmp, f32_bits(value));
      b.emit(Opcode::V_FILL, {f32, at.index, tmp.index, one.index, one.index});
    };
    fill_f32(inv_at, 1.0f / float(length));
    fill_f32(eps_reg, float(op.epsilon));
    if (op.kind == OpKind::VAR || op.kind == OpKind::STD) b.li(addr, inv_divisor_at), fill_f32(addr, variance_scale(length, op.correction));
    const auto dma = [&](Opcode opcode, unsigned channel, Reg dst, Reg src) {
      b.emit(opcode, {int64_t(channel), dst.index, src.index, n0.index, n1.index, n2.index, ds1.index, ss1.index, ds2.index, ss2.index});
    };
    // rows x L of a view with element strides (row, col) into a dense local tile (or back).
    const auto shape_rows = [&](Reg count, int64_t row_stride, int64_t col_stride, int64_t esize) {
      b.li(n2, 0), b.li(ds2, 0), b.li(ss2, 0);
      if ((col_stride == 1 || length == 1) && row_stride == length) {
        // Rows one after another in DRAM as on the core: one run (short rows would each be a DMA request).
        b.muli(n0, count, length * esize), b.li(n1, 1), b.li(ds1, 0), b.li(ss1, 0);
      } else if (col_stride == 1 || length == 1) {
        b.li(n0, length * esize), b.mov(n1, count), b.li(ds1, length * esize), b.li(ss1, row_stride * esize);
      } else {
        b.li(n0, esize), b.li(n1, length), b.li(ds1, esize), b.li(ss1, col_stride * esize);
        b.mov(n2, count), b.li(ds2, length * esize), b.li(ss2, row_stride * esize);
      }
    };
    // Weight and bias: once per core, converted to f32.
    if (op.inputs.size() > first_param) {
      for (size_t i = first_param; i < op.inputs.size(); ++i) {
        const int64_t pe = isa::dtype_size_bytes(op.inputs[i].dtype);
        b.emit(Opcode::LA, {addr.index, in_syms[i]});
        if (op.inputs[i].storage_offset) b.addi(addr, addr, op.inputs[i].storage_offset * pe);
        b.li(a0, param_raw[i - first_param]);
        b.li(n0, length * pe), b.li(n1, 1), b.li(n2, 0), b.li(ds1, 0), b.li(ss1, 0), b.li(ds2, 0), b.li(ss2, 0);
        dma(Opcode::DMA_LD, 0, a0, addr);
      }
      b.emit(Opcode::SIGNAL, {kDma0, PARAMS_FULL});
      b.emit(Opcode::WAIT, {kVec, PARAMS_FULL});
      for (size_t i = first_param; i < op.inputs.size(); ++i) {
        b.li(a0, param_raw[i - first_param]), b.li(a1, param_f32[i - first_param]);
        if (op.inputs[i].dtype == DType::F32) b.emit(Opcode::V_MOV, {f32, a1.index, a0.index, one.index, len.index});
        else b.emit(Opcode::V_CVT, {f32, int64_t(op.inputs[i].dtype), a1.index, a0.index, one.index, len.index});
      }
    }
    const int64_t i32 = int64_t(DType::I32);
    // topk: a write pointer into the positions, its step, the rounds left.
    const Reg positions = topk ? b.reg() : Reg{}, position_step = topk ? b.reg() : Reg{}, rounds = topk ? b.reg() : Reg{};
    if (topk) {
      // Once per core: each element's flat position i * L + j, each row's i * L, the masked-out key
      // INT32_MIN (below every key) as a tile, and the constants INT32_MIN and 0.
      const auto fill_i32 = [&](int64_t at, int64_t value, Reg r, Reg c) {
        b.li(tmp, value), b.li(addr, at);
        b.emit(Opcode::V_FILL, {i32, addr.index, tmp.index, r.index, c.index});
      };
      const Reg tile_rows = a0, zero = a1;
      b.li(tile_rows, tr), b.li(zero, 0);
      b.li(addr, flat_at), b.emit(Opcode::V_IOTA, {addr.index, zero.index, tile_rows.index, len.index});
      fill_i32(length_at, length, one, one);
      b.li(addr, row_base_at), b.emit(Opcode::V_IOTA, {addr.index, zero.index, tile_rows.index, one.index});
      b.li(tmp, length_at), b.emit(Opcode::V_MUL, {i32, kScalar, addr.index, addr.index, tmp.index, tile_rows.index, one.index});
      fill_i32(sentinel_at, std::numeric_limits<int32_t>::min(), tile_rows, len);
      fill_i32(int_min_at, std::numeric_limits<int32_t>::min(), one, one);
      fill_i32(zero_at, 0, one, one);
    }
    for (int i = 0; i < 2; ++i) b.emit(Opcode::SIGNAL, {kCtl, IN_FREE}), b.emit(Opcode::SIGNAL, {kCtl, OUT_FREE});
    b.li(slot, 0);
    const Label loop = b.label();
    b.bind(loop);
    b.li(tmp, tr), b.mul(row0, t, tmp);
    b.li(mt, rows), b.sub(mt, mt, row0), b.min(mt, mt, tmp);

    // Load the rows.
    b.emit(Opcode::WAIT, {kDma0, IN_FREE});
    b.emit(Opcode::LA, {addr.index, in_syms[0]});
    b.li(tmp, x_row * e), b.mul(tmp, tmp, row0), b.add(addr, addr, tmp);
    if (x.storage_offset) b.addi(addr, addr, x.storage_offset * e);
    shape_rows(mt, x_row, x_col, e);
    b.addi(a0, slot, convert ? raw0 : work0);
    dma(Opcode::DMA_LD, 0, a0, addr);
    if (backward) {
      const TensorDesc& y = op.inputs[1];
      b.emit(Opcode::LA, {addr.index, in_syms[1]});
      b.li(tmp, y_row * ye), b.mul(tmp, tmp, row0), b.add(addr, addr, tmp);
      if (y.storage_offset) b.addi(addr, addr, y.storage_offset * ye);
      shape_rows(mt, y_row, y_col, ye);
      b.addi(a0, slot, convert_y ? y_raw0 : y_work0);
      dma(Opcode::DMA_LD, 0, a0, addr);
    }
    for (size_t i = row_inputs; i < first_param; ++i) {  // mean, rstd: mt contiguous values from row0
      const int64_t se = isa::dtype_size_bytes(op.inputs[i].dtype);
      b.emit(Opcode::LA, {addr.index, in_syms[i]});
      b.li(tmp, se), b.mul(tmp, tmp, row0), b.add(addr, addr, tmp);
      if (op.inputs[i].storage_offset) b.addi(addr, addr, op.inputs[i].storage_offset * se);
      b.muli(n0, mt, se), b.li(n1, 1), b.li(n2, 0), b.li(ds1, 0), b.li(ss1, 0), b.li(ds2, 0), b.li(ss2, 0);
      b.addi(a0, slot, stat_raw0 + int64_t(i - row_inputs) * stat_bytes);
      dma(Opcode::DMA_LD, 0, a0, addr);
    }
    b.emit(Opcode::SIGNAL, {kDma0, IN_FULL});

    // Compute in f32: w (work), s (scratch), c0 / c1 (rows x 1 statistics).
    b.emit(Opcode::WAIT, {kVec, IN_FULL});
    b.emit(Opcode::WAIT, {kVec, OUT_FREE});
    const Reg w = a0, s = a1, c0 = a2, c1 = a3;
    b.addi(w, slot, work0), b.addi(s, slot, scratch0), b.addi(c0, slot, stat0), b.addi(c1, slot, stat1);
    if (convert) {
      b.addi(tmp, slot, raw0);
      b.emit(Opcode::V_CVT, {f32, dt, w.index, tmp.index, mt.index, len.index});
    }
    // The backward ops' second row tile (y or x) in f32, and the backward norms' statistics.
    if (backward) {
      b.addi(wy, slot, y_work0);
      if (convert_y) b.addi(tmp, slot, y_raw0), b.emit(Opcode::V_CVT, {f32, int64_t(y_dtype), wy.index, tmp.index, mt.index, len.index});
    }
    for (size_t i = row_inputs; i < first_param; ++i) {
      b.addi(tmp, slot, stat_raw0 + int64_t(i - row_inputs) * stat_bytes), b.addi(addr, slot, stat_f32_0 + int64_t(i - row_inputs) * stat_bytes);
      if (op.inputs[i].dtype == DType::F32) b.emit(Opcode::V_MOV, {f32, addr.index, tmp.index, mt.index, one.index});
      else b.emit(Opcode::V_CVT, {f32, int64_t(op.inputs[i].dtype), addr.index, tmp.index, mt.index, one.index});
    }
    const auto v2 = [&](Opcode opcode, int64_t bc, Reg dst, Reg a, Reg bb, Reg r, Reg c) {
      b.emit(opcode, {f32, bc, dst.index, a.index, bb.index, r.index, c.index});
    };
    const auto v1 = [&](Opcode opcode, Reg dst, Reg src, Reg r, Reg c) { b.emit(opcode, {f32, dst.index, src.index, r.index, c.index}); };
    const auto reduce = [&](Opcode opcode, Reg dst, Reg src) { b.emit(opcode, {f32, kAxis1, dst.index, src.index, mt.index, len.index}); };
    Reg result = w;  // rows x L, or rows x 1 for the reductions
    // An f32 rows x L result: the last op writes the output tile itself (a copy pass fewer: f32 layer
    // norm on base went from 79% to 91% of its DRAM bound); `out_tile` gives that op's destination.
    const bool direct = out.dtype == DType::F32 && !reduction && !topk && !arg;
    const auto out_tile = [&]() -> Reg {
      if (!direct) return w;
      b.addi(addr, slot, out0);
      return addr;
    };
    switch (op.kind) {
      case OpKind::SOFTMAX:
        reduce(Opcode::V_RMAX, c0, w);
        b.emit(Opcode::V_EXPSUM, {f32, w.index, w.index, c0.index, c0.index, mt.index, len.index});  // exp(x - max), its sum over the max
        // One reciprocal per row, then a multiply (1 cycle per vector, a divide 4): as PyTorch's CPU
        // softmax does, x * (1 / sum).
        v1(Opcode::V_RECIP, c0, c0, mt, one);
        v2(Opcode::V_MUL, kCol, out_tile(), w, c0, mt, len);
        break;
      case OpKind::LOG_SOFTMAX:
        reduce(Opcode::V_RMAX, c0, w);
        b.emit(Opcode::V_EXPSUM, {f32, s.index, w.index, c0.index, c1.index, mt.index, len.index});  // the sum of exp(x - max)
        v2(Opcode::V_SUB, kCol, w, w, c0, mt, len);
        v1(Opcode::V_LOG, c0, c1, mt, one);
        v2(Opcode::V_SUB, kCol, out_tile(), w, c0, mt, len);
        break;
      case OpKind::LAYER_NORM:
      case OpKind::RMS_NORM:
        if (op.kind == OpKind::LAYER_NORM) {
          reduce(Opcode::V_RSUM, c0, w);
          v2(Opcode::V_MUL, kScalar, c0, c0, inv_at, mt, one);
          v2(Opcode::V_SUB, kCol, w, w, c0, mt, len);  // centred
        }
        v2(Opcode::V_MUL, kFull, s, w, w, mt, len);
        reduce(Opcode::V_RSUM, c1, s);
        v2(Opcode::V_MUL, kScalar, c1, c1, inv_at, mt, one);  // variance (mean square)
        v2(Opcode::V_ADD, kScalar, c1, c1, eps_reg, mt, one);
        v1(Opcode::V_RSQRT, c1, c1, mt, one);
        v2(Opcode::V_MUL, kCol, has_weight ? w : out_tile(), w, c1, mt, len);
        if (has_weight) b.li(tmp, param_f32[0]), v2(Opcode::V_MUL, kRow, has_bias ? w : out_tile(), w, tmp, mt, len);
        if (has_bias) b.li(tmp, param_f32[1]), v2(Opcode::V_ADD, kRow, out_tile(), w, tmp, mt, len);
        break;
      case OpKind::SUM: b.emit(Opcode::V_RSUM, {int_rows ? dt : f32, kAxis1, c0.index, w.index, mt.index, len.index}), result = c0; break;
      case OpKind::MEAN: reduce(Opcode::V_RSUM, c0, w), v2(Opcode::V_MUL, kScalar, c0, c0, inv_at, mt, one), result = c0; break;
      case OpKind::AMAX:
      case OpKind::AMIN:
        b.emit(op.kind == OpKind::AMAX ? Opcode::V_RMAX : Opcode::V_RMIN, {int_rows ? dt : f32, kAxis1, c0.index, w.index, mt.index, len.index});
        result = c0;
        break;
      case OpKind::VAR:
      case OpKind::STD:
        // Two passes over the row on the core, as layer_norm: the mean, then the squared deviations from it.
        reduce(Opcode::V_RSUM, c0, w);
        v2(Opcode::V_MUL, kScalar, c0, c0, inv_at, mt, one);
        v2(Opcode::V_SUB, kCol, w, w, c0, mt, len);
        v2(Opcode::V_MUL, kFull, w, w, w, mt, len);
        reduce(Opcode::V_RSUM, c0, w);
        b.li(tmp, inv_divisor_at), v2(Opcode::V_MUL, kScalar, c0, c0, tmp, mt, one);
        if (op.kind == OpKind::STD) v1(Opcode::V_SQRT, c0, c0, mt, one);
        result = c0;
        break;
      case OpKind::SOFTMAX_BACKWARD:  // y * (g - sum(g * y))
        v2(Opcode::V_MUL, kFull, s, w, wy, mt, len);
        reduce(Opcode::V_RSUM, c0, s);
        v2(Opcode::V_SUB, kCol, w, w, c0, mt, len);
        v2(Opcode::V_MUL, kFull, out_tile(), w, wy, mt, len);
        break;
      case OpKind::LOG_SOFTMAX_BACKWARD:  // g - exp(y) * sum(g)
        reduce(Opcode::V_RSUM, c0, w);
        v1(Opcode::V_EXP, wy, wy, mt, len);
        v2(Opcode::V_MUL, kCol, wy, wy, c0, mt, len);
        v2(Opcode::V_SUB, kFull, out_tile(), w, wy, mt, len);
        break;
      case OpKind::LAYER_NORM_BACKWARD:
      case OpKind::RMS_NORM_BACKWARD: {
        // layer norm: rstd * (h - mean(h) - x^ * mean(h * x^)), x^ = (x - mean) * rstd;
        // rms norm:   rstd * (h - x^ * mean(h * x^)),           x^ = x * rstd;   h = g * weight
        const bool centred = op.kind == OpKind::LAYER_NORM_BACKWARD;
        const Reg stat = c1;  // mean, then rstd
        if (centred) b.addi(stat, slot, mean0), v2(Opcode::V_SUB, kCol, wy, wy, stat, mt, len);
        b.addi(stat, slot, rstd0);
        v2(Opcode::V_MUL, kCol, wy, wy, stat, mt, len);  // x^
        if (has_weight) b.li(tmp, param_f32[0]), v2(Opcode::V_MUL, kRow, w, w, tmp, mt, len);
        v2(Opcode::V_MUL, kFull, s, w, wy, mt, len);
        reduce(Opcode::V_RSUM, c0, s);
        v2(Opcode::V_MUL, kScalar, c0, c0, inv_at, mt, one);  // mean(h * x^)
        v2(Opcode::V_MUL, kCol, s, wy, c0, mt, len);
        if (centred) {
          reduce(Opcode::V_RSUM, c0, w);
          v2(Opcode::V_MUL, kScalar, c0, c0, inv_at, mt, one);  // mean(h)
          v2(Opcode::V_SUB, kCol, w, w, c0, mt, len);
        }
        v2(Opcode::V_SUB, kFull, w, w, s, mt, len);
        v2(Opcode::V_MUL, kCol, out_tile(), w, stat, mt, len);
        break;
      }
      case OpKind::ARGMAX: b.emit(Opcode::V_ARGMAX, {f32, kAxis1, c0.index, w.index, mt.index, len.index}), result = c0; break;
      case OpKind::ARGMIN: b.emit(Opcode::V_ARGMIN, {f32, kAxis1, c0.index, w.index, mt.index, len.index}), result = c0; break;
      case OpKind::TOPK: {
        const auto vi = [&](Opcode opcode, int64_t bc, Reg dst, Reg a, Reg bb, Reg c) {
          b.emit(opcode, {i32, bc, dst.index, a.index, bb.index, mt.index, c.index});
        };
        const Reg mask = c1;
        b.addi(mask, slot, mask0);
        // Keys: the f32 bits b as an i32 that orders as the floats do (b >= 0: b; b < 0: INT32_MIN - b,
        // so that -0.0 and 0.0 tie), a NaN of either sign made positive first (so above +inf).
        v2(Opcode::V_NE, kFull, mask, w, w, mt, len);
        v1(Opcode::V_ABS, s, w, mt, len);
        b.emit(Opcode::V_SEL, {i32, w.index, mask.index, s.index, w.index, mt.index, len.index});
        b.li(tmp, zero_at), vi(Opcode::V_LT, kScalar, mask, w, tmp, len);
        b.emit(Opcode::V_NEG, {i32, s.index, w.index, mt.index, len.index});
        b.li(tmp, int_min_at), vi(Opcode::V_ADD, kScalar, s, s, tmp, len);
        b.emit(Opcode::V_SEL, {i32, w.index, mask.index, s.index, w.index, mt.index, len.index});
        // The smallest are the largest of the negated keys (NaN still last; INT32_MIN, the masked-out key, below all).
        if (!op.largest) b.emit(Opcode::V_NEG, {i32, w.index, w.index, mt.index, len.index});
        // k rounds: each row's first largest key's position (row j of the positions), then that key masked out.
        b.addi(positions, slot, positions0), b.muli(position_step, mt, 4);
        if (k > 1) {
          b.li(rounds, k - 1);
          const Label round = b.label();
          b.bind(round);
          b.emit(Opcode::V_ARGMAX, {i32, kAxis1, positions.index, w.index, mt.index, len.index});
          b.li(tmp, row_base_at), vi(Opcode::V_ADD, kFull, c0, positions, tmp, one);  // its flat position
          b.li(tmp, flat_at), vi(Opcode::V_EQ, kCol, mask, tmp, c0, len);
          b.li(tmp, sentinel_at), b.emit(Opcode::V_SEL, {i32, w.index, mask.index, tmp.index, w.index, mt.index, len.index});
          b.add(positions, positions, position_step);
          b.branch(Opcode::DBNZ, {rounds.index}, round);
        }
        b.emit(Opcode::V_ARGMAX, {i32, kAxis1, positions.index, w.index, mt.index, len.index});
        // k x mt positions into the mt x k output tile.
        b.addi(addr, slot, out0), b.addi(tmp, slot, positions0), b.li(rounds, k);
        b.emit(Opcode::V_TRANS, {i32, addr.index, tmp.index, rounds.index, mt.index});
        break;
      }
      default: throw std::logic_error("not a row op");
    }
    const Reg cols = reduction ? one : len;
    b.addi(addr, slot, out0);
    if (topk) {
      // (the positions are in the output tile already)
    } else if (arg || int_rows) b.emit(Opcode::V_MOV, {int64_t(DType::I32), addr.index, result.index, mt.index, cols.index});  // i32 already
    else if (direct) {
      // (the last op wrote the output tile)
    } else if (out.dtype == DType::F32) v1(Opcode::V_MOV, addr, result, mt, cols);
    else b.emit(Opcode::V_CVT, {int64_t(out.dtype), f32, addr.index, result.index, mt.index, cols.index});
    b.emit(Opcode::SIGNAL, {kVec, IN_FREE});
    b.emit(Opcode::SIGNAL, {kVec, OUT_FULL});

    // Store.
    b.emit(Opcode::WAIT, {kStore, OUT_FULL});
    const Reg local = c0;
    b.addi(local, slot, out0);
    b.emit(Opcode::LA, {addr.index, out_sym});
    b.li(tmp, o_row * eo), b.mul(tmp, tmp, row0), b.add(addr, addr, tmp);
    if (out.storage_offset) b.addi(addr, addr, out.storage_offset * eo);
    if (reduction || topk) {
      b.muli(n0, mt, eo * out_cols), b.li(n1, 1), b.li(n2, 0), b.li(ds1, 0), b.li(ss1, 0), b.li(ds2, 0), b.li(ss2, 0);
    } else {
      shape_rows(mt, o_row, o_col, eo);
      b.mov(tmp, ds1), b.mov(ds1, ss1), b.mov(ss1, tmp);  // the store's destination is the strided side
      b.mov(tmp, ds2), b.mov(ds2, ss2), b.mov(ss2, tmp);
    }
    dma(Opcode::DMA_ST, store_channel, addr, local);
    b.emit(Opcode::SIGNAL, {kStore, OUT_FREE});

    b.emit(Opcode::XORI, {slot.index, slot.index, slot_bytes});
    b.addi(t, t, 1);
    b.branch(Opcode::BLT, {t.index, t_end.index}, loop);
    b.bind(done);
    b.emit(Opcode::HALT, {});
  }

  Kernel kernel;
  kernel.program = b.finish();
  kernel.cores = cores;
  std::ostringstream plan;
  plan << name << ": " << x.to_string() << " as " << rows << " rows of " << length << "; tiles of " << tr << " rows, " << tiles
       << " tiles over " << cores << " cores; " << 2 * slot_bytes << " bytes of scratchpad (two slots), computed in f32\n";
  kernel.plan = plan.str();
  return kernel;
}

}  // namespace npu::compiler
