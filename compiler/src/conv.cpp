// 2-D convolution on the tensor core with implicit im2col: the windows are
// formed in the scratchpad, never as an im2col matrix in DRAM.
//
// A tile is (output channels cot * TN .. +TN, image, band of R output rows).
// dma ch0 loads the band's input rows of every channel into a stage of C
// planes, each (R + KH - 1) rows of Wp = W + 2 * pw columns, zero-filled once
// (the padding columns); the rows of a band that lie outside the image are
// copied from a zero row (dma.cp) first. With the output computed over the
// stage's full width, tap (i, j) of every output position p reads the stage at
// the flat offset i * Wp + j + p, so the stage seen from that offset, C rows
// (one per channel) a plane apart, is the A operand of one tc.mm, stored
// transposed (k x m, the ta flag): M = the plane's positions, K = C, N = TN,
// B = the tap's [C x TN] weights. KH * KW products accumulate in f32 in the
// accumulator (two slots). The positions past the band's R rows and the
// columns past OW are computed and dropped: R * OW of (R + KH - 1) * Wp are
// kept.
// A stride (sy, sx) splits the stage into sy * sx phases, phase (py, px)
// holding rows py, py + sy, ... and of those the columns px, px + sx, ...
// (cols = Wp / sx of them): tap (i, j) reads phase (i % sy, j % sx) from offset
// (i / sy) * cols + j / sx, at unit stride again. The DMA places the row
// phases (a row stride of sy rows); with sx > 1 the rows land in a landing
// area first and one v.trans [rows * cols x sx] -> [sx x rows * cols] (the
// vector unit) splits their columns into the stage.
//   dma ch0: the next tile's stage: zero rows outside the image, the
//            image's rows                                    -> tc
//   dma ch1: the weights of output channels cot (when cot changes; they stay
//            for its tiles), and the tile's residual         -> tc, vector
//   tc:      KH * KW tc.mm into an accumulator slot          -> vector
//   vector:  v.trans [positions x TN] -> [TN x positions], scale, bias,
//            residual, epilogue, rounding                    -> dma ch2
//   dma ch2: TN x R runs of OW
// Short rows would each take a bus cycle (a request): where x's rows are contiguous and at most a bus
// cycle's bytes, ch0 loads each channel's rows of the band as one run (to rows_at; two buffers, one
// where a core has a single tile) and
// places them with dma.cp (local; the fourth channel places half the channels); where the output's are
// contiguous and at most half a bus cycle's bytes, ch2 gathers the tile's rows with dma.cp into
// `compact` [TN][R * OW] and stores a run per channel.
// The next tile's stage is zeroed and loaded while this one's products run.
// Weights deeper than the array's rows load, and their products run, a block of its rows of channels
// at a time. Packed taps (few channels, below): dma ch3 and ch1 gather every tap's planes into one
// [C * KH * KW x positions] operand, and a tile is one tc.mm of that depth.
#include "conv.h"

#include <algorithm>
#include <sstream>
#include <vector>

#include "elementwise.h"
#include "matmul_operands.h"
#include "npusim/compiler/program_builder.h"
#include "npusim/isa/isa.h"

namespace npu::compiler {

using isa::Opcode;

namespace {

// Under an eighth of the array's rows (16 on a 128-row array): a tap's product would be that shallow,
// so the kernel only packs the taps.
bool few_channels(int64_t channels, const sim::ChipConfig& config) { return channels * 8 < int64_t(config.core.tensor_core.rows); }

}  // namespace

bool conv2d_takes_channels(int64_t channels, const sim::ChipConfig& config) {
  // (With several arrays a packed product of TN <= 128 output channels keeps to one of them, where
  // im2col's matmul, the positions its columns, spreads over all: tpu_v4, 3 -> 32 channels at 512 x 512,
  // 136 k cycles packed, 91 k through im2col.)
  return !few_channels(channels, config) || config.core.tensor_core.arrays <= 1;
}

Kernel lower_conv2d(const OpDesc& op, const sim::ChipConfig& config) {
  const std::string name = op_name(op.kind);
  const size_t extra = op.inputs.size() < 2 ? 0 : op.inputs.size() - 2;
  if (op.inputs.size() < 2 || extra > (op.residual ? 3u : 2u) || (op.residual && extra == 0))
    throw std::invalid_argument(name + " takes x, w, an optional bias, an optional scale and (OpDesc::residual) a residual");
  const TensorDesc& x = op.inputs[0];
  const TensorDesc& w = op.inputs[1];
  const TensorDesc& out = op.output;
  const TensorDesc* residual = op.residual ? &op.inputs.back() : nullptr;
  const size_t vectors = extra - (op.residual ? 1 : 0);  // bias [, scale]
  if (x.shape.size() != 4 || w.shape.size() != 4 || out.shape.size() != 4) throw std::invalid_argument(name + ": x, w and the output are 4-D");
  const int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2], wd = x.shape[3];
  const int64_t kh = w.shape[1], kw = w.shape[2], cout = w.shape[3];
  if (w.shape[0] != c) throw std::invalid_argument(name + ": w is [C, KH, KW, Cout]");
  const isa::DType dtype = x.dtype;
  const auto& accepted = config.core.tensor_core.input_dtypes;
  if ((dtype != isa::DType::BF16 && dtype != isa::DType::F16) || std::find(accepted.begin(), accepted.end(), dtype) == accepted.end())
    throw UnsupportedOp(name + ": bf16 or f16 on a tensor core that takes it");
  if (w.dtype != dtype || out.dtype != dtype || (residual && residual->dtype != dtype))
    throw std::invalid_argument(name + ": x, w, the residual and the output of one dtype");
  const Window& win = op.window;
  const int64_t ph = win.padding[0], pw = win.padding[1], sy = win.stride[0], sx = win.stride[1];
  if (sy < 1 || sx < 1 || sy > 4 || sx > 4 || win.dilation != std::array<int64_t, 2>{1, 1} || win.flip || ph < 0 || pw < 0 || ph >= kh || pw >= kw)
    throw UnsupportedOp(name + ": strides of 1 to 4, no dilation, padding of 0 to K - 1");
  const int64_t oh = (h + 2 * ph - kh) / sy + 1, ow = (wd + 2 * pw - kw) / sx + 1;
  if (out.shape != std::vector<int64_t>{n, cout, oh, ow} || oh < 1 || ow < 1)
    throw std::invalid_argument(name + ": the output is not [N, Cout, OH, OW] of this window");
  if (residual && residual->shape != out.shape) throw std::invalid_argument(name + ": the residual is [N, Cout, OH, OW]");
  if (x.strides[3] != 1 || out.strides[3] != 1 || (residual && residual->strides[3] != 1))
    throw UnsupportedOp(name + ": rows of x, the residual and the output contiguous");
  if (w.strides != TensorDesc::contiguous(w.dtype, w.shape).strides) throw UnsupportedOp(name + ": w contiguous");
  for (size_t i = 2; i < 2 + vectors; ++i) {
    const TensorDesc& v = op.inputs[i];
    if (v.numel() != cout || !isa::dtype_is_float(v.dtype)) throw std::invalid_argument(name + ": the bias and the scale are float, one per output channel");
    if (cout > 1 && v.strides.back() != 1) throw UnsupportedOp(name + ": the bias and the scale contiguous");
  }

  // TN output channels per tile (a multiple of them); R output rows per band (a divisor of OH): the
  // tallest band whose accumulator slots and scratchpad buffers fit.
  // A stride's phases: the stage holds, for each row phase py and column phase px, the input rows
  // py, py + sy, ... and their columns px, px + sx, ..., so that every tap reads its phase's plane at
  // unit stride (tap (i, j): phase (i % sy, j % sx), offset (i / sy) * cols + j / sx).
  const int64_t e = isa::dtype_size_bytes(dtype), taps = kh * kw, wp = (wd + 2 * pw + sx - 1) / sx * sx, cols = wp / sx;
  const int64_t scratchpad = static_cast<int64_t>(config.core.scratchpad.size_bytes);
  const int64_t accumulator = static_cast<int64_t>(config.core.accumulator.size_bytes);
  const int64_t slack = (kh - 1) / sy * cols + (kw - 1) / sx;  // elements the last tap reads past a stage
  // Rows of each phase a band of R output rows reads: ceil(((R - 1) * sy + KH) / sy).
  const auto phase_rows = [&](int64_t rows) { return ((rows - 1) * sy + kh + sy - 1) / sy; };
  // A row is a DMA request of its own, and a request takes a whole cycle of a DRAM channel's bus: rows of
  // at most half a bus cycle's bytes leave most of it idle. Such output rows, where the output's rows are
  // contiguous, are gathered by dma.cp into `compact`, [TN][R * OW], and stored as one run per channel.
  // Image rows of up to a bus cycle's bytes, where x's rows are contiguous, load as one run per channel
  // of the band (to rows_at) and dma.cp places them in the stage (local, off the DRAM bus): on large
  // (64-byte buses, 16 cores loading at once) the 56-byte rows of a 28-wide bf16 image loaded at 13
  // bytes a cycle per core, and as runs 3 x 3 on 8 x 128 x 28 x 28 went from 20.5 k to 16.2 k cycles,
  // 3 x 3 / 2 on 32 x 128 x 28 x 28 from 50.6 k to 38.4 k; on base the 112-byte rows of a 56-wide one
  // lose 1.9% so (13.9 k to 14.2 k). Longer rows go straight: the local pass would cost more than the
  // bus cycles it saves.
  const int64_t bus_bytes = static_cast<int64_t>(config.dram.bytes_per_cycle_per_channel);
  const bool band_in_runs = x.strides[2] == wd && wd * e <= bus_bytes;
  const bool compact_store = out.strides[2] == ow && 2 * ow * e <= bus_bytes;
  const auto band_rows = [&](int64_t rows) { return (rows - 1) * sy + kh; };  // input rows a band of output rows reads
  // The widest tiles, then the tallest band, whose buffers fit; where those leave cores idle, the fastest
  // (TN, R) by an estimate: a core's tiles overlap the next stage's load and this tile's epilogue with
  // the products, so a tile costs the slowest of the three; the first tile's stage and weights and the
  // last tile's epilogue and store overlap nothing. (1 x 64 x 56 x 56 took 4 bands of 14 rows on large's
  // 16 cores, 12,967 cycles; 14 bands of 4 rows take 7,272. Where every core has a tile the estimate,
  // which counts no per-tile overheads, chose shorter bands that ran slower: 3 x 3 / 2 on large.)
  // Within 2% the widest tiles win, then the tallest bands (fewer halo rows).
  const double lanes = double(config.core.vector_unit.lanes);
  const double dram_share_total = matmul_dram_bytes_per_cycle(config);
  // Packed taps: where a tap's product fills few of the array's rows (C channels of K), dma.cp gathers
  // every tap's C planes of the kept positions into one [C * taps x positions] operand (rows in the
  // weights' own [C, KH, KW] order), a tile's one tc.mm of C * taps deep: an RGB stem's 49 products of
  // depth 3 become 2 folds of 128. The copies (one per kernel row and column phase) run on their own
  // DMA channels (ch3 and ch1, which loads only the weights and the residual) at a request a cycle each,
  // beside the products. Under 16 channels only packed, as the bridge routed such convolutions to
  // im2col before there was packing.
  const int64_t array_rows = config.core.tensor_core.rows, request_bytes = config.core.dma.request_bytes;
  const std::vector<unsigned> pack_channels = config.core.dma.channels >= 4 ? std::vector<unsigned>{3, 1} : std::vector<unsigned>{0};
  const unsigned pack_channel = pack_channels[0];
  const int64_t pack_copies = kh * std::min(sx, kw);
  struct Choice {
    int64_t tn = 0, r = 0;
    double estimate = 0;
  };
  // Where a core has one tile, the band's runs need one buffer, not two (a tile's parity): ResNet-18's last
  // 3 x 3 (512 channels at 7 x 7, a residual) then fits the scratchpad less the bridge's SRAM pool in
  // bands of 7 rows, one tile a core; with two it missed by 3 KB and took bands of 1 row, 28 tiles for
  // 4 cores, 1.5 times as long.
  const auto run_buffers = [&](int64_t tile_count) { return tile_count > int64_t{config.num_cores} ? 2 : 1; };
  const auto choose = [&](bool pack) {
    Choice best, first;
    int64_t first_tiles = 0;
    for (const int64_t candidate : {int64_t{128}, int64_t{64}, int64_t{32}}) {
      const int64_t width = std::min(cout, candidate);
      if (cout % width != 0 || (width < candidate && candidate != 128)) continue;  // (fewer channels than 128: once)
      for (int64_t rows = oh; rows >= 1; --rows) {
        if (oh % rows != 0) continue;
        const int64_t m = phase_rows(rows) * cols, kept = rows * cols, phases = sy * sx * c * m, positions = pack ? kept : m;
        const int64_t tiles_ = cout / width * n * (oh / rows), per_core = ceil_div(tiles_, int64_t{config.num_cores});
        const int64_t local = align64(taps * c * width * e) + 2 * align64((phases + slack) * e) + (sx > 1 ? align64(phases * e) : 0) +
                              align64(width * kept * 4) + (residual ? align64(width * kept * e) : 0) + 2 * align64(width * kept * e) +
                              int64_t(vectors) * 2 * align64(cout * 4) + align64(wp * e) +
                              (band_in_runs ? run_buffers(tiles_) * align64(c * band_rows(rows) * wd * e) : 0) +
                              (compact_store ? align64(width * rows * ow * e) : 0) + (pack ? 2 * align64(c * taps * kept * e) : 0);
        if (2 * align64(positions * width * 4) > accumulator || local > scratchpad) continue;
        const double share = dram_share_total / double(std::min<int64_t>(tiles_, config.num_cores));
        // The taps' tc.mm back to back, or the one packed product.
        const double products = pack ? tensor_core_tile_cycles(config, kept, width, taps * c, taps * c) : tensor_core_tile_cycles(config, m, width, taps * c, c);
        const double copies = pack ? double(ceil_div(c * taps * kept * e, request_bytes) + pack_copies * int64_t(config.core.dma.descriptor_cycles)) /
                                         double(std::min<int64_t>(pack_copies, int64_t(pack_channels.size())))
                                   : 0.0;
        const double stage = double(c * std::min(band_rows(rows), h) * wd * e) / share + (pack_channel == 0 ? copies : 0.0);
        const double store = double(width * rows * ow * e * (residual ? 2 : 1)) / share;
        const double epilogue = double(ceil_div(width * kept, int64_t(lanes))) * (2.0 + 1.0 + double(vectors) + double(op.epilogue.size())) +
                                (sx > 1 ? 2.0 * double(ceil_div(phases, int64_t(lanes))) : 0.0);  // (v.trans, half a vector a cycle)
        // A core's tiles are a run of the cot-major order: the weights load once per output-channel block it meets.
        const double weight_loads = double(std::min<int64_t>(per_core, ceil_div(per_core - 1, n * (oh / rows)) + 1));
        const double weights = weight_loads * double(taps * c * width * e) / share;
        // (Packed, a tile's handoffs, copies to product to epilogue, which the slowest of the three does not
        // overlap, are priced as one more fill and drain of the array: without, on base with the cores
        // doubled, the stem took bands of 2 rows, 20% slower than 7. It misses both ways: on large the
        // stem's bands of 2 rows run 18% faster than the 4 it picks.)
        const double handoffs = pack ? double(2 * array_rows + config.core.tensor_core.cols) : 0.0;
        const double estimate = stage + weights + copies + double(per_core) * (std::max({products, stage + store, epilogue, copies}) + handoffs) + epilogue + store;
        if (first.r == 0) first = {width, rows, estimate}, first_tiles = tiles_;
        if (best.r == 0 || estimate < best.estimate * 0.98) best = {width, rows, estimate};
      }
    }
    // (Packed, the estimate also decides where every core has a tile: it counts the copies, a tile's
    // largest overhead, and the stem's 14 bands of 8 rows over 4 cores ran 5% slower than 16 of 7.)
    return first_tiles >= int64_t{config.num_cores} && !pack ? first : best;
  };
  // Packed where the taps' products would fill at most half the array's rows and packing is the faster
  // by the estimates by 10% or more; under 16 channels only packed, where the chip takes them at all.
  if (!conv2d_takes_channels(c, config)) throw UnsupportedOp(name + ": under 16 channels only on a tensor core of one array");
  const bool shallow = few_channels(c, config);
  const Choice plain = shallow ? Choice{} : choose(false);
  const Choice packed_choice = taps > 1 && 2 * c <= array_rows ? choose(true) : Choice{};
  const bool packed = packed_choice.r != 0 && (plain.r == 0 || packed_choice.estimate < plain.estimate * 0.9);
  if (!packed && plain.r == 0)
    throw UnsupportedOp(name + (shallow ? ": under 16 channels only with packed taps, whose operand does not fit"
                                        : ": the weights of 32 output channels and a band of one row do not fit the scratchpad"));
  const int64_t tn = packed ? packed_choice.tn : plain.tn, r = packed ? packed_choice.r : plain.r;
  const int64_t rows_p = phase_rows(r), m = rows_p * cols, kept = r * cols, bands = oh / r, cots = cout / tn;
  const int64_t phase_elems = c * m, phases_elems = sy * sx * phase_elems;  // a phase's planes (one per channel); all of them
  const int64_t positions = packed ? kept : m;  // the accumulator's rows: the products' positions
  const int64_t w_bytes = align64(taps * c * tn * e), stage_bytes = align64((phases_elems + slack) * e), acc_bytes = align64(positions * tn * 4);
  // Columns in phases: the rows land in `landing` ([py][C][rows][Wp]) and v.trans [.. x sx] -> [sx x ..]
  // makes them [px][py][C][rows][cols] in a stage slot. Without, they land in the stage slot itself.
  const int64_t stage_at = w_bytes, landing_at = stage_at + 2 * stage_bytes, landing_bytes = sx > 1 ? align64(phases_elems * e) : 0;
  const int64_t t_at = landing_at + landing_bytes, raw_at = t_at + align64(tn * kept * 4);
  const int64_t out_at = raw_at + (residual ? align64(tn * kept * e) : 0), out_bytes = align64(tn * kept * e);
  const int64_t vec_at = out_at + 2 * out_bytes;  // per vector: its raw values, then in f32
  const int64_t zero_at = vec_at + int64_t(vectors) * 2 * align64(cout * 4), rows_at = zero_at + align64(wp * e);
  const int64_t tiles = cots * n * bands;
  const int64_t span = band_rows(r), band_bytes = band_in_runs ? align64(c * span * wd * e) : 0;
  const int64_t compact_at = rows_at + run_buffers(tiles) * band_bytes, pack_at = compact_at + (compact_store ? align64(tn * r * ow * e) : 0);
  const int64_t pack_bytes = packed ? align64(c * taps * kept * e) : 0, local_bytes = pack_at + 2 * pack_bytes;
  const int64_t acc0 = static_cast<int64_t>(isa::kAccumulatorBase);
  const unsigned cores = static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(config.num_cores, tiles)));
  const unsigned store_channel = std::min<unsigned>(2, config.core.dma.channels - 1), w_channel = std::min<unsigned>(1, config.core.dma.channels - 1);

  ProgramBuilder b(name + " (generated)");
  const uint16_t out_sym = b.output("out", out.dtype, {uint64_t(std::max<int64_t>(out.storage_extent(), 1))});
  std::vector<uint16_t> in_syms;
  for (size_t i = 0; i < op.inputs.size(); ++i)
    in_syms.push_back(b.input("in" + std::to_string(i), op.inputs[i].dtype, {uint64_t(std::max<int64_t>(op.inputs[i].storage_extent(), 1))}));
  // (Each half of the stage has its own FULL and FREE: a count raised by two engines could count one
  // engine's next tile as the other's half of this one.)
  // (With a landing area, LOAD_* pass it between the DMAs and the vector unit and ST_FREE/ST_FULL the stage
  // slots between the vector unit and the tensor core (ST_*2 are free for the first); without, ST_* pass the
  // slots between the DMAs and the tensor core. ROWS_FULL: a band's rows loaded in runs, for the fourth
  // channel to place its half. With the four below, 20 of the 32 semaphores.)
  // (PK_FREE, PK_FULL: the packed operand's two slots, between the packing channels and the tensor core;
  // PK_GO, PK_DONE: the first packing channel starts the second and waits for it.)
  enum : int64_t { ST_FREE, ST_FREE2, ST_FULL, ST_FULL2, W_FREE, W_FULL, ACC_FREE, ACC_FULL, RES_FREE, RES_FULL, OUT_FREE, OUT_FULL, PARAMS_FULL, LD_FREE2, LD_FULL2, ROWS_FULL,
                   PK_FREE, PK_FULL, PK_GO, PK_DONE };
  const bool landing = sx > 1;
  const int64_t LOAD_FREE = landing ? ST_FREE2 : ST_FREE, LOAD_FREE2 = landing ? LD_FREE2 : ST_FREE2;
  const int64_t LOAD_FULL = landing ? ST_FULL2 : ST_FULL, LOAD_FULL2 = landing ? LD_FULL2 : ST_FULL2;
  const int64_t kCtl = 0, kDma0 = 1, kDmaW = 1 + w_channel, kTc = 5, kVec = 6, kStore = 1 + store_channel;
  // The stage's second half of channels on a fourth DMA channel, where there is one and it does not pack.
  const unsigned second_channel = config.core.dma.channels >= 4 && !packed ? 3 : 0;
  const int64_t kPack = 1 + pack_channel, kPack2 = 1 + pack_channels.back();
  // Weights deeper than the array's rows load and multiply in blocks of its rows of channels.
  const int64_t channel_block = array_rows, channel_blocks = packed || c <= channel_block ? 1 : ceil_div(c, channel_block);
  const bool two_packers = packed && pack_channels.size() > 1 && pack_copies > 1;
  const int64_t c_first = second_channel == 0 ? c : (c + 1) / 2, kDma1 = 1 + second_channel;
  const int64_t f32 = int64_t(isa::DType::F32), dt = int64_t(dtype);
  constexpr int64_t kFull = 0, kCol = 2;

  const Label done = b.label();
  const Reg t = b.reg(), t_end = b.reg();
  b.split_over_cores(tiles, t, t_end);
  b.branch(Opcode::BGE, {t.index, t_end.index}, done);
  const Reg tmp = b.reg(), tmp2 = b.reg(), one = b.reg(), addr = b.reg(), local = b.reg(), vr = b.reg(), vc = b.reg();
  const Reg n0 = b.reg(), n1 = b.reg(), n2 = b.reg(), ds1 = b.reg(), ss1 = b.reg(), ds2 = b.reg(), ss2 = b.reg();
  const Reg sslot = b.reg(), aslot = b.reg(), oslot = b.reg(), cot = b.reg(), img = b.reg(), band = b.reg(), cur_cot = b.reg(), u = b.reg(), nslot = b.reg(), land = b.reg();
  const Reg band_lo = b.reg(), rows = b.reg();  // the first image row loaded in runs, and where they lie
  const Reg pslot = packed ? b.reg() : kZero;     // the packed operand's slot
  const auto dma = [&](Opcode opcode, int64_t channel, Reg dst, Reg src) {
    b.emit(opcode, {channel, dst.index, src.index, n0.index, n1.index, n2.index, ds1.index, ss1.index, ds2.index, ss2.index});
  };
  // Tile v: output channels cot, image img, band (cot-major: a core's tiles mostly share their weights).
  const auto decode = [&](Reg v) {
    b.li(tmp, n * bands), b.emit(Opcode::DIVU, {cot.index, v.index, tmp.index}), b.emit(Opcode::REMU, {tmp2.index, v.index, tmp.index});
    b.li(tmp, bands), b.emit(Opcode::DIVU, {img.index, tmp2.index, tmp.index}), b.emit(Opcode::REMU, {band.index, tmp2.index, tmp.index});
  };
  // addr = the symbol's base + its storage offset + img * s0 + channel * s1 + row * s2 (elements of e).
  const auto element_address = [&](size_t input, const TensorDesc& td, Reg channel, Reg row) {
    b.emit(Opcode::LA, {addr.index, input == SIZE_MAX ? out_sym : in_syms[input]});
    if (td.storage_offset) b.addi(addr, addr, td.storage_offset * e);
    b.li(tmp, td.strides[0] * e), b.mul(tmp, tmp, img), b.add(addr, addr, tmp);
    b.li(tmp, td.strides[1] * e), b.mul(tmp, tmp, channel), b.add(addr, addr, tmp);
    b.li(tmp, td.strides[2] * e), b.mul(tmp, tmp, row), b.add(addr, addr, tmp);
  };
  b.li(one, 1);

  // The bias and the scale, once per core, in f32.
  for (size_t i = 0; i < vectors; ++i) {
    const TensorDesc& v = op.inputs[2 + i];
    const int64_t ve = isa::dtype_size_bytes(v.dtype), raw = vec_at + int64_t(i) * 2 * align64(cout * 4);
    b.emit(Opcode::LA, {addr.index, in_syms[2 + i]});
    if (v.storage_offset) b.addi(addr, addr, v.storage_offset * ve);
    b.li(local, raw), b.li(n0, cout * ve), b.li(n1, 1), b.li(n2, 1), b.li(ds1, 0), b.li(ss1, 0), b.li(ds2, 0), b.li(ss2, 0);
    dma(Opcode::DMA_LD, 0, local, addr);
  }
  b.emit(Opcode::SIGNAL, {kDma0, PARAMS_FULL});
  b.emit(Opcode::WAIT, {kVec, PARAMS_FULL});
  for (size_t i = 0; i < vectors; ++i) {
    const TensorDesc& v = op.inputs[2 + i];
    const int64_t raw = vec_at + int64_t(i) * 2 * align64(cout * 4);
    b.li(addr, raw), b.li(local, raw + align64(cout * 4)), b.li(vc, cout);
    if (v.dtype == isa::DType::F32) b.emit(Opcode::V_MOV, {f32, local.index, addr.index, one.index, vc.index});
    else b.emit(Opcode::V_CVT, {f32, int64_t(v.dtype), local.index, addr.index, one.index, vc.index});
  }
  // Both stage slots and the landing area zero once (the padding columns are never written again), and a zero row.
  b.li(tmp, 0), b.li(vr, 1), b.li(vc, stage_bytes / e);
  for (int k = 0; k < 2; ++k) b.li(local, stage_at + k * stage_bytes), b.emit(Opcode::V_FILL, {dt, local.index, tmp.index, vr.index, vc.index});
  if (landing) b.li(local, landing_at), b.li(vc, landing_bytes / e), b.emit(Opcode::V_FILL, {dt, local.index, tmp.index, vr.index, vc.index});
  b.li(local, zero_at), b.li(vc, wp), b.emit(Opcode::V_FILL, {dt, local.index, tmp.index, one.index, vc.index});
  for (int k = 0; k < 2; ++k) {
    if (k == 0 || !landing) {
      b.emit(Opcode::SIGNAL, {kVec, LOAD_FREE});
      if (c_first < c) b.emit(Opcode::SIGNAL, {kVec, LOAD_FREE2});
    }
    if (landing) b.emit(Opcode::SIGNAL, {kCtl, ST_FREE});
    for (const int64_t s : {ACC_FREE, OUT_FREE}) b.emit(Opcode::SIGNAL, {kCtl, s});
    if (packed) b.emit(Opcode::SIGNAL, {kCtl, PK_FREE});
  }
  b.emit(Opcode::SIGNAL, {kCtl, W_FREE}), b.emit(Opcode::SIGNAL, {kCtl, RES_FREE});
  b.li(sslot, stage_at), b.li(aslot, acc0), b.li(oslot, out_at), b.li(cur_cot, -1);
  if (packed) b.li(pslot, pack_at);

  // Tile v's input rows, into the slot at `slot` (or the landing area): for each row phase py, the rows
  // first + py + sy * k (first = band * R * sy - ph) for k < rows_p: those outside the image zero (copied
  // from a zero row), the others from x.
  const int64_t used_py = std::min(sy, kh);  // (phases no tap reads are not loaded)
  // The loads in runs may go ahead of the wait for the landing area, which they do not write; not of the
  // wait for a stage slot (below).
  const bool load_before_wait = band_in_runs && landing;
  const auto wait_free = [&] {
    b.emit(Opcode::WAIT, {kDma0, LOAD_FREE});
    if (c_first < c) b.emit(Opcode::WAIT, {kDma1, LOAD_FREE2});
  };
  const auto prepare = [&](Reg v, Reg slot) {
    decode(v);
    if (!load_before_wait) wait_free();
    const Reg base = landing ? land : slot;
    if (landing) b.li(base, landing_at);
    if (band_in_runs) {
      // The band's image rows [lo, hi) of every channel, a run per channel, into one of two buffers (tile
      // v's parity): ch0 places the first half of the channels from there, the fourth channel (after
      // ROWS_FULL) the second. The buffer is loaded again two tiles on, once the fourth channel has
      // placed this tile's half, so no semaphore back is needed: without a landing area, ch0 waits
      // first for that tile's stage slot, freed by the tensor core after both halves of this tile;
      // with one, ch0 loads after placing the tile between, for which it waited for the landing area,
      // freed by the vector unit after both halves of this tile.
      const Label none = b.label();
      b.li(tmp, run_buffers(tiles)), b.emit(Opcode::REMU, {rows.index, v.index, tmp.index}), b.muli(rows, rows, band_bytes), b.addi(rows, rows, rows_at);
      b.muli(band_lo, band, r * sy), b.addi(band_lo, band_lo, -ph);
      b.addi(n0, band_lo, span), b.li(tmp, h), b.min(n0, n0, tmp);  // hi
      b.emit(Opcode::MAX, {band_lo.index, band_lo.index, kZero.index});
      b.sub(n0, n0, band_lo);
      b.branch(Opcode::BGE, {kZero.index, n0.index}, none);
      b.muli(n0, n0, wd * e);
      element_address(0, x, kZero, band_lo);
      b.li(n1, c), b.li(n2, 1), b.li(ds1, span * wd * e), b.li(ss1, x.strides[1] * e), b.li(ds2, 0), b.li(ss2, 0);
      dma(Opcode::DMA_LD, 0, rows, addr);
      b.bind(none);
      if (c_first < c) b.emit(Opcode::SIGNAL, {kDma0, ROWS_FULL}), b.emit(Opcode::WAIT, {kDma1, ROWS_FULL});
      if (load_before_wait) wait_free();
    }
    for (int64_t py = 0; py < used_py; ++py) {
      const Reg first = vr, from = vc, to = tmp2;
      b.muli(first, band, r * sy), b.addi(first, first, py - ph);  // the phase's row 0 (may lie above the image)
      // from = ceil(max(-first, 0) / sy), to = max(from, min(rows_p, ceil(max(H - first, 0) / sy))).
      b.sub(from, kZero, first), b.emit(Opcode::MAX, {from.index, from.index, kZero.index}), b.addi(from, from, sy - 1);
      b.li(tmp, sy), b.emit(Opcode::DIVU, {from.index, from.index, tmp.index});
      b.li(to, h), b.sub(to, to, first), b.emit(Opcode::MAX, {to.index, to.index, kZero.index}), b.addi(to, to, sy - 1);
      b.emit(Opcode::DIVU, {to.index, to.index, tmp.index}), b.li(tmp, rows_p), b.min(to, to, tmp), b.emit(Opcode::MAX, {to.index, to.index, from.index});
      const int64_t phase_at = py * c * rows_p * wp * e;
      const auto zero_rows = [&](Reg count, Reg at_row) {
        const Label none = b.label();
        b.branch(Opcode::BEQ, {count.index, kZero.index}, none);
        b.muli(tmp, at_row, wp * e), b.add(local, base, tmp), b.addi(local, local, phase_at), b.li(addr, zero_at);
        b.li(n0, wp * e), b.li(n2, c), b.li(ds1, wp * e), b.li(ss1, 0), b.li(ds2, rows_p * wp * e), b.li(ss2, 0);
        dma(Opcode::DMA_CP, 0, local, addr);
        b.bind(none);
      };
      b.mov(n1, from);
      zero_rows(n1, kZero);
      b.li(n1, rows_p), b.sub(n1, n1, to);
      zero_rows(n1, to);
      // The image's rows [from, to), at column pw; the channels in two halves on two DMA channels: each
      // row a run of only W elements, the requests (one a cycle) bound a load more than the bytes do.
      const Label no_rows = b.label();
      b.sub(n1, to, from);
      b.branch(Opcode::BEQ, {n1.index, kZero.index}, no_rows);
      b.muli(tmp, from, wp * e), b.add(local, base, tmp), b.addi(local, local, phase_at + pw * e);
      b.muli(tmp, from, sy), b.add(tmp2, first, tmp);  // the first image row (to is not needed again)
      // (A channel's rows: x's plane stride apart in DRAM, span rows apart where loaded in runs.)
      const int64_t channel_bytes = band_in_runs ? span * wd * e : x.strides[1] * e;
      const Opcode move = band_in_runs ? Opcode::DMA_CP : Opcode::DMA_LD;
      if (band_in_runs) {  // where that row lies: (tmp2 - lo) rows in
        b.sub(tmp2, tmp2, band_lo), b.muli(tmp2, tmp2, wd * e), b.add(addr, tmp2, rows);
      } else {
        element_address(0, x, kZero, tmp2);
      }
      b.li(n0, wd * e), b.li(n2, c_first), b.li(ds1, wp * e), b.li(ss1, sy * (band_in_runs ? wd : x.strides[2]) * e), b.li(ds2, rows_p * wp * e);
      b.li(ss2, channel_bytes);
      dma(move, 0, local, addr);
      if (c_first < c) {
        b.li(n2, c - c_first), b.addi(local, local, c_first * rows_p * wp * e), b.li(tmp, c_first * channel_bytes), b.add(addr, addr, tmp);
        dma(move, second_channel, local, addr);
      }
      b.bind(no_rows);
    }
    b.emit(Opcode::SIGNAL, {kDma0, LOAD_FULL});
    if (c_first < c) b.emit(Opcode::SIGNAL, {kDma1, LOAD_FULL2});
    if (landing) {  // the columns into phases: [py][C][rows][cols][sx] -> [sx][py][C][rows][cols]
      b.emit(Opcode::WAIT, {kVec, LOAD_FULL});
      if (c_first < c) b.emit(Opcode::WAIT, {kVec, LOAD_FULL2});
      b.emit(Opcode::WAIT, {kVec, ST_FREE});
      b.li(base, landing_at), b.li(vr, sy * c * rows_p * cols), b.li(vc, sx);
      b.emit(Opcode::V_TRANS, {dt, slot.index, base.index, vr.index, vc.index});
      b.emit(Opcode::SIGNAL, {kVec, LOAD_FREE});
      if (c_first < c) b.emit(Opcode::SIGNAL, {kVec, LOAD_FREE2});
      b.emit(Opcode::SIGNAL, {kVec, ST_FULL});
    }
  };
  prepare(t, sslot);

  // The weights of output channels cot, where they are new to the core.
  const auto load_weights = [&] {
    b.emit(Opcode::WAIT, {kDmaW, W_FREE});
    b.emit(Opcode::LA, {addr.index, in_syms[1]});
    if (w.storage_offset) b.addi(addr, addr, w.storage_offset * e);
    b.muli(tmp, cot, tn * e), b.add(addr, addr, tmp);
    if (packed) {  // [channel][tap][TN], as x's are packed: one load
      b.li(n0, tn * e), b.li(n1, c * taps), b.li(n2, 1), b.li(ds1, tn * e), b.li(ss1, cout * e), b.li(ds2, 0), b.li(ss2, 0);
      dma(Opcode::DMA_LD, w_channel, kZero, addr);
      b.emit(Opcode::SIGNAL, {kDmaW, W_FULL});
      return;
    }
    // [tap][channel][TN] here, from [channel][tap][Cout]. Up to the array's rows of channels, a tap's
    // [C][TN] a load; deeper, a block of the array's rows of channels for every tap a load, which reads
    // DRAM in its own order (a tap's rows lie taps * Cout elements apart, each a DRAM row of its own).
    if (channel_blocks > 1) {
      b.li(n0, tn * e), b.li(n1, taps), b.li(ds1, c * tn * e), b.li(ss1, cout * e), b.li(ds2, tn * e), b.li(ss2, taps * cout * e);
      for (int64_t k = 0; k < channel_blocks; ++k) {
        const int64_t c0 = k * channel_block;
        b.li(n2, std::min(channel_block, c - c0)), b.li(local, c0 * tn * e), b.addi(tmp2, addr, c0 * taps * cout * e);
        dma(Opcode::DMA_LD, w_channel, local, tmp2);
        b.emit(Opcode::SIGNAL, {kDmaW, W_FULL});
      }
      return;
    }
    b.li(n0, tn * e), b.li(n1, c), b.li(n2, 1), b.li(ds1, tn * e), b.li(ss1, taps * cout * e), b.li(ds2, 0), b.li(ss2, 0);
    for (int64_t tap = 0; tap < taps; ++tap) {
      b.li(local, tap * c * tn * e), b.addi(tmp2, addr, tap * cout * e);
      dma(Opcode::DMA_LD, w_channel, local, tmp2);
      b.emit(Opcode::SIGNAL, {kDmaW, W_FULL});
    }
  };

  const Label loop = b.label();
  b.bind(loop);
  if (packed) {
    // New weights load first: ch1 packs too, and its copies would hold them back.
    const Label same = b.label();
    decode(t);
    b.branch(Opcode::BEQ, {cot.index, cur_cot.index}, same);
    load_weights();
    b.bind(same);
    // This tile's operand: for kernel row i and column phase px, the taps j = px, px + sx, ... read the
    // phase's planes from consecutive offsets (i / sy) * cols + j / sx, so one 3-D dma.cp gathers them for
    // every channel: rows of the kept positions, into rows (channel, i, j) of the operand. (Before the
    // next tile's stage: where the packing channel is ch0, that load would otherwise delay the products.)
    b.emit(Opcode::WAIT, {kPack, ST_FULL});
    b.emit(Opcode::WAIT, {kPack, PK_FREE});
    if (two_packers) b.emit(Opcode::SIGNAL, {kPack, PK_GO}), b.emit(Opcode::WAIT, {kPack2, PK_GO});
    b.li(n0, kept * e), b.li(n2, c), b.li(ds1, sx * kept * e), b.li(ss1, e), b.li(ds2, taps * kept * e), b.li(ss2, m * e);
    // Two channels take alternate copies, or, for an odd number of them, a half of the channels of each.
    const bool halves = two_packers && pack_copies % 2 == 1 && c > 1;
    int64_t copy = 0;
    for (int64_t i = 0; i < kh; ++i)
      for (int64_t px = 0; px < std::min(sx, kw); ++px, ++copy) {
        const int64_t phase = px * sy + i % sy;
        b.li(n1, (kw - px + sx - 1) / sx);
        b.addi(addr, sslot, (phase * phase_elems + i / sy * cols) * e), b.addi(local, pslot, (i * kw + px) * kept * e);
        if (!halves) {
          dma(Opcode::DMA_CP, two_packers && copy % 2 ? pack_channels.back() : pack_channel, local, addr);
          continue;
        }
        b.li(n2, c / 2);
        dma(Opcode::DMA_CP, pack_channel, local, addr);
        b.li(n2, c - c / 2), b.addi(addr, addr, c / 2 * m * e), b.addi(local, local, c / 2 * taps * kept * e);
        dma(Opcode::DMA_CP, pack_channels.back(), local, addr);
        b.li(n2, c);
      }
    if (two_packers) b.emit(Opcode::SIGNAL, {kPack2, PK_DONE}), b.emit(Opcode::WAIT, {kPack, PK_DONE});
    b.emit(Opcode::SIGNAL, {kPack, ST_FREE});
    b.emit(Opcode::SIGNAL, {kPack, PK_FULL});
  }
  {  // The next tile's stage, into the other slot.
    const Label last = b.label();
    b.addi(u, t, 1);
    b.branch(Opcode::BGE, {u.index, t_end.index}, last);
    b.li(tmp, 2 * stage_at + stage_bytes), b.sub(nslot, tmp, sslot);
    prepare(u, nslot);
    b.bind(last);
  }
  decode(t);
  // The products: tap (i, j) = the stage from offset i * Wp + j, transposed, times its weights. Where
  // the weights of output channels cot are new to the core, they load a tap at a time, and each tap's
  // product waits only for its own (W_FULL counts the taps): the products start after the first tap's
  // weights instead of all of them (large's 3 x 3 on 8 x 128 x 28 x 28: 295 KB of weights a core, one
  // tile each).
  const auto products = [&](bool streamed) {
    if (packed) {  // one product: [C * taps x positions] transposed, times the [C * taps x TN] weights
      b.emit(Opcode::WAIT, {kTc, PK_FULL});
      b.emit(Opcode::WAIT, {kTc, ACC_FREE});
      if (streamed) b.emit(Opcode::WAIT, {kTc, W_FULL});
      b.li(vr, kept), b.li(vc, tn), b.li(n0, c * taps);
      b.emit(Opcode::TC_MM, {dt, 2, aslot.index, pslot.index, kZero.index, vr.index, vc.index, n0.index});
      return;
    }
    b.emit(Opcode::WAIT, {kTc, ST_FULL});
    if (c_first < c && !landing) b.emit(Opcode::WAIT, {kTc, ST_FULL2});
    b.emit(Opcode::WAIT, {kTc, ACC_FREE});
    b.li(vr, m), b.li(vc, tn);
    // Each block of channels (all of them up to the array's rows) a product per tap; the first block's
    // products start when its weights are in.
    for (int64_t k = 0; k < channel_blocks; ++k) {
      const int64_t c0 = k * channel_block, depth = channel_blocks > 1 ? std::min(channel_block, c - c0) : c;
      if (streamed && channel_blocks > 1) b.emit(Opcode::WAIT, {kTc, W_FULL});
      b.li(n0, depth);
      for (int64_t i = 0; i < kh; ++i)
        for (int64_t j = 0; j < kw; ++j) {
          const int64_t tap = i * kw + j, phase = (j % sx) * sy + i % sy;
          if (streamed && channel_blocks == 1) b.emit(Opcode::WAIT, {kTc, W_FULL});
          b.addi(addr, sslot, (phase * phase_elems + c0 * m + i / sy * cols + j / sx) * e), b.li(local, (tap * c + c0) * tn * e);
          b.emit(Opcode::TC_MM, {dt, 2 | (tap > 0 || k > 0 ? 1 : 0), aslot.index, addr.index, local.index, vr.index, vc.index, n0.index});
        }
    }
  };
  {
    const Label same = b.label(), issued = b.label();
    b.branch(Opcode::BEQ, {cot.index, cur_cot.index}, same);
    if (!packed) load_weights();
    b.mov(cur_cot, cot);
    products(true);
    b.branch(Opcode::JMP, {}, issued);
    b.bind(same);
    products(false);
    b.bind(issued);
  }
  if (packed) {
    b.emit(Opcode::SIGNAL, {kTc, PK_FREE});
  } else {
    b.emit(Opcode::SIGNAL, {kTc, ST_FREE});
    if (c_first < c && !landing) b.emit(Opcode::SIGNAL, {kTc, ST_FREE2});
  }
  b.emit(Opcode::SIGNAL, {kTc, ACC_FULL});
  {  // The weights are free after the core's last tile of these output channels.
    const Label keep = b.label();
    b.addi(u, t, 1);
    const Label release = b.label();
    b.branch(Opcode::BGE, {u.index, t_end.index}, release);
    b.li(tmp, n * bands), b.emit(Opcode::DIVU, {tmp.index, u.index, tmp.index});
    b.branch(Opcode::BEQ, {tmp.index, cot.index}, keep);
    b.bind(release);
    b.emit(Opcode::SIGNAL, {kTc, W_FREE});
    b.bind(keep);
  }
  // The residual's TN x R x OW values, at the kept positions' layout (rows of cols).
  b.muli(u, cot, tn), b.muli(tmp2, band, r);  // first output channel, first output row
  if (residual) {
    b.emit(Opcode::WAIT, {kDmaW, RES_FREE});
    element_address(op.inputs.size() - 1, *residual, u, tmp2);
    b.li(local, raw_at), b.li(n0, ow * e), b.li(n1, r), b.li(n2, tn), b.li(ds1, cols * e), b.li(ss1, residual->strides[2] * e);
    b.li(ds2, kept * e), b.li(ss2, residual->strides[1] * e);
    dma(Opcode::DMA_LD, w_channel, local, addr);
    b.emit(Opcode::SIGNAL, {kDmaW, RES_FULL});
  }
  // The epilogue: [positions x TN] turned into [TN x positions] (the kept rows only), per output channel
  // times the scale plus the bias, plus the residual, the unary steps; rounded into an output slot.
  b.emit(Opcode::WAIT, {kVec, ACC_FULL});
  b.li(local, t_at), b.li(vr, kept), b.li(vc, tn);
  b.emit(Opcode::V_TRANS, {f32, local.index, aslot.index, vr.index, vc.index});
  b.li(vr, tn), b.li(vc, kept);
  for (size_t i = vectors; i-- > 0;) {  // the scale (when there is one), then the bias
    b.muli(tmp, cot, tn * 4), b.addi(tmp, tmp, vec_at + int64_t(i) * 2 * align64(cout * 4) + align64(cout * 4));
    b.emit(i == 1 ? Opcode::V_MUL : Opcode::V_ADD, {f32, kCol, local.index, local.index, tmp.index, vr.index, vc.index});
  }
  if (residual) {  // converted in the accumulator slot, free once read
    b.emit(Opcode::WAIT, {kVec, RES_FULL});
    b.li(addr, raw_at);
    b.emit(Opcode::V_CVT, {f32, dt, aslot.index, addr.index, vr.index, vc.index});
    b.emit(Opcode::SIGNAL, {kVec, RES_FREE});
    b.emit(Opcode::V_ADD, {f32, kFull, local.index, local.index, aslot.index, vr.index, vc.index});
  }
  b.emit(Opcode::SIGNAL, {kVec, ACC_FREE});
  for (const OpKind step : op.epilogue) b.emit(unary_opcode(step), {f32, local.index, local.index, vr.index, vc.index});
  b.emit(Opcode::WAIT, {kVec, OUT_FREE});
  b.emit(Opcode::V_CVT, {dt, f32, oslot.index, local.index, vr.index, vc.index});
  b.emit(Opcode::SIGNAL, {kVec, OUT_FULL});
  // Store TN x R runs of OW; or gather them into compact first (local), then TN runs of R * OW.
  b.emit(Opcode::WAIT, {kStore, OUT_FULL});
  element_address(SIZE_MAX, out, u, tmp2);
  if (compact_store) {
    b.li(local, compact_at);
    b.li(n0, ow * e), b.li(n1, r), b.li(n2, tn), b.li(ds1, ow * e), b.li(ss1, cols * e), b.li(ds2, r * ow * e), b.li(ss2, kept * e);
    dma(Opcode::DMA_CP, store_channel, local, oslot);
    b.emit(Opcode::SIGNAL, {kStore, OUT_FREE});
    b.li(n0, r * ow * e), b.li(n1, tn), b.li(n2, 1), b.li(ds1, out.strides[1] * e), b.li(ss1, r * ow * e), b.li(ds2, 0), b.li(ss2, 0);
    dma(Opcode::DMA_ST, store_channel, addr, local);
  } else {
    b.li(n0, ow * e), b.li(n1, r), b.li(n2, tn), b.li(ds1, out.strides[2] * e), b.li(ss1, cols * e), b.li(ds2, out.strides[1] * e), b.li(ss2, kept * e);
    dma(Opcode::DMA_ST, store_channel, addr, oslot);
    b.emit(Opcode::SIGNAL, {kStore, OUT_FREE});
  }

  b.li(tmp, 2 * stage_at + stage_bytes), b.sub(sslot, tmp, sslot);
  b.li(tmp, 2 * acc0 + acc_bytes), b.sub(aslot, tmp, aslot);
  b.li(tmp, 2 * out_at + out_bytes), b.sub(oslot, tmp, oslot);
  if (packed) b.li(tmp, 2 * pack_at + pack_bytes), b.sub(pslot, tmp, pslot);
  b.addi(t, t, 1);
  b.branch(Opcode::BLT, {t.index, t_end.index}, loop);
  b.bind(done);
  b.emit(Opcode::HALT, {});

  Kernel kernel;
  kernel.program = b.finish();
  kernel.cores = cores;
  std::ostringstream plan;
  plan << name << ": " << x.to_string() << " with " << kh << " x " << kw << " kernels to " << cout << " channels, padding " << ph << " x " << pw
       << (sy * sx > 1 ? ", stride " + std::to_string(sy) + " x " + std::to_string(sx) : "") << " -> " << oh << " x " << ow
       << "; implicit im2col: tiles of " << tn << " output channels x a band of " << r << " rows of one image, " << tiles << " tiles over " << cores
       << " cores; each band's " << (r - 1) * sy + kh << " x " << wp << " input rows of " << c << " channels in a zero-padded stage"
       << (sy * sx > 1 ? " of " + std::to_string(sy * sx) + " phases (" + (landing ? "columns split by v.trans" : "rows by the DMA") + ")" : "")
       << (band_in_runs ? " (each channel's rows loaded as one run, placed by dma.cp)" : "");
  if (packed)
    plan << ", the taps packed by dma.cp (" << pack_copies << " copies on ch" << pack_channel << (two_packers ? " and ch" + std::to_string(pack_channels.back()) : "")
         << ") into one tc.mm per tile (" << kept << " x " << c * taps << " by "
         << c * taps << " x " << tn << "), " << r * ow << " of " << kept << " positions kept";
  else
    plan << ", " << taps << " tc.mm per tile (the stage from each tap's offset, transposed: " << m << " x " << c << " by " << c << " x " << tn << "), " << r * ow
         << " of " << m << " positions kept";
  plan << "; weights resident per " << tn
       << " output channels" << (vectors == 2 ? ", scaled" : "") << (vectors >= 1 ? ", plus a bias" : "") << (residual ? ", plus a residual" : "")
       << (compact_store ? "; output rows gathered by dma.cp and stored as a run per channel" : "") << "; " << local_bytes << " bytes of scratchpad"
       << "; estimate " << int64_t(packed ? packed_choice.estimate : plain.estimate) << " cycles\n";
  kernel.plan = plan.str();
  return kernel;
}

}  // namespace npu::compiler
