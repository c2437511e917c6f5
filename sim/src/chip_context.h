// State shared by every module of one chip: the config, the clock, the mode,
// the fault latch and the trace recorder.
#pragma once

#include <systemc>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
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
        units_per_cycle_(chip_config.cycle_ps() * units_per_ps()),
        per_cycle_(units_per_cycle_) {}

  const ChipConfig& config;
  const bool functional;  // false: timing only, the tensor core and vector unit skip their arithmetic
  // Whether DMA moves data and integer vector results are computed (always
  // when functional; SimulatorOptions::timing_only_moves_data otherwise).
  const bool moves_data;
  ChipTrace* trace;  // null when not tracing (Simulator::start_trace and stop_trace switch it)
  // Where the tensor core's products run in functional mode (LocalMemory::run_in_background); set by the Chip.
  BackgroundWork* background = nullptr;

  // The current cycle. Asked several times per memory request, at the same
  // time: the kernel's clock is read inline (sc_time_stamp() is an out-of-line
  // call) and the last conversion is remembered.
  uint64_t now_cycle() const {
    const uint64_t now = sc_core::sc_get_curr_simcontext()->time_stamp().value();
    if (now != converted_units_) converted_units_ = now, converted_cycle_ = per_cycle_.quotient(now);
    return converted_cycle_;
  }
  sc_core::sc_time cycles(uint64_t count) const { return sc_core::sc_time::from_value(count * units_per_cycle_); }
  // The first cycle the kernel's time cannot reach.
  uint64_t cycle_limit() const { return UINT64_MAX / units_per_cycle_; }
  // Delay (relative to now) until `cycle`, zero if it has passed: whole cycles,
  // for the delays a TLM transport annotates (cycle_of() reads them back).
  sc_core::sc_time until(uint64_t cycle) const {
    const uint64_t now = now_cycle();
    return cycle > now ? cycles(cycle - now) : sc_core::SC_ZERO_TIME;
  }

  // Wake slots: where in a cycle timed wake-ups fall. Every event that is
  // notified for a later cycle has a slot of its own, a fixed offset into
  // the cycle (kernel time units: femtoseconds under a Simulator), handed out
  // in construction order. So threads that wake in the same cycle run one
  // after another in slot order, each with the delta cycles it causes, and
  // never at the same kernel time. Without slots they woke together, in the
  // order SystemC's timed-event heap returned them, and that order depends on
  // every event inserted before: removing one wait that did nothing could
  // reorder two others' reservations and move cycles elsewhere. With slots a
  // thread's timed waits that lead to nothing can go without changing
  // anything else (DmaEngine's last window, ControlUnit's full queues).
  uint64_t new_slot() {
    if (next_slot_ >= units_per_cycle_)
      throw std::logic_error("more wake slots than kernel time units in a cycle (" + std::to_string(units_per_cycle_) + ")");
    return next_slot_++;
  }
  // Delay from now until slot `slot` of `cycle`; zero if `cycle` is not after the current one.
  sc_core::sc_time until(uint64_t cycle, uint64_t slot) const {
    if (cycle <= now_cycle()) return sc_core::SC_ZERO_TIME;
    return sc_core::sc_time::from_value(cycle * units_per_cycle_ + slot - converted_units_);
  }
  // A thread's own event for its timed waits (wait_until), with its slot,
  // made once per thread; reset() notifies every one. (A timed wait that also
  // listened to the reset event would put the thread on that event's list
  // and search it out again at every wait, with every waiting thread of the
  // chip on it: a few percent of a timing-only run.)
  struct Timer {
    sc_core::sc_event event;
    uint64_t slot = 0;
  };
  Timer& new_timer() {
    timers_.push_back(std::make_unique<Timer>());
    timers_.back()->slot = new_slot();
    reset_notifies(timers_.back()->event);
    return *timers_.back();
  }
  // From an SC_THREAD, with its timer: advance simulated time to `cycle` (its
  // slot in it). Returns false when the run faulted or the chip was reset
  // meanwhile: the caller abandons its work.
  bool wait_until(uint64_t cycle, Timer& timer) {
    const uint64_t generation = generation_;
    if (cycle > now_cycle()) {
      timer.event.notify(until(cycle, timer.slot));
      sc_core::wait(timer.event);
    }
    return generation == generation_ && !fault_;
  }
  // Notifies `timer` for slot of `cycle` (after the current one) without waiting: a thread that waits for
  // something else meanwhile calls wait_armed() if that came first. The kernel meets the same events as
  // if the thread had waited for the timer and then for the other thing, one wake-up fewer.
  void arm(uint64_t cycle, Timer& timer) { timer.event.notify(until(cycle, timer.slot)); }
  // After arm(cycle, timer): waits for the timer if its time is still ahead; false as for wait_until.
  bool wait_armed(uint64_t cycle, Timer& timer) {
    const uint64_t generation = generation_;
    if (sc_core::sc_get_curr_simcontext()->time_stamp().value() < cycle * units_per_cycle_ + timer.slot) sc_core::wait(timer.event);
    return generation == generation_ && !fault_;
  }
  // From an SC_THREAD: wait for `event` or the chip's reset (for rare waits, a
  // barrier's: frequent ones use wait_on); false as for wait_until.
  bool wait_for(const sc_core::sc_event& event) {
    const uint64_t generation = generation_;
    sc_core::wait(event | reset_event_);
    return generation == generation_ && !fault_;
  }
  // An event reset() notifies as well, so that threads that wait on it often
  // wait on it alone (wait_on) and still see a reset. (`event | reset` put a
  // new list on the heap at every wait, and the waiter on the reset event's
  // list too, to be searched out of it after every wake-up with every
  // waiting thread of the chip on it.) The event lives as long as the chip.
  void reset_notifies(sc_core::sc_event& event) { reset_notified_.push_back(&event); }
  // From an SC_THREAD: wait for an event of reset_notifies(); false as for wait_until.
  bool wait_on(const sc_core::sc_event& event) {
    const uint64_t generation = generation_;
    sc_core::wait(event);
    return generation == generation_ && !fault_;
  }
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
    // (A timer's pending notification for a later cycle gives way: an earlier notification replaces a later one.)
    for (sc_core::sc_event* event : reset_notified_) event->notify(sc_core::SC_ZERO_TIME);
  }
  uint64_t cycle_of(const sc_core::sc_time& offset_from_now) const { return now_cycle() + per_cycle_.quotient(offset_from_now.value()); }
  // Kernel time units in a picosecond: 1000 under a Simulator (it sets a femtosecond resolution, room for
  // wake slots in the shortest cycle), 1 where SystemC's default resolution stands.
  static uint64_t units_per_ps() {
    return static_cast<uint64_t>(1e-12 / sc_core::sc_get_time_resolution().to_seconds() + 0.5);
  }

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
  uint64_t units_per_cycle_;  // kernel time units
  Divider per_cycle_;         // kernel time units to cycles
  mutable uint64_t converted_units_ = 0, converted_cycle_ = 0;  // now_cycle()'s last conversion (0 is cycle 0)
  uint64_t next_slot_ = 1;  // (slot 0 is the cycle's start)
  std::optional<FaultRecord> fault_;
  uint64_t generation_ = 0;
  sc_core::sc_event reset_event_{"chip_reset"};
  std::vector<std::unique_ptr<Timer>> timers_;    // (their events are in reset_notified_)
  std::vector<sc_core::sc_event*> reset_notified_;
};

}  // namespace npu::sim
