#include <cstdio>
#include <string>

#include "npusim/driver/device.h"
#include "npusim/firmware/counters.h"
#include "npusim/sim/fault.h"
#include "npusim/sim/registers.h"

namespace npu {
namespace {

std::string human_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) value /= 1024, ++unit;
  char buf[32];
  std::snprintf(buf, sizeof buf, unit == 0 ? "%.0f %s" : "%.2f %s", value, units[unit]);
  return buf;
}

const char* fault_kind_text(uint32_t kind_plus_one) {
  // FAULT_KIND holds the kind + 1.
  return kind_plus_one >= 1 && kind_plus_one <= 7 ? sim::fault_kind_name(static_cast<sim::FaultKind>(kind_plus_one - 1)) : "unknown fault";
}

}  // namespace

std::string Device::report() {
  const auto reg = [&](sim::Register r) { return link_->read_register(static_cast<uint32_t>(r)); };
  const AllocatorStats memory = memory_stats();
  char line[256];
  std::string out;
  std::snprintf(line, sizeof line, "device: npusim NPU (ISA version %u, register map %u), %u cores, %u command queues\n", info_.isa_version,
                info_.register_map_version, info_.num_cores, info_.num_queues);
  out += line;
  out += "memory: " + human_bytes(info_.memory_bytes) + " total, " + human_bytes(memory.in_use_bytes) + " in use (peak " +
         human_bytes(memory.peak_in_use_bytes) + ") in " + std::to_string(memory.allocations) + " allocations, " +
         human_bytes(memory.free_bytes) + " free, largest free block " + human_bytes(memory.largest_free_bytes);
  std::snprintf(line, sizeof line, ", fragmentation %.1f%%\n", 100.0 * memory.fragmentation);
  out += line;
  if (info_.sram_pool_bytes_per_core > 0) {
    const AllocatorStats sram = sram_stats();
    out += "SRAM buffers: " + human_bytes(info_.sram_pool_bytes_per_core) + " of each core's " + human_bytes(info_.scratchpad_bytes) +
           " scratchpad, " + human_bytes(sram.in_use_bytes) + " in use in " + std::to_string(sram.allocations) + " allocations\n";
  }
  const bool faulted = reg(sim::Register::STATUS) & 1;
  if (faulted) {
    const uint64_t address = reg(sim::Register::FAULT_ADDR_LO) | uint64_t{reg(sim::Register::FAULT_ADDR_HI)} << 32;
    const uint64_t cycle = reg(sim::Register::FAULT_CYCLE_LO) | uint64_t{reg(sim::Register::FAULT_CYCLE_HI)} << 32;
    std::snprintf(line, sizeof line, "status: FAULT latched: %s, core %d, pc %d, address 0x%llx, cycle %llu\n",
                  fault_kind_text(reg(sim::Register::FAULT_KIND)), static_cast<int>(reg(sim::Register::FAULT_CORE)),
                  static_cast<int>(reg(sim::Register::FAULT_PC)), static_cast<unsigned long long>(address),
                  static_cast<unsigned long long>(cycle));
    out += line;
  } else {
    out += "status: ok\n";
  }
  std::snprintf(line, sizeof line, "interrupts: status 0x%08x, enabled 0x%08x\n", reg(sim::Register::IRQ_STATUS),
                reg(sim::Register::IRQ_ENABLE));
  out += line;
  const uint64_t cycle = reg(sim::Register::CYCLE_LO);  // reading LO latches HI
  out += "cycle: " + std::to_string(cycle | uint64_t{reg(sim::Register::CYCLE_HI)} << 32) + "\n";
  out += "resets: " + std::to_string(resets()) + (resets() ? " (last: " + last_reset_report() + ")" : "") + "\n";
  if (faulted) {
    out += "counters: not read while a fault is latched (the next wait reports it and resets the device)\n";
    return out;
  }
  const firmware::CounterSnapshot counters = read_counters();
  std::snprintf(line, sizeof line, "counters at cycle %llu: DRAM %s read, %s written, row hits %llu of %llu accesses\n",
                static_cast<unsigned long long>(counters.cycle), human_bytes(counters.dram_read_bytes).c_str(),
                human_bytes(counters.dram_write_bytes).c_str(), static_cast<unsigned long long>(counters.dram_row_hits),
                static_cast<unsigned long long>(counters.dram_accesses));
  out += line;
  for (size_t c = 0; c < counters.cores.size(); ++c) {
    const firmware::CoreCounters& core = counters.cores[c];
    std::snprintf(line, sizeof line,
                  "  core %zu: %llu instructions, %llu MACs, busy cycles tensor %llu vector %llu dma %llu, stall cycles %llu\n", c,
                  static_cast<unsigned long long>(core.instructions), static_cast<unsigned long long>(core.macs),
                  static_cast<unsigned long long>(core.tensor_busy_cycles), static_cast<unsigned long long>(core.vector_busy_cycles),
                  static_cast<unsigned long long>(core.dma_busy_cycles), static_cast<unsigned long long>(core.stall_cycles));
    out += line;
  }
  return out;
}

firmware::CounterSnapshot Device::read_counters() {
  // From the last queue: the one least likely to hold the caller's work.
  std::vector<uint64_t> words;
  queue(info_.num_queues - 1).snapshot_counters(&words);
  return firmware::decode_counter_snapshot(words.data(), words.size());
}

}  // namespace npu
