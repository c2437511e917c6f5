// The command processor's slot: the microcontroller that reads the command
// queues the driver fills. Its program (the firmware, firmware/) is installed
// into this slot and runs as the module's thread; the slot provides the
// doorbell events the register block rings. With no firmware installed the
// doorbells are recorded and nothing else happens.
#pragma once

#include <systemc>

#include <memory>
#include <vector>

#include "chip_context.h"

namespace npu::sim {

class CommandProcessor;

// What firmware implements: its main loop, run on the command processor's thread.
class CommandProcessorFirmware {
 public:
  virtual ~CommandProcessorFirmware() = default;
  virtual void run(CommandProcessor& processor) = 0;
};

class CommandProcessor : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(CommandProcessor);
  CommandProcessor(sc_core::sc_module_name name, ChipContext& context);

  // Installs the firmware; only before the simulation starts.
  void install(std::unique_ptr<CommandProcessorFirmware> firmware);

  // Rung by the register block when the host writes a queue's DOORBELL.
  void ring(unsigned queue);
  const sc_core::sc_event& doorbell_event() const { return doorbell_; }
  uint64_t doorbells(unsigned queue) const { return doorbells_.at(queue); }

  ChipContext& context;

 private:
  void run();

  std::unique_ptr<CommandProcessorFirmware> firmware_;
  std::vector<uint64_t> doorbells_;
  sc_core::sc_event doorbell_;
};

}  // namespace npu::sim
