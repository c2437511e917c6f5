// A core's counting semaphores, shared by its control unit and engines (and
// raised by other cores' dma.send).
#pragma once

#include <systemc>

#include <array>
#include <cstdint>

#include "chip_context.h"
#include "npusim/isa/isa.h"

namespace npu::sim {

struct Semaphores {
  explicit Semaphores(ChipContext& context) {
    for (sc_core::sc_event& event : changed) context.reset_notifies(event);
  }
  Semaphores(const Semaphores&) = delete;
  Semaphores& operator=(const Semaphores&) = delete;

  std::array<uint64_t, isa::kNumSemaphores> value{};
  // Notified when a value grows, and at the chip's reset (ChipContext::wait_on).
  std::array<sc_core::sc_event, isa::kNumSemaphores> changed;
  // Whether the last signal of each semaphore came from a DMA transfer, so a
  // wait it ends can be attributed to "waiting for DMA data".
  std::array<bool, isa::kNumSemaphores> signalled_by_dma{};

  void signal(unsigned index, bool from_dma) {
    ++value[index];
    signalled_by_dma[index] = from_dma;
    changed[index].notify(sc_core::SC_ZERO_TIME);
  }
  void reset() {
    value.fill(0);
    signalled_by_dma.fill(false);
  }
};

}  // namespace npu::sim
