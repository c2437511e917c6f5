#include "chip.h"

#include "npusim/isa/isa.h"
#include "npusim/sim/address_map.h"
#include "npusim/sim/chip_peaks.h"

namespace npu::sim {

Chip::Chip(sc_core::sc_module_name name, ChipContext& chip_context)
    : sc_module(name),
      context(chip_context),
      dram("dram", chip_context),
      noc("noc", chip_context),
      command_processor("command_processor", chip_context, *this),
      registers("registers", chip_context, command_processor, [this] { reset(); }),
      host_link("host_link", chip_context) {
  const ChipConfig& config = context.config;
  if (context.functional) context.background = &background;
  directory.noc = &noc;
  for (unsigned c = 0; c < config.num_cores; ++c)
    cores.push_back(std::make_unique<Core>(("core" + std::to_string(c)).c_str(), context, c, directory, dram));
  for (auto& core : cores) {
    core->control.set_halt_listener(&command_processor.wake_event());
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

Chip::~Chip() {
  background.finish();
  context.background = nullptr;
}

void Chip::reset() {
  context.reset();
  for (auto& core : cores) core->reset();
  command_processor.wake_event().notify(sc_core::SC_ZERO_TIME);
}

uint8_t* Chip::device_bytes(uint64_t address, uint64_t bytes) {
  if (!in_core_window(address)) return dram.in_range(address, bytes) ? dram.data(address, bytes) : nullptr;
  const unsigned core = window_core(address);
  const uint64_t local = window_offset(address);
  if (core >= cores.size() || local >= isa::kAccumulatorBase) return nullptr;
  LocalMemory& memory = cores[core]->local;
  return memory.check(local, bytes, 1) ? nullptr : memory.data(local, bytes);
}

FaultRecord Chip::stuck_fault(FaultKind kind, const std::vector<unsigned>& stuck_cores) const {
  // Name the first thing that is stuck, and list everything that is.
  FaultRecord fault;
  fault.kind = kind;
  fault.cycle = context.now_cycle();
  std::string all;
  for (const unsigned c : stuck_cores) {
    Core& core = *cores[c];
    if (core.control.finished()) continue;
    const std::vector<uint64_t>& code = *core.control.launch().code;
    const auto note = [&](const std::string& engine, int64_t pc, uint64_t word, const std::string& what) {
      if (fault.core < 0) {
        fault.core = static_cast<int>(c);
        fault.engine = engine;
        fault.pc = pc;
        fault.instruction = word ? instruction_text(word) : "";
      }
      all += "; core " + std::to_string(c) + " " + engine + " " + what;
    };
    const std::string control_state = core.control.blocked_on();
    note("control", core.control.pc(),
         core.control.pc() >= 0 && static_cast<size_t>(core.control.pc()) < code.size() ? code[static_cast<size_t>(core.control.pc())] : 0,
         "at pc " + std::to_string(core.control.pc()) + (control_state.empty() ? "" : " (" + control_state + ")"));
    for (Engine* engine : core.engines()) {
      if (const Command* command = engine->current()) {
        const std::string state = engine->waiting_on() >= 0 ? "waits on s" + std::to_string(engine->waiting_on()) + " (value 0)" : "busy";
        note(engine->display_name(), command->pc, command->word, state + " at pc " + std::to_string(command->pc));
      }
    }
  }
  fault.message = (kind == FaultKind::Deadlock ? "no engine can make progress" : "the run exceeded its cycle limit") + all;
  return fault;
}

ChipStats Chip::stats() const {
  ChipStats stats;
  stats.clock_mhz = context.config.clock_mhz;
  stats.timing_only = !context.functional;
  for (const auto& core : cores) stats.cores.push_back(core->stats);
  stats.dram_channels = dram.channel_stats();
  stats.noc_links = noc.link_stats();
  stats.host_link_bytes = host_link.bytes();
  stats.peak_macs_per_cycle = peak_macs_per_cycle(context.config);
  return stats;
}


}  // namespace npu::sim
