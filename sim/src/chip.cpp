#include "chip.h"

namespace npu::sim {

Chip::Chip(sc_core::sc_module_name name, ChipContext& chip_context)
    : sc_module(name),
      context(chip_context),
      dram("dram", chip_context),
      noc("noc", chip_context),
      command_processor("command_processor", chip_context),
      registers("registers", chip_context, command_processor, [this] { reset(); }),
      host_link("host_link", chip_context) {
  const ChipConfig& config = context.config;
  for (unsigned c = 0; c < config.num_cores; ++c)
    cores.push_back(std::make_unique<Core>(("core" + std::to_string(c)).c_str(), context, c, barrier, directory, dram));
  for (auto& core : cores) {
    directory.local_memories.push_back(&core->local);
    directory.semaphores.push_back(&core->semaphores);
  }
  // NoC targets in the order Noc expects: DRAM, then each core's local memory.
  noc.out.bind(dram.socket);
  for (auto& core : cores) noc.out.bind(core->local.socket);
  for (unsigned c = 0; c < config.num_cores; ++c)
    for (auto& channel : cores[c]->dma) {
      channel->noc.bind(noc.in);
      noc.add_initiator_node(config.core_position(c));
    }
  host_link.noc.bind(noc.in);
  noc.add_initiator_node({config.host_link.port.x, config.host_link.port.y});
  host_link.registers.bind(registers.socket);
  context.on_fault = [this](const FaultRecord& fault) {
    registers.latch_fault(fault);
    registers.raise_interrupt(kIrqFaultBit);
  };
}

void Chip::reset() {
  context.reset();
  for (auto& core : cores) core->reset();
}

}  // namespace npu::sim
