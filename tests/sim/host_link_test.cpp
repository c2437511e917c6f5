// The host's view of the chip: MMIO registers and memory through the host
// link, interrupts, the latched fault and RESET.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "generated_doc.h"

#include "npusim/sim/registers.h"
#include "npusim/sim/simulator.h"
#include "test_chip.h"

namespace npu::sim {
namespace {

using testing::assemble;
using testing::bind_symbols;
using testing::test_config;

ChipConfig link_config() {
  ChipConfig config = test_config(2, 2, 1);
  config.host_link = {16, 100, {1, 0}};  // 16 B/cycle, 100 cycles each way, at node (1,0)
  config.command_processor.num_queues = 2;
  return config;
}

TEST(HostLink, RegisterReadsTakeTwoCrossingsAndWritesOne) {
  Simulator simulator(link_config());
  uint64_t before = simulator.now_cycle();
  EXPECT_EQ(simulator.read_register(static_cast<uint32_t>(Register::DEVICE_ID)), kDeviceId);
  EXPECT_EQ(simulator.now_cycle() - before, 200u);  // request over, value back: 2 x 100
  EXPECT_EQ(simulator.read_register(static_cast<uint32_t>(Register::NUM_CORES)), 2u);
  EXPECT_EQ(simulator.read_register(static_cast<uint32_t>(Register::NUM_QUEUES)), 2u);
  EXPECT_EQ(simulator.read_register(static_cast<uint32_t>(Register::VERSION)), (2u << 16) | kRegisterMapVersion);  // ISA version 2
  before = simulator.now_cycle();
  simulator.write_register(static_cast<uint32_t>(Register::SCRATCH), 0xdeadbeef);
  EXPECT_EQ(simulator.now_cycle() - before, 100u);
  EXPECT_EQ(simulator.read_register(static_cast<uint32_t>(Register::SCRATCH)), 0xdeadbeefu);
  // Queue registers: RW ring setup, HEAD read-only for the host.
  simulator.write_register(queue_register(1, QueueRegister::RING_SIZE), 4096);
  simulator.write_register(queue_register(1, QueueRegister::HEAD), 77);
  EXPECT_EQ(simulator.read_register(queue_register(1, QueueRegister::RING_SIZE)), 4096u);
  EXPECT_EQ(simulator.read_register(queue_register(1, QueueRegister::HEAD)), 0u);
  // The cycle counter reads back the time of the read.
  const uint32_t cycle = simulator.read_register(static_cast<uint32_t>(Register::CYCLE_LO));
  EXPECT_EQ(cycle + 100, simulator.now_cycle());
  EXPECT_THROW(simulator.read_register(0x2), std::out_of_range);
}

TEST(HostLink, MemoryCopiesCrossTheLinkAndTheNoc) {
  Simulator simulator(link_config());
  std::vector<uint8_t> data(8192);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7);
  const uint64_t before = simulator.now_cycle();
  simulator.copy_to_device(0x1000, data.data(), data.size());
  const uint64_t cycles = simulator.now_cycle() - before;
  // 8 KiB at 16 B/cycle is 512 cycles on the link, plus one 100-cycle crossing, the
  // hop from node (1,0) to the DRAM port at (0,0) and DRAM latency: a little over 612.
  EXPECT_GE(cycles, 612u);
  EXPECT_LE(cycles, 612u + 200u);
  std::vector<uint8_t> back(data.size());
  simulator.copy_from_device(0x1000, back.data(), back.size());
  EXPECT_EQ(back, data);
  simulator.read_dram(0x1000, back.data(), back.size());  // the zero-time view agrees
  EXPECT_EQ(back, data);
  EXPECT_THROW(simulator.copy_to_device(uint64_t{1} << 40, data.data(), 16), std::out_of_range);
}

TEST(HostLink, RecordsEachMemoryTransferFromItsIssueToItsArrival) {
  Simulator simulator(link_config());
  std::vector<uint8_t> data(8192, 1);
  simulator.copy_to_device(0x1000, data.data(), 64);  // before the record: not in it
  simulator.record_host_transfers(true);
  const uint64_t write_start = simulator.now_cycle();
  simulator.copy_to_device(0x2000, data.data(), data.size());
  const uint64_t write_end = simulator.now_cycle();
  simulator.read_register(static_cast<uint32_t>(Register::SCRATCH));  // a register access is no memory transfer
  const uint64_t read_start = simulator.now_cycle();
  simulator.copy_from_device(0x2000, data.data(), 256);
  const uint64_t read_end = simulator.now_cycle();
  simulator.record_host_transfers(false);
  simulator.copy_to_device(0x1000, data.data(), 64);  // after it: not in it either
  const std::vector<HostTransfer> transfers = simulator.take_host_transfers();
  ASSERT_EQ(transfers.size(), 2u);
  // A blocking copy: the host waited from its issue to its arrival, so the record spans exactly that.
  EXPECT_EQ(transfers[0].start_cycle, write_start);
  EXPECT_EQ(transfers[0].end_cycle, write_end);
  EXPECT_EQ(transfers[0].address, 0x2000u);
  EXPECT_EQ(transfers[0].bytes, 8192u);
  EXPECT_TRUE(transfers[0].to_device);
  EXPECT_FALSE(transfers[0].by_copy_engine);
  EXPECT_EQ(transfers[1].start_cycle, read_start);
  EXPECT_EQ(transfers[1].end_cycle, read_end);
  EXPECT_EQ(transfers[1].bytes, 256u);
  EXPECT_FALSE(transfers[1].to_device);
  // 256 bytes back over the link: the request's crossing, DRAM, 16 cycles of data and the crossing back.
  EXPECT_GE(read_end - read_start, 2 * 100u + 16u);
  EXPECT_TRUE(simulator.take_host_transfers().empty());  // taken: forgotten
}

TEST(HostLink, AFaultIsLatchedRaisesItsInterruptAndResetClearsIt) {
  Simulator simulator(link_config());
  simulator.write_register(static_cast<uint32_t>(Register::IRQ_ENABLE), 1u << kIrqFaultBit);
  EXPECT_FALSE(simulator.wait_for_interrupt(1000));  // nothing pending yet
  const isa::Program program =
      assemble(".code 0\n    li r1, 1\n    shli r1, r1, 40\n    li r2, 64\n    dma.ld ch0, r0, r1, r2, r0, r0, r0, r0, r0, r0\n    halt\n");
  simulator.launch(program, 1, bind_symbols(program));
  const RunResult result = simulator.run(100000);
  ASSERT_TRUE(result.fault);
  EXPECT_TRUE(simulator.wait_for_interrupt(10));
  EXPECT_EQ(simulator.read_register(static_cast<uint32_t>(Register::STATUS)), 3u);  // a fault, with an address
  EXPECT_EQ(simulator.read_register(static_cast<uint32_t>(Register::FAULT_KIND)), static_cast<uint32_t>(FaultKind::AddressOutOfRange) + 1);
  EXPECT_EQ(simulator.read_register(static_cast<uint32_t>(Register::FAULT_ENGINE)), 16u);  // dma ch0
  EXPECT_EQ(simulator.read_register(static_cast<uint32_t>(Register::FAULT_CORE)), 0u);
  EXPECT_EQ(simulator.read_register(static_cast<uint32_t>(Register::FAULT_PC)), 3u);
  EXPECT_EQ(simulator.read_register(static_cast<uint32_t>(Register::FAULT_ADDR_HI)), 1u << 8);
  // The message, a word at a time through its window: the simulator's own text, zeros after its end.
  std::string message;
  for (uint32_t word = 0; word < kFaultMessageWords; ++word) {
    simulator.write_register(static_cast<uint32_t>(Register::FAULT_MESSAGE_INDEX), word);
    EXPECT_EQ(simulator.read_register(static_cast<uint32_t>(Register::FAULT_MESSAGE_INDEX)), word);
    const uint32_t bytes = simulator.read_register(static_cast<uint32_t>(Register::FAULT_MESSAGE));
    for (uint32_t b = 0; b < 4; ++b)
      if (const char c = static_cast<char>(bytes >> (8 * b)); c != 0) message += c;
  }
  EXPECT_EQ(message, result.fault->message.substr(0, 4 * kFaultMessageWords));
  EXPECT_FALSE(message.empty());
  EXPECT_EQ(simulator.read_register(static_cast<uint32_t>(Register::IRQ_STATUS)), 1u << kIrqFaultBit);
  simulator.write_register(static_cast<uint32_t>(Register::IRQ_STATUS), 1u << kIrqFaultBit);  // write 1 to clear
  EXPECT_EQ(simulator.read_register(static_cast<uint32_t>(Register::IRQ_STATUS)), 0u);
  simulator.write_register(static_cast<uint32_t>(Register::RESET), 1);
  EXPECT_EQ(simulator.read_register(static_cast<uint32_t>(Register::STATUS)), 0u);
  EXPECT_EQ(simulator.read_register(static_cast<uint32_t>(Register::FAULT_KIND)), 0u);
  EXPECT_EQ(simulator.read_register(static_cast<uint32_t>(Register::FAULT_MESSAGE_INDEX)), 0u);
  EXPECT_EQ(simulator.read_register(static_cast<uint32_t>(Register::FAULT_MESSAGE)), 0u);
}

TEST(HostLink, EnginesBusyAtAFaultComeBackAfterReset) {
  Simulator simulator(link_config());
  // The vector unit is in the middle of a long op when the DMA faults.
  const isa::Program bad = assemble(R"(
.code 0
    li r2, 32
    li r3, 256
    v.relu f32, r0, r0, r2, r3
    li r1, 1
    shli r1, r1, 40
    li r4, 64
    dma.ld ch0, r0, r1, r4, r0, r0, r0, r0, r0, r0
    halt
)");
  simulator.launch(bad, 1, bind_symbols(bad));
  ASSERT_TRUE(simulator.run(100000).fault);
  const isa::Program good = assemble(R"(
.output y, i32, 4
.code 0
    li r1, 9
    li r2, 4
    li r3, 1
    v.fill i32, r0, r1, r3, r2
    sync.signal vec, s0
    sync.wait dma0, s0
    la r4, y
    li r5, 16
    dma.st ch0, r4, r0, r5, r0, r0, r0, r0, r0, r0
    halt
)");
  const auto addresses = bind_symbols(good);
  simulator.launch(good, 1, addresses);
  const RunResult result = simulator.run(100000);
  ASSERT_FALSE(result.fault) << result.fault->to_string();
  int32_t y[4] = {};
  simulator.read_dram(addresses[0], y, sizeof y);
  EXPECT_EQ(y[0], 9);
  EXPECT_EQ(y[3], 9);
}

TEST(HostLink, DocsRegistersMdIsGeneratedFromTheTable) {
  npu::testing::expect_generated_doc_is_current("docs/registers.md", generate_register_markdown(),
                                                "build/bin/npu-sim --register-map > docs/registers.md");
  const std::string doc = generate_register_markdown();
  for (const RegisterSpec& spec : register_table()) EXPECT_NE(doc.find("`" + spec.name + "`"), std::string::npos) << spec.name;
}

}  // namespace
}  // namespace npu::sim
