// Feeds an arbitrary stream of 32-bit words to a command queue of a
// simulated chip through its registers, and runs the chip until the queue
// has consumed them, stopped, or a bound of cycles has passed. For the
// packet fuzz target and its deterministic test: whatever the words, the
// simulator must neither crash nor hang, and must come back after RESET.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "npusim/firmware/packets.h"
#include "npusim/sim/registers.h"
#include "simulator_link.h"

namespace npu::testing {

// The ring is placed at a fixed address, the rest of memory is what earlier
// streams left there; queue q's ring: kStreamRingBase + q * kStreamRingBytes.
inline constexpr uint64_t kStreamRingBase = 0x100000;
inline constexpr uint32_t kStreamRingBytes = 4096;

// Returns the queue's ERROR register after the run (0, or a known code);
// aborts on anything a chip must never do (an unknown error code).
inline uint32_t run_packet_stream(SimulatorLink& link, unsigned queue, const std::vector<uint32_t>& words, uint64_t max_cycles) {
  const auto reg = [&](sim::Register r) { return static_cast<uint32_t>(r); };
  link.write_register(reg(sim::Register::RESET), 1);
  link.write_register(reg(sim::Register::IRQ_ENABLE), 0xffffffffu);
  const uint64_t ring = kStreamRingBase + uint64_t{queue} * kStreamRingBytes;
  link.write_register(sim::queue_register(queue, sim::QueueRegister::RING_BASE_LO), static_cast<uint32_t>(ring));
  link.write_register(sim::queue_register(queue, sim::QueueRegister::RING_BASE_HI), 0);
  link.write_register(sim::queue_register(queue, sim::QueueRegister::RING_SIZE), kStreamRingBytes);
  const size_t count = std::min<size_t>(words.size(), kStreamRingBytes / 4 - 1);
  if (count == 0) return 0;
  link.write_memory(ring, words.data(), count * 4);
  const auto tail = static_cast<uint32_t>(count * 4);
  link.write_register(sim::queue_register(queue, sim::QueueRegister::TAIL), tail);
  link.write_register(sim::queue_register(queue, sim::QueueRegister::DOORBELL), 1);
  // Run in slices, clearing interrupts, until the queue is done, stopped, or out of time.
  uint32_t error = 0;
  for (uint64_t spent = 0; spent < max_cycles; spent += max_cycles / 8) {
    link.wait_for_interrupt(max_cycles / 8);
    link.write_register(reg(sim::Register::IRQ_STATUS), 0xffffffffu);
    error = link.read_register(sim::queue_register(queue, sim::QueueRegister::ERROR));
    if (error != 0 || link.read_register(sim::queue_register(queue, sim::QueueRegister::HEAD)) == tail) break;
    if (link.read_register(reg(sim::Register::STATUS)) & 1) break;  // a device fault (a random LAUNCH can cause one)
  }
  if (error != 0 && firmware::find_packet_error(static_cast<firmware::PacketError>(error)) == nullptr) std::abort();
  return error;
}

}  // namespace npu::testing
