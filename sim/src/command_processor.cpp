#include "command_processor.h"

#include <stdexcept>

namespace npu::sim {

CommandProcessor::CommandProcessor(sc_core::sc_module_name name, ChipContext& chip_context)
    : sc_module(name), context(chip_context), doorbells_(chip_context.config.command_processor.num_queues, 0) {
  SC_THREAD(run);
}

void CommandProcessor::install(std::unique_ptr<CommandProcessorFirmware> firmware) {
  if (sc_core::sc_get_status() != sc_core::SC_ELABORATION) throw std::logic_error("firmware is installed before the simulation starts");
  firmware_ = std::move(firmware);
}

void CommandProcessor::ring(unsigned queue) {
  ++doorbells_.at(queue);
  doorbell_.notify(sc_core::SC_ZERO_TIME);
}

void CommandProcessor::run() {
  if (firmware_) firmware_->run(*this);
}

}  // namespace npu::sim
