// State shared by every module of one chip: the config, the clock, the mode,
// the fault latch and the trace recorder.
#pragma once

#include <systemc>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "npusim/sim/chip_config.h"
#include "npusim/sim/fault.h"
#include "divider.h"

namespace npu::sim {

class BackgroundWork;
class ChipTrace;

class ChipContext {
 public:
  ChipContext(const ChipConfig& chip_config, bool is_functional, bool timing_only_moves_data, ChipTrace* chip_trace)
      : config(chip_config),
        functional(is_functional),
        moves_data(is_functional || timing_only_moves_data),
        trace(chip_trace),
        cycle_ps_(chip_config.cycle_ps()),
        per_cycle_(cycle_ps_) {}

  const ChipConfig& config;
  const bool functional;  // false: timing only, the tensor core and vector unit skip their arithmetic
  // Whether DMA moves data and integer vector results are computed (always
  // when functional; SimulatorOptions::timing_only_moves_data otherwise).
  const bool moves_data;
  ChipTrace* const trace; // null when not tracing
  // Where the tensor core's products run in functional mode (LocalMemory::run_in_background); set by the Chip.
  BackgroundWork* background = nullptr;

  // The current cycle. Asked several times per memory request, at the same
  // time: the kernel's clock is read inline (sc_time_stamp() is an out-of-line
  // call) and the last conversion is remembered.
  uint64_t now_cycle() const {
    const uint64_t now_ps = sc_core::sc_get_curr_simcontext()->time_stamp().value();
    if (now_ps != converted_ps_) converted_ps_ = now_ps, converted_cycle_ = per_cycle_.quotient(now_ps);
    return converted_cycle_;
  }
  sc_core::sc_time cycles(uint64_t count) const { return sc_core::sc_time::from_value(count * cycle_ps_); }
  // Delay (relative to now) until `cycle`, zero if it has passed.
  sc_core::sc_time until(uint64_t cycle) const {
    const uint64_t now = now_cycle();
    return cycle > now ? cycles(cycle - now) : sc_core::SC_ZERO_TIME;
  }
  // A thread's own event for its timed waits (wait_until), made once per
  // thread; reset() notifies every one. (A timed wait that also listened to
  // the reset event would put the thread on that event's list and search it
  // out again at every wait, with every waiting thread of the chip on it: a
  // few percent of a timing-only run.)
  sc_core::sc_event& new_timer() {
    timers_.push_back(std::make_unique<sc_core::sc_event>());
    return *timers_.back();
  }
  // From an SC_THREAD, with its timer: advance simulated time to `cycle`. Returns
  // false when the run faulted or the chip was reset meanwhile: the caller
  // abandons its work.
  bool wait_until(uint64_t cycle, sc_core::sc_event& timer) {
    const uint64_t generation = generation_;
    const uint64_t now = now_cycle();
    if (cycle > now) {
      timer.notify(cycles(cycle - now));
      sc_core::wait(timer);
    }
    return generation == generation_ && !fault_;
  }
  // From an SC_THREAD: wait for `event`; false as for wait_until.
  bool wait_for(const sc_core::sc_event& event) {
    const uint64_t generation = generation_;
    sc_core::wait(event | reset_event_);
    return generation == generation_ && !fault_;
  }
  // The same for a list made by or_reset(): where a thread waits often, it
  // keeps one (`event | reset` puts a new list on the heap at every wait:
  // that was a twentieth of a timing-only run).
  bool wait_for(const sc_core::sc_event_or_list& event_or_reset) {
    const uint64_t generation = generation_;
    sc_core::wait(event_or_reset);
    return generation == generation_ && !fault_;
  }
  sc_core::sc_event_or_list or_reset(const sc_core::sc_event& event) const { return or_reset(event, reset_event_); }
  static sc_core::sc_event_or_list or_reset(const sc_core::sc_event& event, const sc_core::sc_event& reset) {
    sc_core::sc_event_or_list list(event);
    list |= reset;
    return list;
  }
  const sc_core::sc_event& reset_event() const { return reset_event_; }
  // The reset generation: work started in one generation is abandoned in the next.
  uint64_t generation() const { return generation_; }
  // Parks a thread whose work (started in generation `started`) was abandoned,
  // until the chip has been reset past it; returns at once if it already was.
  void park(uint64_t started) {
    while (generation_ == started) sc_core::wait(reset_event_);
  }
  // Abandons all work in flight (called between runs, with the kernel paused).
  void reset() {
    ++generation_;
    fault_.reset();
    reset_event_.notify(sc_core::SC_ZERO_TIME);
    for (const auto& timer : timers_) timer->notify(sc_core::SC_ZERO_TIME);  // (an earlier notification replaces a later one)
  }
  uint64_t cycle_of(const sc_core::sc_time& offset_from_now) const { return now_cycle() + per_cycle_.quotient(offset_from_now.value()); }

  // The first fault of a run stops the run (sc_pause); later ones are dropped.
  void raise_fault(FaultRecord fault) {
    if (fault_) return;
    fault.cycle = fault.cycle ? fault.cycle : now_cycle();
    fault_ = std::move(fault);
    if (on_fault) on_fault(*fault_);
    // From a process: stop the kernel at the end of this delta. From outside
    // (the run loop reporting a deadlock) the kernel is already stopped.
    if (sc_core::sc_get_status() == sc_core::SC_RUNNING) sc_core::sc_pause();
  }
  bool faulted() const { return fault_.has_value(); }
  // Called once per fault (the register block latches it and raises its interrupt).
  std::function<void(const FaultRecord&)> on_fault;
  const std::optional<FaultRecord>& fault() const { return fault_; }

 private:
  uint64_t cycle_ps_;
  Divider per_cycle_;  // picoseconds to cycles
  mutable uint64_t converted_ps_ = 0, converted_cycle_ = 0;  // now_cycle()'s last conversion (0 ps is cycle 0)
  std::optional<FaultRecord> fault_;
  uint64_t generation_ = 0;
  sc_core::sc_event reset_event_{"chip_reset"};
  std::vector<std::unique_ptr<sc_core::sc_event>> timers_;
};

}  // namespace npu::sim
