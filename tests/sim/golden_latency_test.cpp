// Golden latencies: one instruction at a time on the test chip (test_chip.h),
// with the expected cycles worked out from the config in a comment.
#include <gtest/gtest.h>

#include "npusim/sim/address_map.h"
#include "npusim/sim/simulator.h"
#include "tensor_core.h"  // systolic_cycles (internal)
#include "test_chip.h"

namespace npu::sim {
namespace {

using testing::assemble;
using testing::bind_symbols;
using testing::test_config;

// Busy cycles of engine `engine` (0 control, 1.. DMA channels, then tensor, vector) of core 0 in one run.
uint64_t busy(const ChipStats& before, const ChipStats& after, unsigned core, unsigned engine) {
  return after.cores[core].engines[engine].busy_cycles - before.cores[core].engines[engine].busy_cycles;
}

struct Golden : ::testing::Test {
  void run(Simulator& simulator, const isa::Program& program, uint64_t mask = 1) {
    simulator.launch(program, mask, bind_symbols(program));
    const RunResult result = simulator.run(1'000'000);
    ASSERT_FALSE(result.fault) << result.fault->to_string();
  }
};

constexpr unsigned kDma0 = 1, kTensor = 3, kVector = 4;

TEST_F(Golden, DmaLoadFromDramOnRowMissThenHitThenConflict) {
  Simulator simulator(test_config());
  // x spans DRAM 0.. ; address 8192 is channel 0, bank 0, row 1 (local 4096 = row_global 4, bank 4 % 4 = 0).
  const auto load = [&](uint64_t offset, uint64_t bytes) {
    return assemble(".buffer x, u8, 16384\n.code 0\n  la r1, x\n  addi r1, r1, " + std::to_string(offset) + "\n  li r3, " +
                    std::to_string(bytes) + "\n  dma.ld ch0, r0, r1, r3, r0, r0, r0, r0, r0, r0\n  halt\n");
  };
  ChipStats before = simulator.stats();
  run(simulator, load(0, 256));
  ChipStats after = simulator.stats();
  // 5 descriptor; 4 requests of 64 B to channel 0, bank 0, row 0 (closed):
  // req0 issued at 5, data after 20 (closed) = 25, bus 25..27 (64 B / 32 B/cycle);
  // req1..3 hit the open row (bank ready at 5 + 20 - 10 = 15, data at 25) and
  // queue on the bus: 27..29, 29..31, 31..33; each lands in the scratchpad in
  // 1 cycle (64 B at 64 B/cycle): the last at 34.
  EXPECT_EQ(busy(before, after, 0, kDma0), 34u);

  before = after;
  run(simulator, load(64, 64));
  after = simulator.stats();
  // Row 0 is open: 5 + 10 (hit) + 2 (bus) + 1 (scratchpad) = 18.
  EXPECT_EQ(busy(before, after, 0, kDma0), 18u);

  before = after;
  run(simulator, load(8192, 64));
  after = simulator.stats();
  // Row 1 of the same bank: 5 + 30 (conflict) + 2 + 1 = 38.
  EXPECT_EQ(busy(before, after, 0, kDma0), 38u);
  EXPECT_EQ(after.dram_channels[0].row_hits, 4u);  // 3 in the first load, 1 in the second
  EXPECT_EQ(after.dram_channels[0].row_closed, 1u);
  EXPECT_EQ(after.dram_channels[0].row_conflicts, 1u);
}

TEST_F(Golden, XorBankMapPutsRowsABankCountApartInDifferentBanks) {
  // The last load above under dram.bank_map XOR: row_global 4 of channel 0 lies in bank
  // (4 ^ 4 / 4 ^ 4 / 16) % 4 = (4 ^ 1 ^ 0) % 4 = 1, not bank 0 where row 0 is open.
  ChipConfig config = test_config();
  config.dram.bank_map = DramBankMap::Xor;
  Simulator simulator(config);
  const auto load = [&](uint64_t offset) {
    return assemble(".buffer x, u8, 16384\n.code 0\n  la r1, x\n  addi r1, r1, " + std::to_string(offset) +
                    "\n  li r3, 64\n  dma.ld ch0, r0, r1, r3, r0, r0, r0, r0, r0, r0\n  halt\n");
  };
  run(simulator, load(0));
  const ChipStats before = simulator.stats();
  run(simulator, load(8192));
  const ChipStats after = simulator.stats();
  // Bank 1 has no row open: 5 + 20 (closed) + 2 + 1 = 28, against 38 for the conflict in bank 0.
  EXPECT_EQ(busy(before, after, 0, kDma0), 28u);
  EXPECT_EQ(after.dram_channels[0].row_closed, 2u);
  EXPECT_EQ(after.dram_channels[0].row_conflicts, 0u);
}

TEST_F(Golden, SystolicTileClosedFormsForBothDataflows) {
  TensorCoreConfig array{4, 4, Dataflow::WeightStationary, {}};
  // Weight stationary, one fold: 2*R + C + m - 2 = 8 + 4 + 8 - 2 = 18.
  EXPECT_EQ(systolic_cycles(array, 8, 4, 4), 18u);
  // 2 x 2 folds of 18: 72.
  EXPECT_EQ(systolic_cycles(array, 8, 8, 8), 72u);
  // Partial folds (k = 4 + 2, n = 3): (2*4 + 3 + 5 - 2) + (2*2 + 3 + 5 - 2) = 14 + 10 = 24.
  EXPECT_EQ(systolic_cycles(array, 5, 3, 6), 24u);
  array.dataflow = Dataflow::OutputStationary;
  // Output stationary, 2 row folds of 2*R + C + k - 2 = 8 + 4 + 4 - 2 = 14: 28.
  EXPECT_EQ(systolic_cycles(array, 8, 4, 4), 28u);
}

TEST_F(Golden, SystolicTileWithDoubleBufferedWeights) {
  TensorCoreConfig array{4, 4, Dataflow::WeightStationary, {}, /*weight_double_buffering=*/true};
  // One fold is the same as without: R (load) + m (stream) + R + C - 2 (drain) = 4 + 8 + 4 + 4 - 2 = 18.
  EXPECT_EQ(systolic_cycles(array, 8, 4, 4), 18u);
  // 4 folds: load 4, three folds of max(m, R) = 8 while the next weights load, the last
  // streams 8 and drains 4 + 4 - 2: 4 + 24 + 8 + 6 = 42 (72 without).
  EXPECT_EQ(systolic_cycles(array, 8, 8, 8), 42u);
  // m = 2 < R: the weight loads set the pace: 4 + max(2, 4) + 2 + 6 = 16 (24 without).
  EXPECT_EQ(systolic_cycles(array, 2, 4, 8), 16u);
  // k = 4 + 2 (the second fold loads 2 rows), n = 3: 4 + max(5, 2) + 5 + (2 + 3 - 2) = 17 (24 without).
  EXPECT_EQ(systolic_cycles(array, 5, 3, 6), 17u);
  // k = 2 < R in each of 2 column folds (n = 4 + 3): 2 + max(5, 2) + 5 + (2 + 3 - 2) = 15.
  EXPECT_EQ(systolic_cycles(array, 5, 7, 2), 15u);
  // k = 6, n = 7: folds (kr, nc) = (4,4) (2,4) (4,3) (2,3): 4 + max(5,2) + max(5,4) + max(5,2) + 5 + (2 + 3 - 2) = 27.
  EXPECT_EQ(systolic_cycles(array, 5, 7, 6), 27u);
}

// SCALE-Sim v3.0.0 (pip install scalesim; validation/scalesim_check.py reruns it) on GEMM layers,
// ample SRAM, no stalls. Its "Total Cycles" is the index of the cycle that serves the last output
// (single_layer_sim.py: max(ofmap_serviced_cycles)), one less than the count of cycles.
struct ScaleSimGemm {
  uint32_t rows, cols;
  uint64_t m, n, k, scale_sim_total_cycles;
};

// Weight stationary with double buffering off and every fold timed as the full array: npusim's
// closed form is SCALE-Sim's, ceil(k / R) * ceil(n / C) folds of 2R + C + m - 2 cycles.
TEST_F(Golden, SystolicTileReproducesScaleSimWeightStationary) {
  constexpr ScaleSimGemm kLayers[] = {
      // 1 x 1 fold of 2*32 + 32 + 64 - 2 = 158.
      {32, 32, 64, 32, 32, 157},
      // 3 x 2 folds of 64 + 32 + 100 - 2 = 194: 1164.
      {32, 32, 100, 50, 70, 1163},
      // 2 x 3 folds of 64 + 32 + 8 - 2 = 102: 612.
      {32, 32, 8, 96, 40, 611},
      // 8 x 4 folds of 64 + 32 + 1 - 2 = 95: 3040.
      {32, 32, 1, 128, 256, 3039},
      // 1 x 1 fold (k = 9, n = 17 padded to the array) of 64 + 32 + 300 - 2 = 394.
      {32, 32, 300, 17, 9, 393},
      // 5 x 3 folds of 64 + 32 + 33 - 2 = 127: 1905.
      {32, 32, 33, 65, 129, 1904},
      // A 8 x 16 array: 4 x 2 folds of 16 + 16 + 64 - 2 = 94: 752.
      {8, 16, 64, 32, 32, 751},
      // 9 x 4 folds of 16 + 16 + 100 - 2 = 130: 4680.
      {8, 16, 100, 50, 70, 4679},
      // 5 x 6 folds of 16 + 16 + 8 - 2 = 38: 1140.
      {8, 16, 8, 96, 40, 1139},
      // 32 x 8 folds of 16 + 16 + 1 - 2 = 31: 7936.
      {8, 16, 1, 128, 256, 7935},
      // 2 x 2 folds of 16 + 16 + 300 - 2 = 330: 1320.
      {8, 16, 300, 17, 9, 1319},
      // 17 x 5 folds of 16 + 16 + 33 - 2 = 63: 5355.
      {8, 16, 33, 65, 129, 5354},
  };
  for (const ScaleSimGemm& layer : kLayers) {
    TensorCoreConfig array{layer.rows, layer.cols, Dataflow::WeightStationary, {}};
    array.fold_timing = FoldTiming::FullArray;
    EXPECT_EQ(systolic_cycles(array, layer.m, layer.n, layer.k), layer.scale_sim_total_cycles + 1)
        << layer.rows << "x" << layer.cols << " array, m=" << layer.m << " n=" << layer.n << " k=" << layer.k;
  }
}

// Output stationary departs from SCALE-Sim on purpose: npusim shifts each fold's outputs out of the
// array (R more cycles a fold, 2R + C + k - 2), where SCALE-Sim v3 overlaps that drain with the next
// fold's inputs and charges R + C + k - 2, the last fold's drain included.
TEST_F(Golden, SystolicTileOutputStationaryDrainsEachFoldUnlikeScaleSim) {
  constexpr ScaleSimGemm kLayers[] = {
      // 2 x 1 folds: SCALE-Sim 2 * (32 + 32 + 32 - 2) = 188 cycles, npusim 188 + 2 * 32 = 252.
      {32, 32, 64, 32, 32, 187},
      // 4 x 2 folds: SCALE-Sim 8 * (32 + 32 + 70 - 2) = 1056, npusim 1056 + 8 * 32 = 1312.
      {32, 32, 100, 50, 70, 1055},
      // A 8 x 16 array, 5 x 5 folds: SCALE-Sim 25 * (8 + 16 + 129 - 2) = 3775, npusim 3775 + 25 * 8 = 3975.
      {8, 16, 33, 65, 129, 3774},
  };
  for (const ScaleSimGemm& layer : kLayers) {
    TensorCoreConfig array{layer.rows, layer.cols, Dataflow::OutputStationary, {}};
    array.fold_timing = FoldTiming::FullArray;
    const uint64_t folds = ((layer.m + layer.rows - 1) / layer.rows) * ((layer.n + layer.cols - 1) / layer.cols);
    EXPECT_EQ(systolic_cycles(array, layer.m, layer.n, layer.k), layer.scale_sim_total_cycles + 1 + folds * layer.rows)
        << layer.rows << "x" << layer.cols << " array, m=" << layer.m << " n=" << layer.n << " k=" << layer.k;
  }
}

// Partial folds: npusim's default charges the rows and columns a fold uses, SCALE-Sim the whole array.
TEST_F(Golden, SystolicFoldTimingUsedExtentAgainstFullArray) {
  TensorCoreConfig array{4, 4, Dataflow::WeightStationary, {}};
  // k = 4 + 2, n = 3: used extent (2*4 + 3 + 5 - 2) + (2*2 + 3 + 5 - 2) = 14 + 10 = 24.
  EXPECT_EQ(systolic_cycles(array, 5, 3, 6), 24u);
  array.fold_timing = FoldTiming::FullArray;
  // Full array: 2 folds of 2*4 + 4 + 5 - 2 = 15: 30.
  EXPECT_EQ(systolic_cycles(array, 5, 3, 6), 30u);
}

// Several arrays (MXUs) share a tile's folds: column folds first, then k folds.
TEST_F(Golden, SystolicTileOnSeveralArrays) {
  TensorCoreConfig array{4, 4, Dataflow::WeightStationary, {}};
  array.arrays = 2;
  // n = 16: 4 column folds, 2 per array; k = 4: each array 2 folds of 2*4 + 4 + 8 - 2 = 18: 36 (72 on one).
  EXPECT_EQ(systolic_cycles(array, 8, 16, 4), 36u);
  // n = 12: 3 column folds, the slower array takes 2: 36.
  EXPECT_EQ(systolic_cycles(array, 8, 12, 4), 36u);
  // n = 4, k = 16: 1 column fold, so the 2 arrays split its 4 k folds: 2 folds of 18 each: 36.
  EXPECT_EQ(systolic_cycles(array, 8, 4, 16), 36u);
  array.arrays = 4;
  // n = 4 + 2, k = 12: 2 column folds, 2 arrays each, 3 k folds split 2 + 1: the slower array's
  // share, n = 4 and k = 8: 2 folds of 18: 36.
  EXPECT_EQ(systolic_cycles(array, 8, 6, 12), 36u);
}

// A tile of m = 8, n = 4, k = 4: the accumulator (r1), A at 0 (r2), B at 1024 (r3), m (r4), n and k (r5).
constexpr const char* kTileOperands = R"(
.code 0
    li r1, 0x40000000
    li r2, 0
    li r3, 1024
    li r4, 8
    li r5, 4
)";

TEST_F(Golden, TensorCoreTileEndToEnd) {
  Simulator simulator(test_config());
  const isa::Program program = assemble(std::string(kTileOperands) + R"(
    tc.mm bf16, none, r1, r2, r3, r4, r5, r5
    halt
)");
  const ChipStats before = simulator.stats();
  run(simulator, program);
  const ChipStats after = simulator.stats();
  // m=8, n=4, k=4 on a 4x4 weight-stationary array: 18 cycles (one fold); the
  // operand traffic (64 B of A, 32 B of B, 128 B to the accumulator) takes at most 2.
  EXPECT_EQ(busy(before, after, 0, kTensor), 18u);
  EXPECT_EQ(after.cores[0].macs - before.cores[0].macs, 8u * 4 * 4);
}

// With double-buffered weights, a tc.mm that follows another without a gap loads its first weights
// while the other's last fold streams, and its rows enter behind that fold's while the results drain.
TEST_F(Golden, BackToBackTilesOverlapTheirWeightLoadsAndDrains) {
  ChipConfig config = test_config();
  config.core.tensor_core.weight_double_buffering = true;
  config.core.vector_unit.op_costs[static_cast<size_t>(isa::Opcode::V_EXP)] = {20, 2};
  const std::string operands = std::string(kTileOperands) + R"(
    li r6, 2048
    li r7, 40
)";
  Simulator simulator(config);
  {
    const ChipStats before = simulator.stats();
    run(simulator, assemble(operands + R"(
    tc.mm bf16, none, r1, r2, r3, r4, r5, r5
    tc.mm bf16, acc, r1, r2, r3, r4, r5, r5
    sync.signal tc, s0
    sync.wait ctl, s0
    halt
)"));
    const ChipStats after = simulator.stats();
    // Alone, m=8, n=4, k=4 on the 4x4 array: 4 (weights) + 8 (rows) + 4 + 4 - 2 (drain) = 18.
    // The first ends when its last row is in (4 + 8 = 12); the second, at once, has its weights
    // (loaded during the first's 8 rows): 8; the signal waits for its drain, 6: 12 + 8 + 6 = 26.
    EXPECT_EQ(busy(before, after, 0, kTensor), 26u);
  }
  {
    const ChipStats before = simulator.stats();
    run(simulator, assemble(operands + R"(
    tc.mm bf16, none, r1, r2, r3, r4, r5, r5
    sync.signal tc, s2
    tc.mm bf16, acc, r1, r2, r3, r4, r5, r5
    sync.wait ctl, s2
    halt
)"));
    const ChipStats after = simulator.stats();
    // A signal between them (a K step freeing its operand slots) rises when the first's results are
    // complete (12 + 6) while the engine goes on: the second still follows at once, 12 + 8 + 6 = 26.
    // (When a signal held the engine through the drain: 12 + 6, then 4 + 8 + 6 = 36.)
    EXPECT_EQ(busy(before, after, 0, kTensor), 26u);
  }
  {
    const ChipStats before = simulator.stats();
    run(simulator, assemble(operands + R"(
    v.exp f32, r6, r2, r5, r7
    sync.signal vec, s1
    tc.mm bf16, none, r1, r2, r3, r4, r5, r5
    sync.wait tc, s1
    tc.mm bf16, acc, r1, r2, r3, r4, r5, r5
    halt
)"));
    const ChipStats after = simulator.stats();
    // The second waits for the vector unit (20 + 160 / 8 * 2 = 60 cycles), long after the first's
    // last row: its weights load after the wait. 12 + (4 + 8) + 6 (the drain before the core halts) = 30.
    EXPECT_EQ(busy(before, after, 0, kTensor), 30u);
    EXPECT_GT(after.cores[0].engines[kTensor].stall_cycles[size_t(StallReason::Semaphore)] -
                  before.cores[0].engines[kTensor].stall_cycles[size_t(StallReason::Semaphore)],
              0u);
  }
}

TEST_F(Golden, VectorOpUsesItsOwnCost) {
  ChipConfig config = test_config();
  config.core.vector_unit.op_costs[static_cast<size_t>(isa::Opcode::V_EXP)] = {20, 2};
  config.core.vector_unit.op_costs[static_cast<size_t>(isa::Opcode::V_EXPSUM)] = {30, 4};
  Simulator simulator(config);
  const isa::Program program = assemble(R"(
.code 0
    li r1, 0
    li r2, 1024
    li r3, 4
    li r4, 10
    li r5, 2048
    v.exp f32, r2, r1, r3, r4
    v.add f32, full, r2, r1, r1, r3, r4
    v.expsum bf16, r2, r1, r5, r5, r3, r4
    halt
)");
  const ChipStats before = simulator.stats();
  run(simulator, program);
  const ChipStats after = simulator.stats();
  // v.exp: 40 elements, 8 lanes: 20 + ceil(40 / 8) * 2 = 30.
  // v.add: default cost 4 + 5 * 1 = 9 (its 3 x 160 B of traffic takes 3 cycles each, overlapped: 9).
  // v.expsum: 30 + ceil(40 / 8) * 4 = 50 (its m and sum, a value per row, add no cycles).
  EXPECT_EQ(busy(before, after, 0, kVector), 30u + 9u + 50u);
}

TEST_F(Golden, NocTransferOverTwoHops) {
  Simulator simulator(test_config(3, 3, 1));
  const isa::Program program = assemble(R"(
.code 0
    li r1, 2
    li r2, 64
    dma.send ch0, r1, s0, r0, r0, r2, r0, r0, r0
    halt
.code 1
    halt
.code 2
    sync.wait ctl, s0
    halt
)");
  const ChipStats before = simulator.stats();
  run(simulator, program, 0b111);
  const ChipStats after = simulator.stats();
  // 5 descriptor + 1 scratchpad read + 2 hops x 2 router cycles + 64 B / 16 B
  // per cycle on the links (wormhole: charged once) + 1 remote scratchpad write = 15.
  EXPECT_EQ(busy(before, after, 0, kDma0), 15u);
}

// A global address in core 2's window is core 2's scratchpad: the host link
// writes it, core 0 loads from it over the NoC and stores what it read to DRAM.
TEST_F(Golden, DmaLoadFromAnotherCoresScratchpadThroughItsWindow) {
  Simulator simulator(test_config(3, 3, 1));
  std::vector<uint8_t> data(64);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(3 * i + 1);
  simulator.copy_to_device(core_window_address(2, 256), data.data(), data.size());
  const isa::Program program = assemble(R"(
.buffer x, u8, 64
.code 0
    li r1, 1
    shli r1, r1, 48
    li r2, 2
    shli r2, r2, 32
    add r1, r1, r2
    addi r1, r1, 256
    li r3, 64
    dma.ld ch0, r0, r1, r3, r0, r0, r0, r0, r0, r0
    fence
    la r4, x
    dma.st ch1, r4, r0, r3, r0, r0, r0, r0, r0, r0
    halt
.code 1
    halt
.code 2
    halt
)");
  const ChipStats before = simulator.stats();
  run(simulator, program, 0b111);
  const ChipStats after = simulator.stats();
  // 5 descriptor + the read request's 2 hops x 2 router cycles + 1 remote
  // scratchpad read + the data's 2 hops back (2 x 2 router cycles + 64 B / 16 B
  // per cycle, wormhole: charged once) + 1 local scratchpad write = 19.
  EXPECT_EQ(busy(before, after, 0, kDma0), 19u);
  std::vector<uint8_t> stored(64);
  simulator.read_dram(bind_symbols(program)[0], stored.data(), stored.size());
  EXPECT_EQ(stored, data);
  // No DRAM read: the load came from SRAM.
  uint64_t dram_read_bytes = 0;
  for (const auto& channel : after.dram_channels) dram_read_bytes += channel.read_bytes;
  for (const auto& channel : before.dram_channels) dram_read_bytes -= channel.read_bytes;
  EXPECT_EQ(dram_read_bytes, 0u);
}

// A vector instruction streams its operands through the scratchpad's banks
// over its whole time, sharing them: a DMA request meanwhile is slowed by the
// vector's share of the banks, not held up until the vector is done.
TEST_F(Golden, DmaSharesTheBanksWithAStreamingVectorOp) {
  Simulator simulator(test_config());
  const auto program = [&](bool with_vector) {
    return assemble(std::string(".buffer x, u8, 64\n.code 0\n  la r1, x\n  li r3, 64\n  li r5, 32768\n") +
                    (with_vector ? "  li r6, 1\n  li r7, 1024\n  li r8, 4096\n  li r9, 16384\n  v.add f32, full, r9, r0, r8, r6, r7\n" : "") +
                    "  dma.ld ch0, r5, r1, r3, r0, r0, r0, r0, r0, r0\n  halt\n");
  };
  ChipStats before = simulator.stats();
  run(simulator, program(false));
  ChipStats after = simulator.stats();
  EXPECT_EQ(busy(before, after, 0, kDma0), 28u);  // 5 descriptor + 20 (row closed) + 2 (bus) + 1 (scratchpad)
  before = after;
  run(simulator, program(false));
  after = simulator.stats();
  EXPECT_EQ(busy(before, after, 0, kDma0), 18u);  // the row open: 5 + 10 + 2 + 1
  before = after;
  run(simulator, program(true));
  after = simulator.stats();
  // v.add of 1024 f32: 128 vectors, 4 + 128 = 132 cycles; each of its three 4 KiB operands spans all 8 banks
  // (64 B/cycle) for 128 cycles: half of their bandwidth each, 7/8 in all (the cap). The DMA's 64-byte write,
  // 1 cycle at full width, takes ceil(1 / (1/8)) = 8: 5 + 10 + 2 + 8 = 25. (Holding the banks for the
  // vector's 3 x 64 cycles of traffic up front, as a first-come reservation would, it took 5 + 10 + 2 + ~190.)
  EXPECT_EQ(busy(before, after, 0, kVector), 132u);
  EXPECT_EQ(busy(before, after, 0, kDma0), 25u);
}

}  // namespace
}  // namespace npu::sim
