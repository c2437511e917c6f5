#include "chip_trace.h"

#include <algorithm>
#include <sstream>

#include "engine.h"
#include "noc_links.h"
#include "npusim/sim/chip_peaks.h"

namespace npu::sim {

ChipTrace::ChipTrace(const ChipConfig& config, trace::Trace& trace, uint64_t start_cycle)
    : trace_(trace),
      cycle_ps_(config.cycle_ps()),
      window_cycles_(config.simulation.counter_window_cycles),
      engines_per_core_(3 + config.core.dma.channels),
      energy_(energy_model(config)) {
  trace::TrackId next = trace.next_free_id();
  for (unsigned core = 0; core < config.num_cores; ++core) {
    const trace::TrackId process = next++;
    trace.add_track({process, 0, trace::TrackKind::Process, "core " + std::to_string(core), trace::CounterUnit::Count,
                     static_cast<int32_t>(core)});
    std::vector<std::string> names = {"control"};
    for (unsigned ch = 0; ch < config.core.dma.channels; ++ch) names.push_back("dma ch" + std::to_string(ch));
    names.push_back("tensor core");
    names.push_back("vector unit");
    for (size_t i = 0; i < names.size(); ++i) {
      engine_tracks_.push_back(next);
      trace.add_track({next++, process, trace::TrackKind::Thread, names[i], trace::CounterUnit::Count, static_cast<int32_t>(i)});
    }
    scratchpad_tracks_.push_back(next);
    trace.add_track({next++, process, trace::TrackKind::Counter, "scratchpad used (bytes)", trace::CounterUnit::Bytes,
                     static_cast<int32_t>(names.size())});
  }
  const trace::TrackId memory = memory_process_ = next++;
  trace.add_track({memory, 0, trace::TrackKind::Process, "memory system", trace::CounterUnit::Count, static_cast<int32_t>(config.num_cores)});
  for (unsigned channel = 0; channel < config.dram.channels; ++channel) {
    dram_counters_.push_back({next, {}});
    trace.add_track({next++, memory, trace::TrackKind::Counter, "dram ch" + std::to_string(channel) + " bytes/cycle",
                     trace::CounterUnit::BytesPerCycle, static_cast<int32_t>(channel)});
  }
  host_link_track_ = next;
  trace.add_track({next++, memory, trace::TrackKind::Thread, "host link", trace::CounterUnit::Count,
                   static_cast<int32_t>(config.dram.channels + 1)});
  const trace::TrackId command_processor = next++;
  trace.add_track({command_processor, 0, trace::TrackKind::Process, "command processor", trace::CounterUnit::Count,
                   static_cast<int32_t>(config.num_cores + 1)});
  for (unsigned queue = 0; queue < config.command_processor.num_queues; ++queue) {
    queue_tracks_.push_back(next);
    trace.add_track({next++, command_processor, trace::TrackKind::Thread, "queue " + std::to_string(queue), trace::CounterUnit::Count,
                     static_cast<int32_t>(queue)});
  }
  noc_counter_ = {next, {}};
  trace.add_track({next++, memory, trace::TrackKind::Counter, "noc bytes/cycle (all links)", trace::CounterUnit::BytesPerCycle,
                   static_cast<int32_t>(config.dram.channels)});
  // Dynamic power of MACs, SRAM, vector ops, NoC and DRAM bytes, plus leakage (docs/energy.md).
  const trace::TrackId chip = next++;
  trace.add_track({chip, 0, trace::TrackKind::Process, "chip", trace::CounterUnit::Count, static_cast<int32_t>(config.num_cores + 2)});
  power_counter_ = {next, {}};
  trace.add_track({next++, chip, trace::TrackKind::Counter, "power (W)", trace::CounterUnit::Watts, 0});
  const trace::TrackId description = next++;
  trace.add_track({description, chip, trace::TrackKind::Thread, "config", trace::CounterUnit::Count, 1});
  trace::Slice slice;
  slice.track = description;
  slice.begin_ps = slice.end_ps = ps(start_cycle);
  slice.name = "chip " + config.name;
  slice.category = "metadata";
  const auto number = [](double value) {
    std::ostringstream out;
    out << value;
    return out.str();
  };
  slice.args = {{"config", config.name},
                {"clock_mhz", number(config.clock_mhz)},
                {"cycle_ps", std::to_string(cycle_ps_)},
                {"num_cores", std::to_string(config.num_cores)},
                {"dma_channels", std::to_string(config.core.dma.channels)},
                {"macs_per_cycle", std::to_string(peak_macs_per_cycle(config))},
                {"vector_elements_per_cycle", std::to_string(peak_vector_elements_per_cycle(config))},
                {"dram_bytes_per_cycle", std::to_string(peak_dram_bytes_per_cycle(config))},
                {"scratchpad_bytes_per_core", std::to_string(config.core.scratchpad.size_bytes)}};
  trace.add_slice(std::move(slice));
}

trace::TrackId ChipTrace::engine_track(unsigned core, unsigned engine) const {
  return engine_tracks_.at(static_cast<size_t>(core) * engines_per_core_ + engine);
}

void ChipTrace::span(trace::TrackId track, uint64_t begin_cycle, uint64_t end_cycle, const std::string& name, int64_t pc, uint64_t word,
                     std::vector<trace::Arg> more) {
  std::vector<trace::Arg> args = {{"pc", std::to_string(pc)}, {"instruction", instruction_text(word)}};
  for (trace::Arg& arg : more) args.push_back(std::move(arg));
  named_span(track, begin_cycle, end_cycle, name, std::move(args));
}

void ChipTrace::named_span(trace::TrackId track, uint64_t begin_cycle, uint64_t end_cycle, const std::string& name,
                           std::vector<trace::Arg> args) {
  trace::Slice slice;
  slice.track = track;
  slice.begin_ps = ps(begin_cycle);
  slice.end_ps = ps(std::max(begin_cycle, end_cycle));
  slice.name = name;
  slice.category = "device";
  slice.args = std::move(args);
  trace_.add_slice(std::move(slice));
}

void ChipTrace::packet_span(unsigned queue, uint64_t begin_cycle, uint64_t end_cycle, const std::string& name, uint64_t flow_id) {
  trace::Slice slice;
  slice.track = queue_tracks_.at(queue);
  slice.begin_ps = ps(begin_cycle);
  slice.end_ps = ps(std::max(begin_cycle, end_cycle));
  slice.name = name;
  slice.category = "command";
  if (flow_id) slice.flows_in.push_back(flow_id);
  trace_.add_slice(std::move(slice));
}

void ChipTrace::host_transfer(const HostTransfer& transfer) {
  // Slices on a track must nest; a transfer may start before the last one arrived (a posted write, the
  // other direction, the copy engine): its span starts where the last one's ended, so the track shows
  // the cycles with a transfer on the link, once each.
  const uint64_t begin = std::max(transfer.start_cycle, host_link_end_cycle_);
  if (transfer.end_cycle <= begin) return;
  host_link_end_cycle_ = transfer.end_cycle;
  trace::Slice slice;
  slice.track = host_link_track_;
  slice.begin_ps = ps(begin);
  slice.end_ps = ps(transfer.end_cycle);
  slice.name = transfer.to_device ? "to device" : "to host";
  slice.category = "host link";
  slice.args = {{"bytes", std::to_string(transfer.bytes)}, {"by", transfer.by_copy_engine ? "copy engine" : "host"}};
  trace_.add_slice(std::move(slice));
}

void ChipTrace::accumulate(Counter& counter, uint64_t begin_cycle, uint64_t end_cycle, uint64_t bytes) {
  if (end_cycle <= begin_cycle) end_cycle = begin_cycle + 1;
  const double per_cycle = static_cast<double>(bytes) / static_cast<double>(end_cycle - begin_cycle);
  for (uint64_t window = begin_cycle / window_cycles_; window * window_cycles_ < end_cycle; ++window) {
    const uint64_t lo = std::max(begin_cycle, window * window_cycles_);
    const uint64_t hi = std::min(end_cycle, (window + 1) * window_cycles_);
    counter.bytes_per_window[window] += per_cycle * static_cast<double>(hi - lo);
  }
}

void ChipTrace::dram_transfer(unsigned channel, uint64_t begin_cycle, uint64_t end_cycle, uint64_t bytes) {
  accumulate(dram_counters_.at(channel), begin_cycle, end_cycle, bytes);
  actions(Action::DramReadByte, begin_cycle, end_cycle, bytes);  // (a write is priced as a read here: the same figure by default)
}

void ChipTrace::noc_transfer(uint64_t begin_cycle, uint64_t end_cycle, uint64_t bytes) {
  accumulate(noc_counter_, begin_cycle, end_cycle, bytes);
  actions(Action::NocByteHop, begin_cycle, end_cycle, bytes);
}

void ChipTrace::noc_link_busy(size_t link, unsigned mesh_cols, uint64_t begin_cycle, uint64_t end_cycle) {
  auto it = noc_link_counters_.find(link);
  if (it == noc_link_counters_.end()) {
    const trace::TrackId track = trace_.next_free_id();
    trace_.add_track({track, memory_process_, trace::TrackKind::Counter, "noc link " + noc_link_name(mesh_cols, link) + " busy %",
                      trace::CounterUnit::Percent, static_cast<int32_t>(1000 + link)});
    it = noc_link_counters_.emplace(link, Counter{track, {}}).first;
  }
  accumulate(it->second, begin_cycle, end_cycle, end_cycle - begin_cycle);
}

void ChipTrace::scratchpad_footprint(unsigned core, uint64_t begin_cycle, uint64_t end_cycle, uint64_t bytes) {
  trace_.add_counter(scratchpad_tracks_.at(core), ps(begin_cycle), static_cast<double>(bytes));
  trace_.add_counter(scratchpad_tracks_.at(core), ps(std::max(begin_cycle, end_cycle)), 0);
}

void ChipTrace::actions(Action action, uint64_t begin_cycle, uint64_t end_cycle, uint64_t count) {
  accumulate(power_counter_, begin_cycle, end_cycle, count * energy_.energy_fj[static_cast<size_t>(action)]);
}

void ChipTrace::flush_counters() {
  auto flush = [&](Counter& counter) {
    uint64_t previous = UINT64_MAX;
    for (const auto& [window, bytes] : counter.bytes_per_window) {
      // Back to zero across idle gaps, so the counter does not hold a stale value.
      if (previous != UINT64_MAX && window > previous + 1) trace_.add_counter(counter.track, ps((previous + 1) * window_cycles_), 0);
      trace_.add_counter(counter.track, ps(window * window_cycles_), bytes / static_cast<double>(window_cycles_));
      previous = window;
    }
    if (previous != UINT64_MAX) trace_.add_counter(counter.track, ps((previous + 1) * window_cycles_), 0);
    counter.bytes_per_window.clear();
  };
  for (Counter& counter : dram_counters_) flush(counter);
  flush(noc_counter_);
  // A link's busy cycles per window, as a percentage of the window.
  for (auto& [link, counter] : noc_link_counters_) {
    for (auto& [window, busy] : counter.bytes_per_window) busy *= 100;
    flush(counter);
  }
  // Power: each window's dynamic energy over its time, plus leakage, which idle windows keep.
  const double window_ps = static_cast<double>(window_cycles_ * cycle_ps_), leakage_w = energy_.leakage_w();
  uint64_t previous = UINT64_MAX;
  for (const auto& [window, femtojoules] : power_counter_.bytes_per_window) {
    if (previous != UINT64_MAX && window > previous + 1) trace_.add_counter(power_counter_.track, ps((previous + 1) * window_cycles_), leakage_w);
    trace_.add_counter(power_counter_.track, ps(window * window_cycles_), femtojoules / window_ps * 1e-3 + leakage_w);
    previous = window;
  }
  if (previous != UINT64_MAX) trace_.add_counter(power_counter_.track, ps((previous + 1) * window_cycles_), leakage_w);
  power_counter_.bytes_per_window.clear();
}

}  // namespace npu::sim
