// A core's counting semaphores, shared by its control unit and engines (and
// raised by other cores' dma.send).
#pragma once

#include <systemc>

#include <array>
#include <cstdint>
#include <vector>

#include "npusim/isa/isa.h"

namespace npu::sim {

struct Semaphores {
  explicit Semaphores(const sc_core::sc_event& chip_reset) {
    changed_or_reset.reserve(changed.size());
    for (const sc_core::sc_event& event : changed) {
      changed_or_reset.emplace_back(event);
      changed_or_reset.back() |= chip_reset;
    }
  }
  Semaphores(const Semaphores&) = delete;
  Semaphores& operator=(const Semaphores&) = delete;

  std::array<uint64_t, isa::kNumSemaphores> value{};
  std::array<sc_core::sc_event, isa::kNumSemaphores> changed;
  // changed[i] or the chip's reset, to wait on (ChipContext::wait_for).
  std::vector<sc_core::sc_event_or_list> changed_or_reset;
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
