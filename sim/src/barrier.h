// Barriers across the cores of a launch: `barrier id` releases when every
// participating core has arrived at the same id.
#pragma once

#include <systemc>

#include <array>
#include <cstdint>

#include "chip_context.h"

namespace npu::sim {

class BarrierUnit {
 public:
  void start_launch(unsigned participants) {
    participants_ = participants;
    for (Slot& slot : slots_) slot.arrived = 0;
  }
  // From a control-unit thread: returns true once all participants have
  // arrived, false if the run faulted or the chip was reset meanwhile.
  bool arrive(unsigned id, ChipContext& context) {
    Slot& slot = slots_[id];
    const uint64_t generation = slot.generation;
    if (++slot.arrived == participants_) {
      slot.arrived = 0;
      ++slot.generation;
      slot.released.notify(sc_core::SC_ZERO_TIME);
      return true;
    }
    while (slot.generation == generation)
      if (!context.wait_for(slot.released)) return false;
    return true;
  }

 private:
  struct Slot {
    unsigned arrived = 0;
    uint64_t generation = 0;
    sc_core::sc_event released;
  };
  unsigned participants_ = 0;
  std::array<Slot, 16> slots_;
};

}  // namespace npu::sim
