// An engine of a core (a DMA channel, the tensor core, the vector unit): an
// in-order queue of commands served by one SystemC thread. The base class
// handles the queue, semaphore waits and signals, statistics and trace spans;
// subclasses say what an instruction does and how long it takes.
#pragma once

#include <systemc>

#include <optional>
#include <string>

#include "chip_context.h"
#include "command.h"
#include "npusim/sim/fault.h"
#include "npusim/sim/stats.h"
#include "ring.h"
#include "semaphores.h"
#include "npusim/traces/trace.h"

namespace npu::sim {

class Engine : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(Engine);
  Engine(sc_core::sc_module_name name, ChipContext& context, unsigned core, std::string display_name, Semaphores& semaphores,
         EngineStats& stats, unsigned engine_index);

  // Called by the control unit. `full()` must be false.
  void push(const Command& command);
  bool full() const { return queue_.size() >= capacity_; }
  bool idle() const { return queue_.empty() && !busy_; }
  // Room in the queue, and the queue drained; notified at the chip's reset too (ChipContext::wait_on).
  const sc_core::sc_event& popped() const { return popped_; }
  const sc_core::sc_event& went_idle() const { return idle_; }
  const std::string& display_name() const { return display_name_; }
  // For deadlock reports: the semaphore this engine waits on, or -1.
  int waiting_on() const { return waiting_on_; }
  const Command* current() const { return queue_.empty() ? nullptr : &queue_.front(); }
  void reset();

 protected:
  struct Outcome {
    uint64_t end_cycle = 0;
    std::optional<FaultRecord> fault;
    std::string span_name;  // in the trace (left empty without one); defaults to the mnemonic
  };
  // Runs one instruction starting at `start` (the current cycle): applies its
  // effect and returns when it ends. May wait() (e.g. a DMA pacing its requests).
  virtual Outcome execute(const Command& command, uint64_t start) = 0;
  // When the effects of every instruction executed so far are complete, for an engine whose
  // instructions end (free it for the next one) before their results are (the tensor core's
  // drain). A signal is raised then (deferred_signals_), and the engine goes idle only then.
  virtual uint64_t results_ready_cycle() const { return 0; }
  // On a reset: the abandoned instructions' results are nobody's to wait for.
  virtual void forget_pending_results() {}
  // What the instruction that just ended did, as trace arguments an analysis sums per kernel
  // ("macs", "elements", "bytes", "dram_bytes"); called only where a trace is recorded.
  virtual void describe_work(std::vector<trace::Arg>& /*args*/) const {}

  // A fault report prefilled with this engine's identity and the command.
  FaultRecord fault_for(const Command& command, FaultKind kind, std::string message) const;
  // The same from a memory check's finding (kind, address and message), with an optional prefix.
  FaultRecord fault_from(const Command& command, const FaultRecord& problem, const std::string& prefix = "") const;
  void add_stall(StallReason reason, uint64_t cycles) { stats_.stall_cycles[static_cast<size_t>(reason)] += cycles; }

  ChipContext& context_;
  ChipContext::Timer& timer_;  // for this thread's timed waits (ChipContext::wait_until)
  const unsigned core_;
  Semaphores& semaphores_;
  EngineStats& stats_;
  bool is_dma_ = false;  // its signals count as "DMA data ready" for waiters' stall attribution

 private:
  void run();
  bool serve(const Command& command);  // false: abandoned by a fault or reset
  bool wait_for_results();  // until results_ready_cycle(); false as serve
  void raise_due_signals();  // SC_METHOD: the deferred signals whose cycle has come

  std::string display_name_;
  unsigned engine_index_;  // its position among the core's engines (ChipTrace::engine_track)
  Ring<Command> queue_;
  size_t capacity_;
  bool busy_ = false;
  int waiting_on_ = -1;
  sc_core::sc_event pushed_, popped_, idle_;
  // Signals queued behind results not ready yet (the tensor core's drain): raised at that cycle while
  // the engine goes on with the next instruction, as sync.signal says ("once every earlier instruction
  // has completed"). In cycle order: results_ready_cycle() never goes back.
  struct DeferredSignal {
    uint64_t cycle;
    unsigned semaphore;
  };
  Ring<DeferredSignal> deferred_signals_;
  sc_core::sc_event deferred_signal_due_;
  const uint64_t deferred_signal_slot_;  // (ChipContext::new_slot)
};

// Disassembly of a command's instruction word (for faults and traces).
std::string instruction_text(uint64_t word);

}  // namespace npu::sim
