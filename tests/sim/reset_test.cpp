// A reset (after a fault: here the watchdog's; the RESET register does the
// same) while a kernel's DMA transfers, products and semaphore waits are in
// flight abandons all of it: the next launch runs to
// its end. (Before, an engine whose command was abandoned could pop the next
// launch's command off its queue, or pop an emptied queue: the next launch
// deadlocked.)
#include <gtest/gtest.h>

#include "example_source.h"
#include "scratch_directory.h"
#include "npusim/sim/config_loader.h"
#include "npusim/sim/simulator.h"
#include "test_chip.h"

namespace npu::sim {
namespace {

TEST(ChipReset, AResetInTheMiddleOfAGemmLeavesAChipThatRunsTheNextToItsEnd) {
  SimulatorOptions options;
  options.functional = false;
  Simulator simulator(load_chip_config("base"), options);
  const std::string source = npu::testing::read_file(std::string(NPUSIM_SOURCE_DIR) + "/examples/gemm.s");
  const isa::Program gemm = testing::assemble(npu::testing::with_sizes(source, {{"M", 1024}, {"N", 1024}, {"K", 1024}}));
  const std::vector<uint64_t> addresses = testing::bind_symbols(gemm);
  simulator.launch(gemm, 0xf, addresses);
  const RunResult whole = simulator.run(100'000'000);
  ASSERT_FALSE(whole.fault) << whole.fault->to_string();
  for (const double fraction : {0.13, 0.38, 0.67, 0.97}) {  // of the whole run: loads, products and stores in flight
    const uint64_t after = uint64_t(fraction * double(whole.cycles()));
    simulator.launch(gemm, 0xf, addresses);
    const RunResult stopped = simulator.run(after);  // the watchdog stops it, and the chip is reset
    ASSERT_TRUE(stopped.fault) << after;
    EXPECT_EQ(stopped.fault->kind, FaultKind::Watchdog) << stopped.fault->to_string();
    simulator.launch(gemm, 0xf, addresses);
    const RunResult again = simulator.run(100'000'000);
    ASSERT_FALSE(again.fault) << "reset after " << after << " cycles: " << again.fault->to_string();
    // Not the fresh chip's cycles exactly: a reset leaves DRAM's open rows, and the DRAM and NoC time that the
    // abandoned transfers reserved stays reserved (docs/chip.md, "Reset").
    EXPECT_NEAR(double(again.cycles()), double(whole.cycles()), 0.1 * double(whole.cycles())) << after;
  }
}

}  // namespace
}  // namespace npu::sim
