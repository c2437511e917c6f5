// A core's control unit: fetches and decodes the core's code in order,
// executes scalar, branch and synchronization instructions itself, and
// dispatches DMA, tensor-core and vector instructions to the engine queues
// with their register operands captured. It keeps a local time ahead of the
// simulation kernel (temporal decoupling) and synchronizes only when it
// interacts with other processes: a full queue, a semaphore, fence, barrier, halt.
#pragma once

#include <systemc>

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "barrier.h"
#include "chip_context.h"
#include "engine.h"
#include "local_memory.h"
#include "npusim/sim/stats.h"
#include "semaphores.h"

namespace npu::sim {

// One core's part of a launch. The launcher keeps what the pointers refer to
// alive until the core has halted (or the chip is reset).
struct Launch {
  const std::vector<uint64_t>* code = nullptr;        // this core's code section
  const std::vector<uint64_t>* symbol_addresses = nullptr;  // global address per symbol index (UINT64_MAX: not a buffer)
  std::array<uint64_t, 8> args{};                   // csr arg0..arg7
  // The launch's cores: core id i of the program (csr coreid, dma.send's
  // core operand) is physical core (*cores)[i]; csr ncores is its size.
  const std::vector<unsigned>* cores = nullptr;
  unsigned rank = 0;                                // this core's id within the launch
  BarrierGroup* barrier = nullptr;                  // the launch's barriers
  std::string name;                                 // trace span on the control track
};

class ControlUnit : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(ControlUnit);
  ControlUnit(sc_core::sc_module_name name, ChipContext& context, unsigned core, Semaphores& semaphores,
              EngineStats& stats, unsigned engine_index, LocalMemory& local);

  // Engines in EngineId order: dma0..dma3 (only the configured channels), tc, vec.
  void attach_engines(std::vector<Engine*> dma_channels, Engine* tensor_core, Engine* vector_unit);

  void start(const Launch& launch);
  // The chip was reset: whatever ran is abandoned and the core is idle.
  void reset() { finished_ = true; }
  bool finished() const { return finished_; }
  const Launch& launch() const { return launch_; }
  uint64_t finish_cycle() const { return finish_cycle_; }
  sc_core::sc_event& finished_event() { return finished_event_; }
  // Also notified when the core halts (the command processor waits on it).
  void set_halt_listener(sc_core::sc_event* listener) { halt_listener_ = listener; }

  // For deadlock and watchdog reports.
  int64_t pc() const { return pc_; }
  std::string blocked_on() const { return full_queue_ ? "queue of " + full_queue_->display_name() + " full" : blocked_on_; }
  const std::vector<Engine*>& engines() const { return all_engines_; }

 private:
  void run();
  void execute_program();
  Engine* engine_for(isa::EngineId id) const;
  void fault(FaultKind kind, const std::string& message, uint64_t word);
  bool drain();  // waits until every engine is idle; false on fault

  ChipContext& context_;
  ChipContext::Timer& timer_;  // for this thread's timed waits (ChipContext::wait_until)
  const unsigned core_;
  Semaphores& semaphores_;
  EngineStats& stats_;
  unsigned engine_index_;  // its position among the core's engines (ChipTrace::engine_track)
  LocalMemory& local_;     // for each program's scratchpad footprint
  std::vector<Engine*> dma_channels_;
  Engine* tensor_core_ = nullptr;
  Engine* vector_unit_ = nullptr;
  std::vector<Engine*> all_engines_;

  Launch launch_;
  // The launch's code decoded as it is first reached (an instruction word that does not decode faults when
  // it is reached, not at launch): a loop decodes its body once.
  std::vector<std::optional<isa::Instruction>> decoded_;
  std::array<uint64_t, isa::kNumRegisters> registers_{};
  int64_t pc_ = 0;
  uint64_t local_cycle_ = 0;
  bool finished_ = true;
  uint64_t finish_cycle_ = 0;
  std::string blocked_on_;
  const Engine* full_queue_ = nullptr;  // blocked on this engine's full queue (named only when asked: it is frequent)
  sc_core::sc_event start_event_, finished_event_;
  sc_core::sc_event* halt_listener_ = nullptr;
};

}  // namespace npu::sim
