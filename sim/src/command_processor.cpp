#include "command_processor.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "chip.h"
#include "chip_trace.h"
#include "npusim/sim/chip_peaks.h"

namespace npu::sim {

CommandProcessor::CommandProcessor(sc_core::sc_module_name name, ChipContext& context, Chip& chip)
    : sc_module(name), context_(context), chip_(chip), doorbells_(context.config.command_processor.num_queues, 0) {
  slot_ = context.new_slot();
  SC_THREAD(run);
}

void CommandProcessor::install(std::shared_ptr<CommandProcessorFirmware> firmware) {
  if (sc_core::sc_get_status() != sc_core::SC_ELABORATION) throw std::logic_error("firmware is installed before the simulation starts");
  firmware_ = std::move(firmware);
}

void CommandProcessor::ring(unsigned queue) {
  ++doorbells_.at(queue);
  wake_.notify(sc_core::SC_ZERO_TIME);
}

void CommandProcessor::run() {
  generation_seen_ = context_.generation();
  if (firmware_) firmware_->run(*this);
}

uint64_t CommandProcessor::register_host_memory(void* data, uint64_t bytes) {
  if (data == nullptr || bytes == 0) throw std::invalid_argument("host memory to register is empty");
  const uint64_t bus_address = next_host_bus_address_;
  // Page-aligned and never reused, so that a stale address can only miss.
  next_host_bus_address_ += (bytes + 4095) / 4096 * 4096 + 4096;
  host_regions_.push_back({bus_address, static_cast<uint8_t*>(data), bytes});
  return bus_address;
}

void CommandProcessor::unregister_host_memory(uint64_t bus_address) {
  const auto it = std::find_if(host_regions_.begin(), host_regions_.end(), [&](const HostRegion& r) { return r.bus_address == bus_address; });
  if (it == host_regions_.end()) throw std::invalid_argument("host memory at this bus address is not registered");
  host_regions_.erase(it);
}

uint8_t* CommandProcessor::host_pointer(uint64_t bus_address, uint64_t bytes) {
  for (const HostRegion& region : host_regions_)
    if (bus_address >= region.bus_address && bus_address - region.bus_address <= region.bytes &&
        bytes <= region.bytes - (bus_address - region.bus_address))
      return region.data + (bus_address - region.bus_address);
  return nullptr;
}

CommandProcessorPort::QueueRegisters CommandProcessor::queue_registers(unsigned queue) const {
  const RegisterBlock& r = chip_.registers;
  QueueRegisters q;
  q.ring_base = r.queue_value(queue, QueueRegister::RING_BASE_LO) | uint64_t{r.queue_value(queue, QueueRegister::RING_BASE_HI)} << 32;
  q.ring_size_bytes = r.queue_value(queue, QueueRegister::RING_SIZE);
  q.head = r.queue_value(queue, QueueRegister::HEAD);
  q.tail = r.queue_value(queue, QueueRegister::TAIL);
  return q;
}

void CommandProcessor::set_queue_head(unsigned queue, uint32_t head) { chip_.registers.set_queue_value(queue, QueueRegister::HEAD, head); }

void CommandProcessor::set_queue_error(unsigned queue, uint32_t code) { chip_.registers.set_queue_value(queue, QueueRegister::ERROR, code); }

void CommandProcessor::raise_queue_interrupt(unsigned queue) { chip_.registers.raise_interrupt(queue); }

bool CommandProcessor::read_memory(uint64_t address, void* data, uint64_t bytes) {
  const uint8_t* source = chip_.device_bytes(address, bytes);
  if (!source) return false;
  std::memcpy(data, source, bytes);
  return true;
}

bool CommandProcessor::write_memory(uint64_t address, const void* data, uint64_t bytes) {
  uint8_t* target = chip_.device_bytes(address, bytes);
  if (!target) return false;
  std::memcpy(target, data, bytes);
  return true;
}

uint64_t CommandProcessor::dram_bytes_per_cycle() const {
  return peak_dram_bytes_per_cycle(context_.config);
}

// The copy engine is one resource shared by all queues: a copy starts when it
// is free. Device memory streams at the DRAM channels' combined bandwidth
// (a device-to-device copy crosses it twice: read and write) after one
// closed-row access; host memory crosses the host link instead.
bool CommandProcessor::copy(CopyKind kind, uint64_t dst, uint64_t src, uint64_t bytes, uint64_t* done_cycle) {
  const uint64_t now = context_.now_cycle();
  const DramConfig& dram = context_.config.dram;
  switch (kind) {
    case CopyKind::DeviceToDevice: {
      uint8_t* target = chip_.device_bytes(dst, bytes);
      const uint8_t* source = chip_.device_bytes(src, bytes);
      if (!target || !source) return false;
      std::memmove(target, source, bytes);
      const uint64_t duration = dram.row_closed_cycles + ceil_div(2 * bytes, dram_bytes_per_cycle());
      *done_cycle = copy_engine_.reserve(now, duration) + duration;
      return true;
    }
    case CopyKind::HostToDevice:
    case CopyKind::DeviceToHost: {
      const bool to_device = kind == CopyKind::HostToDevice;
      const uint64_t device = to_device ? dst : src;
      uint8_t* host = host_pointer(to_device ? src : dst, bytes);
      uint8_t* memory = chip_.device_bytes(device, bytes);
      if (host == nullptr || memory == nullptr) return false;
      if (to_device) std::memmove(memory, host, bytes);
      else std::memmove(host, memory, bytes);
      const uint64_t start = copy_engine_.reserve(now, 0);
      *done_cycle = std::max(chip_.host_link.reserve_transfer(to_device, device, bytes, start), start + dram.row_closed_cycles);
      copy_engine_.reserve(*done_cycle, 0);
      return true;
    }
  }
  return false;
}

bool CommandProcessor::fill(uint64_t dst, uint64_t bytes, uint32_t pattern, uint64_t* done_cycle) {
  uint8_t* out = chip_.device_bytes(dst, bytes);
  if (!out) return false;
  for (uint64_t i = 0; i < bytes; ++i) out[i] = static_cast<uint8_t>(pattern >> (8 * (i % 4)));
  const uint64_t duration = context_.config.dram.row_closed_cycles + ceil_div(bytes, dram_bytes_per_cycle());
  *done_cycle = copy_engine_.reserve(context_.now_cycle(), duration) + duration;
  return true;
}

void CommandProcessor::start_cores(const LaunchRequest& request) {
  if (request.physical_cores.empty() || request.code.size() != request.physical_cores.size())
    throw std::logic_error("a launch request needs one code section per core");
  for (const unsigned core : request.physical_cores)
    if (core >= chip_.cores.size() || !core_idle(core)) throw std::logic_error("launch on a core that is busy or does not exist");
  // Forget launches whose cores have all halted.
  launches_.remove_if([&](const ActiveLaunch& launch) { return finished(launch); });
  ActiveLaunch& launch = launches_.emplace_back();
  launch.watchdog_cycle = context_.now_cycle() + context_.config.simulation.watchdog_cycles;
  launch.cores = request.physical_cores;
  launch.code = request.code;
  launch.symbol_addresses = request.symbol_addresses;
  launch.barrier = std::make_unique<BarrierGroup>(static_cast<unsigned>(launch.cores.size()));
  for (unsigned rank = 0; rank < launch.cores.size(); ++rank) {
    Launch core_launch;
    core_launch.code = &launch.code[rank];
    core_launch.symbol_addresses = &launch.symbol_addresses;
    core_launch.args = request.args;
    core_launch.cores = &launch.cores;
    core_launch.rank = rank;
    core_launch.barrier = launch.barrier.get();
    core_launch.name = request.name;
    chip_.cores[launch.cores[rank]]->control.start(core_launch);
  }
}

bool CommandProcessor::core_idle(unsigned core) const { return core < chip_.cores.size() && chip_.cores[core]->control.finished(); }

bool CommandProcessor::finished(const ActiveLaunch& launch) const {
  return std::all_of(launch.cores.begin(), launch.cores.end(), [&](unsigned c) { return core_idle(c); });
}

uint64_t CommandProcessor::next_watchdog_cycle() {
  launches_.remove_if([&](const ActiveLaunch& launch) { return finished(launch); });
  uint64_t next = UINT64_MAX;
  for (const ActiveLaunch& launch : launches_) next = std::min(next, launch.watchdog_cycle);
  return next;
}

void CommandProcessor::check_watchdogs() {
  if (context_.faulted()) return;
  for (const ActiveLaunch& launch : launches_) {
    if (finished(launch) || context_.now_cycle() < launch.watchdog_cycle) continue;
    FaultRecord fault = chip_.stuck_fault(FaultKind::Watchdog, launch.cores);
    const uint64_t limit = context_.config.simulation.watchdog_cycles;
    fault.message = "a launch ran longer than its limit of " + std::to_string(limit) + " cycles" +
                    fault.message.substr(std::min(fault.message.size(), fault.message.find(';')));
    context_.raise_fault(std::move(fault));
    return;
  }
}

bool CommandProcessor::wait(uint64_t until_cycle) {
  if (generation_seen_ == context_.generation() && !context_.faulted()) {
    const uint64_t now = context_.now_cycle();
    if (until_cycle == UINT64_MAX) sc_core::wait(wake_);
    else if (until_cycle > now) sc_core::wait(context_.until(until_cycle, slot_), wake_);
    else sc_core::wait(sc_core::SC_ZERO_TIME);
  }
  // A fault stops the command processor until the host resets the chip.
  while (generation_seen_ == context_.generation() && context_.faulted()) sc_core::wait(wake_);
  if (generation_seen_ == context_.generation()) return true;
  generation_seen_ = context_.generation();
  return false;
}

ChipStats CommandProcessor::stats() const { return chip_.stats(); }

void CommandProcessor::trace_packet(unsigned queue, const std::string& name, uint64_t begin_cycle, uint64_t end_cycle, uint64_t flow_id) {
  if (context_.trace) context_.trace->packet_span(queue, begin_cycle, end_cycle, name, flow_id);
}

}  // namespace npu::sim
