// Fused scaled-dot-product attention, tiled the FlashAttention way:
//   out[b] = softmax(scale * q[b] @ k[b]^T, causal: key j > query i masked) @ v[b]
// with q [L, D], k [S, D], v [S, Dv] per batch element (batch and heads
// flattened as matmul does). The scores and probabilities stay on the core:
// DRAM sees Q and the output once, and K and V once per query tile.
//
// Work items are (batch element, query tile of br rows), dealt to the cores
// in a zigzag (causal items grow with the query position; dealing them
// forth and back keeps the cores' shares even). An item loads its Q tile once and
// walks the key/value tiles of bc rows, keeping per query row the running
// maximum m and sum l in f32:
//   S  = Q K^T                      tensor core, f32 in the accumulator (the K tile lies [bc, D]: the tb flag)
//   S *= scale; S = -inf above the diagonal (causal, only on tiles that cross it);
//   S += M (an additive mask's tile, from DRAM: a row when it is the same for every query;
//     a row whose keys are all -inf gives zeros, as PyTorch's attention does)
//     (a power-of-two scale, 1/sqrt(D) for D = 16, 64, 256, scales the Q tile
//     instead, once per item: exact in bf16 and f32, so the scores are the same bits)
//   m' = max(m, rowmax S); P = exp(S - m'); l = l * exp(m - m') + rowsum P
//     (P and its row sums one v.expsum: the special-function unit's pass, with no
//     v.sub, v.rsum or v.cvt over the tile beside it)
//   O  = O * exp(m - m') + P V      the vector unit rescales O in the accumulator, tc.mm adds P V
// P is rounded to the tensor core's input dtype before P V (as FlashAttention
// does; l sums it unrounded), and at the end out = O / l rounds once. Key
// tiles wholly above the diagonal are never loaded, and the last one an item
// sees is cut to the keys it can see.
//
// Engines, with two-slot rings between them (the protocol of matmul.cpp):
//   dma ch0:  Q tile per item, K tiles                          -> tc (Q via the vector unit when it scales it)
//   dma ch1:  V tiles                                           -> tc
//   dma ch3:  mask tiles (ch1 on a chip with fewer channels)   -> vector
//   tc:       S_{j+1} = Q K_{j+1}^T, then O += P_j V_j          -> vector (S), <- vector (P)
//             (the next scores are computed while the vector unit works on these)
//   vector:   softmax step j, O rescale; at the end O / l       -> dma ch2
//             (after the next item's Q and first scores are issued: the tensor core
//             computes those while the vector unit finishes this item)
//   dma ch2:  store the output tile
#include "attention.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <sstream>
#include <vector>

#include "f32_split.h"
#include "npusim/compiler/program_builder.h"
#include "npusim/isa/isa.h"
#include "npusim/sim/chip_peaks.h"

namespace npu::compiler {
namespace {

using isa::DType;
using isa::Opcode;


// One operand's strides and offset, in elements: [outer batch, inner batch, rows, head dim (stride 1)].
// The batch dims are the output's leading dims merged into at most two (batch and heads
// laid out apart, or a mask broadcast over the heads, do not merge into one).
struct Operand {
  std::array<int64_t, 2> batch_stride{0, 0};
  int64_t row_stride = 0;
  int64_t offset = 0;
};

// One core's local memory for query tiles of br rows and key tiles of bc rows.
struct Layout {
  // The per-key-step rings (K, V, S, P, the mask and the K and V parts) have
  // `steps` slots: two, or three where the vector unit splits f32 into parts
  // (it splits the next step's K and V before this step's softmax, into the
  // slot of two steps back, whose P V it has waited for). Q and the output: two.
  int64_t steps = 2;
  // Scratchpad addresses: the slots of each ring buffer (x_bytes apart).
  int64_t q = 0, q_bytes = 0, k = 0, k_bytes = 0, v = 0, v_bytes = 0, p = 0, p_bytes = 0, out = 0, out_bytes = 0;
  // Split f32 (f32_split.h): P's slot holds its parts (p_part_bytes apart); Q's
  // parts (two slots); each K/V parts slot holds K's parts then V's; and one f32
  // tile as large as the largest split, for the parts back in f32.
  int64_t p_part_bytes = 0, qp = 0, qp_bytes = 0, qp_part_bytes = 0, kvp = 0, kvp_bytes = 0, kp_part_bytes = 0, vp_part_bytes = 0;
  int64_t temp = 0;
  // br x 1 f32 row statistics: the running maximum (two buffers, swapped each
  // step), the running sum, one step's sum.
  int64_t max_a = 0, max_b = 0, sum = 0, step_sum = 0;
  int64_t scale = 0;  // one f32 (scaling the scores) or one element of q's dtype (scaling Q)
  // Causal only: an all -inf f32 tile; per element (k0 - q0) + i*nt + j (i32);
  // the mask (u8); per row i * (nt + 1) (i32); the row index i = 0 .. br-1
  // (i32); nt + 1 (one i32).
  int64_t neg_inf = 0, index = 0, mask = 0, row_limit = 0, row_index = 0, nt_plus_one = 0;
  // An additive mask: two slots of its tile (br x bc, or 1 x bc when every query has
  // the same row) in its dtype, the tile in f32 when that is another, f32's lowest
  // value and its smallest normal one.
  int64_t m = 0, m_bytes = 0, m_f32 = 0, lowest = 0, smallest = 0;
  int64_t scratchpad_bytes = 0;
  // Accumulator offsets (from isa::kAccumulatorBase): two slots of scores, then O.
  int64_t s = 0, s_bytes = 0, o = 0, accumulator_bytes = 0;

  // P is in the tensor core's input dtype: q's, or bf16 parts.
  // mask_esize: 0 without a mask; mask_rows: br, or 1 for a row per key tile.
  // parts: 0 where the tensor core takes q's dtype, else the bf16 parts of f32.
  Layout(int64_t br, int64_t bc, int64_t d, int64_t dv, int64_t esize, bool causal, int64_t mask_esize, int64_t mask_rows, int64_t parts) {
    int64_t at = 0;
    const auto take = [&at](int64_t bytes) {
      const int64_t start = at;
      at += align64(bytes);
      return start;
    };
    steps = parts ? 3 : 2;
    q_bytes = align64(br * d * esize), k_bytes = align64(bc * d * esize), v_bytes = align64(bc * dv * esize);
    p_part_bytes = align64(br * bc * (parts ? 2 : esize)), p_bytes = std::max<int64_t>(parts, 1) * p_part_bytes;
    out_bytes = align64(br * dv * esize);
    q = take(2 * q_bytes), k = take(steps * k_bytes), v = take(steps * v_bytes), p = take(steps * p_bytes), out = take(2 * out_bytes);
    if (parts) {
      qp_part_bytes = align64(br * d * 2), kp_part_bytes = align64(bc * d * 2), vp_part_bytes = align64(bc * dv * 2);
      qp_bytes = parts * qp_part_bytes, kvp_bytes = parts * (kp_part_bytes + vp_part_bytes);
      qp = take(2 * qp_bytes), kvp = take(steps * kvp_bytes);
      if (parts > 1) temp = take(4 * std::max({br * d, bc * d, bc * dv, br * bc}));
    }
    max_a = take(br * 4), max_b = take(br * 4), sum = take(br * 4), step_sum = take(br * 4);
    scale = take(4);
    if (causal) {
      neg_inf = take(br * bc * 4), index = take(br * bc * 4), mask = take(br * bc);
      row_limit = take(br * 4), row_index = take(br * 4), nt_plus_one = take(4);
    }
    if (mask_esize) {
      m_bytes = align64(mask_rows * bc * mask_esize);
      m = take(steps * m_bytes), lowest = take(4), smallest = take(4);
      if (mask_esize != 4) m_f32 = take(mask_rows * bc * 4);
    }
    scratchpad_bytes = at;
    s_bytes = align64(br * bc * 4);
    s = 0, o = steps * s_bytes;
    accumulator_bytes = o + align64(br * dv * 4);
  }
};

// The shape of the problem, for choosing tiles.
struct Problem {
  int64_t batch, l, s, d, dv, esize;
  bool causal, scale_scores;  // scale_scores: a vector pass over every score tile
  int64_t mask_esize = 0;     // 0: no mask
  bool mask_row = false;      // the mask is one row for every query
  int64_t parts = 0;          // f32 split into bf16 parts (0: none)
};

// Whether multiplying by `scale` only changes exponents: +-2^k, well inside
// the range where a bf16 or f32 q times it stays normal (f16's range is too
// narrow: q / 8 is subnormal below 2^-11 and loses bits).
bool is_power_of_two(double scale) {
  int exponent = 0;
  return std::fabs(std::frexp(scale, &exponent)) == 0.5 && exponent > -64 && exponent < 64;
}

// Estimated cycles of the kernel with these tiles, from the config's costs.
// Per key step the engines overlap, so a step costs the slowest of: the
// vector unit's softmax work, the tensor core's two products, the K and V
// loads at this core's share of DRAM bandwidth, and the control unit's
// issue of the step's ~80 instructions.
double estimate_cycles(const Problem& pr, int64_t br, int64_t bc, const sim::ChipConfig& config) {
  const sim::VectorUnitConfig& vu = config.core.vector_unit;
  const auto vec = [&](Opcode opcode, int64_t elements) {
    const sim::VectorOpCost& cost = vu.cost(opcode);
    return double(cost.latency_cycles) + double(ceil_div(elements, vu.lanes) * cost.cycles_per_vector);
  };
  const int64_t rows = config.core.tensor_core.rows, cols = config.core.tensor_core.cols;
  const bool double_buffered = config.core.tensor_core.weight_double_buffering;
  // A product on the tensor core: with double-buffered weights its first weights load (k rows at
  // most), then its m rows stream once per fold, and its results are complete a drain later, which
  // the next product overlaps (tc_drain); without, every fold fills and drains.
  const auto tc = [&](int64_t m, int64_t n, int64_t k) {
    const double folds = double(ceil_div(k, rows) * ceil_div(n, cols));
    return double_buffered ? double(std::min(k, rows)) + folds * double(std::max(m, rows)) : folds * double(m + rows + cols);
  };
  const auto tc_drain = [&](int64_t n, int64_t k) { return double_buffered ? double(std::min(k, rows) + std::min(n, cols) - 2) : 0.0; };
  const int64_t tile = br * bc, items = pr.batch * ceil_div(pr.l, br);
  const int64_t active = std::min<int64_t>(config.num_cores, items);
  const double dram_share = double(sim::peak_dram_bytes_per_cycle(config)) / double(active);
  // Splitting n elements into the parts: a conversion per part, and per part but the last one back and a subtraction.
  const auto split = [&](int64_t elements) {
    return double(pr.parts) * vec(Opcode::V_CVT, elements) + double(pr.parts - 1) * (vec(Opcode::V_CVT, elements) + vec(Opcode::V_SUB, elements));
  };
  double vector = vec(Opcode::V_RMAX, tile) + vec(Opcode::V_EXPSUM, tile) + vec(Opcode::V_MAX, br) + vec(Opcode::V_SUB, br) +
                  vec(Opcode::V_EXP, br) + vec(Opcode::V_MUL, br) + vec(Opcode::V_ADD, br) + vec(Opcode::V_MUL, br * pr.dv);
  // Split f32: P's parts, and K's and V's parts.
  if (pr.parts) vector += split(tile) + split(bc * pr.d) + split(bc * pr.dv);
  if (pr.scale_scores) vector += vec(Opcode::V_MUL, tile);
  const int64_t mask_tile = pr.mask_row ? bc : tile;
  if (pr.mask_esize) vector += vec(Opcode::V_ADD, tile) + (pr.mask_esize != 4 ? vec(Opcode::V_CVT, mask_tile) : 0.0);
  const double products = pr.parts ? double(pr.parts * (pr.parts + 1) / 2) : 1.0;
  const double tensor = (tc(br, bc, pr.d) + tc(br, pr.dv, bc)) * products;
  const double loads = double(bc * (pr.d + pr.dv) * pr.esize + (pr.mask_esize ? mask_tile * pr.mask_esize : 0)) / dram_share +
                       (pr.mask_esize ? 3.0 : 2.0) * config.core.dma.descriptor_cycles;
  // (split f32: some 14 more per product, for its operands' addresses, and 30 for the splits)
  const double control = (80.0 + (pr.parts ? 14.0 * products + 30.0 : 0.0)) * config.core.control.issue_cycles;
  const double step = std::max({vector, tensor, loads, control});
  // Causal items see half the keys on average.
  const int64_t steps = ceil_div(pr.causal ? std::min(pr.s, (pr.l + br) / 2) : pr.s, bc);
  // An item's output waits for its last P V, then O / l; the next item's Q loads and its first
  // scores are computed meanwhile (Q's bytes count with the output's against DRAM).
  const double output = tc(br, pr.dv, bc) * products + tc_drain(pr.dv, bc) + vec(Opcode::V_DIV, br * pr.dv) + vec(Opcode::V_CVT, br * pr.dv);
  const double item = double(steps) * step + std::max(output + (pr.parts ? split(br * pr.d) : 0.0), double(br * (pr.d + pr.dv) * pr.esize) / dram_share);
  return double(ceil_div(items, config.num_cores)) * item;
}

}  // namespace

Kernel lower_attention(const OpDesc& op, const sim::ChipConfig& config) {
  if (op.inputs.size() != 3 && op.inputs.size() != 4) throw std::invalid_argument("attention takes q, k, v and optionally an additive mask");
  const TensorDesc &q = op.inputs[0], &k = op.inputs[1], &v = op.inputs[2], &out = op.output;
  const bool has_mask = op.inputs.size() == 4;
  const TensorDesc& mask = op.inputs.back();  // only read when has_mask
  for (const TensorDesc* t : {&q, &k, &v, &out, &mask}) {
    if (t->shape.size() < 2) throw std::invalid_argument("attention operands have at least 2 dims");
    for (const int64_t s : t->strides)
      if (s < 0) throw UnsupportedOp("attention with negative strides");
  }
  const auto dim = [](const TensorDesc& t, size_t from_end) { return t.shape[t.shape.size() - from_end]; };
  const int64_t seq_q = dim(q, 2), d = dim(q, 1), seq_k = dim(k, 2), dv = dim(v, 1);
  if (dim(k, 1) != d) throw std::invalid_argument("attention: q is [.., L, D] and k [.., S, D]: D differs");
  if (dim(v, 2) != seq_k) throw std::invalid_argument("attention: k is [.., S, D] and v [.., S, Dv]: S differs");
  if (dim(out, 2) != seq_q || dim(out, 1) != dv) throw std::invalid_argument("attention: the output is not [.., L, Dv]");
  const DType dtype = q.dtype;
  if (k.dtype != dtype || v.dtype != dtype || out.dtype != dtype)
    throw std::invalid_argument("attention: q, k, v and the output have one dtype (cast first)");
  const auto& accepted = config.core.tensor_core.input_dtypes;
  const auto takes = [&](DType t) { return std::find(accepted.begin(), accepted.end(), t) != accepted.end(); };
  if (!isa::dtype_is_float(dtype)) throw UnsupportedOp("attention on " + std::string(isa::dtype_name(dtype)) + ": floats only");
  // f32 on a tensor core without f32: Q, K, V and P as bf16 parts (f32_split.h), as matmul does.
  const bool split = dtype == DType::F32 && !takes(DType::F32) && takes(DType::BF16);
  if (!split && !takes(dtype))
    throw UnsupportedOp("attention in " + std::string(isa::dtype_name(dtype)) + ": this chip's tensor core does not take it (cast to bf16)");
  const int64_t parts = split ? f32_split_parts(op.f32_precision) : 0;
  const std::vector<std::pair<int64_t, int64_t>> products = f32_split_products(std::max<int64_t>(parts, 1));
  // The DMA copies whole rows of the head dim; other layouts would need element DMA.
  for (const TensorDesc* t : {&q, &k, &v, &out})
    if (t->shape.back() > 1 && t->strides.back() != 1) throw UnsupportedOp("attention with a strided last dim (head dim)");
  if (has_mask) {
    if (op.is_causal) throw std::invalid_argument("attention: a mask and is_causal both (PyTorch refuses them together too)");
    if (mask.dtype != DType::F32 && mask.dtype != dtype)
      throw std::invalid_argument("attention: the mask is f32 or q's dtype, got " + std::string(isa::dtype_name(mask.dtype)));
    if (mask.shape.size() > out.shape.size() || (dim(mask, 2) != 1 && dim(mask, 2) != seq_q) || (dim(mask, 1) != 1 && dim(mask, 1) != seq_k))
      throw std::invalid_argument("attention: the mask " + mask.to_string() + " does not broadcast to the scores [.., L, S]");
    if (dim(mask, 1) != seq_k || (seq_k > 1 && mask.strides.back() != 1))
      throw UnsupportedOp("attention with a mask that is not contiguous along the keys");
  }

  // Batch: the output's leading dims, merged where every operand allows, into at most
  // two (outer, inner); q, k, v and the mask broadcast over them.
  const size_t batch_rank = out.shape.size() - 2;
  const TensorDesc* const operands[] = {&q, &k, &v, &out, &mask};
  const size_t count = has_mask ? 5 : 4;
  std::vector<std::pair<int64_t, std::array<int64_t, 5>>> dims;  // (size, strides of q, k, v, out, mask)
  for (size_t i = 0; i < batch_rank; ++i) {
    if (out.shape[i] == 1) continue;
    std::array<int64_t, 5> s{};
    for (size_t n = 0; n < count; ++n) {
      const TensorDesc& t = *operands[n];
      const int64_t at = int64_t(i) - int64_t(batch_rank) + int64_t(t.shape.size()) - 2;  // the same batch dim in t
      if (at < 0 || t.shape[size_t(at)] == 1) continue;                                  // broadcast: stride 0
      if (t.shape[size_t(at)] != out.shape[i]) throw std::invalid_argument("attention: batch dims do not broadcast");
      s[n] = t.strides[size_t(at)];
    }
    bool merges = !dims.empty();
    for (size_t n = 0; n < count && merges; ++n) merges = dims.back().second[n] == s[n] * out.shape[i];
    if (merges) dims.back().first *= out.shape[i], dims.back().second = s;
    else dims.push_back({out.shape[i], s});
  }
  if (dims.size() > 2) throw UnsupportedOp("attention with batch dims that do not merge into two");
  while (dims.size() < 2) dims.insert(dims.begin(), {1, std::array<int64_t, 5>{}});
  const int64_t batch = dims[0].first * dims[1].first, inner_batch = dims[1].first;
  Operand qo, ko, vo, oo, mo;
  Operand* const layouts[] = {&qo, &ko, &vo, &oo, &mo};
  for (size_t n = 0; n < count; ++n) {
    const TensorDesc& t = *operands[n];
    layouts[n]->batch_stride = {dims[0].second[n], dims[1].second[n]};
    layouts[n]->row_stride = t.shape[t.shape.size() - 2] == 1 ? 0 : t.strides[t.strides.size() - 2];
    layouts[n]->offset = t.storage_offset;
  }
  const bool mask_row = has_mask && mo.row_stride == 0;  // the same mask row for every query
  const int64_t mask_esize = has_mask ? isa::dtype_size_bytes(mask.dtype) : 0;

  const auto empty_program = [&](const std::string& why) {
    ProgramBuilder empty("scaled_dot_product_attention (generated, empty output)");
    empty.output("out", dtype, {1});
    for (size_t i = 0; i < op.inputs.size(); ++i) empty.input("in" + std::to_string(i), op.inputs[i].dtype, {1});
    empty.emit(Opcode::HALT, {});
    Kernel kernel;
    kernel.program = empty.finish();
    kernel.plan = "scaled_dot_product_attention: " + why + ", nothing to compute\n";
    return kernel;
  };
  if (batch * seq_q * dv == 0) return empty_program("empty output");
  if (seq_k == 0) throw UnsupportedOp("attention over no keys (S = 0): softmax of an empty row");
  if (d == 0) throw UnsupportedOp("attention with head dim 0");

  // Tiles: among those whose buffers fit, the ones within 3% of the fewest
  // estimated cycles, and of those the one that moves the fewest DRAM bytes
  // (K and V are read once per query tile: the tallest query tiles), then the
  // fewest key steps (the widest key tiles: decode at 1024 keys in the lowest
  // estimate's 1 x 256 ran 2.3% slower on base with the cores doubled). The
  // estimate takes DRAM at its peak; DRAM-heavy tiles lose more than it says
  // when the cores contend. (Within 5%, 4 x 12 x 512 x 64 with a mask took
  // 512 x 64 tiles, estimated 3.6% above 256 x 128, and ran 4.4% slower.)
  const int64_t e = isa::dtype_size_bytes(dtype);
  const bool causal = op.is_causal, scale_q = op.scale != 1.0 && dtype != DType::F16 && is_power_of_two(op.scale);
  const bool scale_scores = op.scale != 1.0 && !scale_q;
  const Problem problem{batch, seq_q, seq_k, d, dv, e, causal, scale_scores, mask_esize, mask_row, parts};
  const int64_t scratchpad = int64_t(config.core.scratchpad.size_bytes), accumulator = int64_t(config.core.accumulator.size_bytes);
  struct Candidate {
    int64_t br, bc;
    double cycles;
  };
  std::vector<Candidate> fitting;
  for (const int64_t cr : {1024, 512, 256, 128, 64, 32, 16, 8, 4, 2, 1})
    for (const int64_t cc : {1024, 512, 256, 128, 64, 32, 16, 8, 4, 2, 1}) {
      const int64_t r = std::min(seq_q, cr), c = std::min(seq_k, cc);
      const Layout fit(r, c, d, dv, e, causal, mask_esize, mask_row ? 1 : r, parts);
      if (fit.scratchpad_bytes <= scratchpad && fit.accumulator_bytes <= accumulator) fitting.push_back({r, c, estimate_cycles(problem, r, c, config)});
    }
  if (fitting.empty())
    throw UnsupportedOp("attention with head dims " + std::to_string(d) + " / " + std::to_string(dv) +
                        ": not even one query row and one key fit this chip's scratchpad and accumulator");
  double best = fitting[0].cycles;
  for (const Candidate& c : fitting) best = std::min(best, c.cycles);
  const Candidate* chosen = nullptr;
  for (const Candidate& c : fitting)
    if (c.cycles <= 1.03 * best && (!chosen || c.br > chosen->br || (c.br == chosen->br && c.bc > chosen->bc))) chosen = &c;
  const int64_t br = chosen->br, bc = chosen->bc;
  const Layout lay(br, bc, d, dv, e, causal, mask_esize, mask_row ? 1 : br, parts);
  const int64_t q_tiles = ceil_div(seq_q, br), items = batch * q_tiles;
  const unsigned cores = unsigned(std::max<int64_t>(1, std::min<int64_t>(config.num_cores, items)));
  const unsigned channels = config.core.dma.channels;
  const unsigned ch_q = 0, ch_v = std::min(1u, channels - 1), ch_out = std::min(2u, channels - 1), ch_m = channels > 3 ? 3 : ch_v;

  ProgramBuilder pb("scaled_dot_product_attention (generated)");
  const uint16_t out_sym = pb.output("out", dtype, {uint64_t(std::max<int64_t>(out.storage_extent(), 1))});
  const uint16_t q_sym = pb.input("in0", dtype, {uint64_t(std::max<int64_t>(q.storage_extent(), 1))});
  const uint16_t k_sym = pb.input("in1", dtype, {uint64_t(std::max<int64_t>(k.storage_extent(), 1))});
  const uint16_t v_sym = pb.input("in2", dtype, {uint64_t(std::max<int64_t>(v.storage_extent(), 1))});
  const uint16_t m_sym = has_mask ? pb.input("in3", mask.dtype, {uint64_t(std::max<int64_t>(mask.storage_extent(), 1))}) : 0;

  // Split f32: Q, K and V go to the vector unit (Q_LOADED, K_FULL, V_FULL), which frees K's and V's
  // slots once it has split them and tells the tensor core with PARTS_FULL.
  enum : int64_t { Q_LOADED, Q_FULL, Q_FREE, K_FULL, K_FREE, V_FULL, V_FREE, S_FULL, S_FREE, P_FULL, PV_DONE, OUT_FULL, OUT_FREE, M_FULL, M_FREE,
                   PARTS_FULL };
  static_assert(PARTS_FULL < int64_t(isa::kNumSemaphores));
  const int64_t kCtl = 0, kTc = 5, kVec = 6;
  const auto engine_of = [](unsigned channel) { return int64_t{1} + channel; };
  const int64_t dt = int64_t(dtype), f32 = int64_t(DType::F32), i32 = int64_t(DType::I32);
  const int64_t tc_dt = split ? int64_t(DType::BF16) : dt;
  constexpr int64_t kFull = 0, kRow = 1, kCol = 2, kScalar = 3, kAxis1 = 1, kAcc = 1, kTb = 4;
  const int64_t acc0 = int64_t(isa::kAccumulatorBase);

  const Label done = pb.label();
  for (int i = 0; i < 2; ++i)
    for (const int64_t s : {Q_FREE, K_FREE, V_FREE, S_FREE, OUT_FREE, M_FREE}) pb.emit(Opcode::SIGNAL, {kCtl, s});
  // Items are dealt in a zigzag: in round r, core c of P takes item r*P + c
  // when r is even and r*P + P-1-c when it is odd, so that the cores that
  // get the lightest causal items (the first query tiles of a batch element)
  // in one round get the heaviest in the next.
  const Reg item = pb.reg(), ncores = pb.reg(), round = pb.reg(), mine = pb.reg(), mirror = pb.reg();
  const Reg tmp = pb.reg(), tmp2 = pb.reg(), one = pb.reg();
  pb.emit(Opcode::CSRR, {mine.index, 0});
  pb.emit(Opcode::CSRR, {ncores.index, 1});
  pb.sub(mirror, ncores, mine), pb.addi(mirror, mirror, -1);
  pb.li(round, 0), pb.mov(item, mine);
  pb.li(tmp, items);
  pb.branch(Opcode::BGE, {item.index, tmp.index}, done);
  pb.li(one, 1);
  const Reg l0 = pb.reg(), l1 = pb.reg(), l2 = pb.reg();  // local addresses
  // Constants, once per core: the scale; the -inf tile and row indices the causal mask selects with.
  const auto fill = [&](int64_t dtype_code, int64_t at, uint32_t bits, Reg rows, Reg cols) {
    pb.li(tmp, bits), pb.li(tmp2, at);
    pb.emit(Opcode::V_FILL, {dtype_code, tmp2.index, tmp.index, rows.index, cols.index});
  };
  if (op.scale != 1.0) {  // in f32 for the scores, in q's dtype (exactly: a power of two) for Q
    fill(scale_q ? dt : f32, lay.scale, f32_bits(op.scale), one, one);
  }
  if (has_mask) fill(f32, lay.lowest, 0xff7fffffu, one, one), fill(f32, lay.smallest, 0x00800000u, one, one);
  if (causal) {
    pb.li(l0, br), pb.li(l1, bc);
    fill(f32, lay.neg_inf, 0xff800000u, l0, l1);  // f32 -inf
    pb.li(tmp2, lay.row_index);
    pb.emit(Opcode::V_IOTA, {tmp2.index, kZero.index, l0.index, one.index});
  }

  const Reg bidx = pb.reg(), q0 = pb.reg(), mt = pb.reg(), k_end = pb.reg(), k0 = pb.reg(), nt = pb.reg();
  const Reg slot = pb.reg(), islot = pb.reg(), next_k0 = pb.reg(), next_slot = pb.reg();
  const Reg k_base = pb.reg(), v_base = pb.reg(), m_cur = pb.reg(), m_new = pb.reg();
  const Reg mask_base = has_mask ? pb.reg() : kZero;  // the mask's row q0 of this item's batch element
  const Reg n0 = pb.reg(), n1 = pb.reg(), ds1 = pb.reg(), ss1 = pb.reg();
  pb.li(slot, 0), pb.li(islot, 0);  // the K/V/S/P rings' slot (per key step), the Q/out rings' slot (per item)
  pb.li(m_cur, lay.max_a), pb.li(m_new, lay.max_b);

  const auto dma = [&](Opcode opcode, unsigned channel, Reg dst, Reg src) {
    pb.emit(opcode, {int64_t(channel), dst.index, src.index, n0.index, n1.index, kZero.index, ds1.index, ss1.index, kZero.index,
                     kZero.index});
  };
  // rows x cols elements, `row_stride` apart in DRAM, dense locally (a store swaps the strides).
  const auto tile_shape = [&](Reg rows, int64_t cols, int64_t row_stride, bool store) {
    pb.li(n0, cols * e), pb.mov(n1, rows);
    pb.li(store ? ss1 : ds1, cols * e), pb.li(store ? ds1 : ss1, row_stride * e);
  };
  // dst = base + which * slot_bytes (which: a slot register, 0 / 1).
  const auto slot_address = [&](Reg dst, int64_t base, int64_t slot_bytes, Reg which) {
    pb.li(dst, slot_bytes), pb.mul(dst, dst, which), pb.addi(dst, dst, base);
  };
  // dst = the global address of row `row` of an operand's batch element bidx.
  // (oe: the operand's element size; n0 is free whenever this runs)
  const auto row_address = [&](Reg dst, uint16_t symbol, const Operand& o, Reg row, int64_t oe) {
    pb.emit(Opcode::LA, {dst.index, symbol});
    if (o.offset) pb.li(tmp, o.offset * oe), pb.add(dst, dst, tmp);
    if (o.batch_stride[0]) {  // batch element bidx is (bidx / inner_batch, bidx % inner_batch)
      pb.li(tmp, inner_batch), pb.emit(Opcode::DIVU, {tmp.index, bidx.index, tmp.index});
      pb.li(n0, o.batch_stride[0] * oe), pb.mul(tmp, tmp, n0), pb.add(dst, dst, tmp);
    }
    if (o.batch_stride[1] && inner_batch == batch) {
      pb.li(tmp, o.batch_stride[1] * oe), pb.mul(tmp, tmp, bidx), pb.add(dst, dst, tmp);
    } else if (o.batch_stride[1]) {
      pb.li(tmp, inner_batch), pb.emit(Opcode::REMU, {tmp.index, bidx.index, tmp.index});
      pb.li(n0, o.batch_stride[1] * oe), pb.mul(tmp, tmp, n0), pb.add(dst, dst, tmp);
    }
    if (o.row_stride && row.index != 0) pb.li(tmp, o.row_stride * oe), pb.mul(tmp, tmp, row), pb.add(dst, dst, tmp);
  };
  // nt = the keys of the tile at key row `first`: up to bc, and none past k_end.
  const auto tile_keys = [&](Reg dst, Reg first) { pb.li(tmp, bc), pb.sub(dst, k_end, first), pb.min(dst, dst, tmp); };

  // Key step at `first` in ring slot `which`: load K and V, then S = Q K^T.
  const auto issue_scores = [&](Reg first, Reg which, Reg keys) {
    tile_keys(keys, first);
    pb.emit(Opcode::WAIT, {engine_of(ch_q), K_FREE});
    tile_shape(keys, d, ko.row_stride, false);
    pb.li(tmp2, ko.row_stride * e), pb.mul(tmp2, tmp2, first), pb.add(tmp2, tmp2, k_base);
    slot_address(l0, lay.k, lay.k_bytes, which);
    dma(Opcode::DMA_LD, ch_q, l0, tmp2);
    pb.emit(Opcode::SIGNAL, {engine_of(ch_q), K_FULL});
    pb.emit(Opcode::WAIT, {engine_of(ch_v), V_FREE});
    tile_shape(keys, dv, vo.row_stride, false);
    pb.li(tmp2, vo.row_stride * e), pb.mul(tmp2, tmp2, first), pb.add(tmp2, tmp2, v_base);
    slot_address(l1, lay.v, lay.v_bytes, which);
    dma(Opcode::DMA_LD, ch_v, l1, tmp2);
    pb.emit(Opcode::SIGNAL, {engine_of(ch_v), V_FULL});
    if (has_mask) {  // the mask's [mt (or 1), keys] tile, dense locally
      pb.emit(Opcode::WAIT, {engine_of(ch_m), M_FREE});
      pb.muli(n0, keys, mask_esize), pb.mov(ds1, n0);
      if (mask_row) pb.li(n1, 1);
      else pb.mov(n1, mt);
      pb.li(ss1, mo.row_stride * mask_esize);
      pb.muli(tmp2, first, mask_esize), pb.add(tmp2, tmp2, mask_base);
      slot_address(l1, lay.m, lay.m_bytes, which);
      dma(Opcode::DMA_LD, ch_m, l1, tmp2);
      pb.emit(Opcode::SIGNAL, {engine_of(ch_m), M_FULL});
    }
    if (!split) {
      pb.emit(Opcode::WAIT, {kTc, K_FULL});
      pb.emit(Opcode::WAIT, {kTc, S_FREE});
      slot_address(l2, acc0 + lay.s, lay.s_bytes, which);
      slot_address(l1, lay.q, lay.q_bytes, islot);
      pb.li(tmp2, d);
      pb.emit(Opcode::TC_MM, {dt, kTb, l2.index, l1.index, l0.index, mt.index, keys.index, tmp2.index});
      pb.emit(Opcode::SIGNAL, {kTc, K_FREE});
      pb.emit(Opcode::SIGNAL, {kTc, S_FULL});
      return;
    }
    // Split f32: the vector unit splits K and V into this slot's parts (before this step's
    // softmax, so that the tensor core's scores overlap it), then S = sum of Q_i K_j^T.
    pb.li(l2, lay.temp);
    pb.emit(Opcode::WAIT, {kVec, K_FULL});
    slot_address(l0, lay.k, lay.k_bytes, which), slot_address(l1, lay.kvp, lay.kvp_bytes, which), pb.li(tmp2, d);
    emit_f32_split(pb, parts, l0, l1, lay.kp_part_bytes, l2, keys, tmp2);
    pb.emit(Opcode::SIGNAL, {kVec, K_FREE});
    pb.emit(Opcode::WAIT, {kVec, V_FULL});
    slot_address(l0, lay.v, lay.v_bytes, which), slot_address(l1, lay.kvp + parts * lay.kp_part_bytes, lay.kvp_bytes, which), pb.li(tmp2, dv);
    emit_f32_split(pb, parts, l0, l1, lay.vp_part_bytes, l2, keys, tmp2);
    pb.emit(Opcode::SIGNAL, {kVec, V_FREE});
    pb.emit(Opcode::SIGNAL, {kVec, PARTS_FULL});
    pb.emit(Opcode::WAIT, {kTc, PARTS_FULL});
    pb.emit(Opcode::WAIT, {kTc, S_FREE});
    slot_address(l2, acc0 + lay.s, lay.s_bytes, which);
    pb.li(tmp2, d);
    for (size_t n = 0; n < products.size(); ++n) {
      slot_address(l1, lay.qp + products[n].first * lay.qp_part_bytes, lay.qp_bytes, islot);
      slot_address(l0, lay.kvp + products[n].second * lay.kp_part_bytes, lay.kvp_bytes, which);
      pb.emit(Opcode::TC_MM, {tc_dt, kTb | (n ? kAcc : 0), l2.index, l1.index, l0.index, mt.index, keys.index, tmp2.index});
    }
    pb.emit(Opcode::SIGNAL, {kTc, S_FULL});
  };
  const auto v1 = [&](Opcode opcode, Reg dst, Reg src, Reg rows, Reg cols) {
    pb.emit(opcode, {f32, dst.index, src.index, rows.index, cols.index});
  };
  const auto v2 = [&](Opcode opcode, int64_t bc_mode, Reg dst, Reg a, Reg b, Reg rows, Reg cols) {
    pb.emit(opcode, {f32, bc_mode, dst.index, a.index, b.index, rows.index, cols.index});
  };
  // f32 to q's dtype, the output's.
  const auto to_q_dtype = [&](Reg dst, Reg src, Reg rows, Reg cols) {
    if (dtype == DType::F32) v1(Opcode::V_MOV, dst, src, rows, cols);
    else pb.emit(Opcode::V_CVT, {dt, f32, dst.index, src.index, rows.index, cols.index});
  };

  // ---- A work item's start: batch element bidx, query rows q0 .. q0 + mt; its Q, and its first scores. ----
  const auto start_item = [&] {
    pb.li(tmp, q_tiles);
    pb.emit(Opcode::DIVU, {bidx.index, item.index, tmp.index});
    pb.emit(Opcode::REMU, {q0.index, item.index, tmp.index});
    pb.muli(q0, q0, br);
    pb.li(tmp, seq_q), pb.sub(mt, tmp, q0), pb.li(tmp, br), pb.min(mt, mt, tmp);
    pb.li(k_end, seq_k);
    if (causal) pb.add(tmp, q0, mt), pb.min(k_end, k_end, tmp);  // query i sees keys j <= i
    row_address(k_base, k_sym, ko, kZero, e);
    row_address(v_base, v_sym, vo, kZero, e);
    if (has_mask) row_address(mask_base, m_sym, mo, q0, mask_esize);
    // Q, once per item.
    pb.emit(Opcode::WAIT, {engine_of(ch_q), Q_FREE});
    row_address(tmp2, q_sym, qo, q0, e);
    tile_shape(mt, d, qo.row_stride, false);
    slot_address(l0, lay.q, lay.q_bytes, islot);
    dma(Opcode::DMA_LD, ch_q, l0, tmp2);
    if (scale_q || split) {
      pb.emit(Opcode::SIGNAL, {engine_of(ch_q), Q_LOADED});
      pb.emit(Opcode::WAIT, {kVec, Q_LOADED});
      pb.li(tmp2, d);
      if (scale_q) pb.li(tmp, lay.scale), pb.emit(Opcode::V_MUL, {dt, kScalar, l0.index, l0.index, tmp.index, mt.index, tmp2.index});
      if (split) slot_address(l1, lay.qp, lay.qp_bytes, islot), pb.li(l2, lay.temp), emit_f32_split(pb, parts, l0, l1, lay.qp_part_bytes, l2, mt, tmp2);
      pb.emit(Opcode::SIGNAL, {kVec, Q_FULL});
    } else {
      pb.emit(Opcode::SIGNAL, {engine_of(ch_q), Q_FULL});
    }
    pb.emit(Opcode::WAIT, {kTc, Q_FULL});
    pb.li(k0, 0);
    issue_scores(k0, slot, nt);
  };

  // ---- An item's output, O / l rounded once and stored, once the next item has started: the tensor core
  // then computes the next item's first scores while the vector unit works on this output (in program
  // order after it, they waited for it: 29.1 k cycles for 1 x 12 x 512 x 64 on base). The item's rows
  // are in next_k0, its output address in next_slot and its output slot is the other one (free registers
  // until the next item's key loop). ----
  const auto finish_item = [&] {
    const Reg rows = next_k0, out_at = next_slot;
    pb.emit(Opcode::WAIT, {kVec, PV_DONE});
    pb.emit(Opcode::WAIT, {kVec, OUT_FREE});
    pb.li(l0, acc0 + lay.o), pb.li(tmp, lay.sum), pb.li(tmp2, dv);
    // A row the mask hides wholly has l = 0 and O = 0: l = max(l, smallest normal) makes it 0, not NaN,
    // as PyTorch's attention gives (its safe softmax); every other row has l >= 1.
    if (has_mask) pb.li(l1, lay.smallest), v2(Opcode::V_MAX, kScalar, tmp, tmp, l1, rows, one);
    v2(Opcode::V_DIV, kCol, l0, l0, tmp, rows, tmp2);
    pb.emit(Opcode::XORI, {tmp.index, islot.index, 1});
    slot_address(l1, lay.out, lay.out_bytes, tmp);
    to_q_dtype(l1, l0, rows, tmp2);
    pb.emit(Opcode::SIGNAL, {kVec, OUT_FULL});
    pb.emit(Opcode::WAIT, {engine_of(ch_out), OUT_FULL});
    tile_shape(rows, dv, oo.row_stride, true);
    dma(Opcode::DMA_ST, ch_out, out_at, l1);
    pb.emit(Opcode::SIGNAL, {engine_of(ch_out), OUT_FREE});
  };

  start_item();
  const Label item_loop = pb.label();
  pb.bind(item_loop);

  // ---- Key step: the next step's scores first, then this step's softmax and P V. ----
  const Label key_loop = pb.label(), no_next = pb.label();
  pb.bind(key_loop);
  pb.addi(next_k0, k0, bc);
  if (lay.steps == 2) {
    pb.emit(Opcode::XORI, {next_slot.index, slot.index, 1});
  } else {
    pb.addi(next_slot, slot, 1), pb.li(tmp, lay.steps), pb.emit(Opcode::REMU, {next_slot.index, next_slot.index, tmp.index});
  }
  pb.branch(Opcode::BGE, {next_k0.index, k_end.index}, no_next);
  issue_scores(next_k0, next_slot, nt);  // nt is this step's again just below
  pb.bind(no_next);
  tile_keys(nt, k0);

  pb.emit(Opcode::WAIT, {kVec, S_FULL});
  const Reg s_at = l2;
  slot_address(s_at, acc0 + lay.s, lay.s_bytes, slot);
  if (scale_scores) pb.li(tmp, lay.scale), v2(Opcode::V_MUL, kScalar, s_at, s_at, tmp, mt, nt);
  if (has_mask) {
    pb.emit(Opcode::WAIT, {kVec, M_FULL});
    slot_address(l0, lay.m, lay.m_bytes, slot);
    const Reg mask_rows = mask_row ? one : mt;
    if (mask.dtype != DType::F32) {
      pb.li(l1, lay.m_f32);
      pb.emit(Opcode::V_CVT, {f32, int64_t(mask.dtype), l1.index, l0.index, mask_rows.index, nt.index});
      pb.mov(l0, l1);
    }
    v2(Opcode::V_ADD, mask_row ? kRow : kFull, s_at, s_at, l0, mt, nt);
    pb.emit(Opcode::SIGNAL, {kVec, M_FREE});
  }
  if (causal) {
    // Only a tile with a key after its first query, k0 + nt - 1 > q0, has anything to mask.
    const Label unmasked = pb.label();
    pb.add(tmp, k0, nt), pb.addi(tmp, tmp, -1);
    pb.branch(Opcode::BGE, {q0.index, tmp.index}, unmasked);
    // Key k0 + j comes after query q0 + i when (k0 - q0) + i*nt + j > i*(nt + 1): one iota
    // tile against one per-row limit, no division.
    pb.addi(tmp, nt, 1), pb.li(tmp2, lay.nt_plus_one);
    pb.emit(Opcode::V_FILL, {i32, tmp2.index, tmp.index, one.index, one.index});
    pb.li(l0, lay.row_index), pb.li(l1, lay.row_limit);
    pb.emit(Opcode::V_MUL, {i32, kScalar, l1.index, l0.index, tmp2.index, mt.index, one.index});
    pb.sub(tmp, k0, q0), pb.li(l0, lay.index);
    pb.emit(Opcode::V_IOTA, {l0.index, tmp.index, mt.index, nt.index});
    pb.li(tmp2, lay.mask);
    pb.emit(Opcode::V_GT, {i32, kCol, tmp2.index, l0.index, l1.index, mt.index, nt.index});
    pb.li(l0, lay.neg_inf);
    pb.emit(Opcode::V_SEL, {f32, s_at.index, tmp2.index, l0.index, s_at.index, mt.index, nt.index});
    pb.bind(unmasked);
  }
  const Label later_step = pb.label(), softmax_done = pb.label();
  const Reg p_at = l1;
  // P = exp(S - m) and its row sums into `sums`, one v.expsum: P in the tensor core's dtype, or (split
  // f32) in f32 in place, to be split into its parts by split_p once the sums are used (l0 free then).
  const auto exp_scores = [&](Reg m, Reg sums) {
    if (split) {
      pb.emit(Opcode::V_EXPSUM, {f32, s_at.index, s_at.index, m.index, sums.index, mt.index, nt.index});
      return;
    }
    slot_address(p_at, lay.p, lay.p_bytes, slot);
    pb.emit(Opcode::V_EXPSUM, {dt, p_at.index, s_at.index, m.index, sums.index, mt.index, nt.index});
  };
  const auto split_p = [&] {
    if (!split) return;
    slot_address(p_at, lay.p, lay.p_bytes, slot);
    pb.li(l0, lay.temp);
    emit_f32_split(pb, parts, s_at, p_at, lay.p_part_bytes, l0, mt, nt);
  };
  pb.branch(Opcode::BNE, {k0.index, kZero.index}, later_step);
  {  // The first key tile: its own statistics, nothing to rescale.
    pb.emit(Opcode::V_RMAX, {f32, kAxis1, m_cur.index, s_at.index, mt.index, nt.index});
    // A row the mask hides wholly so far has max -inf: f32's lowest instead keeps exp(S - m) at 0, not NaN.
    if (has_mask) pb.li(tmp, lay.lowest), v2(Opcode::V_MAX, kScalar, m_cur, m_cur, tmp, mt, one);
    pb.li(tmp, lay.sum);
    exp_scores(m_cur, tmp);
    split_p();
    pb.emit(Opcode::SIGNAL, {kVec, S_FREE});
    pb.emit(Opcode::SIGNAL, {kVec, P_FULL});
    pb.branch(Opcode::JMP, {}, softmax_done);
  }
  pb.bind(later_step);
  {  // Later tiles: m' = max(m, rowmax S), alpha = exp(m - m') (into m's buffer), P = exp(S - m').
    pb.emit(Opcode::V_RMAX, {f32, kAxis1, m_new.index, s_at.index, mt.index, nt.index});
    v2(Opcode::V_MAX, kFull, m_new, m_new, m_cur, mt, one);
    v2(Opcode::V_SUB, kFull, m_cur, m_cur, m_new, mt, one);
    v1(Opcode::V_EXP, m_cur, m_cur, mt, one);
    pb.li(l0, lay.step_sum);
    exp_scores(m_new, l0);
    pb.li(tmp, lay.sum);
    v2(Opcode::V_MUL, kFull, tmp, tmp, m_cur, mt, one);
    v2(Opcode::V_ADD, kFull, tmp, tmp, l0, mt, one);
    split_p();
    pb.emit(Opcode::SIGNAL, {kVec, S_FREE});
    // O *= alpha once the previous P V is in it; then this P V may add to it.
    pb.emit(Opcode::WAIT, {kVec, PV_DONE});
    pb.li(l0, acc0 + lay.o), pb.li(tmp2, dv);
    v2(Opcode::V_MUL, kCol, l0, l0, m_cur, mt, tmp2);
    pb.emit(Opcode::SIGNAL, {kVec, P_FULL});
    pb.mov(tmp, m_cur), pb.mov(m_cur, m_new), pb.mov(m_new, tmp);  // m' is the next step's m
  }
  pb.bind(softmax_done);

  // O (+)= P V on the tensor core: the first key tile overwrites. (Split f32: the sum of P_i V_j,
  // V's parts there since this step's PARTS_FULL.)
  if (!split) pb.emit(Opcode::WAIT, {kTc, V_FULL});
  pb.emit(Opcode::WAIT, {kTc, P_FULL});
  pb.li(l0, acc0 + lay.o), pb.li(tmp2, dv);
  const auto pv_operands = [&](size_t n) {
    if (!split) return slot_address(l2, lay.v, lay.v_bytes, slot);
    slot_address(p_at, lay.p + products[n].first * lay.p_part_bytes, lay.p_bytes, slot);
    slot_address(l2, lay.kvp + parts * lay.kp_part_bytes + products[n].second * lay.vp_part_bytes, lay.kvp_bytes, slot);
  };
  pv_operands(0);
  const Label pv_first = pb.label(), pv_issued = pb.label();
  pb.branch(Opcode::BEQ, {k0.index, kZero.index}, pv_first);
  pb.emit(Opcode::TC_MM, {tc_dt, kAcc, l0.index, p_at.index, l2.index, mt.index, tmp2.index, nt.index});
  pb.branch(Opcode::JMP, {}, pv_issued);
  pb.bind(pv_first);
  pb.emit(Opcode::TC_MM, {tc_dt, 0, l0.index, p_at.index, l2.index, mt.index, tmp2.index, nt.index});
  pb.bind(pv_issued);
  for (size_t n = 1; n < products.size(); ++n) {
    pv_operands(n);
    pb.emit(Opcode::TC_MM, {tc_dt, kAcc, l0.index, p_at.index, l2.index, mt.index, tmp2.index, nt.index});
  }
  if (!split) pb.emit(Opcode::SIGNAL, {kTc, V_FREE});
  pb.emit(Opcode::SIGNAL, {kTc, PV_DONE});

  pb.mov(k0, next_k0), pb.mov(slot, next_slot);
  pb.branch(Opcode::BLT, {k0.index, k_end.index}, key_loop);
  pb.emit(Opcode::SIGNAL, {kTc, Q_FREE});

  // The next item (if any) starts, then this one's output.
  row_address(next_slot, out_sym, oo, q0, e);
  pb.mov(next_k0, mt);
  pb.emit(Opcode::XORI, {islot.index, islot.index, 1});
  pb.add(round, round, ncores);
  pb.mov(tmp, mine), pb.mov(mine, mirror), pb.mov(mirror, tmp);
  pb.add(item, round, mine);
  const Label last = pb.label();
  pb.li(tmp, items);
  pb.branch(Opcode::BGE, {item.index, tmp.index}, last);
  start_item();
  finish_item();
  pb.branch(Opcode::JMP, {}, item_loop);
  pb.bind(last);
  finish_item();
  pb.bind(done);
  pb.emit(Opcode::HALT, {});

  Kernel kernel;
  kernel.program = pb.finish();
  kernel.cores = cores;
  std::ostringstream plan;
  plan << "scaled_dot_product_attention: " << batch << " x softmax(" << op.scale << " * [" << seq_q << " x " << d << "] @ [" << seq_k
       << " x " << d << "]^T" << (causal ? ", causal" : "") << (has_mask ? mask_row ? " + a mask row" : " + a mask" : "") << ") @ [" << seq_k << " x " << dv << "] in " << isa::dtype_name(dtype)
       << "; flash-attention tiles of " << br << " queries x " << bc << " keys, " << items << " (batch, query tile) items dealt in a zigzag over "
       << cores << " cores; scores f32 in the accumulator, "
       << (split ? "q, k, v and P as " + std::to_string(parts) + " bf16 parts (" + std::to_string(products.size()) +
                       " tensor-core products per matmul; key-step rings of 3 slots)"
                 : "P rounded to " + std::string(isa::dtype_name(dtype)) + " before P @ V")
       << ", O in f32, rounded once"
       << (scale_q ? "; the scale (a power of two) applied to Q" : scale_scores ? "; the scale applied to the scores" : "")
       << "; K and V read " << q_tiles << " times; scratchpad " << lay.scratchpad_bytes << " of "
       << scratchpad << " bytes, accumulator " << lay.accumulator_bytes << " of " << accumulator << "; estimated "
       << int64_t(chosen->cycles) << " cycles (the fastest tiles: " << int64_t(best) << ")\n";
  kernel.plan = plan.str();
  return kernel;
}

}  // namespace npu::compiler
