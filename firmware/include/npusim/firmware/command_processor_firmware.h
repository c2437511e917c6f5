// The command processor's firmware: serves the chip's command queues
// (docs/packets.md, docs/design/command_path.md). Install it into a simulator
// with SimulatorOptions::firmware.
#pragma once

#include <memory>

#include "npusim/sim/command_processor_port.h"

namespace npu::firmware {

std::shared_ptr<sim::CommandProcessorFirmware> make_command_processor_firmware();

}  // namespace npu::firmware
