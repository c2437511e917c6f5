// A core's local memories: the scratchpad at local addresses [0, size) and
// the accumulator at [ACC_BASE, ACC_BASE + size), each banked. Engines of the
// core reach them directly (pointer plus bank reservation); other cores reach
// them over the NoC through the TLM target socket.
#pragma once

#include <systemc>
#include <tlm>
#include <tlm_utils/multi_passthrough_target_socket.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <utility>
#include <vector>

#include "background_uses.h"
#include "chip_context.h"
#include "divider.h"
#include "npusim/isa/isa.h"
#include "npusim/sim/fault.h"
#include "npusim/sim/stats.h"
#include "bank_timeline.h"
#include "timeline.h"
#include "zeroed_bytes.h"

namespace npu::sim {

class LocalMemory : public sc_core::sc_module {
 public:
  tlm_utils::multi_passthrough_target_socket<LocalMemory> socket;

  LocalMemory(sc_core::sc_module_name name, ChipContext& context, CoreStats& stats);

  enum class Region { Scratchpad, Accumulator };

  // Checks that [address, address + bytes) lies inside one local memory and is
  // aligned to `align`; on failure fills a fault (kind, address, message).
  std::optional<FaultRecord> check(uint64_t address, uint64_t bytes, unsigned align) const;
  // The bytes at `address`, for reading or writing [address, +bytes): once
  // the work in the background that uses any of them is done (settle).
  uint8_t* data(uint64_t address, uint64_t bytes) {
    settle(address, bytes);
    return data(address);
  }
  // The same without waiting: only after settle() for the range it is used for.
  uint8_t* data(uint64_t address);

  // Work the chip's BackgroundWork does on these memories (functional mode:
  // the tensor core's products, and conversions of them), while the
  // simulation goes on. Anything else that reads or writes bytes such work
  // uses waits for it first (settle), so every byte ends up as if the work
  // had been done at once; and the work runs in the order it was handed over.
  struct Range {
    uint64_t address, bytes;
  };
  // Has `work` done in the background (at once, without a BackgroundWork):
  // it reads and writes only `ranges` of these memories and what it owns
  // (and of other memories that it says it uses, with the number returned:
  // 0 where the work was done at once).
  uint64_t run_in_background(std::initializer_list<Range> ranges, std::function<void()> work);
  // Whether work in the background uses any of [address, +bytes).
  bool in_background(uint64_t address, uint64_t bytes);
  // Waits for the work in the background that uses any of [address, +bytes).
  void settle(uint64_t address, uint64_t bytes) { in_background_.settle(context_.background, address, address + bytes); }
  // Bytes from `address` to the end of its memory (0 if outside).
  uint64_t bytes_until_end(uint64_t address) const;
  // The core's own engines note the local ranges their instructions use; take_footprint() returns the
  // end of the highest scratchpad byte noted since the last take (a program's scratchpad footprint, for
  // the trace) and starts over. Accumulator ranges are not counted.
  void note_use(uint64_t address, uint64_t bytes) {
    if (address < isa::kAccumulatorBase) scratchpad_footprint_ = std::max(scratchpad_footprint_, address + bytes);
  }
  uint64_t take_footprint() { return std::exchange(scratchpad_footprint_, 0); }

  // Reserves the banks an access of `bytes` at `address` touches, ready at
  // `ready`; returns the cycle the access completes. `wait_cycles` gets the
  // bank-conflict delay. Where a stream shares the banks, the access takes
  // longer by the stream's share of their bandwidth. (DMA requests.)
  uint64_t access(uint64_t address, uint64_t bytes, bool is_write, uint64_t ready, uint64_t* wait_cycles);
  // A DMA burst (DmaTiming::PerStep): `bytes` coming in or going out from
  // `ready` on, over at least `duration` cycles, that its requests would hold
  // the banks for `full_width_cycles` in all (access_cycles() of each). It is
  // slowed by the largest share streams hold of its banks, as access() is,
  // and holds none of them: bursts do not wait for each other (docs/chip.md,
  // "DMA timing"). Returns when its bytes are through.
  uint64_t burst(uint64_t address, uint64_t bytes, uint64_t full_width_cycles, bool is_write, uint64_t ready, uint64_t duration,
                 uint64_t* wait_cycles);
  // The cycles access() takes for `bytes` at `address` when nothing else uses its banks.
  uint64_t access_cycles(uint64_t address, uint64_t bytes) const {
    const Memory& memory = address >= isa::kAccumulatorBase ? accumulator_ : scratchpad_;
    return memory.bytes_per_cycle.quotient(bytes + memory.config->bytes_per_cycle() - 1);
  }
  // An engine streaming `bytes` through the banks over `duration` cycles (a
  // vector instruction's operand, the tensor core's A, B and C): it shares
  // the banks for its span, using bytes / (their bandwidth x duration) of
  // them, instead of holding all of them from its first cycle; DMA requests
  // in that span are slowed by the share, the stream itself is not (the
  // banks have bandwidth to spare for a vector at a time). Returns when its
  // bytes are through: at least the cycles they take at the banks' full width.
  uint64_t stream(uint64_t address, uint64_t bytes, bool is_write, uint64_t ready, uint64_t duration);

 private:
  // The streams sharing a bank: until when, and their share of its bandwidth in 1/kShareUnit.
  struct BankShare {
    uint64_t until = 0;
    uint64_t share = 0;
  };
  static constexpr uint64_t kShareUnit = 1024;
  struct Memory {
    const SramConfig* config = nullptr;
    ZeroedBytes bytes;
    std::vector<BankTimeline> banks;  // DMA requests' reservations
    std::vector<BankShare> shares;     // streams, per bank (not while shares_uniform)
    Divider bank_width, bytes_per_cycle, bank_count;  // the config's, for the per-access arithmetic
    uint64_t shares_until = 0;  // the latest `until` of any bank's share: from then on no bank is shared
    // Whether every bank's share is uniform_share, as streams over all the banks (a tensor core's
    // operands, most vector operands) leave them: then they are kept once, not per bank.
    bool shares_uniform = true;
    BankShare uniform_share;
  };
  struct BankSpan {
    uint64_t first, to_end, wrapped;  // banks first .. first + to_end - 1, then 0 .. wrapped - 1
    uint64_t size() const { return to_end + wrapped; }
    // Calls f(bank) for each bank of the span, without a modulo per bank. (It
    // runs for every bank of every DMA request: two plain loops, f inlined.)
    template <typename F>
    void each(F&& f) const {
      for (uint64_t bank = first; bank < first + to_end; ++bank) f(bank);
      for (uint64_t bank = 0; bank < wrapped; ++bank) f(bank);
    }
  };
  BankSpan bank_span(const Memory& memory, uint64_t offset, uint64_t bytes) const;
  // The largest share streams hold of a bank in `span` at `ready` (0: none).
  static uint64_t largest_share(const Memory& memory, const BankSpan& span, uint64_t ready);
  // Counts an access of `bytes` at `address` in the statistics; its memory and the banks it touches.
  // Counts the access in the statistics (and, traced, its energy over [ready, ready + cycles)).
  BankSpan begin(uint64_t address, uint64_t bytes, bool is_write, uint64_t ready, uint64_t cycles, Memory** memory);
  Memory& memory_of(uint64_t address) { return address >= isa::kAccumulatorBase ? accumulator_ : scratchpad_; }
  void b_transport(int initiator, tlm::tlm_generic_payload& payload, sc_core::sc_time& delay);
  ChipContext& context_;
  CoreStats& stats_;
  Memory scratchpad_;
  Memory accumulator_;
  BackgroundUses in_background_;
  uint64_t scratchpad_footprint_ = 0;
};

}  // namespace npu::sim
