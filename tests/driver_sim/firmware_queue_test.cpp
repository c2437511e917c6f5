// The firmware seen through the bare registers and device memory, without
// the driver: each error that stops a queue when a packet cannot be
// executed, the other queues going on meanwhile, and the packet costs.
#include <gtest/gtest.h>

#include <cstring>

#include "npusim/firmware/launch_descriptor.h"
#include "npusim/firmware/packets.h"
#include "npusim/sim/command_processor_port.h"
#include "npusim/sim/registers.h"
#include "simulator_link.h"

namespace npu {
namespace {

using firmware::Packet;
using firmware::PacketError;
using firmware::PacketOpcode;

constexpr uint64_t kRingBase = 0x100000;  // queue q's ring at kRingBase + q * kRingBytes
constexpr uint32_t kRingBytes = 1024;

class RawQueues : public ::testing::Test {
 protected:
  RawQueues() : link_("base") { setup_rings(); }

  // RESET clears the queue registers: this sets them again.
  void setup_rings() {
    link_.write_register(static_cast<uint32_t>(sim::Register::IRQ_ENABLE), 0xffffffffu);
    std::fill(std::begin(tail_), std::end(tail_), 0);
    for (unsigned q = 0; q < 4; ++q) {
      link_.write_register(sim::queue_register(q, sim::QueueRegister::RING_BASE_LO), static_cast<uint32_t>(kRingBase + q * kRingBytes));
      link_.write_register(sim::queue_register(q, sim::QueueRegister::RING_BASE_HI), 0);
      link_.write_register(sim::queue_register(q, sim::QueueRegister::RING_SIZE), kRingBytes);
    }
  }

  // Appends packets to queue q's ring and rings its doorbell.
  void submit(unsigned q, const std::vector<Packet>& packets) {
    std::vector<uint32_t> words;
    for (const Packet& p : packets) {
      const auto encoded = firmware::encode(p);
      words.insert(words.end(), encoded.begin(), encoded.end());
    }
    submit_words(q, words);
  }
  void submit_words(unsigned q, const std::vector<uint32_t>& words) {
    link_.write_memory(kRingBase + q * kRingBytes + tail_[q], words.data(), words.size() * 4);
    tail_[q] += static_cast<uint32_t>(words.size() * 4);
    link_.write_register(sim::queue_register(q, sim::QueueRegister::TAIL), tail_[q]);
    link_.write_register(sim::queue_register(q, sim::QueueRegister::DOORBELL), 1);
  }
  uint32_t reg(unsigned q, sim::QueueRegister r) { return link_.read_register(sim::queue_register(q, r)); }
  uint64_t read_u64(uint64_t address) {
    uint64_t value = 0;
    link_.read_memory(address, &value, 8);
    return value;
  }
  // Runs the chip until queue q has consumed everything (or stopped).
  void drain(unsigned q) {
    for (int i = 0; i < 100 && reg(q, sim::QueueRegister::HEAD) != tail_[q] && reg(q, sim::QueueRegister::ERROR) == 0; ++i)
      link_.wait_for_interrupt(100000);
  }
  static Packet packet(PacketOpcode opcode, std::initializer_list<uint64_t> fields) {
    Packet p;
    p.opcode = opcode;
    size_t i = 0;
    for (const uint64_t f : fields) p.fields[i++] = f;
    return p;
  }

  SimulatorLink link_;
  uint32_t tail_[4] = {};
};

TEST_F(RawQueues, PacketsThatCannotBeExecutedStopTheirQueueWithTheirCode) {
  const uint64_t memory = uint64_t{8} << 30;  // base: 8 GiB of DRAM
  std::vector<uint64_t> bad_descriptor(firmware::kLaunchDescriptorHeaderWords, 0);
  link_.write_memory(0x200000, bad_descriptor.data(), bad_descriptor.size() * 8);
  const std::vector<std::pair<std::vector<Packet>, PacketError>> cases = {
      {{packet(PacketOpcode::COPY, {0x1000, memory - 8, 64, 0})}, PacketError::BAD_ADDRESS},
      {{packet(PacketOpcode::COPY, {0x1000, sim::kHostBusBase, 64, 1})}, PacketError::BAD_ADDRESS},  // unregistered host memory
      {{packet(PacketOpcode::FILL, {memory, 4, 0})}, PacketError::BAD_ADDRESS},
      {{packet(PacketOpcode::FENCE_SIGNAL, {memory + 64, 1, 0})}, PacketError::BAD_ADDRESS},
      {{packet(PacketOpcode::FENCE_WAIT, {~uint64_t{0} - 4, 1})}, PacketError::BAD_ADDRESS},
      {{packet(PacketOpcode::TIMESTAMP, {memory})}, PacketError::BAD_ADDRESS},
      {{packet(PacketOpcode::LAUNCH, {0x200000, 1})}, PacketError::BAD_DESCRIPTOR},
      {{packet(PacketOpcode::LAUNCH, {0x200000, 0x10})}, PacketError::BAD_CORE_MASK},  // base has 4 cores
  };
  for (const auto& [packets, error] : cases) {
    SCOPED_TRACE(firmware::describe(packets[0]));
    // Reset between cases: it clears a stopped queue (and HEAD, TAIL).
    link_.write_register(static_cast<uint32_t>(sim::Register::RESET), 1);
    setup_rings();
    link_.write_register(static_cast<uint32_t>(sim::Register::IRQ_STATUS), 0xffffffffu);
    submit(2, packets);
    drain(2);
    EXPECT_EQ(reg(2, sim::QueueRegister::ERROR), static_cast<uint32_t>(error));
    EXPECT_EQ(reg(2, sim::QueueRegister::HEAD), 0u);  // the packet was not consumed
    EXPECT_TRUE(link_.read_register(static_cast<uint32_t>(sim::Register::IRQ_STATUS)) & (1u << 2));
  }
}

TEST_F(RawQueues, ARingOutsideMemoryOrAPositionOutsideTheRingIsABadRingPosition) {
  link_.write_register(sim::queue_register(1, sim::QueueRegister::RING_BASE_HI), 0x100);  // far beyond DRAM
  submit_words(1, {0x00010000});  // a NOP
  drain(1);
  EXPECT_EQ(reg(1, sim::QueueRegister::ERROR), static_cast<uint32_t>(PacketError::BAD_RING_POSITION));
  link_.write_register(sim::queue_register(3, sim::QueueRegister::TAIL), kRingBytes + 4);
  link_.write_register(sim::queue_register(3, sim::QueueRegister::DOORBELL), 1);
  tail_[3] = kRingBytes + 4;
  drain(3);
  EXPECT_EQ(reg(3, sim::QueueRegister::ERROR), static_cast<uint32_t>(PacketError::BAD_RING_POSITION));
}

TEST_F(RawQueues, AStoppedQueueDoesNotStopTheOthers) {
  submit_words(0, {0x0001002a});  // unknown opcode: queue 0 stops
  const uint64_t fence = 0x300000;
  submit(1, {packet(PacketOpcode::FILL, {0x400000, 4096, 0x01020304}), packet(PacketOpcode::FENCE_SIGNAL, {fence, 7, 1})});
  drain(0);
  drain(1);
  EXPECT_EQ(reg(0, sim::QueueRegister::ERROR), static_cast<uint32_t>(PacketError::UNKNOWN_OPCODE));
  EXPECT_EQ(reg(1, sim::QueueRegister::ERROR), 0u);
  EXPECT_EQ(read_u64(fence), 7u);
  EXPECT_EQ(read_u64(0x400000 + 4088), 0x0102030401020304u);
}

// A queue's packets cost packet_cycles each (50 on base); a FILL streams at
// the DRAM channels' combined bandwidth after a closed-row access.
TEST_F(RawQueues, PacketCostsAreModelled) {
  const uint64_t t0 = 0x300000, t1 = 0x300040, t2 = 0x300080;
  submit(0, {packet(PacketOpcode::TIMESTAMP, {t0}), packet(PacketOpcode::NOP, {}), packet(PacketOpcode::NOP, {}),
             packet(PacketOpcode::TIMESTAMP, {t1}), packet(PacketOpcode::FILL, {0x400000, 1 << 20, 0}),
             packet(PacketOpcode::TIMESTAMP, {t2})});
  drain(0);
  // TIMESTAMP writes when its own packet completes: two NOPs and a TIMESTAMP later, 3 x 50 cycles.
  EXPECT_EQ(read_u64(t1) - read_u64(t0), 150u);
  // base DRAM: 4 channels x 128 B/cycle = 512 B/cycle: 1 MiB in 2048 cycles, plus one
  // closed-row access (row_closed_cycles: 46) before it, plus the TIMESTAMP packet.
  const uint64_t fill = read_u64(t2) - read_u64(t1) - 50;
  EXPECT_GE(fill, 2048u);
  EXPECT_LE(fill, 2048u + 100u);
}

}  // namespace
}  // namespace npu
