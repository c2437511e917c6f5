// The simulated chip as a library: build it from a config, put data in its
// DRAM, launch programs on its cores and run them. No SystemC types here.
//
// SystemC allows one elaboration per process: create one Simulator per
// process (a second one throws). Whatever links this library must define
// sc_main (libsystemc's main calls it).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "npusim/isa/program.h"
#include "npusim/sim/chip_config.h"
#include "npusim/sim/fault.h"
#include "npusim/sim/stats.h"

namespace npu::trace {
class Trace;
}

namespace npu::sim {

class CommandProcessorFirmware;

struct SimulatorOptions {
  bool functional = true;          // false: timing only (tensor core and vector unit skip arithmetic)
  trace::Trace* trace = nullptr;   // record the chip's activity here (optional)
  // The command processor's program (firmware/); without one, the command
  // queues do nothing and programs run only through launch()/run().
  std::shared_ptr<CommandProcessorFirmware> firmware;
  // Timing only: whether DMA still moves data and the vector unit still
  // computes integer results, so that indices the chip loads or computes send
  // dma.gather to the functional run's rows. Without a dma.gather no value can
  // change an address or a cycle, and false skips that work with the same result.
  bool timing_only_moves_data = true;
};

struct RunResult {
  uint64_t start_cycle = 0;
  uint64_t end_cycle = 0;           // when the last core finished (or the fault)
  std::optional<FaultRecord> fault; // set if the run did not finish normally
  uint64_t cycles() const { return end_cycle - start_cycle; }
};

// Marks a symbol with no global buffer bound to it.
inline constexpr uint64_t kUnboundSymbol = UINT64_MAX;

class Simulator {
 public:
  explicit Simulator(const ChipConfig& config, SimulatorOptions options = {});
  ~Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  const ChipConfig& config() const;

  // Device DRAM, without simulated time. Throw std::out_of_range outside it.
  void write_dram(uint64_t address, const void* data, uint64_t bytes);
  void read_dram(uint64_t address, void* data, uint64_t bytes) const;
  // The device's bytes [address, +bytes), to read or fill in place between
  // runs (a loader's large inputs, without a copy of them); valid while the
  // simulator lives. Throws std::out_of_range outside DRAM.
  uint8_t* dram_bytes(uint64_t address, uint64_t bytes);

  // Starts `program` on every core in `core_mask` (each must have code in it).
  // symbol_addresses[i] is the DRAM address bound to symbol i (kUnboundSymbol
  // for symbols that are not global buffers). Throws std::invalid_argument.
  void launch(const isa::Program& program, uint64_t core_mask, const std::vector<uint64_t>& symbol_addresses,
              const std::array<uint64_t, 8>& args = {});

  // Runs until every launched core has halted and drained, a fault, a
  // deadlock, or `max_cycles` after the launch (watchdog). After a fault the
  // chip is reset: engines idle, queues and semaphores empty, memories kept.
  RunResult run(uint64_t max_cycles);

  // The host's view through the host link (sim/registers.def, docs/registers.md):
  // each call takes the link's simulated time, during which the chip runs on.
  uint32_t read_register(uint32_t offset);
  void write_register(uint32_t offset, uint32_t value);
  void copy_to_device(uint64_t address, const void* data, uint64_t bytes);
  void copy_from_device(uint64_t address, void* data, uint64_t bytes);
  // Runs the chip until an enabled interrupt is pending (IRQ_STATUS & IRQ_ENABLE)
  // or `max_cycles` pass; returns whether one is pending. If the chip runs
  // out of events while cores are still running programs, nothing can ever
  // finish them: that is a deadlock fault (which raises its interrupt).
  // `stop`, when given, may be set from another thread, which then calls
  // request_stop(): the wait returns false soon after (the chip paused where it
  // stands). A wait that is not stopped runs as it would without `stop`.
  bool wait_for_interrupt(uint64_t max_cycles, const std::atomic<bool>* stop = nullptr);
  // Safe from any thread: pauses the kernel at its next update phase, so that
  // a wait_for_interrupt looks at its `stop`.
  void request_stop();

  // Posted writes, as a driver issues them on PCIe: they return once the
  // write is on the link (not when it arrives) and take effect on arrival,
  // in order with all other host requests. The data is consumed before return.
  void post_register_write(uint32_t offset, uint32_t value);
  void post_copy_to_device(uint64_t address, const void* data, uint64_t bytes);

  // Host memory that the command processor's copy engine may read or write
  // (COPY packets from or to the host): returns its bus address, at or above
  // kHostBusBase. The memory must stay valid until it is unregistered.
  uint64_t register_host_memory(void* data, uint64_t bytes);
  void unregister_host_memory(uint64_t bus_address);

  // Calls `callback(current cycle)` every `every_cycles` simulated cycles
  // during run() (for progress displays); an empty callback turns it off.
  void set_progress(std::function<void(uint64_t)> callback, uint64_t every_cycles);

  // Writes the bandwidth counters accumulated since the last run (or flush)
  // into the trace; run() does it at its end. For callers that drive the
  // chip through its registers, before they write the trace.
  void flush_trace_counters();
  // Starts recording the chip's activity into `trace` from now on (a chip built without
  // SimulatorOptions::trace), or stops it (flushing the counters first). Between runs only: an
  // instruction in flight would have no span. std::logic_error when already recording or not.
  void start_trace(trace::Trace& trace);
  void stop_trace();

  // Records every memory transfer over the host link from now on (profilers place them on the
  // device's timeline), or stops; take_host_transfers() returns what was recorded and forgets it.
  void record_host_transfers(bool on);
  std::vector<HostTransfer> take_host_transfers();

  uint64_t now_cycle() const;
  ChipStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace npu::sim
