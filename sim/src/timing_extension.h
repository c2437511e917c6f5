// A TLM extension that memories and the NoC fill in on each transaction, so
// that an initiator can attribute the time a request took beyond its ideal to
// a cause (NoC link contention, DRAM bank/bus contention, SRAM bank conflicts).
// It also carries the transaction's time in cycles.
#pragma once

#include <systemc>
#include <tlm>

#include <cstdint>

#include "chip_context.h"

namespace npu::sim {

struct TimingExtension : tlm::tlm_extension<TimingExtension> {
  // The transaction's time as a cycle count, in place of the b_transport
  // delay: when it is ready on the way in, when it is done on the way out.
  // Converting between sc_time and cycles at every hop of every request costs
  // as much as modelling the hop, so an initiator that attaches this
  // extension sets `cycle` and passes a zero delay, the NoC and the memories
  // read and advance `cycle` and leave the delay alone, and the initiator
  // takes the completion from `cycle`. (Without the extension, as from the
  // host link, the delay carries the time.)
  uint64_t cycle = 0;
  uint64_t noc_wait_cycles = 0;
  uint64_t dram_wait_cycles = 0;
  uint64_t sram_wait_cycles = 0;
  // False in timing-only runs where no value can change an address
  // (ChipContext::moves_data): targets time the access but move no bytes.
  bool move_data = true;

  tlm::tlm_extension_base* clone() const override { return new TimingExtension(*this); }
  void copy_from(const tlm::tlm_extension_base& other) override { *this = static_cast<const TimingExtension&>(other); }
  void reset() {
    noc_wait_cycles = dram_wait_cycles = sram_wait_cycles = 0;
  }
};

// For a b_transport target or interconnect: when the transaction is ready, in
// cycles, from the extension where there is one, else from the delay.
inline uint64_t transport_cycle(const ChipContext& context, const TimingExtension* timing, const sc_core::sc_time& delay) {
  return timing ? timing->cycle : context.cycle_of(delay);
}
// And when it is done (or handed on): into the extension, else the delay.
inline void set_transport_cycle(const ChipContext& context, TimingExtension* timing, sc_core::sc_time& delay, uint64_t cycle) {
  if (timing) {
    timing->cycle = cycle;
  } else {
    delay = context.until(cycle);
  }
}

}  // namespace npu::sim
