// DMA timing per request (the reference), per step (DmaTiming::PerStep,
// dma_steps.cpp) and per window (DmaTiming::PerWindow, dma_windows.cpp) on the
// test chip (test_chip.h): golden latencies that all three models must give,
// with the arithmetic in a comment, and the coarser models' statistics and
// data. Each transfer here fits in one window, whose share of a channel the
// window model times in closed form as the per-step burst is timed (the
// in-order bus gives the same data times as request by request).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "npusim/sim/simulator.h"
#include "test_chip.h"

namespace npu::sim {
namespace {

using testing::assemble;
using testing::bind_symbols;
using testing::test_config;

constexpr unsigned kDma0 = 1;

std::string timing_name(const ::testing::TestParamInfo<DmaTiming>& info) {
  switch (info.param) {
    case DmaTiming::PerStep: return "PerStep";
    case DmaTiming::PerWindow: return "PerWindow";
    case DmaTiming::PerRequest: break;
  }
  return "PerRequest";
}

class DmaTimingGolden : public ::testing::TestWithParam<DmaTiming> {
 protected:
  ChipConfig config(unsigned cores = 1, unsigned mesh_cols = 1) const {
    ChipConfig chip = test_config(cores, mesh_cols, 1);
    chip.core.dma.timing = GetParam();
    return chip;
  }
  // Runs `program` on the cores of `mask`; returns core `core`'s DMA channel 0 busy cycles.
  uint64_t dma_cycles(Simulator& simulator, const isa::Program& program, uint64_t mask = 1, unsigned core = 0) {
    const ChipStats before = simulator.stats();
    simulator.launch(program, mask, bind_symbols(program));
    const RunResult result = simulator.run(1'000'000);
    EXPECT_FALSE(result.fault) << result.fault->to_string();
    const ChipStats after = simulator.stats();
    return after.cores[core].engines[kDma0].busy_cycles - before.cores[core].engines[kDma0].busy_cycles;
  }
  static std::string load(uint64_t offset, uint64_t bytes, const std::string& core = "0") {
    return ".buffer x, u8, 16384\n.code " + core + "\n  la r1, x\n  addi r1, r1, " + std::to_string(offset) + "\n  li r3, " +
           std::to_string(bytes) + "\n  dma.ld ch0, r0, r1, r3, r0, r0, r0, r0, r0, r0\n  halt\n";
  }
};

TEST_P(DmaTimingGolden, OneChannelRowClosedThenHitThenConflict) {
  Simulator simulator(config());
  // As Golden.DmaLoadFromDramOnRowMissThenHitThenConflict: 5 descriptor; 4
  // requests of 64 B to channel 0, bank 0, row 0 (closed): data at 5 + 20 = 25,
  // the bus 25..27, then 27..29, 29..31, 31..33 (the later ones hit the open
  // row); the last lands in the scratchpad at 34. Per step: one burst of the 4
  // on channel 0, the same bus times; its 256 B enter the scratchpad from 27
  // (the first request's data) for 4 cycles, done no earlier than the last
  // request's 33 + 1 = 34.
  EXPECT_EQ(dma_cycles(simulator, assemble(load(0, 256))), 34u);
  EXPECT_EQ(dma_cycles(simulator, assemble(load(64, 64))), 18u);    // 5 + 10 (hit) + 2 + 1
  EXPECT_EQ(dma_cycles(simulator, assemble(load(8192, 64))), 38u);  // 5 + 30 (conflict) + 2 + 1
  const ChipStats stats = simulator.stats();
  EXPECT_EQ(stats.dram_channels[0].row_hits, 4u);
  EXPECT_EQ(stats.dram_channels[0].row_closed, 1u);
  EXPECT_EQ(stats.dram_channels[0].row_conflicts, 1u);
  EXPECT_EQ(stats.dram_channels[0].read_bytes, 384u);
  EXPECT_EQ(stats.dram_channels[0].busy_cycles, 12u);  // 384 B at 32 B/cycle
}

TEST_P(DmaTimingGolden, TwoChannelsShareTheScratchpad) {
  Simulator simulator(config());
  // 1 KiB in one step (step_bytes 1024): 16 requests of 64 B issued at 5..20;
  // requests 0-3 and 8-11 go to channel 0, 4-7 and 12-15 to channel 1
  // (256-byte interleave), each to bank 0, row 0, closed.
  //   channel 0: request 0 ready at 5, data 25, bus 25..27; the rest hit (bank
  //     ready at 5 + 10 = 15, data from 25) and follow on the bus: the last at 41.
  //   channel 1: request 4 ready at 9, data 29, bus 29..31, the last at 45.
  // Per request: each 64 B lands in the scratchpad in 1 cycle, all 8 banks;
  // two landing together (31, 33, ...) take turns; the last at 45 + 1 = 46.
  // Per step: channel 0's 512 B enter the scratchpad from its first data at 27
  // over its requests' span (27..41, at least its 8 bank cycles), channel 1's
  // from 31 (bursts do not wait for each other's banks); each burst is done no
  // earlier than its last request would be: max(31 + 14, 45 + 1) = 46.
  EXPECT_EQ(dma_cycles(simulator, assemble(load(0, 1024))), 46u);
  const ChipStats stats = simulator.stats();
  EXPECT_EQ(stats.dram_channels[0].read_bytes, 512u);
  EXPECT_EQ(stats.dram_channels[1].read_bytes, 512u);
  EXPECT_EQ(stats.dram_channels[0].row_closed + stats.dram_channels[0].row_hits, 8u);
  EXPECT_EQ(stats.cores[0].scratchpad_write_bytes, 1024u);
}

TEST_P(DmaTimingGolden, LoadOverOneHopIsBoundByTheLink) {
  Simulator simulator(config(2, 2));
  // Core 1 at (1,0), the DRAM port at (0,0): 1 hop of 2 router cycles, links of
  // 16 B/cycle (64 B: 4 cycles). 4 requests of 64 B, channel 0, bank 0, closed:
  // they reach DRAM at 7..10; bus 27..29, 29..31, 31..33, 33..35.
  // Per request: each crosses the link back after its bus burst (+2 router):
  // heads at 31, 35, 39, 43 (the link is the bottleneck), the last done at 47,
  // in the scratchpad at 48.
  // Per step: the burst's 256 B cross the link cut through from 29 + 2 = 31
  // for 16 cycles: 47; the scratchpad: 48.
  EXPECT_EQ(dma_cycles(simulator, assemble(load(0, 256, "1") + ".code 0\n  halt\n"), 0b11, 1), 48u);
  const ChipStats stats = simulator.stats();
  ASSERT_EQ(stats.noc_links.size(), 1u);
  EXPECT_EQ(stats.noc_links[0].bytes, 256u);
}

TEST_P(DmaTimingGolden, StoreToDram) {
  Simulator simulator(config());
  const isa::Program program = assemble(
      ".buffer y, u8, 16384\n.code 0\n  la r1, y\n  li r3, 256\n  dma.st ch0, r1, r0, r3, r0, r0, r0, r0, r0, r0\n  halt\n");
  // 5 descriptor; 4 requests of 64 B read from the scratchpad at 5, 6, 7, 8
  // (1 cycle each), written to channel 0, bank 0, row 0 (closed): request 0
  // from 6: data 26..28; requests 1-3 hit (bank ready at 16) and follow on the
  // bus: 28..30, 30..32, 32..34. Per step, the burst's 256 B are read from the
  // scratchpad from 5 to 9, the first request's by 6: the same bus times.
  EXPECT_EQ(dma_cycles(simulator, program), 34u);
  EXPECT_EQ(simulator.stats().dram_channels[0].write_bytes, 256u);
}

// Data moves the same in every model, strided rows included.
TEST_P(DmaTimingGolden, StridedLoadAndStoreMoveTheSameBytes) {
  Simulator simulator(config());
  const isa::Program program = assemble(R"(
.buffer x, u8, 8192
.buffer y, u8, 8192
.code 0
    la r1, x
    la r2, y
    li r3, 48          # 48-byte rows
    li r4, 20          # 20 rows
    li r5, 300         # x: a row every 300 bytes
    li r6, 64          # scratchpad: a row every 64 bytes
    li r7, 3           # 3 planes
    li r8, 100         # x: a plane every 100 bytes (the planes' rows interleave)
    li r9, 1280        # scratchpad: a plane every 1280 bytes
    dma.ld ch0, r0, r1, r3, r4, r7, r6, r5, r9, r8
    fence
    dma.st ch1, r2, r0, r3, r4, r7, r5, r6, r8, r9
    halt
)");
  const std::vector<uint64_t> addresses = bind_symbols(program);
  std::vector<uint8_t> x(8192);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<uint8_t>(i * 7 + i / 251);
  simulator.copy_to_device(addresses[0], x.data(), x.size());
  simulator.launch(program, 1, addresses);
  const RunResult result = simulator.run(1'000'000);
  ASSERT_FALSE(result.fault) << result.fault->to_string();
  std::vector<uint8_t> y(8192);
  simulator.read_dram(addresses[1], y.data(), y.size());
  std::vector<uint8_t> want(8192, 0);
  for (size_t plane = 0; plane < 3; ++plane)
    for (size_t row = 0; row < 20; ++row) std::memcpy(&want[plane * 100 + row * 300], &x[plane * 100 + row * 300], 48);
  EXPECT_EQ(y, want);
}

INSTANTIATE_TEST_SUITE_P(AllModels, DmaTimingGolden, ::testing::Values(DmaTiming::PerRequest, DmaTiming::PerStep, DmaTiming::PerWindow),
                         timing_name);

}  // namespace
}  // namespace npu::sim
