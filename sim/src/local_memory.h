// A core's local memories: the scratchpad at local addresses [0, size) and
// the accumulator at [ACC_BASE, ACC_BASE + size), each banked. Engines of the
// core reach them directly (pointer plus bank reservation); other cores reach
// them over the NoC through the TLM target socket.
#pragma once

#include <systemc>
#include <tlm>
#include <tlm_utils/multi_passthrough_target_socket.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "chip_context.h"
#include "divider.h"
#include "npusim/sim/fault.h"
#include "npusim/sim/stats.h"
#include "timeline.h"

namespace npu::sim {

class LocalMemory : public sc_core::sc_module {
 public:
  tlm_utils::multi_passthrough_target_socket<LocalMemory> socket;

  LocalMemory(sc_core::sc_module_name name, ChipContext& context, CoreStats& stats);

  enum class Region { Scratchpad, Accumulator };

  // Checks that [address, address + bytes) lies inside one local memory and is
  // aligned to `align`; on failure fills a fault (kind, address, message).
  std::optional<FaultRecord> check(uint64_t address, uint64_t bytes, unsigned align) const;
  uint8_t* data(uint64_t address);
  // Bytes from `address` to the end of its memory (0 if outside).
  uint64_t bytes_until_end(uint64_t address) const;

  // Reserves the banks an access of `bytes` at `address` touches, ready at
  // `ready`; returns the cycle the access completes. `wait_cycles` gets the
  // bank-conflict delay.
  uint64_t access(uint64_t address, uint64_t bytes, bool is_write, uint64_t ready, uint64_t* wait_cycles);

  void clear();

 private:
  struct Memory {
    const SramConfig* config;
    std::vector<uint8_t> bytes;
    std::vector<Timeline> banks;
    Divider bank_width, bytes_per_cycle;  // the config's, for the per-access arithmetic
  };
  Memory& memory_of(uint64_t address) { return address >= isa::kAccumulatorBase ? accumulator_ : scratchpad_; }
  void b_transport(int initiator, tlm::tlm_generic_payload& payload, sc_core::sc_time& delay);

  ChipContext& context_;
  CoreStats& stats_;
  Memory scratchpad_;
  Memory accumulator_;
};

}  // namespace npu::sim
