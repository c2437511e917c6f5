// Every fault class produces a record naming core, engine, pc, instruction,
// address and cycle; the chip is reset and runs the next program; the trace
// recorded across the faults stays valid.
#include <gtest/gtest.h>

#include "npusim/sim/simulator.h"
#include "npusim/traces/trace.h"
#include "npusim/traces/writers.h"
#include "test_chip.h"

namespace npu::sim {
namespace {

using testing::assemble;
using testing::bind_symbols;
using testing::test_config;

class Faults : public ::testing::Test {
 protected:
  Faults() : simulator_(test_config(2, 2, 1), SimulatorOptions{true, &trace_, nullptr}) {}

  FaultRecord expect_fault(const std::string& source, FaultKind kind, uint64_t mask = 1, uint64_t max_cycles = 100000) {
    const isa::Program program = assemble(source);
    simulator_.launch(program, mask, bind_symbols(program));
    const RunResult result = simulator_.run(max_cycles);
    EXPECT_TRUE(result.fault) << source;
    if (!result.fault) return {};
    EXPECT_EQ(result.fault->kind, kind) << result.fault->to_string();
    expect_chip_still_works();
    return *result.fault;
  }

  // After a fault the chip is reset: a good program runs and computes.
  void expect_chip_still_works() {
    const isa::Program program = assemble(R"(
.output y, i32, 4
.code 0
    li r1, 7
    li r2, 4
    li r3, 1
    v.fill i32, r0, r1, r3, r2
    la r4, y
    li r5, 16
    dma.st ch1, r4, r0, r5, r0, r0, r0, r0, r0, r0
    halt
)");
    const auto addresses = bind_symbols(program);
    simulator_.launch(program, 1, addresses);
    const RunResult result = simulator_.run(100000);
    ASSERT_FALSE(result.fault) << result.fault->to_string();
    int32_t y[4] = {};
    simulator_.read_dram(addresses[0], y, sizeof y);
    EXPECT_EQ(y[0], 7);
    EXPECT_EQ(y[3], 7);
  }

  trace::Trace trace_;
  Simulator simulator_;
};

TEST_F(Faults, ALaunchWithNoCycleLimitRunsToItsEnd) {
  // run(UINT64_MAX): the deadline is the last cycle the kernel's time reaches, not the launch's cycle
  // plus the limit wrapped around (which, for any launch after cycle 0, lies before it).
  expect_chip_still_works();  // (so that the next launch starts after cycle 0)
  const isa::Program program = assemble(R"(
.code 0
    li r1, 50
loop:
    dbnz r1, loop
    halt
)");
  simulator_.launch(program, 1, bind_symbols(program));
  const RunResult result = simulator_.run(UINT64_MAX);
  EXPECT_GT(result.start_cycle, 0u);
  EXPECT_FALSE(result.fault) << result.fault->to_string();
  EXPECT_GT(result.cycles(), 50u);
}

TEST_F(Faults, InvalidInstruction) {
  const FaultRecord fault = expect_fault(".code 0\n    nop\n    .word 0xff\n    halt\n", FaultKind::InvalidInstruction);
  EXPECT_EQ(fault.core, 0);
  EXPECT_EQ(fault.engine, "control");
  EXPECT_EQ(fault.pc, 1);
  EXPECT_NE(fault.instruction.find("invalid opcode 0xff"), std::string::npos) << fault.to_string();
}

TEST_F(Faults, GlobalAddressOutOfRange) {
  const FaultRecord fault = expect_fault(R"(
.code 0
    li r1, 1
    shli r1, r1, 40
    li r2, 64
    dma.ld ch1, r0, r1, r2, r0, r0, r0, r0, r0, r0
    halt
)",
                                         FaultKind::AddressOutOfRange);
  EXPECT_EQ(fault.engine, "dma ch1");
  EXPECT_EQ(fault.pc, 3);
  EXPECT_TRUE(fault.has_address);
  EXPECT_EQ(fault.address, uint64_t{1} << 40);
  EXPECT_EQ(fault.instruction, "dma.ld ch1, r0, r1, r2, r0, r0, r0, r0, r0, r0");
  EXPECT_NE(fault.to_string().find("address 0x10000000000"), std::string::npos) << fault.to_string();
}

// Core 1's window holds its 64 KiB scratchpad: an address past it faults with
// the global address; a window of a core the chip lacks is outside memory.
TEST_F(Faults, CoreWindowAddressOutOfRange) {
  const std::string load_from = R"(
.code 0
    li r1, 1
    shli r1, r1, 48
    li r2, CORE
    shli r2, r2, 32
    add r1, r1, r2
    li r3, 0x10000
    add r1, r1, r3
    li r2, 64
    dma.ld ch0, r0, r1, r2, r0, r0, r0, r0, r0, r0
    halt
)";
  const auto for_core = [&](const std::string& core) {
    std::string source = load_from;
    source.replace(source.find("CORE"), 4, core);
    return source;
  };
  FaultRecord fault = expect_fault(for_core("1"), FaultKind::AddressOutOfRange);
  EXPECT_EQ(fault.address, (uint64_t{1} << 48) + (uint64_t{1} << 32) + 0x10000);
  EXPECT_NE(fault.message.find("core 1's window"), std::string::npos) << fault.to_string();
  fault = expect_fault(for_core("5"), FaultKind::AddressOutOfRange);
  EXPECT_EQ(fault.address, (uint64_t{1} << 48) + (uint64_t{5} << 32) + 0x10000);
}

TEST_F(Faults, LocalAddressOutOfRange) {
  const FaultRecord fault =
      expect_fault(".code 0\n    li r1, 0x30000000\n    li r2, 4\n    v.exp f32, r1, r1, r2, r2\n    halt\n", FaultKind::AddressOutOfRange);
  EXPECT_EQ(fault.engine, "vector unit");
  EXPECT_EQ(fault.address, 0x30000000u);
}

TEST_F(Faults, Misaligned) {
  const FaultRecord fault = expect_fault(".code 0\n    li r1, 2\n    li r2, 4\n    v.exp f32, r1, r1, r2, r2\n    halt\n", FaultKind::Misaligned);
  EXPECT_EQ(fault.address, 2u);
}

TEST_F(Faults, SramOverflow) {
  // 64 x 512 f32 = 128 KiB from the start of a 64 KiB scratchpad.
  const FaultRecord fault =
      expect_fault(".code 0\n    li r2, 64\n    li r3, 512\n    v.relu f32, r0, r0, r2, r3\n    halt\n", FaultKind::SramOverflow);
  EXPECT_NE(fault.message.find("runs past the end of the scratchpad"), std::string::npos) << fault.to_string();
}

// A DMA block is checked row by row, in order, before any byte moves: the
// fault names the first row that leaves its memory, whatever the rows after it.
TEST_F(Faults, DmaBlockReportsItsFirstFaultingRow) {
  // Three 64-byte rows 32 KiB apart in a 64 KiB scratchpad: the third starts at its end.
  FaultRecord fault = expect_fault(R"(
.code 0
    li r1, 64
    li r2, 3
    li r3, 0x8000
    dma.ld ch0, r0, r0, r1, r2, r0, r3, r1, r0, r0
    halt
)",
                                   FaultKind::AddressOutOfRange);
  EXPECT_EQ(fault.pc, 3);
  EXPECT_EQ(fault.address, 0x10000u);
  // Rows 0x7ff0 apart: the third runs past the end.
  fault = expect_fault(R"(
.code 0
    li r1, 64
    li r2, 3
    li r3, 0x7ff0
    dma.ld ch0, r0, r0, r1, r2, r0, r3, r1, r0, r0
    halt
)",
                       FaultKind::SramOverflow);
  EXPECT_EQ(fault.address, 0xffe0u);
  // Two planes of two rows from 16 MiB of DRAM: the second plane's second row starts at its end.
  fault = expect_fault(R"(
.code 0
    li r1, 64
    li r2, 2
    li r3, 0xffffc0
    li r4, 128
    dma.ld ch0, r0, r0, r1, r2, r2, r1, r1, r4, r3
    halt
)",
                       FaultKind::AddressOutOfRange);
  EXPECT_EQ(fault.pc, 4);
  EXPECT_EQ(fault.address, 0x1000000u);
  EXPECT_NE(fault.message.find("global range [0x1000000, +64)"), std::string::npos) << fault.to_string();
}

TEST_F(Faults, ExecutionErrors) {
  expect_fault(".code 0\n    li r1, 5\n    divu r2, r1, r0\n    halt\n", FaultKind::ExecutionError);
  // Integer division by zero in the vector unit (the scratchpad is zero where b points).
  const FaultRecord fault =
      expect_fault(".code 0\n    li r1, 1\n    li r2, 4\n    li r3, 256\n    v.fill i32, r0, r1, r1, r2\n    v.div i32, full, r0, r0, r3, r1, r2\n    halt\n",
                   FaultKind::ExecutionError);
  EXPECT_EQ(fault.engine, "vector unit");
  EXPECT_NE(fault.message.find("division by zero"), std::string::npos) << fault.to_string();
}

// A bitwise instruction on a float dtype faults as an invalid instruction, in a timing-only run too.
constexpr const char* kBitwiseOnFloats = ".code 0\n    li r1, 1\n    li r2, 4\n    v.and f32, full, r0, r0, r0, r1, r2\n    halt\n";

TEST_F(Faults, BitwiseOnFloatsIsInvalid) {
  const FaultRecord fault = expect_fault(kBitwiseOnFloats, FaultKind::InvalidInstruction);
  EXPECT_EQ(fault.engine, "vector unit");
  EXPECT_EQ(fault.pc, 2);
  EXPECT_NE(fault.message.find("needs an integer dtype, got f32"), std::string::npos) << fault.to_string();
}

TEST_F(Faults, ExpSumOnIntegersIsInvalid) {
  const FaultRecord fault = expect_fault(".code 0\n    li r1, 1\n    li r2, 4\n    v.expsum i32, r0, r0, r0, r0, r1, r2\n    halt\n",
                                         FaultKind::InvalidInstruction);
  EXPECT_EQ(fault.engine, "vector unit");
  EXPECT_EQ(fault.pc, 2);
  EXPECT_NE(fault.message.find("needs a float dtype, got i32"), std::string::npos) << fault.to_string();
}

TEST(TimingOnlyFaults, BitwiseOnFloatsIsInvalid) {  // (one Simulator per process: not a Faults test)
  Simulator simulator(test_config(2, 2, 1), SimulatorOptions{false, nullptr, nullptr});
  const isa::Program program = assemble(kBitwiseOnFloats);
  simulator.launch(program, 1, bind_symbols(program));
  const RunResult result = simulator.run(100000);
  ASSERT_TRUE(result.fault);
  EXPECT_EQ(result.fault->kind, FaultKind::InvalidInstruction) << result.fault->to_string();
}

TEST_F(Faults, DeadlockNamesTheWaitingEngine) {
  const FaultRecord fault = expect_fault(".code 0\n    sync.wait tc, s3\n    halt\n", FaultKind::Deadlock);
  EXPECT_EQ(fault.core, 0);
  EXPECT_NE(fault.message.find("tensor core waits on s3"), std::string::npos) << fault.to_string();
}

TEST_F(Faults, BarrierWithAMissingCoreDeadlocks) {
  const FaultRecord fault = expect_fault(".code 0\n    barrier 1\n    halt\n.code 1\n    halt\n", FaultKind::Deadlock, 0b11);
  EXPECT_NE(fault.message.find("barrier 1"), std::string::npos) << fault.to_string();
}

TEST_F(Faults, WatchdogStopsAnEndlessLoop) {
  const FaultRecord fault = expect_fault(".code 0\nspin:\n    jmp spin\n", FaultKind::Watchdog, 1, 5000);
  EXPECT_GE(fault.cycle, 5000u);
  EXPECT_NE(fault.message.find("cycle limit"), std::string::npos);
}

TEST_F(Faults, TraceStaysValidAcrossFaults) {
  expect_fault(".code 0\n    li r2, 64\n    li r3, 512\n    v.relu f32, r0, r0, r2, r3\n    halt\n", FaultKind::SramOverflow);
  expect_fault(".code 0\nspin:\n    jmp spin\n", FaultKind::Watchdog, 1, 2000);
  const std::vector<std::string> problems = trace::validate_perfetto(trace::to_perfetto(trace_));
  EXPECT_TRUE(problems.empty()) << problems.front();
  EXPECT_TRUE(trace::validate_chrome_json(trace::to_chrome_json(trace_)).empty());
  EXPECT_FALSE(trace_.slices().empty());
}

}  // namespace
}  // namespace npu::sim
