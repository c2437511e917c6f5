#include "chip.h"

namespace npu::sim {

Chip::Chip(sc_core::sc_module_name name, ChipContext& chip_context)
    : sc_module(name), context(chip_context), dram("dram", chip_context), noc("noc", chip_context) {
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
}

}  // namespace npu::sim
