// What the command processor's firmware sees of the chip: its queue
// registers, device memory, the copy engine, the cores, the interrupt line and
// its own clock. The firmware (firmware/) is written against this interface
// only; the chip model implements it. No SystemC types: the firmware is plain
// C++ that happens to run on the command processor's SystemC thread, where
// the blocking calls below take simulated time.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "npusim/sim/chip_config.h"
#include "npusim/sim/stats.h"

namespace npu::sim {

// Host memory that queued copies may reach is registered with the simulator
// (Simulator::register_host_memory); its bus addresses start here, far above
// any device memory, so that a host address is never mistaken for a device one.
inline constexpr uint64_t kHostBusBase = uint64_t{1} << 56;

class CommandProcessorPort {
 public:
  virtual ~CommandProcessorPort() = default;

  virtual const ChipConfig& config() const = 0;
  virtual uint64_t now_cycle() const = 0;

  // The queue registers (sim/registers.def). HEAD and ERROR are the
  // firmware's to write; the host writes the others.
  struct QueueRegisters {
    uint64_t ring_base = 0;
    uint32_t ring_size_bytes = 0;
    uint32_t head = 0;
    uint32_t tail = 0;
  };
  virtual QueueRegisters queue_registers(unsigned queue) const = 0;
  virtual void set_queue_head(unsigned queue, uint32_t head) = 0;
  virtual void set_queue_error(unsigned queue, uint32_t code) = 0;
  virtual void raise_queue_interrupt(unsigned queue) = 0;

  // The firmware's own small accesses to device memory (ring words, fences,
  // descriptors, timestamps), through its local bus: no simulated time of
  // their own (the firmware charges packet_cycles for them). False, with
  // nothing done, when the range is not all device memory.
  virtual bool read_memory(uint64_t address, void* data, uint64_t bytes) = 0;
  virtual bool write_memory(uint64_t address, const void* data, uint64_t bytes) = 0;

  // The copy engine: moves the data now and returns the cycle at which the
  // transfer completes in the timing model (device memory at the DRAM
  // channels' combined bandwidth; host memory over the host link, sharing it
  // with the host's own transfers). Returns false, moving nothing, when an
  // address range is not device memory (or, for host addresses, registered
  // host memory). `fill` writes the 32-bit pattern repeated.
  enum class CopyKind { DeviceToDevice, HostToDevice, DeviceToHost };
  virtual bool copy(CopyKind kind, uint64_t dst, uint64_t src, uint64_t bytes, uint64_t* done_cycle) = 0;
  virtual bool fill(uint64_t dst, uint64_t bytes, uint32_t pattern, uint64_t* done_cycle) = 0;

  // Starts a program on a group of cores. Core i of the group (its "core id"
  // in the program, 0..n-1) is physical core physical_cores[i] and runs
  // code[i]; every core sees the same symbol table and arguments, and the
  // group's barriers are its own. The cores must be idle. A launch still
  // running simulation.watchdog_cycles after it started faults the chip
  // (watchdog timeout): the command processor's hardware timer.
  struct LaunchRequest {
    std::vector<unsigned> physical_cores;
    std::vector<std::vector<uint64_t>> code;
    std::vector<uint64_t> symbol_addresses;  // UINT64_MAX: the symbol is not a global buffer
    std::array<uint64_t, 8> args{};
    std::string name;      // the span on the cores' control tracks
  };
  virtual void start_cores(const LaunchRequest& request) = 0;
  // A core is idle when it has never run, or its last program halted and drained.
  virtual bool core_idle(unsigned core) const = 0;

  // Blocks the firmware until a doorbell rings, a core halts, `until_cycle`
  // is reached (never, if it is UINT64_MAX), or the chip is reset. Returns
  // false when the chip was reset since the firmware's last wait returned:
  // the firmware then forgets all queue state and starts over.
  virtual bool wait(uint64_t until_cycle) = 0;

  // What the COUNTERS packet snapshots.
  virtual ChipStats stats() const = 0;

  // Trace spans for a queue's packets (no-ops when the chip is not traced):
  // on track "queue N" of the command processor, with a flow from the host's
  // submission (flow_id 0: none).
  virtual void trace_packet(unsigned queue, const std::string& name, uint64_t begin_cycle, uint64_t end_cycle, uint64_t flow_id) = 0;
};

// What firmware implements: its main loop, run on the command processor's
// thread for the whole simulation. It must not let exceptions escape.
class CommandProcessorFirmware {
 public:
  virtual ~CommandProcessorFirmware() = default;
  virtual void run(CommandProcessorPort& port) = 0;
};

}  // namespace npu::sim
