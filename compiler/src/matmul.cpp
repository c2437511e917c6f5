// Matmul on the tensor core:
//   out[b] = epilogue(alpha * (A[b] @ B[b]) * scale + beta * bias + residual[b]).
//
// The output is cut into TM x TN tiles per batch element, numbered
// batch-major then row-major, and core c of P takes tiles [c*T/P, (c+1)*T/P),
// so a core's tiles mostly share their rows of A. Each tile is the sum of K
// steps of depth TK, accumulated in f32 in the accumulator. When a whole
// panel of A (TM x K) fits the scratchpad next to the other buffers, it is
// loaded once for the run of tiles that share it (the "A panel"), not once
// per tile. The tile sizes and the panel are chosen by an estimate of the
// kernel's time from the config: the DRAM bytes it moves at the bandwidth a
// matmul reaches (matmul_operands.h) against the tensor core's cycles per
// tile, whichever is longer.
// Four engines form rings of two slots (the protocol of examples/gemm.s):
//   dma ch0:  A tiles, or the A panel's K steps once per panel,
//             and the bias, scale and residual tiles, once per
//             output tile                                         -> tc
//   dma ch1:  B tiles                                             -> tc
//   tc:       tc.mm per K step, the first overwriting             -> vector
//   vector:   alpha, scale, bias, residual, epilogue, round       -> dma ch2
//   dma ch2:  store the output tile
// An operand stored transposed (unit stride along its first matrix dim) is
// loaded as it lies and multiplied with the tensor core's ta / tb flags; any
// other strides are read with strided DMA, an element at a time along rows.
// The other schedule, in which the cores share B's tiles over the NoC
// (matmul_shared.cpp), replaces this one where its estimate is clearly lower.
#include "matmul.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "elementwise.h"
#include "f32_split.h"
#include "matmul_operands.h"
#include "npusim/compiler/program_builder.h"
#include "npusim/isa/isa.h"
#include "npusim/sim/chip_peaks.h"

namespace npu::compiler {
namespace {

using isa::DType;
using isa::Opcode;

}  // namespace

Kernel lower_matmul(const OpDesc& op, const sim::ChipConfig& config) {
  const size_t extra_inputs = op.inputs.size() < 2 ? 0 : op.inputs.size() - 2;
  if (op.inputs.size() < 2 || extra_inputs > (op.residual ? 3u : 2u) || (op.residual && extra_inputs == 0))
    throw std::invalid_argument("matmul takes A, B, an optional bias, an optional scale and (OpDesc::residual) a residual");
  const TensorDesc& a = op.inputs[0];
  const TensorDesc& b = op.inputs[1];
  const TensorDesc& c = op.output;
  if (a.shape.size() < 2 || b.shape.size() < 2 || c.shape.size() < 2) throw std::invalid_argument("matmul operands have at least 2 dims");
  for (const TensorDesc* t : {&a, &b, &c})
    for (const int64_t s : t->strides)
      if (s < 0) throw UnsupportedOp("negative strides");
  const int64_t m = a.shape[a.shape.size() - 2], k = a.shape.back(), n = b.shape.back();
  if (b.shape[b.shape.size() - 2] != k) throw std::invalid_argument("matmul: A is [.., M, K] and B [.., K, N]: K differs");
  if (c.shape[c.shape.size() - 2] != m || c.shape.back() != n) throw std::invalid_argument("matmul: the output is not [.., M, N]");
  const DType dtype = a.dtype;
  // Integer matmul: i8 operands, their exact products summed in i32 (wrapping), an i32 output.
  const bool integer = dtype == DType::I8;
  // (A bf16 or f16 product may keep its f32 sums: a split-K's partial products, summed after.)
  const bool f32_sums = (dtype == DType::BF16 || dtype == DType::F16) && c.dtype == DType::F32;
  if (b.dtype != dtype || (c.dtype != (integer ? DType::I32 : dtype) && !f32_sums))
    throw std::invalid_argument("matmul: A, B and the output have one dtype (cast first), bf16 or f16 A and B and an f32 output, or i8 A and B and an i32 output");
  const auto& accepted = config.core.tensor_core.input_dtypes;
  const auto takes = [&](DType d) { return std::find(accepted.begin(), accepted.end(), d) != accepted.end(); };
  // f32 on a tensor core without f32: the operands' bf16 parts, multiplied pairwise.
  const bool split = dtype == DType::F32 && !takes(DType::F32) && takes(DType::BF16);
  if (dtype == DType::I32 || dtype == DType::U8 || (!split && !takes(dtype)))
    throw UnsupportedOp("matmul on " + std::string(isa::dtype_name(dtype)) + ": this chip's tensor core does not take it");
  if (integer && (op.inputs.size() > 2 || op.alpha != 1.0 || op.beta != 1.0 || !op.epilogue.empty()))
    throw UnsupportedOp("integer matmul with a bias, scale, residual, alpha, beta or epilogue (its epilogue works in f32)");
  const int64_t parts = split ? f32_split_parts(op.f32_precision) : 1;
  const std::vector<std::pair<int64_t, int64_t>> products = f32_split_products(parts);
  const DType tc_dtype = split ? DType::BF16 : dtype;
  for (const OpKind step : op.epilogue) unary_opcode(step);  // throws for a non-unary op

  // Batch: the output's leading dims, flattened (they must merge), A and B broadcast over them.
  const size_t batch_rank = c.shape.size() - 2;
  int64_t batch = 1;
  Matrix am, bm, cm;
  const TensorDesc* residual = op.residual ? &op.inputs.back() : nullptr;
  // (size, strides of A, B, C, then of each bias, scale and residual input)
  std::vector<std::pair<int64_t, std::vector<int64_t>>> dims;
  for (size_t d = 0; d < batch_rank; ++d) {
    const auto stride_of = [&](const TensorDesc& t) -> int64_t {
      const int64_t i = static_cast<int64_t>(d) - static_cast<int64_t>(batch_rank) + static_cast<int64_t>(t.shape.size()) - 2;
      if (i < 0) return 0;
      if (t.shape[size_t(i)] == 1) return 0;
      if (t.shape[size_t(i)] != c.shape[d]) throw std::invalid_argument("matmul: batch dims do not broadcast");
      return t.strides[size_t(i)];
    };
    if (c.shape[d] == 1) continue;
    std::vector<int64_t> s = {stride_of(a), stride_of(b), c.strides[d]};
    for (size_t input = 2; input < op.inputs.size(); ++input) s.push_back(stride_of(op.inputs[input]));
    const auto merges = [&](const std::vector<int64_t>& outer) {
      for (size_t i = 0; i < s.size(); ++i)
        if (outer[i] != s[i] * c.shape[d]) return false;
      return true;
    };
    if (!dims.empty() && merges(dims.back().second)) {
      dims.back().first *= c.shape[d];
      dims.back().second = s;
    } else {
      dims.push_back({c.shape[d], s});
    }
  }
  if (dims.size() > 2) throw UnsupportedOp("matmul with batch dims that do not merge into two");
  std::vector<Matrix> vector_batches(op.inputs.size() - 2);  // the bias's, scale's and residual's batch strides
  if (!dims.empty()) {
    // One batch dim, or two: the inner one's strides, and the outer one's.
    const auto& [inner_size, inner] = dims.back();
    batch = inner_size;
    std::vector<Matrix*> all = {&am, &bm, &cm};
    for (Matrix& v : vector_batches) all.push_back(&v);
    for (size_t i = 0; i < all.size(); ++i) all[i]->batch_stride = inner[i];
    if (dims.size() == 2) {
      batch *= dims[0].first;
      for (size_t i = 0; i < all.size(); ++i) all[i]->batch_inner = inner_size, all[i]->outer_batch_stride = dims[0].second[i];
    }
  }
  const auto matrix = [](Matrix& mx, const TensorDesc& t) {
    mx.row_stride = t.strides[t.strides.size() - 2];
    mx.col_stride = t.strides.back();
    mx.offset = t.storage_offset;
    mx.esize = isa::dtype_size_bytes(t.dtype);
    mx.dtype = t.dtype;
  };
  matrix(am, a), matrix(bm, b), matrix(cm, c);
  if (m == 1) am.row_stride = 0;  // a single row: its row stride is never used
  if (cm.col_stride != 1 && n > 1) throw UnsupportedOp("matmul into an output with strided columns");

  // The bias, the scale and the residual: each broadcast to [M, N], and each
  // may vary over the batch (a grouped convolution's per-channel scale and
  // bias vary over its groups).
  enum class BiasMode { None, Row, Col, Full, Scalar };
  enum class Role { Bias, Scale, Residual };
  struct TileVector {
    Role role = Role::Bias;
    Matrix mx;
    BiasMode mode = BiasMode::None;
    uint16_t symbol = 0;
    int64_t raw0 = 0, f32_0 = 0, raw_bytes = 0, f32_bytes = 0;  // two slots of each in the scratchpad
  };
  std::vector<TileVector> vectors;  // in input order: [bias [, scale]] [, residual]
  for (size_t input = 2; input < op.inputs.size(); ++input) {
    const Role role = residual && input + 1 == op.inputs.size() ? Role::Residual : input == 2 ? Role::Bias : Role::Scale;
    const char* what = role == Role::Bias ? "bias" : role == Role::Scale ? "scale" : "residual";
    const TensorDesc& t = op.inputs[input];
    if (!isa::dtype_is_float(t.dtype)) throw std::invalid_argument(std::string("matmul: the ") + what + " is a float tensor");
    const int64_t rank = static_cast<int64_t>(t.shape.size());
    const int64_t bn = rank >= 1 ? t.shape.back() : 1, bmr = rank >= 2 ? t.shape[size_t(rank - 2)] : 1;
    if ((bn != 1 && bn != n) || (bmr != 1 && bmr != m)) throw std::invalid_argument(std::string("matmul: the ") + what + " does not broadcast to [M, N]");
    TileVector v;
    v.role = role;
    v.mx.batch_stride = vector_batches[input - 2].batch_stride;
    v.mx.batch_inner = vector_batches[input - 2].batch_inner;
    v.mx.outer_batch_stride = vector_batches[input - 2].outer_batch_stride;
    v.mx.esize = isa::dtype_size_bytes(t.dtype);
    v.mx.dtype = t.dtype;
    v.mx.offset = t.storage_offset;
    v.mx.col_stride = bn == 1 ? 0 : t.strides.back();
    v.mx.row_stride = bmr == 1 ? 0 : t.strides[size_t(rank - 2)];
    v.mode = bn == 1 && bmr == 1 ? BiasMode::Scalar : bn == 1 ? BiasMode::Col : bmr == 1 ? BiasMode::Row : BiasMode::Full;
    if ((v.mode == BiasMode::Row || v.mode == BiasMode::Full) && v.mx.col_stride != 1) throw UnsupportedOp(std::string("a ") + what + " with strided columns");
    vectors.push_back(v);
  }

  if (batch * m * n == 0) {  // an empty output: a program that halts at once
    ProgramBuilder empty("matmul (generated, empty output)");
    empty.output("out", c.dtype, {1});
    for (size_t i = 0; i < op.inputs.size(); ++i) empty.input("in" + std::to_string(i), op.inputs[i].dtype, {1});
    empty.emit(Opcode::HALT, {});
    Kernel kernel;
    kernel.program = empty.finish();
    kernel.plan = "matmul: empty output, nothing to compute\n";
    return kernel;
  }
  // A tile's part of a bias or scale: a row of TN, a column of TM, one value, or the whole tile.
  const auto vector_elements = [&](BiasMode mode, int64_t rows, int64_t cols) -> int64_t {
    switch (mode) {
      case BiasMode::Row: return cols;
      case BiasMode::Col: return rows;
      case BiasMode::Scalar: return 1;
      default: return rows * cols;
    }
  };
  // The share of DRAM's channels that the cores' concurrent tile loads of an operand reach: each load's
  // rows of contiguous bytes (run_bytes, stride_bytes apart) cover interleave blocks that repeat on the same
  // channels when the stride is a multiple of channels x interleave, and the cores' loads lie core_shift_bytes
  // apart (a linear layer's weight, [N, K] read in K tiles of 256 bytes, keeps every request of every core
  // on one channel at a time). The loads get that share of the bandwidth.
  const auto channel_share = [&](int64_t rows, int64_t run_bytes, int64_t stride_bytes, int64_t core_shift_bytes, int64_t cores_) {
    const int64_t channels = config.dram.channels, interleave = config.dram.interleave_bytes;
    if (channels <= 1 || rows <= 0 || run_bytes <= 0 || stride_bytes % interleave != 0 || core_shift_bytes % interleave != 0) return 1.0;
    const int64_t run_blocks = std::min<int64_t>(channels, (run_bytes + interleave - 1) / interleave);
    const int64_t step = (stride_bytes / interleave) % channels, shift = (core_shift_bytes / interleave) % channels;
    std::vector<bool> reached(size_t(channels), false);
    for (int64_t core = 0; core < std::min<int64_t>(cores_, channels); ++core)
      for (int64_t r = 0; r < std::min<int64_t>(rows, channels); ++r)
        for (int64_t j = 0; j < run_blocks; ++j) reached[size_t((core * shift + r * step + j) % channels)] = true;
    return double(std::count(reached.begin(), reached.end(), true)) / double(channels);
  };
  // A tile of rows x cols of an operand as its loads see it (rows in memory, their bytes, their stride), with
  // the cores col_step columns apart (the cores work on neighbouring columns of tiles).
  const auto tile_share = [&](const Matrix& mx, int64_t rows, int64_t cols, int64_t col_step, int64_t cores_) {
    const int64_t shift = col_step * mx.col_stride * mx.esize;
    if (mx.col_stride == 1) return channel_share(rows, cols * mx.esize, mx.row_stride * mx.esize, shift, cores_);
    if (mx.transposed()) return channel_share(cols, rows * mx.esize, mx.col_stride * mx.esize, shift, cores_);
    return 1.0;  // element DMA: its own costs
  };
  // Tile sizes and the A panel: the fastest by an estimate of time, over the shapes whose buffers fit.
  const int64_t e = am.esize, eo = cm.esize;
  const int64_t scratchpad = static_cast<int64_t>(config.core.scratchpad.size_bytes);
  const int64_t accumulator = static_cast<int64_t>(config.core.accumulator.size_bytes);
  const double dram_bytes_per_cycle = double(sim::peak_dram_bytes_per_cycle(config));
  int64_t tm = 0, tn = 0, tk = 0;
  bool panel = false;
  // A the same for every batch element (a 1 x 1 convolution's weights against each image): a row of
  // tiles is then one row of A's tiles across the whole batch (batch inside, columns innermost), so
  // its panel serves every image instead of being loaded again per image.
  const bool a_over_batch = batch > 1 && am.batch_stride == 0 && (am.batch_inner == 0 || am.outer_batch_stride == 0);
  const bool several_rows_always = batch * ((m + std::min<int64_t>(m, 1024) - 1) / std::max<int64_t>(1, std::min<int64_t>(m, 1024))) >= 2;
  double best = 0, best_dram = 0;
  for (const int64_t cm_ : {1024, 512, 256, 128, 64, 32, 16, 8, 4, 2, 1})
    for (const int64_t cn : {1024, 512, 256, 128, 64, 32, 16, 8, 4, 2, 1})
      for (const int64_t ck : {1024, 512, 256, 128, 64, 32, 16, 8}) {
        const int64_t TM = balanced_tile(m, cm_), TN = std::min(n, cn), TK = std::min(k, ck);
        if (2 * align64(TM * TN * 4) > accumulator) continue;
        int64_t bias_bytes = 0;
        for (const TileVector& v : vectors)
          bias_bytes += 2 * (align64(vector_elements(v.mode, TM, TN) * v.mx.esize) + align64(vector_elements(v.mode, TM, TN) * 4));
        // Split f32: two slots of bf16 parts of each operand, and one f32 tile for the residual.
        const int64_t split_bytes = !split ? 0
                                           : 2 * parts * (align64(TM * TK * 2) + align64(TK * TN * 2)) +
                                                 (parts > 1 ? std::max(align64(TM * TK * 4), align64(TK * TN * 4)) : 0);
        const int64_t others = 2 * (align64(TK * TN * e) + align64(TM * TN * eo)) + bias_bytes + 128 + split_bytes;  // + alpha and beta
        const int64_t k_steps = TK > 0 ? (k + TK - 1) / TK : 1;  // K = 0: no steps (the kernel says so below)
        const int64_t m_tiles_ = (m + TM - 1) / TM, n_tiles_ = (n + TN - 1) / TN, tiles_ = batch * m_tiles_ * n_tiles_;
        const int64_t row_tiles_ = a_over_batch ? batch * n_tiles_ : n_tiles_;
        for (const bool with_panel : {false, true}) {
          if (with_panel && (split || row_tiles_ == 1)) continue;  // split f32 rewrites its A tiles; one tile per row has nothing to share
          const int64_t a_local = with_panel ? k_steps * align64(TM * TK * e) : 2 * align64(TM * TK * e);
          if (a_local + others > scratchpad) continue;
          // DRAM bytes: A once per tile (once per row of tiles with a panel), B once per tile, C once.
          // (A core that takes part of a row of tiles loads its panel too: up to one more per core.)
          const double a_reads = with_panel ? double(std::min(tiles_, tiles_ / row_tiles_ + config.num_cores - 1)) : double(tiles_);
          const double a_bytes = a_reads * double(std::min(TM, m)) * double(k) * double(e);
          const double b_bytes = double(tiles_) * double(k) * double(std::min(TN, n)) * double(e);
          // B's loads at the channels they reach (only B's: A's tiles are few and shared by the cores of a row
          // of tiles, and counting their channels too chose tiles that ran slower, GPT-2's qkv projection's)
          const int64_t concurrent = std::min<int64_t>({int64_t{config.num_cores}, tiles_, n_tiles_});
          const double b_share = tile_share(bm, TK, TN, TN, concurrent);
          // And A's, where the cores outnumber a row's tiles and every tile height leaves rows for them: then
          // they work on different rows of tiles at the same K step, and A's rows (a matrix row apart, the
          // cores TM rows apart) may all lie on the same channels (2048 x 64 x 2048 on base: K tiles of 256
          // kept A's loads on two channels of four). Only where every candidate has several rows, so that
          // the share does not tilt the choice between tall tiles (one row) and short ones: counted for the
          // short ones alone it took ResNet-18's forward from 4.27 M to 4.52 M cycles, and counted for one
          // row too (its cores load the same A tiles) GPT-2's from 12.08 M to 12.48 M.
          // The cores' rows of tiles lie TM rows apart, or, where a row of tiles is a whole batch element,
          // a batch element apart (a split K's parts: 2 KiB on large, where TM rows put every core's A on
          // the same channels and chose tiles 16 columns wide for 256 x 256 x 16384).
          const int64_t row_cores = std::min<int64_t>(int64_t{config.num_cores}, batch * m_tiles_);
          const bool rows_are_batch = m_tiles_ == 1 && batch > 1 && am.batch_inner == 0 && am.batch_stride != 0;
          const double a_share =
              n_tiles_ >= int64_t{config.num_cores} || !several_rows_always ? 1.0
              : am.col_stride == 1 ? channel_share(TM, TK * e, am.row_stride * e, (rows_are_batch ? am.batch_stride : TM * am.row_stride) * e, row_cores)
              : am.transposed()    ? channel_share(TK, TM * e, am.col_stride * e, (rows_are_batch ? am.batch_stride : TM) * e, row_cores)
                                   : 1.0;
          // Narrow tiles' rows (of B and C, a matrix row apart) at the bandwidth such rows reach.
          const double b_rows = bm.col_stride == 1 && TN < n ? dram_row_share(config, TN * e) : bm.transposed() && TK < k ? dram_row_share(config, TK * e) : 1.0;
          // C's rows go out one DMA request each: rows shorter than a request move that much less per request
          // (on large, 1024 x 64 bf16 tiles of a [1024, 196] output stored at 17 bytes a cycle per core, and
          // ran 70 k cycles where 512 x 128 ran 34 k).
          const double request_share = std::min(1.0, double(TN * eo) / double(config.core.dma.request_bytes));
          const double c_rows = TN < n ? std::min(dram_row_share(config, TN * eo), request_share) : 1.0;
          const double dram_cycles = (a_bytes / a_share + b_bytes / (b_share * b_rows) + double(batch * m * n * eo) / c_rows) / matmul_dram_bytes_per_cycle(config);
          const double tile_cycles = tensor_core_tile_cycles(config, TM, TN, k, TK);
          const double per_core_tiles = double((tiles_ + config.num_cores - 1) / config.num_cores);
          const double estimate = std::max(dram_cycles, per_core_tiles * tile_cycles * double(parts * (parts + 1) / 2));
          // Ties (compute-bound shapes) go to the shorter DRAM time (fewer bytes, more channels, longer rows).
          if (tm == 0 || estimate < best || (estimate == best && dram_cycles < best_dram))
            best = estimate, best_dram = dram_cycles, tm = TM, tn = TN, tk = TK, panel = with_panel;
        }
      }
  if (tm == 0) throw UnsupportedOp("matmul tile does not fit this chip's memories");
  // The estimate plus the last store, which nothing overlaps: against the other schedule's, and in the plan.
  const double estimate_cycles = best + double(tm * tn * eo) / (dram_bytes_per_cycle / config.num_cores);
  {
    MatmulShape shape{m, n, k, batch, am, bm, cm, integer, split, false, {}};
    if (vectors.size() == 1 && vectors[0].role == Role::Bias && vectors[0].mode == BiasMode::Row && vectors[0].mx.dtype == dtype &&
        vectors[0].mx.batch_stride == 0 && vectors[0].mx.batch_inner == 0)
      shape.bias_row = true, shape.bias = vectors[0].mx;
    if (auto shared = lower_matmul_shared(op, shape, config, estimate_cycles)) return *shared;
  }
  // Enough tiles for every core: split the larger output tile side while there are fewer tiles than cores.
  const auto tile_count = [&] { return batch * ((m + tm - 1) / tm) * ((n + tn - 1) / tn); };
  while (tile_count() < int64_t{config.num_cores} && std::max(tm, tn) > 16) {
    if (tm >= tn) tm = (tm + 1) / 2;
    else tn = (tn + 1) / 2;
  }
  const int64_t m_tiles = (m + tm - 1) / tm, n_tiles = (n + tn - 1) / tn, tiles = batch * m_tiles * n_tiles;
  const int64_t row_tiles = a_over_batch ? batch * n_tiles : n_tiles;  // the tiles that share a row of A's tiles
  const unsigned cores = static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(config.num_cores, tiles)));
  const unsigned channels = config.core.dma.channels;
  const unsigned ch_a = 0, ch_b = std::min(1u, channels - 1), ch_c = std::min(2u, channels - 1);

  if (row_tiles == 1) panel = false;
  const int64_t k_steps = tk > 0 ? (k + tk - 1) / tk : 1;
  // Local memory: two slots of each buffer; the A panel holds all K steps of its rows.
  const int64_t a_bytes = align64(tm * tk * e), b_bytes = align64(tk * tn * e), o_bytes = align64(tm * tn * eo);
  const int64_t a_slots = panel ? k_steps : 2;
  const int64_t a0 = 0, b0 = a_slots * a_bytes, o0 = b0 + 2 * b_bytes;
  int64_t consts = o0 + 2 * o_bytes;  // after the bias and scale slots: f32 alpha, beta
  for (TileVector& v : vectors) {
    v.raw_bytes = align64(vector_elements(v.mode, tm, tn) * v.mx.esize), v.f32_bytes = align64(vector_elements(v.mode, tm, tn) * 4);
    v.raw0 = consts, v.f32_0 = v.raw0 + 2 * v.raw_bytes, consts = v.f32_0 + 2 * v.f32_bytes;
  }
  // Split f32: part p of slot s of A at ap0 + (s * parts + p) * ap_bytes, of B likewise; the residual's scratch at residual0.
  const int64_t ap_bytes = align64(tm * tk * 2), bp_bytes = align64(tk * tn * 2);
  const int64_t ap0 = consts + 128, bp0 = ap0 + 2 * parts * ap_bytes, residual0 = bp0 + 2 * parts * bp_bytes;
  const int64_t acc0 = static_cast<int64_t>(isa::kAccumulatorBase), acc_bytes = align64(tm * tn * 4);

  // Where each core starts within its part of a row of tiles (see "Tile t is visited as tile u" below):
  // by default the core id modulo its part, so that cores on neighbouring columns start on different
  // ones. A column of tiles of a row-major B or C whose rows are a multiple of channels x interleave
  // apart lies on the DRAM channels of its first row; where tile rows are shorter than a period of
  // the interleave, cores that own the same columns of different rows (or columns on the same
  // channels) would start on the same channel. Then each core, in order, starts at the column of its
  // part whose channels the cores before it use least (the default where that ties).
  std::vector<int64_t> start_of_core(cores);
  bool default_starts = true;  // every core starts at its core id's column (the program reads its id)
  {
    const int64_t dram_channels = config.dram.channels, interleave = config.dram.interleave_bytes, period = dram_channels * interleave;
    const auto channel_key = [&](const Matrix& mx, int64_t esize, int64_t column) -> int64_t {
      if (mx.col_stride != 1 || (mx.row_stride * esize) % period != 0 || tn * esize >= period) return -1;  // spread: no preference
      return (column * tn * esize / interleave) % dram_channels;
    };
    std::vector<int64_t> b_use(size_t(dram_channels), 0), c_use(size_t(dram_channels), 0);
    for (unsigned core = 0; core < cores; ++core) {
      const int64_t first = int64_t(core) * tiles / cores, end = int64_t(core + 1) * tiles / cores;
      const int64_t row_first = first / row_tiles * row_tiles, part = std::min(row_first + row_tiles, end) - first;
      start_of_core[core] = part > 0 ? int64_t(core) % part : 0;
      if (part <= 1) continue;
      const auto cost = [&](int64_t x) {
        const int64_t column = (first - row_first + x) % n_tiles, b_key = channel_key(bm, e, column), c_key = channel_key(cm, eo, column);
        return (b_key < 0 ? 0 : b_use[size_t(b_key)]) + (c_key < 0 ? 0 : c_use[size_t(c_key)]);
      };
      int64_t best_x = start_of_core[core];
      for (int64_t x = 0; x < part; ++x)
        if (cost(x) < cost(best_x)) best_x = x;
      default_starts = default_starts && best_x == start_of_core[core];
      start_of_core[core] = best_x;
      const int64_t column = (first - row_first + best_x) % n_tiles, b_key = channel_key(bm, e, column), c_key = channel_key(cm, eo, column);
      if (b_key >= 0) ++b_use[size_t(b_key)];
      if (c_key >= 0) ++c_use[size_t(c_key)];
    }
  }

  ProgramBuilder pb("matmul (generated)");
  const uint16_t c_sym = pb.output("out", c.dtype, {uint64_t(std::max<int64_t>(c.storage_extent(), 1))});
  const uint16_t a_sym = pb.input("in0", a.dtype, {uint64_t(std::max<int64_t>(a.storage_extent(), 1))});
  const uint16_t b_sym = pb.input("in1", b.dtype, {uint64_t(std::max<int64_t>(b.storage_extent(), 1))});
  for (size_t i = 0; i < vectors.size(); ++i)
    vectors[i].symbol = pb.input("in" + std::to_string(i + 2), op.inputs[i + 2].dtype, {uint64_t(std::max<int64_t>(op.inputs[i + 2].storage_extent(), 1))});

  enum : int64_t { A_FULL, A_FREE, B_FULL, B_FREE, ACC_FULL, ACC_FREE, OUT_FULL, OUT_FREE, BIAS_FULL, BIAS_FREE, PARTS_FULL, PARTS_FREE };
  const int64_t kCtl = 0, kTc = 5, kVec = 6;
  const auto engine_of = [](unsigned channel) { return int64_t{1} + channel; };
  const int64_t dt = static_cast<int64_t>(dtype), f32 = static_cast<int64_t>(DType::F32);
  const int64_t tc_dt = static_cast<int64_t>(tc_dtype);
  const bool has_vectors = !vectors.empty();

  const Label done = pb.label();
  if (tiles == 0 || k == 0) {
    if (k == 0 && tiles > 0) throw UnsupportedOp("matmul with K = 0");
    pb.emit(Opcode::HALT, {});
    pb.bind(done);
  } else {
    // Ring tokens, and the f32 constants.
    // (The A panel is one buffer: one token.)
    for (int i = 0; i < 2; ++i)
      for (const int64_t s : {A_FREE, B_FREE, ACC_FREE, OUT_FREE, BIAS_FREE, PARTS_FREE})
        if (!(panel && s == A_FREE && i == 1)) pb.emit(Opcode::SIGNAL, {kCtl, s});
    const Reg t = pb.reg(), t_end = pb.reg(), tmp = pb.reg(), tmp2 = pb.reg();
    pb.split_over_cores(tiles, t, t_end);
    pb.branch(Opcode::BGE, {t.index, t_end.index}, done);
    const Reg t_first = pb.reg();
    pb.mov(t_first, t);
    const Reg one = pb.reg();
    pb.li(one, 1);
    const uint32_t alpha_bits = f32_bits(op.alpha), beta_bits = f32_bits(op.beta);
    const int64_t alpha_at = consts, beta_at = consts + 64;
    pb.li(tmp2, alpha_at), pb.li(tmp, alpha_bits);
    pb.emit(Opcode::V_FILL, {f32, tmp2.index, tmp.index, one.index, one.index});
    pb.li(tmp2, beta_at), pb.li(tmp, beta_bits);
    pb.emit(Opcode::V_FILL, {f32, tmp2.index, tmp.index, one.index, one.index});

    const Reg slot = pb.reg();  // 0 / 1: this tile's output slot and accumulator slot
    const Reg new_panel = pb.reg();  // 1 when this tile's rows of A are not in the panel yet
    pb.li(slot, 0), pb.li(new_panel, 1);
    const Reg bidx = pb.reg(), m0 = pb.reg(), n0 = pb.reg(), mt = pb.reg(), nt = pb.reg(), kt = pb.reg(), k_left = pb.reg();
    const Reg a_src = pb.reg(), b_src = pb.reg(), kslot = pb.reg();  // kslot: the K step's operand slot, 0 / 1
    const Reg r_n0 = pb.reg(), r_n1 = pb.reg(), r_n2 = pb.reg(), ds1 = pb.reg(), ss1 = pb.reg(), ds2 = pb.reg(), ss2 = pb.reg();
    const Reg l0 = pb.reg(), l1 = pb.reg(), l2 = pb.reg();
    pb.li(kslot, 0);
    const Label tile = pb.label();
    pb.bind(tile);
    // Tile t is visited as tile u: within the part of its row of tiles that this core owns,
    // rotated by the core id. Cores then work on different columns of B at the same time,
    // which lie in different DRAM channels (a column of tiles of a row-major B sits in one
    // channel when a tile row is one interleave block), and the rows stay whole for the panel.
    if (row_tiles > 1) {
      pb.li(tmp, row_tiles), pb.emit(Opcode::DIVU, {bidx.index, t.index, tmp.index}), pb.mul(bidx, bidx, tmp);  // the row's first tile
      pb.emit(Opcode::MAX, {m0.index, t_first.index, bidx.index});                                              // s: this core's first in it
      pb.addi(n0, bidx, row_tiles), pb.min(n0, n0, t_end), pb.sub(n0, n0, m0);                                 // its count there
      pb.sub(tmp2, t, m0);
      if (default_starts) {
        pb.emit(Opcode::CSRR, {tmp.index, 0});
      } else {
        // This core's start_of_core, picked by its id (kt and k_left serve as scratch: the K loop sets them).
        pb.emit(Opcode::CSRR, {k_left.index, 0}), pb.li(tmp, 0);
        for (unsigned core = 0; core < cores; ++core) {
          if (start_of_core[core] == 0) continue;
          const Label other = pb.label();
          pb.li(kt, core);
          pb.branch(Opcode::BNE, {k_left.index, kt.index}, other);
          pb.li(tmp, start_of_core[core]);
          pb.bind(other);
        }
      }
      pb.add(tmp2, tmp2, tmp);
      pb.emit(Opcode::REMU, {tmp2.index, tmp2.index, n0.index}), pb.add(tmp2, tmp2, m0);
    } else {
      pb.mov(tmp2, t);
    }
    // Tile u: batch element bidx, rows m0 .. +mt, columns n0 .. +nt (u = (bidx, m, n), or with A the
    // same over the batch (m, bidx, n), in mixed radix).
    if (a_over_batch) {
      pb.li(tmp, row_tiles);
      pb.emit(Opcode::DIVU, {m0.index, tmp2.index, tmp.index});
      pb.emit(Opcode::REMU, {bidx.index, tmp2.index, tmp.index});
      pb.li(tmp, n_tiles);
      pb.emit(Opcode::REMU, {n0.index, bidx.index, tmp.index});
      pb.emit(Opcode::DIVU, {bidx.index, bidx.index, tmp.index});
    } else {
      pb.li(tmp, m_tiles * n_tiles);
      pb.emit(Opcode::DIVU, {bidx.index, tmp2.index, tmp.index});
      pb.emit(Opcode::REMU, {m0.index, tmp2.index, tmp.index});
      pb.li(tmp, n_tiles);
      pb.emit(Opcode::REMU, {n0.index, m0.index, tmp.index});
      pb.emit(Opcode::DIVU, {m0.index, m0.index, tmp.index});
    }
    pb.muli(m0, m0, tm), pb.muli(n0, n0, tn);
    pb.li(tmp, m), pb.sub(mt, tmp, m0), pb.li(tmp, tm), pb.min(mt, mt, tmp);
    pb.li(tmp, n), pb.sub(nt, tmp, n0), pb.li(tmp, tn), pb.min(nt, nt, tmp);
    const DmaShape shape{r_n0, r_n1, r_n2, ds1, ss1, ds2, ss2};
    const auto address = [&](Reg out, uint16_t symbol, const Matrix& mx, Reg row, Reg col) {
      emit_element_address(pb, out, symbol, mx, bidx, row, col, tmp);
    };
    const auto dma = [&](Opcode opcode, unsigned channel, Reg dst, Reg src) { emit_dma(pb, opcode, channel, dst, src, shape); };
    const auto load_shape = [&](const Matrix& mx, Reg rows, Reg cols) { emit_tile_shape(pb, mx, rows, cols, shape); };
    const Reg zero_col = kZero;
    address(a_src, a_sym, am, m0, zero_col);
    address(b_src, b_sym, bm, zero_col, n0);

    // The bias, scale and residual tiles, once per output tile, on the A channel.
    if (has_vectors) {
      pb.emit(Opcode::WAIT, {engine_of(ch_a), BIAS_FREE});
      for (const TileVector& v : vectors) {
        const Matrix& bias = v.mx;
        const Reg bias_src = l2;
        pb.emit(Opcode::LA, {bias_src.index, v.symbol});
        if (bias.offset) pb.addi(bias_src, bias_src, bias.offset * bias.esize);
        emit_batch_offset(pb, bias_src, bias, bidx, tmp);
        if (bias.row_stride) pb.li(tmp, bias.row_stride * bias.esize), pb.mul(tmp, tmp, m0), pb.add(bias_src, bias_src, tmp);
        if (bias.col_stride) pb.li(tmp, bias.col_stride * bias.esize), pb.mul(tmp, tmp, n0), pb.add(bias_src, bias_src, tmp);
        pb.li(r_n2, 0), pb.li(ds2, 0), pb.li(ss2, 0);
        switch (v.mode) {
          case BiasMode::Row: pb.muli(r_n0, nt, bias.esize), pb.li(r_n1, 1), pb.li(ds1, 0), pb.li(ss1, 0); break;
          case BiasMode::Col: pb.li(r_n0, bias.esize), pb.mov(r_n1, mt), pb.li(ds1, bias.esize), pb.li(ss1, bias.row_stride * bias.esize); break;
          case BiasMode::Full: pb.muli(r_n0, nt, bias.esize), pb.mov(r_n1, mt), pb.muli(ds1, nt, bias.esize), pb.li(ss1, bias.row_stride * bias.esize); break;
          default: pb.li(r_n0, bias.esize), pb.li(r_n1, 1), pb.li(ds1, 0), pb.li(ss1, 0); break;
        }
        pb.li(l0, v.raw0), pb.li(tmp, v.raw_bytes), pb.mul(tmp, tmp, slot), pb.add(l0, l0, tmp);
        dma(Opcode::DMA_LD, ch_a, l0, bias_src);
      }
      pb.emit(Opcode::SIGNAL, {engine_of(ch_a), BIAS_FULL});
    }

    // The K loop.
    pb.li(k_left, k);
    if (panel) {  // the previous panel's last tile is done with it
      const Label kept = pb.label();
      pb.branch(Opcode::BEQ, {new_panel.index, kZero.index}, kept);
      pb.emit(Opcode::WAIT, {engine_of(ch_a), A_FREE});
      pb.bind(kept);
    }
    pb.emit(Opcode::WAIT, {kTc, ACC_FREE});
    const Label k_loop = pb.label(), k_first = pb.label(), k_issued = pb.label();
    pb.bind(k_loop);
    pb.li(tmp, tk), pb.min(kt, k_left, tmp);
    if (panel) {
      // A: mt x kt at a_src into the panel's K step (k - k_left) / tk, when the panel is new.
      pb.li(l0, k), pb.sub(l0, l0, k_left), pb.li(tmp, tk), pb.emit(Opcode::DIVU, {l0.index, l0.index, tmp.index});
      pb.li(tmp, a_bytes), pb.mul(l0, l0, tmp), pb.addi(l0, l0, a0);
      const Label loaded = pb.label();
      pb.branch(Opcode::BEQ, {new_panel.index, kZero.index}, loaded);
      load_shape(am, mt, kt);
      dma(Opcode::DMA_LD, ch_a, l0, a_src);
      pb.emit(Opcode::SIGNAL, {engine_of(ch_a), A_FULL});
      pb.bind(loaded);
    } else {
      // A: mt x kt at a_src (slot kslot).
      pb.emit(Opcode::WAIT, {engine_of(ch_a), A_FREE});
      load_shape(am, mt, kt);
      pb.li(l0, a_bytes), pb.mul(l0, l0, kslot), pb.addi(l0, l0, a0);
      dma(Opcode::DMA_LD, ch_a, l0, a_src);
      pb.emit(Opcode::SIGNAL, {engine_of(ch_a), A_FULL});
    }
    // B: kt x nt at b_src.
    pb.emit(Opcode::WAIT, {engine_of(ch_b), B_FREE});
    load_shape(bm, kt, nt);
    pb.li(l1, b_bytes), pb.mul(l1, l1, kslot), pb.addi(l1, l1, b0);
    dma(Opcode::DMA_LD, ch_b, l1, b_src);
    pb.emit(Opcode::SIGNAL, {engine_of(ch_b), B_FULL});
    if (split) {
      // The vector unit splits both f32 tiles into bf16 parts: part = bf16(r), r -= f32(part),
      // with r the loaded tile itself (free once split).
      pb.emit(Opcode::WAIT, {kVec, A_FULL});
      pb.emit(Opcode::WAIT, {kVec, B_FULL});
      pb.emit(Opcode::WAIT, {kVec, PARTS_FREE});
      const auto split_tile = [&](Reg raw, int64_t parts0, int64_t part_bytes, Reg rows, Reg cols) {
        pb.li(r_n1, parts * part_bytes), pb.mul(r_n1, r_n1, kslot), pb.addi(r_n1, r_n1, parts0);
        pb.li(ds1, residual0);
        emit_f32_split(pb, parts, raw, r_n1, part_bytes, ds1, rows, cols);
      };
      split_tile(l0, ap0, ap_bytes, mt, kt);
      split_tile(l1, bp0, bp_bytes, kt, nt);
      pb.emit(Opcode::SIGNAL, {kVec, A_FREE});
      pb.emit(Opcode::SIGNAL, {kVec, B_FREE});
      pb.emit(Opcode::SIGNAL, {kVec, PARTS_FULL});
    }
    // tc.mm into this tile's accumulator slot; the first K step overwrites.
    if (split) {
      pb.emit(Opcode::WAIT, {kTc, PARTS_FULL});
    } else if (panel) {
      const Label resident = pb.label();
      pb.branch(Opcode::BEQ, {new_panel.index, kZero.index}, resident);
      pb.emit(Opcode::WAIT, {kTc, A_FULL});
      pb.bind(resident);
      pb.emit(Opcode::WAIT, {kTc, B_FULL});
    } else {
      pb.emit(Opcode::WAIT, {kTc, A_FULL});
      pb.emit(Opcode::WAIT, {kTc, B_FULL});
    }
    pb.li(l2, acc_bytes), pb.mul(l2, l2, slot), pb.li(tmp, acc0), pb.add(l2, l2, tmp);
    const int64_t flags = (am.transposed() ? 2 : 0) | (bm.transposed() ? 4 : 0);
    // The operands of product p: the loaded tiles, or parts i and j of them.
    const auto operands = [&](size_t p) -> std::pair<Reg, Reg> {
      if (!split) return {l0, l1};
      pb.li(r_n0, parts * ap_bytes), pb.mul(r_n0, r_n0, kslot), pb.addi(r_n0, r_n0, ap0 + products[p].first * ap_bytes);
      pb.li(r_n1, parts * bp_bytes), pb.mul(r_n1, r_n1, kslot), pb.addi(r_n1, r_n1, bp0 + products[p].second * bp_bytes);
      return {r_n0, r_n1};
    };
    const auto [a0_op, b0_op] = operands(0);
    pb.li(tmp, k);
    pb.branch(Opcode::BEQ, {k_left.index, tmp.index}, k_first);
    pb.emit(Opcode::TC_MM, {tc_dt, flags | 1, l2.index, a0_op.index, b0_op.index, mt.index, nt.index, kt.index});
    pb.branch(Opcode::JMP, {}, k_issued);
    pb.bind(k_first);
    pb.emit(Opcode::TC_MM, {tc_dt, flags, l2.index, a0_op.index, b0_op.index, mt.index, nt.index, kt.index});
    pb.bind(k_issued);
    for (size_t p = 1; p < products.size(); ++p) {
      const auto [ap, bp] = operands(p);
      pb.emit(Opcode::TC_MM, {tc_dt, flags | 1, l2.index, ap.index, bp.index, mt.index, nt.index, kt.index});
    }
    if (split) {
      pb.emit(Opcode::SIGNAL, {kTc, PARTS_FREE});
    } else {
      if (!panel) pb.emit(Opcode::SIGNAL, {kTc, A_FREE});
      pb.emit(Opcode::SIGNAL, {kTc, B_FREE});
    }
    pb.emit(Opcode::XORI, {kslot.index, kslot.index, 1});
    pb.li(tmp, tk * am.col_stride * am.esize), pb.add(a_src, a_src, tmp);
    pb.li(tmp, tk * bm.row_stride * bm.esize), pb.add(b_src, b_src, tmp);
    pb.li(tmp, tk), pb.sub(k_left, k_left, tmp);
    pb.branch(Opcode::BLT, {kZero.index, k_left.index}, k_loop);
    pb.emit(Opcode::SIGNAL, {kTc, ACC_FULL});
    if (panel) {
      // The next tile starts a new panel when it starts a row of tiles; the tensor core frees
      // the panel after the last tile that uses it (that one, or this core's last tile).
      const Label same_row = pb.label(), release = pb.label(), kept = pb.label();
      pb.addi(tmp, t, 1), pb.li(tmp2, row_tiles), pb.emit(Opcode::REMU, {tmp2.index, tmp.index, tmp2.index});
      pb.li(new_panel, 0);
      pb.branch(Opcode::BNE, {tmp2.index, kZero.index}, same_row);
      pb.li(new_panel, 1);
      pb.bind(same_row);
      pb.branch(Opcode::BNE, {new_panel.index, kZero.index}, release);
      pb.branch(Opcode::BNE, {tmp.index, t_end.index}, kept);
      pb.bind(release);
      pb.emit(Opcode::SIGNAL, {kTc, A_FREE});
      pb.bind(kept);
    }

    // Epilogue on the vector unit, in f32 in the accumulator: alpha, bias, ops; then round.
    pb.emit(Opcode::WAIT, {kVec, ACC_FULL});
    pb.emit(Opcode::WAIT, {kVec, OUT_FREE});
    if (op.alpha != 1.0) pb.li(tmp2, alpha_at), pb.emit(Opcode::V_MUL, {f32, 3, l2.index, l2.index, tmp2.index, mt.index, nt.index});
    if (has_vectors) {
      // The scale multiplies the product, then the bias (times beta) and the residual are added: all in f32.
      pb.emit(Opcode::WAIT, {kVec, BIAS_FULL});
      std::vector<const TileVector*> in_order;
      for (const Role role : {Role::Scale, Role::Bias, Role::Residual})
        for (const TileVector& v : vectors)
          if (v.role == role) in_order.push_back(&v);
      for (const TileVector* vector : in_order) {
        const TileVector& v = *vector;
        pb.li(l0, v.raw0), pb.li(tmp, v.raw_bytes), pb.mul(tmp, tmp, slot), pb.add(l0, l0, tmp);
        pb.li(l1, v.f32_0), pb.li(tmp, v.f32_bytes), pb.mul(tmp, tmp, slot), pb.add(l1, l1, tmp);
        const Reg rows = v.mode == BiasMode::Row || v.mode == BiasMode::Scalar ? one : mt;
        const Reg cols = v.mode == BiasMode::Col || v.mode == BiasMode::Scalar ? one : nt;
        if (v.mx.dtype != DType::F32) pb.emit(Opcode::V_CVT, {f32, int64_t(v.mx.dtype), l1.index, l0.index, rows.index, cols.index});
        else pb.emit(Opcode::V_MOV, {f32, l1.index, l0.index, rows.index, cols.index});
        const bool is_bias = v.role == Role::Bias;
        if (is_bias && op.beta != 1.0) pb.li(tmp2, beta_at), pb.emit(Opcode::V_MUL, {f32, 3, l1.index, l1.index, tmp2.index, rows.index, cols.index});
        const int64_t bc = v.mode == BiasMode::Full ? 0 : v.mode == BiasMode::Row ? 1 : v.mode == BiasMode::Col ? 2 : 3;
        pb.emit(v.role == Role::Scale ? Opcode::V_MUL : Opcode::V_ADD, {f32, bc, l2.index, l2.index, l1.index, mt.index, nt.index});
      }
      pb.emit(Opcode::SIGNAL, {kVec, BIAS_FREE});
    }
    for (const OpKind step : op.epilogue) pb.emit(unary_opcode(step), {f32, l2.index, l2.index, mt.index, nt.index});
    pb.li(l0, o_bytes), pb.mul(l0, l0, slot), pb.addi(l0, l0, o0);
    if (integer) pb.emit(Opcode::V_MOV, {static_cast<int64_t>(DType::I32), l0.index, l2.index, mt.index, nt.index});  // the i32 sums as they are
    else if (c.dtype == DType::F32) pb.emit(Opcode::V_MOV, {f32, l0.index, l2.index, mt.index, nt.index});
    else pb.emit(Opcode::V_CVT, {dt, f32, l0.index, l2.index, mt.index, nt.index});
    pb.emit(Opcode::SIGNAL, {kVec, ACC_FREE});
    pb.emit(Opcode::SIGNAL, {kVec, OUT_FULL});

    // Store.
    pb.emit(Opcode::WAIT, {engine_of(ch_c), OUT_FULL});
    address(tmp2, c_sym, cm, m0, n0);
    pb.li(r_n2, 0), pb.li(ds2, 0), pb.li(ss2, 0);
    pb.muli(r_n0, nt, eo), pb.mov(r_n1, mt), pb.li(ds1, cm.row_stride * eo), pb.muli(ss1, nt, eo);
    dma(Opcode::DMA_ST, ch_c, tmp2, l0);
    pb.emit(Opcode::SIGNAL, {engine_of(ch_c), OUT_FREE});

    pb.emit(Opcode::XORI, {slot.index, slot.index, 1});
    pb.addi(t, t, 1);
    pb.branch(Opcode::BLT, {t.index, t_end.index}, tile);
    pb.bind(done);
    pb.emit(Opcode::HALT, {});
  }

  Kernel kernel;
  kernel.program = pb.finish();
  kernel.cores = cores;
  std::ostringstream plan;
  plan << "matmul: " << batch << " x [" << m << " x " << k << "] @ [" << k << " x " << n << "] in " << isa::dtype_name(dtype)
       << (split ? " as " + std::to_string(parts) + " bf16 parts (" + std::to_string(products.size()) + " tensor-core products per step)" : std::string())
       << (integer ? ", i32 accumulation (wrapping); tiles " : ", f32 accumulation; tiles ") << tm << " x " << tn << " x " << tk << " (M x N x K), " << tiles << " output tiles over " << cores
       << " cores; A " << layout(am) << ", B " << layout(bm) << (has_vectors && vectors[0].role == Role::Bias ? ", with bias" : "")
       << (vectors.size() > 1 && vectors[1].role == Role::Scale ? ", scaled" : "") << (residual ? ", plus a residual" : "");
  if (panel)
    plan << "; A panel resident (" << tm << " x " << k << ", loaded once per row of " << row_tiles << " tiles"
         << (a_over_batch ? ": its columns of every batch element" : "") << ")";
  if (!default_starts) plan << "; each core starts its part of a row at the column on the DRAM channels the cores before it use least";
  plan << "; estimate " << int64_t(estimate_cycles) << " cycles";
  if (op.alpha != 1.0) plan << ", alpha " << op.alpha;
  if (op.beta != 1.0) plan << ", beta " << op.beta;
  for (const OpKind step : op.epilogue) plan << ", then " << op_name(step);
  plan << "\n";
  kernel.plan = plan.str();
  return kernel;
}

}  // namespace npu::compiler
