#include "npusim/sim/stats.h"

#include <cstdio>
#include <iomanip>

#include "npusim/sim/energy.h"

namespace npu::sim {
namespace {

std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

double ratio(uint64_t a, uint64_t b) { return b == 0 ? 0.0 : static_cast<double>(a) / static_cast<double>(b); }

}  // namespace

const char* stall_reason_name(StallReason reason) {
  switch (reason) {
    case StallReason::Semaphore: return "semaphore";
    case StallReason::DmaData: return "dma_data";
    case StallReason::SramBankConflict: return "sram_bank_conflict";
    case StallReason::Noc: return "noc";
    case StallReason::Dram: return "dram";
    case StallReason::QueueFull: return "queue_full";
    case StallReason::Fence: return "fence";
    case StallReason::Barrier: return "barrier";
    case StallReason::Count: break;
  }
  return "?";
}

void ChipStats::write_json(std::ostream& out, const EnergyModel* energy) const {
  uint64_t total_macs = 0;
  for (const CoreStats& core : cores) total_macs += core.macs;
  out << "{\n  \"cycles\": " << cycles << ",\n  \"clock_mhz\": " << clock_mhz << ",\n  \"timing_only\": " << (timing_only ? "true" : "false")
      << ",\n  \"macs\": " << total_macs << ",\n  \"peak_macs_per_cycle\": " << peak_macs_per_cycle
      << ",\n  \"tensor_utilization\": " << ratio(total_macs, cycles * peak_macs_per_cycle) << ",\n  \"cores\": [";
  for (size_t c = 0; c < cores.size(); ++c) {
    const CoreStats& core = cores[c];
    out << (c ? "," : "") << "\n    {\"core\": " << c << ", \"macs\": " << core.macs << ", \"vector_elements\": " << core.vector_elements
        << ", \"finish_cycle\": " << core.finish_cycle << ", \"scratchpad_read_bytes\": " << core.scratchpad_read_bytes
        << ", \"scratchpad_write_bytes\": " << core.scratchpad_write_bytes << ", \"accumulator_read_bytes\": " << core.accumulator_read_bytes
        << ", \"accumulator_write_bytes\": " << core.accumulator_write_bytes << ",\n     \"engines\": [";
    for (size_t e = 0; e < core.engines.size(); ++e) {
      const EngineStats& engine = core.engines[e];
      out << (e ? "," : "") << "\n       {\"name\": " << quoted(engine.name) << ", \"instructions\": " << engine.instructions
          << ", \"busy_cycles\": " << engine.busy_cycles << ", \"utilization\": " << ratio(engine.busy_cycles, cycles) << ", \"stall_cycles\": {";
      for (size_t r = 0; r < engine.stall_cycles.size(); ++r)
        out << (r ? ", " : "") << quoted(stall_reason_name(static_cast<StallReason>(r))) << ": " << engine.stall_cycles[r];
      out << "}}";
    }
    out << "]}";
  }
  out << "\n  ],\n  \"dram_channels\": [";
  for (size_t i = 0; i < dram_channels.size(); ++i) {
    const DramChannelStats& channel = dram_channels[i];
    const uint64_t accesses = channel.row_hits + channel.row_closed + channel.row_conflicts;
    out << (i ? "," : "") << "\n    {\"channel\": " << i << ", \"read_bytes\": " << channel.read_bytes << ", \"write_bytes\": " << channel.write_bytes
        << ", \"row_hits\": " << channel.row_hits << ", \"row_closed\": " << channel.row_closed << ", \"row_conflicts\": " << channel.row_conflicts
        << ", \"row_hit_rate\": " << ratio(channel.row_hits, accesses) << ", \"refreshes\": " << channel.refreshes
        << ", \"busy_cycles\": " << channel.busy_cycles << ", \"utilization\": " << ratio(channel.busy_cycles, cycles) << "}";
  }
  out << "\n  ],\n  \"noc_links\": [";
  for (size_t i = 0; i < noc_links.size(); ++i) {
    const NocLinkStats& link = noc_links[i];
    out << (i ? "," : "") << "\n    {\"link\": " << quoted(link.name) << ", \"bytes\": " << link.bytes << ", \"busy_cycles\": " << link.busy_cycles
        << ", \"utilization\": " << ratio(link.busy_cycles, cycles) << "}";
  }
  out << "\n  ],\n  \"host_link_bytes\": " << host_link_bytes;
  if (energy) {
    const ActionCounts counts = action_counts(*this);
    out << ",\n  \"energy\": ";
    write_energy_json(out, price(*energy, counts, cycles, static_cast<uint32_t>(clock_mhz)), counts, *energy, "  ");
  }
  out << "\n}\n";
}

void ChipStats::write_summary(std::ostream& out, const EnergyModel* energy) const {
  uint64_t total_macs = 0, dram_bytes = 0, hits = 0, accesses = 0;
  for (const CoreStats& core : cores) total_macs += core.macs;
  for (const DramChannelStats& channel : dram_channels) {
    dram_bytes += channel.read_bytes + channel.write_bytes;
    hits += channel.row_hits;
    accesses += channel.row_hits + channel.row_closed + channel.row_conflicts;
  }
  char line[256];
  std::snprintf(line, sizeof line, "cycles: %llu (%.3f us at %llu MHz)%s\n", static_cast<unsigned long long>(cycles),
                static_cast<double>(cycles) / static_cast<double>(clock_mhz), static_cast<unsigned long long>(clock_mhz),
                timing_only ? ", timing only" : "");
  out << line;
  std::snprintf(line, sizeof line, "tensor cores: %llu MACs, %.1f%% of peak (%llu MACs/cycle)\n", static_cast<unsigned long long>(total_macs),
                100.0 * ratio(total_macs, cycles * peak_macs_per_cycle), static_cast<unsigned long long>(peak_macs_per_cycle));
  out << line;
  std::snprintf(line, sizeof line, "DRAM: %llu bytes, %.1f bytes/cycle, row hit rate %.1f%%\n", static_cast<unsigned long long>(dram_bytes),
                ratio(dram_bytes, cycles), 100.0 * ratio(hits, accesses));
  out << line;
  for (size_t c = 0; c < cores.size(); ++c) {
    const CoreStats& core = cores[c];
    bool any = false;
    for (const EngineStats& engine : core.engines) any = any || engine.instructions > 0;
    if (!any) continue;
    out << "core " << c << ":";
    for (const EngineStats& engine : core.engines) {
      if (engine.instructions == 0) continue;
      std::snprintf(line, sizeof line, "  %s %.0f%%", engine.name.c_str(), 100.0 * ratio(engine.busy_cycles, cycles));
      out << line;
    }
    out << "\n";
  }
  if (energy) write_energy_summary(out, price(*energy, action_counts(*this), cycles, static_cast<uint32_t>(clock_mhz)));
}

}  // namespace npu::sim
