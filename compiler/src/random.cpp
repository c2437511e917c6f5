// Random numbers on the vector unit: v.rand (a counter-based generator) and a
// transform per distribution, in f32, rounded once to the output's dtype. And
// arange, the same kernel with v.iota (the element's index) in place of v.rand.
//
// The output (contiguous) is cut into runs of E elements; core c of P takes
// runs [c*T/P, (c+1)*T/P). Run t uses counters offset + t*E onwards (normal
// also offset + numel + t*E onwards), so what an element gets depends only on
// the seed, the offset and its index: not on the chip's core count or SRAM.
// Two engines over two output slots:
//   vector:  wait OUT_FREE, v.rand and the transform into the slot, signal OUT_FULL
//   dma chS: wait OUT_FULL, store the slot, signal OUT_FREE
#include "random.h"

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

}  // namespace

Kernel lower_random(const OpDesc& op, const sim::ChipConfig& config) {
  if (!op.inputs.empty()) throw std::invalid_argument(std::string(op_name(op.kind)) + " takes no inputs");
  const TensorDesc& out = op.output;
  const DType dtype = out.dtype;
  const bool float_out = isa::dtype_is_float(dtype);
  const bool arange = op.kind == OpKind::ARANGE;
  if (!float_out && !(op.kind == OpKind::BERNOULLI && dtype == DType::U8) && !(arange && dtype == DType::I32))
    throw UnsupportedOp(std::string(op_name(op.kind)) + " into " + std::string(isa::dtype_name(dtype)) + " (floats only; bernoulli also u8)");
  if (out.numel() > 0 && out.storage_extent() != out.numel())
    throw UnsupportedOp(std::string(op_name(op.kind)) + " into a non-contiguous output");
  for (size_t d = 0; d + 1 < out.shape.size(); ++d)
    if (out.shape[d] > 1 && out.strides[d] < out.strides[d + 1]) throw UnsupportedOp(std::string(op_name(op.kind)) + " into a permuted output");
  const int64_t numel = out.numel();
  const int64_t esize = isa::dtype_size_bytes(dtype);
  const auto [param0, param1] = op.random_params;

  // Local memory: constants, two f32 work rows (u, w), a u8 mask, two output slots.
  const int64_t scratchpad = static_cast<int64_t>(config.core.scratchpad.size_bytes);
  const int64_t lanes = config.core.vector_unit.lanes;
  const int64_t per_element = 4 + 4 + 1 + 2 * esize;
  int64_t run = std::min<int64_t>(8192, (scratchpad - 512) / per_element);
  run = std::max<int64_t>(lanes, run / lanes * lanes);
  run = std::min<int64_t>(run, std::max<int64_t>(numel, 1));
  const int64_t consts = 0, u0 = 256, w0 = u0 + align64(run * 4), mask0 = w0 + align64(run * 4), out0 = mask0 + align64(run);
  const int64_t slot_bytes = align64(run * esize);
  if (out0 + 2 * slot_bytes > scratchpad) throw UnsupportedOp("random: the scratchpad is too small");
  const int64_t runs = ceil_div(numel, run);
  const unsigned cores = static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(config.num_cores, runs)));
  const unsigned store_channel = std::min<unsigned>(2, config.core.dma.channels - 1);

  ProgramBuilder b(std::string(op_name(op.kind)) + " (generated)");
  const uint16_t out_sym = b.output("out", dtype, {static_cast<uint64_t>(std::max<int64_t>(numel, 1))});
  constexpr int64_t OUT_FULL = 0, OUT_FREE = 1;
  const int64_t kCtl = 0, kVec = 6, kStore = 1 + store_channel;
  const int64_t f32 = static_cast<int64_t>(DType::F32), dt = static_cast<int64_t>(dtype), u8 = static_cast<int64_t>(DType::U8);
  const Label done = b.label();
  if (runs > 0) {
    const Reg t = b.reg(), t_end = b.reg(), tmp = b.reg(), one = b.reg();
    b.split_over_cores(runs, t, t_end);
    b.branch(Opcode::BGE, {t.index, t_end.index}, done);
    b.emit(Opcode::SIGNAL, {kCtl, OUT_FREE});
    b.emit(Opcode::SIGNAL, {kCtl, OUT_FREE});
    b.li(one, 1);
    // The f32 constants the transforms broadcast, 4 bytes apart.
    std::vector<double> constants;
    const auto constant = [&](double value) {
      const Reg at = b.reg();
      b.li(at, consts + 4 * static_cast<int64_t>(constants.size()));
      b.li(tmp, f32_bits(value));
      b.emit(Opcode::V_FILL, {f32, at.index, tmp.index, one.index, one.index});
      constants.push_back(value);
      return at;
    };
    const Reg seed = b.reg(), ctr = b.reg(), ctr2 = b.reg(), len = b.reg(), left = b.reg();
    const Reg u = b.reg(), w = b.reg(), mask = b.reg(), slot = b.reg(), toggle = b.reg(), dst = b.reg(), bytes = b.reg();
    if (arange) {
      b.li(ctr, 0);  // (the element's index in place of the counter)
    } else {
      b.emit(Opcode::CSRR, {seed.index, 3});  // arg0
      b.emit(Opcode::CSRR, {ctr.index, 4});   // arg1
    }
    b.li(u, u0), b.li(w, w0), b.li(mask, mask0), b.li(slot, out0), b.li(toggle, out0 ^ (out0 + slot_bytes));
    // This core's first run: counters and the output address.
    b.li(tmp, run), b.mul(tmp, tmp, t), b.add(ctr, ctr, tmp);
    b.emit(Opcode::LA, {dst.index, out_sym});
    b.li(tmp, run * esize), b.mul(tmp, tmp, t), b.add(dst, dst, tmp);
    b.li(left, numel), b.li(tmp, run), b.mul(tmp, tmp, t), b.sub(left, left, tmp);  // elements from this run to the end

    Reg scale{}, shift{}, minus_one{}, plus_one{}, minus_two{}, two_pi{};
    const bool scale_uniform = op.kind == OpKind::UNIFORM && param1 - param0 != 1.0;
    const bool shift_uniform = op.kind == OpKind::UNIFORM && param0 != 0.0;
    if (op.kind == OpKind::UNIFORM) {
      if (scale_uniform) scale = constant(param1 - param0);
      if (shift_uniform) shift = constant(param0);
    } else if (op.kind == OpKind::NORMAL) {
      minus_one = constant(-1.0), plus_one = constant(1.0), minus_two = constant(-2.0), two_pi = constant(2.0 * M_PI);
      if (param1 != 1.0) scale = constant(param1);
      if (param0 != 0.0) shift = constant(param0);
    } else if (arange) {
      if (dtype == DType::I32) {
        // i32 constants: start and step, wrapped to 32 bits.
        const auto constant_i32 = [&](double value) {
          const Reg at = b.reg();
          b.li(at, consts + 4 * static_cast<int64_t>(constants.size()));
          b.li(tmp, static_cast<int64_t>(static_cast<int32_t>(static_cast<int64_t>(value))));
          b.emit(Opcode::V_FILL, {int64_t(DType::I32), at.index, tmp.index, one.index, one.index});
          constants.push_back(value);
          return at;
        };
        shift = constant_i32(param0), scale = constant_i32(param1);
      } else {
        shift = constant(param0), scale = constant(param1);
      }
    } else {
      scale = constant(param0);  // p
    }

    const Label loop = b.label();
    b.bind(loop);
    b.li(tmp, run), b.min(len, left, tmp);
    b.emit(Opcode::WAIT, {kVec, OUT_FREE});
    const auto vec2 = [&](Opcode opcode, int64_t bcast, Reg d, Reg a, Reg c) {
      b.emit(opcode, {f32, bcast, d.index, a.index, c.index, one.index, len.index});
    };
    constexpr int64_t kFull = 0, kScalar = 3;
    if (arange) {
      const int64_t i32 = int64_t(DType::I32);
      b.emit(Opcode::V_IOTA, {(dtype == DType::I32 ? slot : u).index, ctr.index, one.index, len.index});
      if (dtype == DType::I32) {
        b.emit(Opcode::V_MUL, {i32, kScalar, slot.index, slot.index, scale.index, one.index, len.index});
        b.emit(Opcode::V_ADD, {i32, kScalar, slot.index, slot.index, shift.index, one.index, len.index});
      } else {
        b.emit(Opcode::V_CVT, {f32, i32, u.index, u.index, one.index, len.index});
        vec2(Opcode::V_MUL, kScalar, u, u, scale);
        vec2(Opcode::V_ADD, kScalar, u, u, shift);
        if (dtype == DType::F32) b.emit(Opcode::V_MOV, {f32, slot.index, u.index, one.index, len.index});
        else b.emit(Opcode::V_CVT, {dt, f32, slot.index, u.index, one.index, len.index});
      }
    } else if (op.kind == OpKind::UNIFORM) {
      // u in the output's own precision, so that it is < 1 there too; the transform in f32.
      const bool transform = scale_uniform || shift_uniform;
      if (!transform || dtype == DType::F32) {
        b.emit(Opcode::V_RAND, {dt, slot.index, seed.index, ctr.index, one.index, len.index});
        if (scale_uniform) vec2(Opcode::V_MUL, kScalar, slot, slot, scale);
        if (shift_uniform) vec2(Opcode::V_ADD, kScalar, slot, slot, shift);
      } else {
        b.emit(Opcode::V_RAND, {dt, slot.index, seed.index, ctr.index, one.index, len.index});
        b.emit(Opcode::V_CVT, {f32, dt, u.index, slot.index, one.index, len.index});
        if (scale_uniform) vec2(Opcode::V_MUL, kScalar, u, u, scale);
        if (shift_uniform) vec2(Opcode::V_ADD, kScalar, u, u, shift);
        b.emit(Opcode::V_CVT, {dt, f32, slot.index, u.index, one.index, len.index});
      }
    } else if (op.kind == OpKind::NORMAL) {
      // r = sqrt(-2 log(1 - u1)): 1 - u1 is exact and in (0, 1], so the log is finite.
      b.emit(Opcode::V_RAND, {f32, u.index, seed.index, ctr.index, one.index, len.index});
      vec2(Opcode::V_MUL, kScalar, u, u, minus_one);
      vec2(Opcode::V_ADD, kScalar, u, u, plus_one);
      b.emit(Opcode::V_LOG, {f32, u.index, u.index, one.index, len.index});
      vec2(Opcode::V_MUL, kScalar, u, u, minus_two);
      b.emit(Opcode::V_SQRT, {f32, u.index, u.index, one.index, len.index});
      // cos(2 pi u2), u2 from the second block of counters.
      b.li(tmp, numel), b.add(ctr2, ctr, tmp);
      b.emit(Opcode::V_RAND, {f32, w.index, seed.index, ctr2.index, one.index, len.index});
      vec2(Opcode::V_MUL, kScalar, w, w, two_pi);
      b.emit(Opcode::V_COS, {f32, w.index, w.index, one.index, len.index});
      vec2(Opcode::V_MUL, kFull, u, u, w);
      if (param1 != 1.0) vec2(Opcode::V_MUL, kScalar, u, u, scale);
      if (param0 != 0.0) vec2(Opcode::V_ADD, kScalar, u, u, shift);
      if (dtype == DType::F32) b.emit(Opcode::V_MOV, {f32, slot.index, u.index, one.index, len.index});
      else b.emit(Opcode::V_CVT, {dt, f32, slot.index, u.index, one.index, len.index});
    } else {
      b.emit(Opcode::V_RAND, {f32, u.index, seed.index, ctr.index, one.index, len.index});
      if (dtype == DType::U8) {
        vec2(Opcode::V_LT, kScalar, slot, u, scale);
      } else {
        vec2(Opcode::V_LT, kScalar, mask, u, scale);
        b.emit(Opcode::V_CVT, {dt, u8, slot.index, mask.index, one.index, len.index});
      }
    }
    b.emit(Opcode::SIGNAL, {kVec, OUT_FULL});

    b.emit(Opcode::WAIT, {kStore, OUT_FULL});
    b.muli(bytes, len, esize);
    b.emit(Opcode::DMA_ST, {int64_t(store_channel), dst.index, slot.index, bytes.index, kZero.index, kZero.index, kZero.index, kZero.index,
                            kZero.index, kZero.index});
    b.emit(Opcode::SIGNAL, {kStore, OUT_FREE});

    b.emit(Opcode::XOR, {slot.index, slot.index, toggle.index});
    b.li(tmp, run), b.add(ctr, ctr, tmp), b.sub(left, left, tmp);
    b.li(tmp, run * esize), b.add(dst, dst, tmp);
    b.addi(t, t, 1);
    b.branch(Opcode::BLT, {t.index, t_end.index}, loop);
  }
  b.bind(done);
  b.emit(Opcode::HALT, {});

  Kernel kernel;
  kernel.program = b.finish();
  kernel.cores = cores;
  std::ostringstream plan;
  plan << op_name(op.kind) << ": " << out.to_string() << " (" << param0 << ", " << param1 << "), ";
  if (arange) plan << "the element's index by v.iota";
  else plan << random_counters(op) << " counters from launch argument 1 under the seed in argument 0";
  plan << "; runs of " << run << " elements, " << runs << " runs over "
       << cores << " cores; stores on dma ch" << store_channel << "\n";
  kernel.plan = plan.str();
  return kernel;
}

}  // namespace npu::compiler
