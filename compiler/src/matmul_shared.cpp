// Matmul with B's tiles shared over the NoC.
//
// On a chip whose DRAM is narrow for its tensor cores, a matmul is bound by
// the bytes it reads, and B is most of them: every row of output tiles reads
// all of B again. Here the cores of a group (Q of them: up to four; each member
// takes two semaphores and the rings eight more) work on Q different rows of
// output tiles and on the same Q columns at the same time.
// A group is Q consecutive cores, or a block of the mesh where that unloads
// the busiest link (GroupLayout).
// Per K step, each member loads one of the Q tiles of B from DRAM once and
// sends it to the other members, so B is read once per Q rows, and the Q loads
// of a step come from Q different columns (different DRAM channels where a
// tile row is one interleave block, or a part of one: then a round's columns
// lie a block apart; and each member loads the column its own channel's
// controller serves). Each core accumulates its Q output tiles together, so the
// accumulator holds Q x TM x TN f32, and A stays resident as the row's panel
// (TM x K) for all the columns.
//
// Rows of output tiles (batch element, row) are dealt to the groups, and
// within a group row i goes to member i % Q; a member without a row in the
// group's last round ("phantom": 0 rows) still loads and sends its B tiles,
// and stores nothing. Columns past N are empty tiles (0 columns) that raise
// their semaphores. Group g takes its rounds of columns from round g on.
//
// Engines of member q (code generated per member: semaphores are immediates),
// per K step, with B slot s of a ring of three (two where three do not fit):
//   dma ch0  wait MINE_FREE (our tensor core is done with slot s) and SENT (ch1
//            has sent what slot s held); tell every peer, by a send of no bytes
//            raising CREDIT[q] there; load our tile into part q of slot s;
//            signal FULL[q] (tc) and LOADED (ch1)
//   dma ch1  wait LOADED; for each peer p in turn (q + 1, q + 2, ...): wait
//            CREDIT[p] (p's slot s is free), send part q into p's slot s, which
//            raises FULL[q] there; signal SENT
//   tc       for p = q, q - 1, ... (the order the parts arrive in): wait FULL[p]
//            (and on the first K step ACC_FREE); tc.mm into accumulator tile p;
//            then signal MINE_FREE
// and per round of Q columns / per row:
//   vector   each tile's epilogue, into an output slot of two, freeing the tile
//            (ACC_FREE) as it goes, in the tensor core's order          -> dma ch2
//   dma ch2  store the Q tiles, each member starting at a different column
//   dma ch3  the row's A panel, a K step at a time (ch0 where there is no fourth channel)
// With several groups, A can be shared too (SharedPlan::a_shared, a 2-D schedule):
// the groups then split the columns (group g takes rounds g, g + G, ...) and
// every group takes all rows, so the G cores of one member index (its A set)
// work on the same row at a time. Per K step each of them loads a G-th of the
// step's A tile (rows [g P, (g + 1) P), P = ceil(TM / G)) on dma ch3 and sends it to the
// others on the same channel, with a data and a credit semaphore per member of
// the A set as for B. A is then read once per round of the G groups' columns
// instead of once per round of one group's, and B once per round of Q rows.
// Each core's program is its own (its group's semaphores are immediates).
// One semaphore per sender for data and for credits: a count shared by
// several senders could be raised by a fast one for a later step. The cores
// meet at a barrier before the first send: a launch starts each core with its
// semaphores at 0, which must not undo a peer's early send.
#include <algorithm>
#include <cstring>
#include <limits>
#include <sstream>
#include <tuple>
#include <vector>

#include "elementwise.h"
#include "matmul.h"
#include "npusim/compiler/program_builder.h"
#include "npusim/sim/chip_peaks.h"

namespace npu::compiler {
namespace {

using isa::DType;
using isa::Opcode;

struct SharedPlan {
  unsigned group = 0;  // Q: cores that share B
  int64_t tm = 0, tn = 0, tk = 0;
  int64_t b_slots = 2;  // the B ring's depth
  // A resident as the row's panel (all K steps, loaded once per row), or streamed: a ring of two A
  // tiles, loaded per K step of every round of columns (for a K whose panel does not fit).
  bool panel = true;
  // Panels held at once: two where they fit, so that the next row's panel loads while this row's
  // products run (with one, each row's first K step waits for its panel's load).
  int64_t panel_slots = 1;
  // Streamed or shared A: the depth of its ring of tiles. Three where they fit: a step's load (and, shared,
  // its sends) then has two steps' products to arrive in, and a late one costs less.
  int64_t a_slots = 2;
  // Output slots (of Q tiles each): two, or one where that makes room for the deeper rings. With one, a
  // round's epilogue waits for the last round's stores, which had its K steps' time to finish.
  int64_t out_sets = 2;
  double cycles = 0, dram_bytes = 0;
  int64_t steps = 0;  // K steps per core (rounds of rows x rounds of columns x K steps)
  // The columns of tiles a round takes are tile_spread apart (see column_spread); column_rounds per row
  // (each core's).
  int64_t tile_spread = 1, column_rounds = 0;
  // A shared too (a 2-D schedule): the groups split the columns instead of the rows, and the cores of
  // one member index in every group (its A set) work on the same rows, each loading 1/G of a step's
  // A tile and sending it to the others (G: the number of groups).
  bool a_shared = false;
};

// Where a tile row of B is a part of a DRAM interleave block (so a column of tiles lies in one
// channel), the Q columns of a round are taken an interleave block apart, so that the Q members'
// loads go to Q different channels (adjacent narrow columns would share one): the number of
// columns per block, where there are enough columns for it; else 1 (adjacent columns).
int64_t column_spread(const MatmulShape& mm, const sim::ChipConfig& config, int64_t q, int64_t tn) {
  const int64_t row_bytes = tn * mm.b.esize, interleave = config.dram.interleave_bytes;
  if (mm.b.col_stride != 1 || row_bytes >= interleave || interleave % row_bytes != 0) return 1;
  const int64_t spread = interleave / row_bytes;
  return ceil_div(mm.n, tn) >= q * spread ? spread : 1;
}

// A bias row in A's dtype joins the schedule as one more product: ones [TM x 1] @ bias [1 x TN], on
// the tensor core after the last K step, the bias row travelling with the last B tile of its column.
// (The vector unit could not add it: its tile would need a ring and two semaphores more.)
bool has_bias(const OpDesc& op, const MatmulShape& mm) { return op.inputs.size() == 3 && !op.residual && mm.bias_row; }

// The group size: the largest of 4, 3, 2 that divides the core count (0: one core).
unsigned group_size(unsigned cores) {
  for (const unsigned q : {4u, 3u, 2u})
    if (cores % q == 0) return q;
  return 0;
}

// Which cores form a group, and which member each is. Linear: Q consecutive core ids (a row of the
// mesh where Q is its width). Blocks: gx x gy blocks of the mesh, for a mesh full of cores whose sides
// they divide; member (x % gx) + gx (y % gy) of group (x / gx) + (cols / gx) (y / gy). A square block
// halves the sends that cross the busiest link against a row of four (2 against 4 on a 4 x 4 mesh).
// Member p of a group is always core `first + offset(p)` with first the group's member 0, so the
// programs, generated per member, address their peers by a constant offset from their own core id.
struct GroupLayout {
  unsigned q = 0, gx = 0, gy = 1, cols = 1;
  bool linear = true;
  unsigned groups(const sim::ChipConfig& config) const { return config.num_cores / q; }
  unsigned member(unsigned core) const { return linear ? core % q : core % cols % gx + gx * (core / cols % gy); }
  unsigned group(unsigned core) const { return linear ? core / q : core % cols / gx + cols / gx * (core / cols / gy); }
  unsigned core(unsigned group, unsigned member_index) const {
    if (linear) return group * q + member_index;
    const unsigned x = group % (cols / gx) * gx + member_index % gx, y = group / (cols / gx) * gy + member_index / gx;
    return y * cols + x;
  }
  int64_t offset(unsigned member_index) const { return int64_t(core(0, member_index)) - int64_t(core(0, 0)); }
};

// The cores of each group (B's sets), and the cores of each member index over the groups (A's sets,
// where A is shared too).
std::vector<std::vector<unsigned>> b_sets(const sim::ChipConfig& config, const GroupLayout& layout) {
  std::vector<std::vector<unsigned>> sets(layout.groups(config));
  for (unsigned g = 0; g < sets.size(); ++g)
    for (unsigned m = 0; m < layout.q; ++m) sets[g].push_back(layout.core(g, m));
  return sets;
}
std::vector<std::vector<unsigned>> a_sets(const sim::ChipConfig& config, const GroupLayout& layout) {
  std::vector<std::vector<unsigned>> sets(layout.q);
  for (unsigned m = 0; m < layout.q; ++m)
    for (unsigned g = 0; g < layout.groups(config); ++g) sets[m].push_back(layout.core(g, m));
  return sets;
}

// Adds `weight` to each directed link of the mesh (XY routing, as the NoC routes) that a send
// crosses, for every core of every set sending one to each other core of its set. Links are
// (y * cols + x) * 4 + direction.
void add_link_loads(const sim::ChipConfig& config, const std::vector<std::vector<unsigned>>& sets, double weight, std::vector<double>& load) {
  const unsigned cols = config.noc.mesh_cols;
  load.resize(size_t(config.noc.mesh_cols) * config.noc.mesh_rows * 4, 0.0);
  for (const std::vector<unsigned>& set : sets)
    for (const unsigned from : set)
      for (const unsigned to : set) {
        if (to == from) continue;
        sim::MeshPosition at = config.core_position(from);
        const sim::MeshPosition target = config.core_position(to);
        while (at.x != target.x) {  // along the row first
          const unsigned direction = target.x > at.x ? 0 : 1;
          load[(size_t(at.y) * cols + at.x) * 4 + direction] += weight;
          at.x = target.x > at.x ? at.x + 1 : at.x - 1;
        }
        while (at.y != target.y) {
          const unsigned direction = target.y > at.y ? 2 : 3;
          load[(size_t(at.y) * cols + at.x) * 4 + direction] += weight;
          at.y = target.y > at.y ? at.y + 1 : at.y - 1;
        }
      }
}

// The most sends that cross one directed link when every member of every group sends one to each of
// its peers: 2 in a 2 x 2 group (each link carries a neighbour's send and half of a diagonal's two
// hops), 4 in a row of four (the middle link).
int64_t busiest_link_sends(const sim::ChipConfig& config, const GroupLayout& layout) {
  std::vector<double> load;
  add_link_loads(config, b_sets(config, layout), 1.0, load);
  return std::max<int64_t>(1, int64_t(*std::max_element(load.begin(), load.end())));
}

// The layout whose busiest link carries the fewest sends: the linear one, or a block of the mesh
// where one fits (the linear one on a tie).
GroupLayout group_layout(const sim::ChipConfig& config) {
  GroupLayout best;
  best.q = group_size(config.num_cores);
  if (best.q == 0) return best;
  best.gx = best.q, best.cols = config.noc.mesh_cols;
  const unsigned cols = config.noc.mesh_cols, rows = config.noc.mesh_rows;
  if (config.num_cores != cols * rows) return best;
  int64_t fewest = busiest_link_sends(config, best);
  for (unsigned gx = 1; gx <= best.q; ++gx) {
    const unsigned gy = best.q / gx;
    if (gx * gy != best.q || cols % gx != 0 || rows % gy != 0) continue;
    const GroupLayout block{best.q, gx, gy, cols, false};
    if (const int64_t sends = busiest_link_sends(config, block); sends < fewest) best = block, fewest = sends;
  }
  return best;
}

// Tile sizes by an estimate of time like the other schedule's: the longest of
// DRAM bytes at the bandwidth a matmul reaches (matmul_dram_bytes_per_cycle,
// narrow rows at dram_row_share), the NoC's share of the exchange and the
// first loads followed by the tensor core's work, plus the last stores.
SharedPlan plan_shared(const OpDesc& op, const MatmulShape& mm, const sim::ChipConfig& config) {
  SharedPlan best;
  const GroupLayout layout = group_layout(config);
  const unsigned q_size = layout.q;
  if (q_size == 0) return best;
  const int64_t groups = config.num_cores / q_size, q = q_size;
  const int64_t e = mm.a.esize, eo = mm.c.esize;
  const int64_t scratchpad = static_cast<int64_t>(config.core.scratchpad.size_bytes);
  const int64_t accumulator = static_cast<int64_t>(config.core.accumulator.size_bytes);
  const double dram_bytes_per_cycle = double(sim::peak_dram_bytes_per_cycle(config));
  const bool alpha_const = op.alpha != 1.0, bias = has_bias(op, mm);
  std::vector<SharedPlan> candidates;
  // A shared too: with more than one group, a fourth DMA channel (A's loads and sends), and the
  // semaphores (a data and a credit one per member of each of the two sets, and eight for the rings).
  const bool a_can_be_shared = groups >= 2 && config.core.dma.channels >= 4 && 2 * (q + groups) + 8 <= int64_t(isa::kNumSemaphores) &&
                               mm.a.col_stride == 1 && op.schedule != MatmulSchedule::SharedB && op.schedule != MatmulSchedule::SharedBStreamedA;
  // The busiest link's load when every core sends each of its B loads to its group and r bytes of A for
  // each byte of B to its A set, in B's bytes (r = 0: the one-operand schedule's busiest link).
  std::vector<double> b_load, a_load;
  add_link_loads(config, b_sets(config, layout), 1.0, b_load);
  add_link_loads(config, a_sets(config, layout), 1.0, a_load);
  const auto busiest_both = [&](double r) {
    double most = 1.0;
    for (size_t link = 0; link < b_load.size(); ++link) most = std::max(most, b_load[link] + r * a_load[link]);
    return most;
  };
  for (const int64_t cm : {512, 256, 128, 64, 32, 16})
    for (const int64_t cn : {512, 256, 128, 64, 32, 16})
      for (const int64_t ck : {1024, 512, 256, 128, 64, 32}) {
        const int64_t tm = balanced_tile(mm.m, cm), tn = std::min(mm.n, cn), tk = std::min(mm.k, ck);
        // K steps of at least two array heights: every step synchronizes the group (below).
        if (tk < std::min<int64_t>(mm.k, 2 * config.core.tensor_core.rows)) continue;
        if (q * align64(tm * tn * 4) > accumulator) continue;
        const int64_t k_steps = ceil_div(mm.k, tk);
        for (const std::pair<bool, bool>& kind : {std::pair{true, false}, std::pair{false, false}, std::pair{false, true}}) {
          const bool panel = kind.first, a_shared = kind.second;  // (a lambda below reads them: no structured binding in C++17)
          // Shared A: rows of tiles at least the array's height (or all of M). Every K step then waits for
          // all G x Q cores, and shorter tiles both halve the array's use and leave the exchange's latencies
          // less work to hide: on large, 256 x 16384 x 1024 in tiles of 64 rows ran 88 k cycles, estimated
          // 52 k, against 66 k with tiles of its own per core.
          if (a_shared ? !a_can_be_shared || tm < std::min<int64_t>(mm.m, config.core.tensor_core.rows)
                       : op.schedule == MatmulSchedule::SharedAB)
            continue;
          if (!panel && !a_shared && k_steps < 2 && op.schedule != MatmulSchedule::SharedBStreamedA) continue;  // (one K step: the panel is one tile)
          if (panel && op.schedule == MatmulSchedule::SharedBStreamedA) continue;
          const int64_t part = align64(tk * tn * e) + (bias ? align64(tn * e) : 0), ones = bias ? align64(tm * e) : 0;
          const auto local = [&](int64_t slots, int64_t panels, int64_t a_ring, int64_t outs) {
            return (panel ? panels * k_steps : a_ring) * align64(tm * tk * e) + slots * q * part + outs * q * align64(tm * tn * eo) +
                   (alpha_const || bias ? 64 : 0) + ones;
          };
          // Three B slots where they fit (a step's loads and sends overlap two steps' products), else two;
          // then two panels where they fit. A streamed or shared: a ring of three A tiles where it fits, with
          // one output slot if need be where a round has at least three K steps to store the last one's tiles in.
          const int64_t b_slots = local(3, 1, 2, 2) <= scratchpad ? 3 : 2;
          if (local(b_slots, 1, 2, 2) > scratchpad) continue;
          const int64_t panel_slots = panel && local(b_slots, 2, 2, 2) <= scratchpad ? 2 : 1;
          int64_t a_slots = 2, out_sets = 2;
          if (!panel && local(b_slots, 1, 3, 2) <= scratchpad) a_slots = 3;
          else if (!panel && k_steps >= 3 && local(b_slots, 1, 3, 1) <= scratchpad) a_slots = 3, out_sets = 1;
          const int64_t rows = mm.batch * ceil_div(mm.m, tm), n_tiles = ceil_div(mm.n, tn);
          const int64_t tile_spread = column_spread(mm, config, q, tn), all_column_rounds = ceil_div(n_tiles, q * tile_spread) * tile_spread;
          // Per core: rounds of rows (the busiest group's; shared A: every group takes all rows), and
          // rounds of columns (shared A: each group its G-th of them).
          const int64_t rounds = a_shared ? ceil_div(rows, q) : ceil_div(ceil_div(rows, groups), q);
          const int64_t column_rounds = a_shared ? ceil_div(all_column_rounds, groups) : all_column_rounds;
          // A once per row (streamed: once per round of columns; shared: once per round of the G groups'
          // columns), B once per round of each group that has rows (shared A: once per round of rows), C once.
          const double a_bytes = double(mm.batch * mm.m * mm.k * e) * double(panel ? 1 : column_rounds);
          const double b_bytes = double(a_shared ? 1 : std::min<int64_t>(groups, rows)) * double(rounds) * double(mm.k) * double(mm.n) * double(e);
          const double bytes = a_bytes + b_bytes + double(mm.batch * mm.m * mm.n * eo);
          // Each core sends its loads of B to its Q - 1 peers (shared A: and of A to its G - 1): the
          // busiest link's share of those sends.
          const double link = config.noc.link_bytes_per_cycle;
          const double noc = b_bytes / config.num_cores * busiest_both(a_shared ? a_bytes / b_bytes : 0.0) / link;
          const double compute = double(rounds * column_rounds * q) * tensor_core_tile_cycles(config, tm, tn, mm.k, tk);
          // Not overlapped: the first step's loads and sends, the last round's Q stores (at a core's share of DRAM).
          const double core_share = dram_bytes_per_cycle / config.num_cores;
          const double a_first = double(tm * tk * e) / (a_shared ? double(groups) : 1.0);
          const double fill = (a_first + double(tk * tn * e)) / core_share +
                              (double((q - 1) * tk * tn * e) + (a_shared ? double(groups - 1) * a_first : 0.0)) / link;
          const double drain = double(q * tm * tn * eo) / core_share;
          // With one panel, each later row's first K step waits for its tile of the panel.
          const double panel_waits = panel_slots == 1 && panel ? double(rounds - 1) * double(tm * tk * e) / core_share : 0.0;
          // DRAM: narrow tiles' rows (of B and C, a matrix row apart) at the bandwidth such rows reach.
          const double b_rows = tn < mm.n ? dram_row_share(config, tn * e) : 1.0, c_rows = tn < mm.n ? dram_row_share(config, tn * eo) : 1.0;
          const double dram = (a_bytes + b_bytes / b_rows + double(mm.batch * mm.m * mm.n * eo) / c_rows) / matmul_dram_bytes_per_cycle(config);
          // A core's sends go out one after another on one channel: its B part to Q - 1 peers (shared A:
          // and its A part to G - 1 more, on another channel).
          const double sends = std::max(b_bytes / config.num_cores * double(q - 1) / link,
                                        a_shared ? a_bytes / config.num_cores * double(groups - 1) / link : 0.0);
          const double cycles = std::max({dram, noc, sends, fill + compute + panel_waits}) + drain;
          candidates.push_back(
              {q_size, tm, tn, tk, b_slots, panel, panel_slots, a_slots, out_sets, cycles, bytes, rounds * column_rounds * k_steps, tile_spread, column_rounds,
               a_shared});
        }
      }
  // Every K step synchronizes the group (a member's products wait for every member's part, and its
  // slot for every member's credit), and the estimate leaves out those latencies; they cost each step
  // about the same. So among the plans within 10% of the lowest estimate, the one with the fewest K
  // steps per core; then the lowest estimate, the fewest bytes, the deeper ring. (Measured on base,
  // 4096 x 4096 x 1024, when this was chosen: 512 x 64 x 512 tiles, 64 steps, 654 k cycles; 512 x 64
  // x 256, 128 steps, estimated 2% lower, 718 k. docs/compiler.md has the figures of today.)
  double lowest = std::numeric_limits<double>::infinity();
  for (const SharedPlan& plan : candidates) lowest = std::min(lowest, plan.cycles);
  for (const SharedPlan& plan : candidates) {
    if (plan.cycles > 1.1 * lowest) continue;
    const auto key = [](const SharedPlan& p) { return std::make_tuple(p.steps, p.cycles, p.dram_bytes, -p.b_slots); };
    if (best.group == 0 || key(plan) < key(best)) best = plan;
  }
  return best;
}

// The program of member q of every group; where A is shared, of member q of group `group_index` only.
isa::Program member_program(const OpDesc& op, const MatmulShape& mm, const sim::ChipConfig& config, const SharedPlan& plan, unsigned member,
                            unsigned group_index = 0) {
  const GroupLayout layout = group_layout(config);
  const int64_t q_size = plan.group, q = member, groups = config.num_cores / plan.group;
  const int64_t tm = plan.tm, tn = plan.tn, tk = plan.tk, k = mm.k, m = mm.m, n = mm.n;
  const int64_t e = mm.a.esize, eo = mm.c.esize;
  const int64_t k_steps = ceil_div(k, tk), m_tiles = ceil_div(m, tm), rows = mm.batch * m_tiles;
  // Local memory: the A panels (panel_slots of k_steps tiles) or ring (a_slots tiles), b_slots B slots of Q parts, out_sets output
  // slots of Q tiles, alpha.
  // A B part: the tile, then (with a bias, on the last K step) the bias row of its column at bias_off.
  const bool bias = has_bias(op, mm);
  const int64_t bias_off = align64(tk * tn * e);
  const int64_t a_bytes = align64(tm * tk * e), b_bytes = bias_off + (bias ? align64(tn * e) : 0), o_bytes = align64(tm * tn * eo),
                acc_bytes = align64(tm * tn * 4);
  const int64_t b_slots = plan.b_slots;
  const bool panel = plan.panel;
  const int64_t panel_bytes = k_steps * a_bytes;
  const int64_t a0 = 0, b0 = a0 + (panel ? plan.panel_slots * panel_bytes : plan.a_slots * a_bytes), o0 = b0 + b_slots * q_size * b_bytes,
                alpha_at = o0 + plan.out_sets * q_size * o_bytes, ones_at = alpha_at + 64;
  const int64_t acc0 = static_cast<int64_t>(isa::kAccumulatorBase);
  // Semaphores: FULL[p] = p, CREDIT[p] = Q + p (ours, CREDIT[q], is MINE_FREE); where A is shared,
  // A_FULL[h] = 2Q + h and A_CREDIT[h] = 2Q + G + h for the cores of our A set (in group h; ours,
  // A_CREDIT[g], is A_MINE_FREE); then the local rings (A's two unused where A is shared).
  const bool a_shared = plan.a_shared;
  const int64_t g = group_index;
  const auto full = [&](int64_t p) { return p; };
  const auto credit = [&](int64_t p) { return q_size + p; };
  const auto a_part_full = [&](int64_t h) { return 2 * q_size + h; };
  const auto a_credit = [&](int64_t h) { return 2 * q_size + groups + h; };
  const int64_t mine_free = credit(q), a_full = 2 * q_size + (a_shared ? 2 * groups : 0), a_free = a_full + 1, acc_full = a_full + 2, acc_free = a_full + 3,
                out_full = a_full + 4, out_free = a_full + 5, loaded = a_full + 6, sent = a_full + 7;
  const int64_t kCtl = 0, kTc = 5, kVec = 6;
  const unsigned channels = config.core.dma.channels;
  // ch_a: B loads, ch_b: B sends, ch_c: stores, ch_panel: the A panel (a fourth channel where there is one).
  const unsigned ch_a = 0, ch_b = std::min(1u, channels - 1), ch_c = std::min(2u, channels - 1), ch_panel = channels >= 4 ? 3 : ch_a;
  const auto engine_of = [](unsigned channel) { return int64_t{1} + channel; };
  const int64_t f32 = static_cast<int64_t>(DType::F32), tc_dt = static_cast<int64_t>(mm.a.dtype);
  const int64_t flags = (mm.a.transposed() ? 2 : 0) | (mm.b.transposed() ? 4 : 0);

  // Which columns of tiles a round takes, and which member loads which: where a tile row of B is a
  // DRAM interleave block or a part of one (so a column of tiles lies in one channel), the Q columns
  // of a round are tile_spread apart, one per interleave block, hence in Q different channels (with
  // narrower tiles, adjacent columns would share channels); and where each member sits at one
  // channel's controller, the member whose controller serves the column loads it, so that its loads
  // cross no link. Otherwise member p loads column p of Q adjacent ones. channel_of_member[p]: the
  // channel whose controller sits at member p's mesh node (all -1: the mapping does not apply).
  const sim::DramConfig& dram = config.dram;
  // Rounds: tile_spread per Q x tile_spread columns; round r's member j takes column
  // (r / tile_spread) * Q * tile_spread + r % tile_spread + j * tile_spread (past N: empty).
  const int64_t tile_spread = plan.tile_spread, column_rounds = plan.column_rounds;
  std::vector<int64_t> channel_of_member(size_t(q_size), -1);
  if (groups == 1 && dram.channels == unsigned(q_size) && mm.b.col_stride == 1 && tile_spread * tn * e == int64_t(dram.interleave_bytes) &&
      (mm.b.row_stride * e) % int64_t(dram.interleave_bytes * dram.channels) == 0) {
    for (unsigned c = 0; c < dram.channels; ++c) {
      const sim::MeshPosition port = dram.ports[c % dram.ports.size()];
      for (unsigned core = 0; core < config.num_cores; ++core)
        if (config.core_position(core).x == port.x && config.core_position(core).y == port.y) channel_of_member[core] = c;
    }
    std::vector<int64_t> sorted = channel_of_member;
    std::sort(sorted.begin(), sorted.end());
    for (int64_t c = 0; c < q_size; ++c)
      if (sorted[size_t(c)] != c) channel_of_member.assign(size_t(q_size), -1);  // not one member per channel
  }
  const bool local_columns = channel_of_member[0] >= 0;

  ProgramBuilder pb("matmul, B shared over the NoC (generated)");
  const uint16_t c_sym = pb.output("out", mm.c.dtype, {uint64_t(std::max<int64_t>(op.output.storage_extent(), 1))});
  const uint16_t a_sym = pb.input("in0", mm.a.dtype, {uint64_t(std::max<int64_t>(op.inputs[0].storage_extent(), 1))});
  const uint16_t b_sym = pb.input("in1", mm.b.dtype, {uint64_t(std::max<int64_t>(op.inputs[1].storage_extent(), 1))});
  const uint16_t bias_sym = bias ? pb.input("in2", mm.bias.dtype, {uint64_t(std::max<int64_t>(op.inputs[2].storage_extent(), 1))}) : 0;

  for (int64_t slot = 0; slot < b_slots; ++slot) pb.emit(Opcode::SIGNAL, {kCtl, mine_free}), pb.emit(Opcode::SIGNAL, {kCtl, sent});
  for (int64_t set = 0; set < plan.out_sets; ++set) pb.emit(Opcode::SIGNAL, {kCtl, out_free});
  for (int64_t slot = 0; slot < (panel ? plan.panel_slots : plan.a_slots); ++slot) pb.emit(Opcode::SIGNAL, {kCtl, a_shared ? a_credit(g) : a_free});
  for (int64_t p = 0; p < q_size; ++p) pb.emit(Opcode::SIGNAL, {kCtl, acc_free});  // (one per accumulator tile)
  // The order in which the tensor core works on the tiles (the vector unit reads them out in the same).
  std::vector<int64_t> tile_order;
  for (int64_t i = 0; i < q_size; ++i) tile_order.push_back((q - i + q_size) % q_size);
  const Reg tmp = pb.reg(), tmp2 = pb.reg(), group = pb.reg();
  const Reg rr = pb.reg(), rr_stop = pb.reg(), row_end = pb.reg();
  // Group g (GroupLayout) holds rows [g R / G, (g + 1) R / G); member q takes every Q-th from the first + q.
  pb.emit(Opcode::CSRR, {group.index, 0});
  if (a_shared) {
    pb.li(group, g);
  } else if (layout.linear) {
    pb.li(tmp2, q_size), pb.emit(Opcode::DIVU, {group.index, group.index, tmp2.index});
  } else {  // (x / gx) + (cols / gx) (y / gy)
    pb.li(tmp2, layout.cols), pb.emit(Opcode::REMU, {tmp.index, group.index, tmp2.index}), pb.emit(Opcode::DIVU, {group.index, group.index, tmp2.index});
    pb.li(tmp2, layout.gx), pb.emit(Opcode::DIVU, {tmp.index, tmp.index, tmp2.index});
    pb.li(tmp2, layout.gy), pb.emit(Opcode::DIVU, {group.index, group.index, tmp2.index});
    pb.muli(group, group, layout.cols / layout.gx), pb.add(group, group, tmp);
  }
  pb.mov(tmp, group);
  pb.li(tmp2, rows), pb.mul(rr, tmp, tmp2), pb.li(tmp2, groups), pb.emit(Opcode::DIVU, {rr.index, rr.index, tmp2.index});
  pb.addi(row_end, tmp, 1), pb.li(tmp2, rows), pb.mul(row_end, row_end, tmp2), pb.li(tmp2, groups);
  pb.emit(Opcode::DIVU, {row_end.index, row_end.index, tmp2.index});
  // Rounds: ceil((end - first) / Q); rr_stop = first + q + rounds * Q.
  pb.sub(rr_stop, row_end, rr), pb.addi(rr_stop, rr_stop, q_size - 1), pb.li(tmp2, q_size);
  pb.emit(Opcode::DIVU, {rr_stop.index, rr_stop.index, tmp2.index}), pb.muli(rr_stop, rr_stop, q_size);
  pb.add(rr_stop, rr_stop, rr), pb.addi(rr_stop, rr_stop, q), pb.addi(rr, rr, q);
  if (a_shared) pb.li(rr, q), pb.li(row_end, rows), pb.li(rr_stop, q + ceil_div(rows, q_size) * q_size);  // every group: all rows
  const Reg one = pb.reg();
  pb.li(one, 1);
  const auto peer_core = [&](int64_t p) {  // tmp2 = the core of member p of our group
    pb.emit(Opcode::CSRR, {tmp2.index, 0}), pb.addi(tmp2, tmp2, layout.offset(unsigned(p)) - layout.offset(unsigned(q)));
  };
  if (op.alpha != 1.0) {
    pb.li(tmp2, alpha_at), pb.li(tmp, f32_bits(op.alpha));
    pb.emit(Opcode::V_FILL, {f32, tmp2.index, tmp.index, one.index, one.index});
  }
  // shift: the channel of B's column 0 (and of every Q-th column).
  const Reg shift = pb.reg();
  if (local_columns) {
    emit_element_address(pb, shift, b_sym, mm.b, kZero, kZero, kZero, tmp);
    pb.li(tmp, dram.interleave_bytes), pb.emit(Opcode::DIVU, {shift.index, shift.index, tmp.index});
    pb.li(tmp, dram.channels), pb.emit(Opcode::REMU, {shift.index, shift.index, tmp.index});
  }
  pb.emit(Opcode::BARRIER, {0});

  const Reg bidx = pb.reg(), m0 = pb.reg(), mt = pb.reg(), round = pb.reg(), col0 = pb.reg(), n0 = pb.reg(), nt = pb.reg();
  const Reg k_left = pb.reg(), kt = pb.reg(), bslot = pb.reg(), oslot = pb.reg(), a_src = pb.reg(), b_src = pb.reg(), apanel = pb.reg();
  const Reg l0 = pb.reg(), l1 = pb.reg();
  const DmaShape shape{pb.reg(), pb.reg(), pb.reg(), pb.reg(), pb.reg(), pb.reg(), pb.reg()};
  pb.li(bslot, 0), pb.li(oslot, 0), pb.li(apanel, a0);
  // apanel = this row's panel: with two, they alternate by row (rr / Q steps by one a row).
  const auto panel_start = [&] {
    pb.li(apanel, a0);
    if (plan.panel_slots < 2) return;
    pb.li(tmp2, q_size), pb.emit(Opcode::DIVU, {tmp.index, rr.index, tmp2.index}), pb.emit(Opcode::ANDI, {tmp.index, tmp.index, 1});
    pb.muli(tmp, tmp, panel_bytes), pb.add(apanel, apanel, tmp);
  };
  if (bias) {  // the ones column (1.0 rounded to A's dtype: exact)
    pb.li(l0, ones_at), pb.li(l1, 0x3f800000), pb.li(mt, tm);
    pb.emit(Opcode::V_FILL, {tc_dt, l0.index, l1.index, mt.index, one.index});
  }
  const Label done = pb.label(), row_loop = pb.label();
  pb.branch(Opcode::BGE, {rr.index, rr_stop.index}, done);
  pb.bind(row_loop);
  // Row rr: batch element bidx, rows m0 .. +mt (0 rows past the group's end).
  {
    const Label phantom = pb.label();
    pb.li(bidx, 0), pb.li(m0, 0), pb.li(mt, 0);
    pb.branch(Opcode::BGE, {rr.index, row_end.index}, phantom);
    pb.li(tmp, m_tiles), pb.emit(Opcode::DIVU, {bidx.index, rr.index, tmp.index}), pb.emit(Opcode::REMU, {m0.index, rr.index, tmp.index});
    pb.muli(m0, m0, tm), pb.li(tmp, m), pb.sub(mt, tmp, m0), pb.li(tmp, tm), pb.min(mt, mt, tmp);
    pb.bind(phantom);
  }
  // The A panel, a K step at a time.
  if (panel) {
    pb.emit(Opcode::WAIT, {engine_of(ch_panel), a_free});
    emit_element_address(pb, a_src, a_sym, mm.a, bidx, m0, kZero, tmp);
    pb.li(k_left, k), panel_start();
    const Label a_loop = pb.label();
    pb.bind(a_loop);
    pb.li(tmp, tk), pb.min(kt, k_left, tmp);
    emit_tile_shape(pb, mm.a, mt, kt, shape);
    emit_dma(pb, Opcode::DMA_LD, ch_panel, apanel, a_src, shape);
    pb.emit(Opcode::SIGNAL, {engine_of(ch_panel), a_full});
    pb.li(tmp, tk * mm.a.col_stride * e), pb.add(a_src, a_src, tmp), pb.addi(apanel, apanel, a_bytes);
    pb.li(tmp, tk), pb.sub(k_left, k_left, tmp);
    pb.branch(Opcode::BLT, {kZero.index, k_left.index}, a_loop);
  }
  // Rounds of Q columns of tiles: col0 is the round's first column.
  pb.li(round, 0);
  const Label column_loop = pb.label();
  pb.bind(column_loop);
  // Group g takes its rounds of columns from round g on, so that the groups load different columns of
  // B at a time (the same column in every group put all their loads on the same DRAM channels); where
  // A is shared, rounds g, g + G, g + 2G, ... only (past the last: empty columns).
  if (a_shared) pb.muli(tmp2, round, groups), pb.addi(tmp2, tmp2, g);
  else pb.add(tmp2, group, round), pb.li(tmp, column_rounds), pb.emit(Opcode::REMU, {tmp2.index, tmp2.index, tmp.index});
  pb.li(tmp, tile_spread), pb.emit(Opcode::DIVU, {col0.index, tmp2.index, tmp.index}), pb.muli(col0, col0, q_size * tile_spread);
  pb.emit(Opcode::REMU, {tmp.index, tmp2.index, tmp.index}), pb.add(col0, col0, tmp);
  // Member p's column of this round: n0 = (col0 + j tile_spread) TN with j = p, or the j whose
  // channel, (shift + j) % Q, is member p's; nt = clamp(N - n0, 0, TN).
  const auto column = [&](int64_t p) {
    if (local_columns) {
      pb.li(n0, channel_of_member[size_t(p)] + q_size), pb.sub(n0, n0, shift), pb.li(tmp, q_size);
      pb.emit(Opcode::REMU, {n0.index, n0.index, tmp.index});
    } else {
      pb.li(n0, p);
    }
    pb.muli(n0, n0, tile_spread), pb.add(n0, n0, col0);
    pb.muli(n0, n0, tn);
    pb.li(tmp, n), pb.sub(nt, tmp, n0), pb.li(tmp, tn), pb.min(nt, nt, tmp), pb.emit(Opcode::MAX, {nt.index, nt.index, kZero.index});
    pb.li(tmp, n), pb.min(n0, n0, tmp);  // (an empty column's address stays inside B)
  };
  column(q);
  emit_element_address(pb, b_src, b_sym, mm.b, kZero, kZero, n0, tmp);
  pb.li(k_left, k);
  if (panel) panel_start();
  else emit_element_address(pb, a_src, a_sym, mm.a, bidx, m0, kZero, tmp);  // (apanel goes on round the ring)
  const Label k_loop = pb.label();
  pb.bind(k_loop);
  pb.li(tmp, tk), pb.min(kt, k_left, tmp);
  if (a_shared) {
    // A shared: our part of this step's tile, its rows [g P, (g + 1) P) with P = ceil(TM / G) (the tile is dense, kt
    // long rows), into the ring slot at apanel once our tensor core is done with the slot (and the
    // other cores of our A set are told so by a send of no bytes); then to each of them once its slot
    // is free. Loads and sends on one channel, in order: the next load waits for these sends.
    const int64_t part_rows = ceil_div(tm, groups);  // (the last part may be shorter)
    pb.emit(Opcode::WAIT, {engine_of(ch_panel), a_credit(g)});
    for (int64_t h = 0; h < groups; ++h) {
      if (h == g) continue;
      pb.li(tmp2, layout.core(unsigned(h), unsigned(q)));
      pb.emit(Opcode::DMA_SEND, {int64_t(ch_panel), tmp2.index, a_credit(g), apanel.index, apanel.index, kZero.index, kZero.index, kZero.index, kZero.index});
    }
    pb.li(l1, g * part_rows), pb.sub(l1, mt, l1), pb.emit(Opcode::MAX, {l1.index, l1.index, kZero.index}), pb.li(tmp, part_rows), pb.min(l1, l1, tmp);
    pb.li(tmp, g * part_rows * e), pb.mul(l0, kt, tmp), pb.add(l0, l0, apanel);
    pb.li(tmp2, g * part_rows * mm.a.row_stride * e), pb.add(tmp2, tmp2, a_src);
    emit_tile_shape(pb, mm.a, l1, kt, shape);
    pb.min(tmp, l1, one), pb.mul(shape.n0, shape.n0, tmp);  // (no rows: no bytes, where n1 = 0 would count as one row past M)
    emit_dma(pb, Opcode::DMA_LD, ch_panel, l0, tmp2, shape);
    pb.emit(Opcode::SIGNAL, {engine_of(ch_panel), a_part_full(g)});
    pb.mul(l1, l1, kt), pb.muli(l1, l1, e);  // the part's bytes
    for (int64_t i = 1; i < groups; ++i) {
      const int64_t h = (g + i) % groups;
      pb.emit(Opcode::WAIT, {engine_of(ch_panel), a_credit(h)});
      pb.li(tmp2, layout.core(unsigned(h), unsigned(q)));
      pb.emit(Opcode::DMA_SEND, {int64_t(ch_panel), tmp2.index, a_part_full(g), l0.index, l0.index, l1.index, one.index, kZero.index, kZero.index});
    }
    pb.li(tmp, tk * e), pb.add(a_src, a_src, tmp);
  } else if (!panel) {  // A streamed: this K step's tile into the ring slot at apanel
    pb.emit(Opcode::WAIT, {engine_of(ch_panel), a_free});
    emit_tile_shape(pb, mm.a, mt, kt, shape);
    emit_dma(pb, Opcode::DMA_LD, ch_panel, apanel, a_src, shape);
    pb.emit(Opcode::SIGNAL, {engine_of(ch_panel), a_full});
    pb.li(tmp, tk * mm.a.col_stride * e), pb.add(a_src, a_src, tmp);
  }
  // B: dma ch0 loads our tile into part q of slot bslot once the slot is free here (our tensor core is
  // done with it, and ch1 has sent what it held), and tells the peers; ch1 sends it to each peer
  // once that peer's slot is free.
  column(q);
  pb.li(l1, q_size * b_bytes), pb.mul(l1, l1, bslot), pb.addi(l1, l1, b0 + q * b_bytes);
  pb.emit(Opcode::WAIT, {engine_of(ch_a), mine_free});
  pb.emit(Opcode::WAIT, {engine_of(ch_a), sent});
  for (int64_t p = 0; p < q_size; ++p) {
    if (p == q) continue;
    peer_core(p);
    pb.emit(Opcode::DMA_SEND, {int64_t(ch_a), tmp2.index, credit(q), l1.index, l1.index, kZero.index, kZero.index, kZero.index, kZero.index});
  }
  emit_tile_shape(pb, mm.b, kt, nt, shape);
  emit_dma(pb, Opcode::DMA_LD, ch_a, l1, b_src, shape);
  if (bias) {  // the last K step: the column's bias row after the tile
    const Label not_last = pb.label();
    pb.li(tmp, tk), pb.branch(Opcode::BLT, {tmp.index, k_left.index}, not_last);
    emit_element_address(pb, tmp2, bias_sym, mm.bias, kZero, kZero, n0, tmp);
    pb.addi(l0, l1, bias_off);
    pb.muli(shape.n0, nt, e), pb.li(shape.n1, 1), pb.li(shape.n2, 0), pb.li(shape.dst_s1, 0), pb.li(shape.src_s1, 0);
    pb.li(shape.dst_s2, 0), pb.li(shape.src_s2, 0);
    emit_dma(pb, Opcode::DMA_LD, ch_a, l0, tmp2, shape);
    pb.bind(not_last);
  }
  pb.emit(Opcode::SIGNAL, {engine_of(ch_a), full(q)});
  pb.emit(Opcode::SIGNAL, {engine_of(ch_a), loaded});
  pb.emit(Opcode::WAIT, {engine_of(ch_b), loaded});
  pb.mul(tmp, kt, nt), pb.muli(tmp, tmp, e);  // the part's bytes, dense (the last step's: up to the bias row's end)
  if (bias) {
    const Label sized = pb.label();
    pb.li(tmp2, tk), pb.branch(Opcode::BLT, {tmp2.index, k_left.index}, sized);
    pb.muli(tmp, nt, e), pb.addi(tmp, tmp, bias_off);
    pb.bind(sized);
  }
  // (Member q sends to q + 1, q + 2, ... in turn: at each turn every member receives from one.)
  for (int64_t i = 1; i < q_size; ++i) {
    const int64_t p = (q + i) % q_size;
    pb.emit(Opcode::WAIT, {engine_of(ch_b), credit(p)});
    peer_core(p);
    pb.emit(Opcode::DMA_SEND, {int64_t(ch_b), tmp2.index, full(q), l1.index, l1.index, tmp.index, one.index, kZero.index, kZero.index});
  }
  pb.emit(Opcode::SIGNAL, {engine_of(ch_b), sent});
  // The tensor core: Q products into the Q accumulator tiles, each as soon as its part is here: our
  // own first, then in the order the peers send to us (q - 1, q - 2, ...). On the first K step each
  // tile also waits until the vector unit has read it out (it frees them in the same order).
  {
    const Label resident = pb.label();
    if (panel) pb.branch(Opcode::BNE, {round.index, kZero.index}, resident);
    if (a_shared)
      for (int64_t h = 0; h < groups; ++h) pb.emit(Opcode::WAIT, {kTc, a_part_full(h)});
    else
      pb.emit(Opcode::WAIT, {kTc, a_full});
    pb.bind(resident);
  }
  for (const int64_t p : tile_order) {
    pb.emit(Opcode::WAIT, {kTc, full(p)});
    column(p);
    pb.li(l1, q_size * b_bytes), pb.mul(l1, l1, bslot), pb.addi(l1, l1, b0 + p * b_bytes);
    pb.li(l0, acc0 + p * acc_bytes);
    const Label accumulate = pb.label(), issued = pb.label();
    pb.li(tmp, k);
    pb.branch(Opcode::BNE, {k_left.index, tmp.index}, accumulate);
    pb.emit(Opcode::WAIT, {kTc, acc_free});
    pb.emit(Opcode::TC_MM, {tc_dt, flags, l0.index, apanel.index, l1.index, mt.index, nt.index, kt.index});
    pb.branch(Opcode::JMP, {}, issued);
    pb.bind(accumulate);
    pb.emit(Opcode::TC_MM, {tc_dt, flags | 1, l0.index, apanel.index, l1.index, mt.index, nt.index, kt.index});
    pb.bind(issued);
  }
  if (bias) {  // the last K step: + ones @ bias row, into each tile
    const Label no_bias = pb.label();
    pb.li(tmp, tk), pb.branch(Opcode::BLT, {tmp.index, k_left.index}, no_bias);
    pb.li(tmp2, ones_at);
    for (int64_t p = 0; p < q_size; ++p) {
      column(p);
      pb.li(l1, q_size * b_bytes), pb.mul(l1, l1, bslot), pb.addi(l1, l1, b0 + p * b_bytes + bias_off);
      pb.li(l0, acc0 + p * acc_bytes);
      pb.emit(Opcode::TC_MM, {tc_dt, 1, l0.index, tmp2.index, l1.index, mt.index, nt.index, one.index});
    }
    pb.bind(no_bias);
  }
  pb.emit(Opcode::SIGNAL, {kTc, mine_free});
  if (!panel) pb.emit(Opcode::SIGNAL, {kTc, a_shared ? a_credit(g) : a_free});
  pb.addi(bslot, bslot, 1), pb.li(tmp, b_slots), pb.emit(Opcode::REMU, {bslot.index, bslot.index, tmp.index});
  pb.li(tmp, tk * mm.b.row_stride * e), pb.add(b_src, b_src, tmp);
  if (panel) pb.addi(apanel, apanel, a_bytes);
  else {  // the next slot of the ring
    const Label in_ring = pb.label();
    pb.addi(apanel, apanel, a_bytes), pb.li(tmp, a0 + plan.a_slots * a_bytes);
    pb.branch(Opcode::BLT, {apanel.index, tmp.index}, in_ring);
    pb.li(apanel, a0);
    pb.bind(in_ring);
  }
  pb.li(tmp, tk), pb.sub(k_left, k_left, tmp);
  pb.branch(Opcode::BLT, {kZero.index, k_left.index}, k_loop);
  pb.emit(Opcode::SIGNAL, {kTc, acc_full});

  // The epilogue of the Q tiles on the vector unit, in f32 in the accumulator, rounded into the output slot.
  pb.emit(Opcode::WAIT, {kVec, acc_full});
  pb.emit(Opcode::WAIT, {kVec, out_free});
  for (const int64_t p : tile_order) {
    column(p);
    pb.li(l0, acc0 + p * acc_bytes);
    pb.li(l1, q_size * o_bytes), pb.mul(l1, l1, oslot), pb.addi(l1, l1, o0 + p * o_bytes);
    if (op.alpha != 1.0) pb.li(tmp2, alpha_at), pb.emit(Opcode::V_MUL, {f32, 3, l0.index, l0.index, tmp2.index, mt.index, nt.index});
    for (const OpKind step : op.epilogue) pb.emit(unary_opcode(step), {f32, l0.index, l0.index, mt.index, nt.index});
    if (mm.integer) pb.emit(Opcode::V_MOV, {static_cast<int64_t>(DType::I32), l1.index, l0.index, mt.index, nt.index});
    else if (mm.c.dtype == DType::F32) pb.emit(Opcode::V_MOV, {f32, l1.index, l0.index, mt.index, nt.index});
    else pb.emit(Opcode::V_CVT, {static_cast<int64_t>(mm.c.dtype), f32, l1.index, l0.index, mt.index, nt.index});
    pb.emit(Opcode::SIGNAL, {kVec, acc_free});
  }
  pb.emit(Opcode::SIGNAL, {kVec, out_full});
  // Store them.
  pb.emit(Opcode::WAIT, {engine_of(ch_c), out_full});
  for (int64_t i = 0; i < q_size; ++i) {
    const int64_t p = (q + i) % q_size;  // (members store different columns at a time: different DRAM channels)
    column(p);
    pb.li(l1, q_size * o_bytes), pb.mul(l1, l1, oslot), pb.addi(l1, l1, o0 + p * o_bytes);
    emit_element_address(pb, l0, c_sym, mm.c, bidx, m0, n0, tmp);
    pb.li(shape.n2, 0), pb.li(shape.dst_s2, 0), pb.li(shape.src_s2, 0);
    pb.muli(shape.n0, nt, eo), pb.mov(shape.n1, mt), pb.li(shape.dst_s1, mm.c.row_stride * eo), pb.muli(shape.src_s1, nt, eo);
    // A member without a row stores nothing: n1 = 0 would count as one row (docs/isa.md), its slot's
    // garbage over row 0, and only the timing decided whether the row's owner wrote it again after.
    pb.min(tmp, mt, one), pb.mul(shape.n0, shape.n0, tmp);
    emit_dma(pb, Opcode::DMA_ST, ch_c, l0, l1, shape);
  }
  pb.emit(Opcode::SIGNAL, {engine_of(ch_c), out_free});
  if (plan.out_sets == 2) pb.emit(Opcode::XORI, {oslot.index, oslot.index, 1});
  pb.addi(round, round, 1);
  pb.li(tmp, column_rounds);
  pb.branch(Opcode::BLT, {round.index, tmp.index}, column_loop);
  // The row is done: its panel is free.
  if (panel) pb.emit(Opcode::SIGNAL, {kTc, a_free});
  pb.addi(rr, rr, q_size);
  pb.branch(Opcode::BLT, {rr.index, rr_stop.index}, row_loop);
  pb.bind(done);
  pb.emit(Opcode::HALT, {});
  return pb.finish();
}

}  // namespace

std::optional<Kernel> lower_matmul_shared(const OpDesc& op, const MatmulShape& mm, const sim::ChipConfig& config, double tiled_cycles) {
  // B the same for every row of tiles; no scale or residual, a bias only as a row in A's dtype (and
  // then alpha and beta 1: it is summed with the products); no split f32, no integers with a bias.
  const bool bias_ok = has_bias(op, mm) && op.alpha == 1.0 && op.beta == 1.0 && !mm.integer;
  if ((op.inputs.size() != 2 && !bias_ok) || mm.split || (mm.batch > 1 && mm.b.batch_stride != 0) || mm.a.batch_inner != 0 ||
      mm.m * mm.n * mm.k == 0)
    return std::nullopt;
  if (op.schedule == MatmulSchedule::OwnTiles) return std::nullopt;
  const SharedPlan plan = plan_shared(op, mm, config);
  // Unless asked for: where its estimate is at least 10% lower. (Before the tensor core overlapped
  // consecutive tc.mm, runs of fewer than 8 K steps per core were left out too: 512^3 on base, 4 steps,
  // estimated 23% faster, ran 9% slower; now it takes 20% fewer cycles. Of shapes of 1 to 5 steps on
  // base that the estimate puts 10% lower, all but one (512 x 256 x 512: 6% more) take fewer: docs/compiler.md.)
  if (plan.group == 0 || (op.schedule == MatmulSchedule::Auto && plan.cycles > 0.9 * tiled_cycles)) return std::nullopt;
  Kernel kernel;
  const GroupLayout placement = group_layout(config);
  if (plan.a_shared) {  // a program per core: its group's A semaphores are immediates
    for (unsigned core = 0; core < config.num_cores && core < 64; ++core) {
      isa::Program program = member_program(op, mm, config, plan, placement.member(core), placement.group(core));
      program.code.front().core_mask = uint64_t{1} << core;
      if (core == 0) kernel.program = std::move(program);
      else kernel.program.code.push_back(program.code.front());
    }
  } else {
    kernel.program = member_program(op, mm, config, plan, 0);
    for (unsigned member = 1; member < plan.group; ++member) kernel.program.code.push_back(member_program(op, mm, config, plan, member).code.front());
    for (isa::CodeSection& section : kernel.program.code) section.core_mask = 0;
    for (unsigned core = 0; core < config.num_cores && core < 64; ++core) kernel.program.code[placement.member(core)].core_mask |= uint64_t{1} << core;
  }
  isa::validate_program(kernel.program);
  kernel.cores = config.num_cores;
  kernel.cores_exchange_data = true;
  std::ostringstream text;
  text << "matmul: " << mm.batch << " x [" << mm.m << " x " << mm.k << "] @ [" << mm.k << " x " << mm.n << "] in " << isa::dtype_name(mm.a.dtype)
       << (mm.integer ? ", i32 accumulation (wrapping)" : ", f32 accumulation") << "; B shared over the NoC by groups of " << plan.group << " cores"
       << (placement.linear ? std::string() : " (" + std::to_string(placement.gx) + " x " + std::to_string(placement.gy) + " blocks of the mesh)")
       << " (each loads a tile of B per K step and sends it to the others); tiles " << plan.tm << " x " << plan.tn << " x " << plan.tk
       << " (M x N x K), " << plan.group << " output tiles accumulated at once per core"
       << (plan.tile_spread > 1 ? "; a round's columns of tiles " + std::to_string(plan.tile_spread) + " apart (one per DRAM interleave block)" : std::string())
       << (plan.a_shared ? "; A shared over the NoC too, by the " + std::to_string(config.num_cores / plan.group) +
                               " cores of each member index (each loads its part of a tile of A per K step and sends it to the others); the groups split the columns"
           : plan.panel ? (plan.panel_slots == 2 ? "; A panel resident (two: the next row's loads during this one's products)" : "; A panel resident") : "; A streamed (a tile per K step of each round)")
       << (plan.panel ? std::string() : "; a ring of " + std::to_string(plan.a_slots) + " A tiles")
       << (plan.out_sets == 1 ? "; one output slot" : "") << "; A " << layout(mm.a) << ", B "
       << layout(mm.b) << (has_bias(op, mm) ? ", with bias (ones @ the bias row on the tensor core)" : "") << "; estimate " << int64_t(plan.cycles) << " cycles against " << int64_t(tiled_cycles) << " for tiles of its own per core";
  if (op.alpha != 1.0) text << ", alpha " << op.alpha;
  for (const OpKind step : op.epilogue) text << ", then " << op_name(step);
  text << "\n";
  kernel.plan = text.str();
  return kernel;
}

}  // namespace npu::compiler
