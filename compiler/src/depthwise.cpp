// Depthwise 2-D convolution on the vector unit: each channel's plane
// convolved with its own KH x KW kernel, its windows formed in the
// scratchpad (no im2col in DRAM, and not on the tensor core, where a
// depthwise convolution is a product with one row per fold).
//
// A tile is one (image, channel) plane. dma ch0 (ch3 for odd planes) loads
// its H rows into a stage of Hp x Wp elements whose padding stays zero
// (filled once per core; the other slot, channel and semaphores take the next
// plane, whose load is issued before this plane's vector work). With the output computed over
// the stage's full width, tap (i, j) of every output position is the stage
// read at the flat offset i * Wp + j: the vector unit multiplies that span by
// the tap's weight and adds it into an f32 accumulator (v.fma, one instruction
// and one rounding a tap), KH * KW times, then
// applies the per-channel scale and bias and the epilogue, and rounds once.
// Stride 2 loads the even and the odd rows into two row phases and splits
// their columns into two with one v.trans, so that each tap reads its phase
// at unit stride and only the output's rows and columns are computed. dma ch2 (ch1) stores OH runs of OW.
#include "depthwise.h"

#include <algorithm>
#include <array>
#include <sstream>

#include "elementwise.h"
#include "npusim/compiler/program_builder.h"
#include "npusim/isa/isa.h"

namespace npu::compiler {

using isa::Opcode;

Kernel lower_depthwise(const OpDesc& op, const sim::ChipConfig& config) {
  const std::string name = op_name(op.kind);
  if (op.inputs.size() < 2 || op.inputs.size() > 4) throw std::invalid_argument(name + " takes x, w and an optional bias and scale");
  const TensorDesc& x = op.inputs[0];
  const TensorDesc& w = op.inputs[1];
  const TensorDesc& out = op.output;
  if (x.shape.size() != 4 || w.shape.size() != 4 || out.shape.size() != 4) throw std::invalid_argument(name + ": x, w and the output are 4-D");
  const int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2], wd = x.shape[3], kh = w.shape[2], kw = w.shape[3];
  if (w.shape[0] != c || w.shape[1] != 1) throw std::invalid_argument(name + ": w is [C, 1, KH, KW]");
  if (!isa::dtype_is_float(x.dtype) || w.dtype != x.dtype || out.dtype != x.dtype) throw UnsupportedOp(name + ": x, w and the output of one float dtype");
  const Window& win = op.window;
  const int64_t s = win.stride[0], ph = win.padding[0], pw = win.padding[1];
  if (win.stride[1] != s || (s != 1 && s != 2) || win.dilation != std::array<int64_t, 2>{1, 1} || win.flip || ph < 0 || pw < 0)
    throw UnsupportedOp(name + ": strides 1 or 2 (the same along both dims), no dilation, padding of at least 0");
  const int64_t oh = out.shape[2], ow = out.shape[3];
  if (out.shape[0] != n || out.shape[1] != c || oh != (h + 2 * ph - kh) / s + 1 || ow != (wd + 2 * pw - kw) / s + 1 || oh < 1 || ow < 1)
    throw std::invalid_argument(name + ": the output is not [N, C, OH, OW] of this window");
  if (x.strides[3] != 1 || out.strides[3] != 1) throw UnsupportedOp(name + ": rows of x and of the output contiguous");
  const bool has_bias = op.inputs.size() >= 3, has_scale = op.inputs.size() == 4;
  for (size_t i = 2; i < op.inputs.size(); ++i) {
    const TensorDesc& v = op.inputs[i];
    if (v.numel() != c || !isa::dtype_is_float(v.dtype)) throw std::invalid_argument(name + ": the bias and the scale are float, one per channel");
    if (c > 1 && v.strides.back() != 1) throw UnsupportedOp(name + ": the bias and the scale contiguous");
  }
  if (w.strides != TensorDesc::contiguous(w.dtype, w.shape).strides) throw UnsupportedOp(name + ": w contiguous");

  // The stage: rows Hp = the rows the windows reach, Wp the columns (even, for stride 2's halving), and KW
  // elements of tail that the last taps' spans read past it.
  // Stride 2 splits the stage into phases, as the implicit-im2col convolution does: the DMA puts the even
  // and the odd rows (of the padded plane) in two row phases of Hp2 rows, and one v.trans [.. x 2] ->
  // [2 x ..] splits their columns, so that phase (py, px) holds rows py, py + 2, .. and of those the
  // columns px, px + 2, .. (Wp / 2 of them): tap (i, j) reads phase (i % 2, j % 2) from row i / 2 and
  // column j / 2 at unit stride, and only the output's rows and columns are computed.
  const int64_t taps = kh * kw;
  const int64_t hp = std::max(h + ph, (oh - 1) * s + kh);
  int64_t wp = std::max(wd + pw, (ow - 1) * s + kw);
  wp += wp % 2;
  const int64_t hp2 = (hp + 1) / 2, cols = s == 2 ? wp / 2 : wp, phase_elements = hp2 * cols;
  // A tap's span: the output's rows over the (phase's) full width; the stage and the f32 stage hold KW
  // elements of tail that the last taps' spans read past them (into columns that are not kept).
  const int64_t span = oh * cols, stage_elements = (s == 2 ? 2 * hp2 * wp : hp * wp) + kw;
  const int64_t e = isa::dtype_size_bytes(x.dtype);
  const bool convert = x.dtype != isa::DType::F32;
  const int64_t raw_bytes = align64(stage_elements * e), work_bytes = convert || s == 2 ? align64(stage_elements * 4) : 0;
  const int64_t phased_bytes = convert && s == 2 ? align64(stage_elements * e) : 0;  // the phases before conversion
  const int64_t acc_bytes = align64(span * 4), out_bytes = align64(span * e);
  const int64_t params = align64(c * taps * 4) + align64(c * taps * e) + (has_bias ? 2 * align64(c * 4) : 0) + (has_scale ? 2 * align64(c * 4) : 0);
  // Layout: two stage slots, the f32 stage (and at stride 2 the phases in x's dtype), the accumulator, two
  // output slots, then the parameters.
  const int64_t work_at = 2 * raw_bytes, phased_at = work_at + work_bytes, acc_at = phased_at + phased_bytes, out_at = acc_at + acc_bytes;
  const int64_t w_f32_at = out_at + 2 * out_bytes, w_raw_at = w_f32_at + align64(c * taps * 4);
  const int64_t bias_f32_at = w_raw_at + align64(c * taps * e), bias_raw_at = bias_f32_at + align64(c * 4);
  const int64_t scale_f32_at = bias_raw_at + align64(c * 4), scale_raw_at = scale_f32_at + align64(c * 4);
  const int64_t local_bytes = out_at + 2 * out_bytes + params;
  if (local_bytes > int64_t(config.core.scratchpad.size_bytes))
    throw UnsupportedOp(name + ": a plane of " + std::to_string(h) + " x " + std::to_string(wd) + " and its weights do not fit the scratchpad");

  const int64_t planes = n * c;
  const unsigned cores = static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(config.num_cores, planes)));
  const unsigned store_channel = std::min<unsigned>(2, config.core.dma.channels - 1);
  ProgramBuilder b(name + " (generated)");
  const uint16_t out_sym = b.output("out", out.dtype, {uint64_t(std::max<int64_t>(out.storage_extent(), 1))});
  std::vector<uint16_t> in_syms;
  for (size_t i = 0; i < op.inputs.size(); ++i)
    in_syms.push_back(b.input("in" + std::to_string(i), op.inputs[i].dtype, {uint64_t(std::max<int64_t>(op.inputs[i].storage_extent(), 1))}));
  // Per parity k of the plane: IN_FULL + 4k, .., OUT_FREE + 4k; loads on load_channel[k], stores on store_channels[k].
  enum : int64_t { IN_FULL, IN_FREE, OUT_FULL, OUT_FREE, PARAMS_FULL = 8 };
  const unsigned channels = config.core.dma.channels;
  const std::array<unsigned, 2> load_channel = {0, channels >= 4 ? 3u : 0u};
  const std::array<unsigned, 2> store_channels = {store_channel, channels >= 4 ? 1u : store_channel};
  const int64_t kCtl = 0, kDma0 = 1, kVec = 6;
  const std::array<int64_t, 2> kLoad = {1 + int64_t(load_channel[0]), 1 + int64_t(load_channel[1])};
  const std::array<int64_t, 2> kStores = {1 + int64_t(store_channels[0]), 1 + int64_t(store_channels[1])};
  const int64_t f32 = int64_t(isa::DType::F32), xdt = int64_t(x.dtype);
  constexpr int64_t kScalar = 3;

  const Label done = b.label();
  const Reg t = b.reg(), t_end = b.reg();
  b.split_over_cores(planes, t, t_end);
  b.branch(Opcode::BGE, {t.index, t_end.index}, done);
  const Reg tmp = b.reg(), one = b.reg(), addr = b.reg(), local = b.reg(), src = b.reg(), wreg = b.reg(), acc = b.reg();
  const Reg n0 = b.reg(), n1 = b.reg(), n2 = b.reg(), ds1 = b.reg(), ss1 = b.reg(), ds2 = b.reg(), ss2 = b.reg();
  const Reg slot = b.reg(), oslot = b.reg(), img = b.reg(), ch = b.reg(), vr = b.reg(), vc = b.reg(), next = b.reg();
  const auto dma = [&](Opcode opcode, unsigned channel, Reg dst, Reg from) {
    b.emit(opcode, {int64_t(channel), dst.index, from.index, n0.index, n1.index, n2.index, ds1.index, ss1.index, ds2.index, ss2.index});
  };
  const auto flat = [&](int64_t bytes) { b.li(n0, bytes), b.li(n1, 1), b.li(ds1, 0), b.li(ss1, 0), b.li(n2, 0), b.li(ds2, 0), b.li(ss2, 0); };
  b.li(one, 1), b.li(acc, acc_at);

  // The weights (and the scale and bias), once per core, converted to f32.
  const std::vector<std::pair<int64_t, int64_t>> param_at = {{w_raw_at, w_f32_at}, {bias_raw_at, bias_f32_at}, {scale_raw_at, scale_f32_at}};
  for (size_t i = 1; i < op.inputs.size(); ++i) {
    const TensorDesc& p = op.inputs[i];
    const int64_t pe = isa::dtype_size_bytes(p.dtype);
    b.emit(Opcode::LA, {addr.index, in_syms[i]});
    if (p.storage_offset) b.addi(addr, addr, p.storage_offset * pe);
    b.li(local, param_at[i - 1].first);
    flat(p.numel() * pe);
    dma(Opcode::DMA_LD, 0, local, addr);
  }
  b.emit(Opcode::SIGNAL, {kDma0, PARAMS_FULL});
  b.emit(Opcode::WAIT, {kVec, PARAMS_FULL});
  for (size_t i = 1; i < op.inputs.size(); ++i) {
    b.li(src, param_at[i - 1].first), b.li(local, param_at[i - 1].second), b.li(vc, op.inputs[i].numel());
    if (op.inputs[i].dtype == isa::DType::F32) b.emit(Opcode::V_MOV, {f32, local.index, src.index, one.index, vc.index});
    else b.emit(Opcode::V_CVT, {f32, int64_t(op.inputs[i].dtype), local.index, src.index, one.index, vc.index});
  }
  // Both stage slots (and the f32 stage) zero once: the padding is never written again.
  b.li(tmp, 0), b.li(vc, stage_elements);
  for (int k = 0; k < 2; ++k) b.li(local, k * raw_bytes), b.emit(Opcode::V_FILL, {xdt, local.index, tmp.index, one.index, vc.index});
  if (work_bytes) b.li(local, work_at), b.emit(Opcode::V_FILL, {f32, local.index, tmp.index, one.index, vc.index});
  for (int k = 0; k < 2; ++k) b.emit(Opcode::SIGNAL, {kVec, IN_FREE + 4 * k}), b.emit(Opcode::SIGNAL, {kCtl, OUT_FREE + 4 * k});

  // Planes alternate between two sets of slots, DMA channels and semaphores (the loop unrolled by two), so
  // that two loads and two stores are in flight: a plane is a short transfer, whose requests' latency
  // would otherwise leave each channel waiting between planes.
  // Plane number v into stage slot k (the slot's padding stays zero; the rows go to its interior).
  const auto load = [&](int k, Reg v) {
    b.li(tmp, c);
    b.emit(Opcode::DIVU, {img.index, v.index, tmp.index});
    b.emit(Opcode::REMU, {ch.index, v.index, tmp.index});
    b.emit(Opcode::WAIT, {kLoad[k], IN_FREE + 4 * k});
    b.emit(Opcode::LA, {addr.index, in_syms[0]});
    if (x.storage_offset) b.addi(addr, addr, x.storage_offset * e);
    b.li(tmp, x.strides[0] * e), b.mul(tmp, tmp, img), b.add(addr, addr, tmp);
    b.li(tmp, x.strides[1] * e), b.mul(tmp, tmp, ch), b.add(addr, addr, tmp);
    if (s == 1) {
      b.li(local, k * raw_bytes + (ph * wp + pw) * e);
      b.li(n0, wd * e), b.li(n1, h), b.li(ds1, wp * e), b.li(ss1, x.strides[2] * e), b.li(n2, 0), b.li(ds2, 0), b.li(ss2, 0);
      dma(Opcode::DMA_LD, load_channel[k], local, addr);
    } else {  // row phase py: the image rows y with (y + ph) % 2 == py, at phase row (y + ph) / 2
      for (int64_t py = 0; py < 2; ++py) {
        const int64_t y0 = ((py - ph) % 2 + 2) % 2, count = y0 < h ? (h - y0 + 1) / 2 : 0;
        if (count == 0) continue;
        b.addi(tmp, addr, y0 * x.strides[2] * e);
        b.li(local, k * raw_bytes + (py * hp2 * wp + (y0 + ph) / 2 * wp + pw) * e);
        b.li(n0, wd * e), b.li(n1, count), b.li(ds1, wp * e), b.li(ss1, 2 * x.strides[2] * e), b.li(n2, 0), b.li(ds2, 0), b.li(ss2, 0);
        dma(Opcode::DMA_LD, load_channel[k], local, tmp);
      }
    }
    b.emit(Opcode::SIGNAL, {kLoad[k], IN_FULL + 4 * k});
  };
  // Plane t, in slot k: the next plane's load first, so that it is issued before this plane's vector
  // work can fill the vector unit's queue (and hold the control unit back).
  const auto plane = [&](int k) {
    {
      const Label last = b.label();
      b.addi(next, t, 1);
      b.branch(Opcode::BGE, {next.index, t_end.index}, last);
      load(1 - k, next);
      b.bind(last);
    }
    b.li(slot, k * raw_bytes), b.li(oslot, k * out_bytes);
    b.li(tmp, c);
    b.emit(Opcode::DIVU, {img.index, t.index, tmp.index});
    b.emit(Opcode::REMU, {ch.index, t.index, tmp.index});

    // The taps, on the vector unit.
    b.emit(Opcode::WAIT, {kVec, IN_FULL + 4 * k});
    const bool staged = convert || s == 2;  // the taps read the f32 stage at work_at, not the slot
    if (s == 2) {  // the columns into phases: [py][Hp2][Wp / 2][2] -> [px][py][Hp2][Wp / 2]
      b.li(local, convert ? phased_at : work_at), b.li(vr, hp2 * wp), b.li(vc, 2);
      b.emit(Opcode::V_TRANS, {xdt, local.index, slot.index, vr.index, vc.index});
    }
    if (convert) {
      b.li(local, work_at), b.li(vc, stage_elements);
      if (s == 2) b.li(src, phased_at), b.li(vc, 2 * hp2 * wp);
      b.emit(Opcode::V_CVT, {f32, xdt, local.index, (s == 2 ? src : slot).index, one.index, vc.index});
    }
    if (staged) b.emit(Opcode::SIGNAL, {kVec, IN_FREE + 4 * k}), b.li(local, work_at);
    const Reg stage = staged ? local : slot;  // the f32 stage
    b.li(vr, oh), b.li(vc, cols);
    b.li(tmp, taps * 4), b.mul(wreg, ch, tmp), b.addi(wreg, wreg, w_f32_at);
    for (int64_t i = 0; i < kh; ++i) {
      for (int64_t j = 0; j < kw; ++j) {
        const int64_t tap = i * kw + j;
        const int64_t at = s == 2 ? ((j % 2) * 2 + i % 2) * phase_elements + i / 2 * cols + j / 2 : i * wp + j;
        b.addi(src, stage, at * 4);
        if (tap == 0) b.emit(Opcode::V_MUL, {f32, kScalar, acc.index, src.index, wreg.index, vr.index, vc.index});
        else b.emit(Opcode::V_FMA, {f32, kScalar, acc.index, src.index, wreg.index, acc.index, vr.index, vc.index});
        b.addi(wreg, wreg, 4);
      }
    }
    if (!staged) b.emit(Opcode::SIGNAL, {kVec, IN_FREE + 4 * k});
    // Scale, bias and epilogue, per channel, and the rounding.
    if (has_scale) b.li(tmp, 4), b.mul(tmp, tmp, ch), b.addi(tmp, tmp, scale_f32_at), b.emit(Opcode::V_MUL, {f32, kScalar, acc.index, acc.index, tmp.index, vr.index, vc.index});
    if (has_bias) b.li(tmp, 4), b.mul(tmp, tmp, ch), b.addi(tmp, tmp, bias_f32_at), b.emit(Opcode::V_ADD, {f32, kScalar, acc.index, acc.index, tmp.index, vr.index, vc.index});
    for (const OpKind step : op.epilogue) b.emit(unary_opcode(step), {f32, acc.index, acc.index, vr.index, vc.index});
    b.emit(Opcode::WAIT, {kVec, OUT_FREE + 4 * k});
    b.addi(local, oslot, out_at);
    if (out.dtype == isa::DType::F32) b.emit(Opcode::V_MOV, {f32, local.index, acc.index, vr.index, vc.index});
    else b.emit(Opcode::V_CVT, {int64_t(out.dtype), f32, local.index, acc.index, vr.index, vc.index});
    b.emit(Opcode::SIGNAL, {kVec, OUT_FULL + 4 * k});

    // Store OH rows of OW (the first OW of each computed row's columns).
    b.emit(Opcode::WAIT, {kStores[k], OUT_FULL + 4 * k});
    b.emit(Opcode::LA, {addr.index, out_sym});
    if (out.storage_offset) b.addi(addr, addr, out.storage_offset * e);
    b.li(tmp, out.strides[0] * e), b.mul(tmp, tmp, img), b.add(addr, addr, tmp);
    b.li(tmp, out.strides[1] * e), b.mul(tmp, tmp, ch), b.add(addr, addr, tmp);
    b.li(n0, ow * e), b.li(n1, oh), b.li(ds1, out.strides[2] * e), b.li(ss1, cols * e), b.li(n2, 0), b.li(ds2, 0), b.li(ss2, 0);
    dma(Opcode::DMA_ST, store_channels[k], addr, local);
    b.emit(Opcode::SIGNAL, {kStores[k], OUT_FREE + 4 * k});

  };
  load(0, t);
  const Label loop = b.label();
  b.bind(loop);
  plane(0);
  b.addi(t, t, 1);
  b.branch(Opcode::BGE, {t.index, t_end.index}, done);
  plane(1);
  b.addi(t, t, 1);
  b.branch(Opcode::BLT, {t.index, t_end.index}, loop);
  b.bind(done);
  b.emit(Opcode::HALT, {});

  Kernel kernel;
  kernel.program = b.finish();
  kernel.cores = cores;
  std::ostringstream plan;
  plan << name << ": " << x.to_string() << " with " << kh << " x " << kw << " kernels, stride " << s << ", padding " << ph << " x " << pw << " -> "
       << oh << " x " << ow << "; one plane per tile, " << planes << " planes over " << cores << " cores; the plane in a zero-padded stage of "
       << hp << " x " << wp << (s == 2 ? " in 4 phases (rows by the DMA, columns split by v.trans)" : "") << ", " << taps << " taps as spans of "
       << span << " elements (fused multiply-add, in f32)" << (has_scale ? ", scaled" : "") << (has_bias ? ", plus a bias" : "") << "; "
       << local_bytes << " bytes of scratchpad; planes alternate between loads on dma ch" << load_channel[0] << " and ch" << load_channel[1]
       << ", stores on dma ch" << store_channels[0] << " and ch" << store_channels[1] << "\n";
  kernel.plan = plan.str();
  return kernel;
}

}  // namespace npu::compiler
