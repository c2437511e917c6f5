// The command processor: the microcontroller that serves the command queues
// the driver fills. Its program (the firmware, firmware/) is installed into
// this module and runs as its thread, seeing the chip through the
// CommandProcessorPort this module implements: queue registers, device
// memory, a copy engine, the cores, interrupts. With no firmware installed,
// doorbells are counted and nothing else happens.
#pragma once

#include <systemc>

#include <list>
#include <memory>
#include <vector>

#include "barrier.h"
#include "chip_context.h"
#include "control_unit.h"
#include "npusim/sim/command_processor_port.h"
#include "timeline.h"

namespace npu::sim {

class Chip;

class CommandProcessor : public sc_core::sc_module, public CommandProcessorPort {
 public:
  SC_HAS_PROCESS(CommandProcessor);
  CommandProcessor(sc_core::sc_module_name name, ChipContext& context, Chip& chip);

  // Installs the firmware; only before the simulation starts.
  void install(std::shared_ptr<CommandProcessorFirmware> firmware);

  // Rung by the register block when the host writes a queue's DOORBELL.
  void ring(unsigned queue);
  // Whatever the firmware may be waiting for happened (a core halted, a reset).
  // One event for all causes: waiting on an or-list of events would do too,
  // but SystemC keeps such a list allocated for as long as the thread waits.
  sc_core::sc_event& wake_event() { return wake_; }
  uint64_t doorbells(unsigned queue) const { return doorbells_.at(queue); }

  // Host memory the copy engine may reach (COPY h2d/d2h); returns its bus address.
  uint64_t register_host_memory(void* data, uint64_t bytes);
  void unregister_host_memory(uint64_t bus_address);

  // The launch watchdog, checked by the simulator between kernel runs (a
  // timer event would keep the kernel busy and hide deadlocks): the earliest
  // deadline of a running launch, and the check that faults the chip once
  // one has passed.
  uint64_t next_watchdog_cycle();
  void check_watchdogs();

  // CommandProcessorPort
  const ChipConfig& config() const override { return context_.config; }
  uint64_t now_cycle() const override { return context_.now_cycle(); }
  QueueRegisters queue_registers(unsigned queue) const override;
  void set_queue_head(unsigned queue, uint32_t head) override;
  void set_queue_error(unsigned queue, uint32_t code) override;
  void raise_queue_interrupt(unsigned queue) override;
  bool read_memory(uint64_t address, void* data, uint64_t bytes) override;
  bool write_memory(uint64_t address, const void* data, uint64_t bytes) override;
  bool copy(CopyKind kind, uint64_t dst, uint64_t src, uint64_t bytes, uint64_t* done_cycle) override;
  bool fill(uint64_t dst, uint64_t bytes, uint32_t pattern, uint64_t* done_cycle) override;
  void start_cores(const LaunchRequest& request) override;
  bool core_idle(unsigned core) const override;
  bool wait(uint64_t until_cycle) override;
  ChipStats stats() const override;
  void trace_packet(unsigned queue, const std::string& name, uint64_t begin_cycle, uint64_t end_cycle, uint64_t flow_id) override;

 private:
  // What a launch's cores refer to, kept until they have all halted.
  struct ActiveLaunch {
    std::vector<unsigned> cores;
    std::vector<std::vector<uint64_t>> code;
    std::vector<uint64_t> symbol_addresses;
    std::unique_ptr<BarrierGroup> barrier;
    uint64_t watchdog_cycle;
  };
  bool finished(const ActiveLaunch& launch) const;
  struct HostRegion {
    uint64_t bus_address;
    uint8_t* data;
    uint64_t bytes;
  };
  void run();
  uint8_t* host_pointer(uint64_t bus_address, uint64_t bytes);
  uint64_t dram_bytes_per_cycle() const;

  ChipContext& context_;
  Chip& chip_;
  std::shared_ptr<CommandProcessorFirmware> firmware_;
  std::vector<uint64_t> doorbells_;
  sc_core::sc_event wake_;
  uint64_t slot_ = 0;  // of its timed waits (ChipContext::new_slot)
  uint64_t generation_seen_ = 0;
  std::list<ActiveLaunch> launches_;
  std::vector<HostRegion> host_regions_;
  uint64_t next_host_bus_address_ = kHostBusBase;
  Timeline copy_engine_;
};

}  // namespace npu::sim
