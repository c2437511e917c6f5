// A TLM extension that memories and the NoC fill in on each transaction, so
// that an initiator can attribute the time a request took beyond its ideal to
// a cause (NoC link contention, DRAM bank/bus contention, SRAM bank conflicts).
#pragma once

#include <tlm>

#include <cstdint>

namespace npu::sim {

struct TimingExtension : tlm::tlm_extension<TimingExtension> {
  uint64_t noc_wait_cycles = 0;
  uint64_t dram_wait_cycles = 0;
  uint64_t sram_wait_cycles = 0;
  // False in timing-only runs: targets time the access but move no bytes.
  bool move_data = true;

  tlm::tlm_extension_base* clone() const override { return new TimingExtension(*this); }
  void copy_from(const tlm::tlm_extension_base& other) override { *this = static_cast<const TimingExtension&>(other); }
  void reset() {
    noc_wait_cycles = dram_wait_cycles = sram_wait_cycles = 0;
  }
};

}  // namespace npu::sim
