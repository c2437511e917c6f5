// The barriers of one launch: `barrier id` releases when every core of the
// launch has arrived at the same id. Each launch has its own group, so that
// launches running side by side on disjoint cores never meet in a barrier.
#pragma once

#include <systemc>

#include <array>
#include <cstdint>

#include "chip_context.h"

namespace npu::sim {

class BarrierGroup {
 public:
  explicit BarrierGroup(unsigned participants) : participants_(participants) {}
  BarrierGroup(const BarrierGroup&) = delete;
  BarrierGroup& operator=(const BarrierGroup&) = delete;

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
  const unsigned participants_;
  std::array<Slot, 16> slots_;
};

}  // namespace npu::sim
