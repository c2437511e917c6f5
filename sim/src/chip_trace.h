// The chip's side of tracing: one process per core with a thread track per
// engine, counters for DRAM channel and NoC bandwidth and for the chip's
// power, and the helpers the models call to record spans, transfers and the
// actions the energy model prices.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "npusim/sim/chip_config.h"
#include "npusim/sim/energy.h"
#include "npusim/sim/stats.h"
#include "npusim/traces/trace.h"

namespace npu::sim {

class ChipTrace {
 public:
  // Describes the chip at `start_cycle` (a "chip" span of category "metadata": what an analysis of the
  // trace needs to know of the config, npusim.trace's roofline among it).
  ChipTrace(const ChipConfig& config, trace::Trace& trace, uint64_t start_cycle = 0);

  // Track of an engine: index 0 = control, 1..channels = DMA channels, then tensor core, vector unit.
  trace::TrackId engine_track(unsigned core, unsigned engine) const;

  // An instruction's span: its pc and text, then `more` (what it did, the stalls inside it).
  void span(trace::TrackId track, uint64_t begin_cycle, uint64_t end_cycle, const std::string& name, int64_t pc, uint64_t word,
            std::vector<trace::Arg> more = {});
  void named_span(trace::TrackId track, uint64_t begin_cycle, uint64_t end_cycle, const std::string& name,
                  std::vector<trace::Arg> args = {});
  // A command packet of queue `queue`, on the command processor's track for
  // it, where the flow `flow_id` (0: none) from the host's submission ends.
  void packet_span(unsigned queue, uint64_t begin_cycle, uint64_t end_cycle, const std::string& name, uint64_t flow_id);
  // A memory transfer over the host link: a span on the memory system's "host link" track (from the
  // previous span's end, where they overlap).
  void host_transfer(const HostTransfer& transfer);
  void dram_transfer(unsigned channel, uint64_t begin_cycle, uint64_t end_cycle, uint64_t bytes);
  void noc_transfer(uint64_t begin_cycle, uint64_t end_cycle, uint64_t bytes);
  // Link `link` (noc_links.h) held from begin_cycle to end_cycle: its "busy %" counter track.
  void noc_link_busy(size_t link, unsigned mesh_cols, uint64_t begin_cycle, uint64_t end_cycle);
  // `count` actions spread over [begin_cycle, end_cycle), for the power counter.
  void actions(Action action, uint64_t begin_cycle, uint64_t end_cycle, uint64_t count);

  // A program on `core` from begin_cycle to end_cycle touched scratchpad bytes up to `bytes`: the core's
  // "scratchpad used" counter holds that over the program.
  void scratchpad_footprint(unsigned core, uint64_t begin_cycle, uint64_t end_cycle, uint64_t bytes);

  // Writes the bandwidth counters accumulated so far (call once at the end of a run).
  void flush_counters();

 private:
  struct Counter {
    trace::TrackId track;
    std::map<uint64_t, double> bytes_per_window;
  };
  void accumulate(Counter& counter, uint64_t begin_cycle, uint64_t end_cycle, uint64_t bytes);
  uint64_t ps(uint64_t cycle) const { return cycle * cycle_ps_; }

  trace::Trace& trace_;
  uint64_t cycle_ps_;
  uint64_t window_cycles_;
  unsigned engines_per_core_;
  std::vector<trace::TrackId> engine_tracks_;
  std::vector<trace::TrackId> queue_tracks_;
  std::vector<trace::TrackId> scratchpad_tracks_;  // per core
  std::vector<Counter> dram_counters_;
  Counter noc_counter_;
  std::map<size_t, Counter> noc_link_counters_;  // busy cycles per window, by link; a track once a link is used
  trace::TrackId memory_process_ = 0;
  trace::TrackId host_link_track_ = 0;
  uint64_t host_link_end_cycle_ = 0;  // of the last span on it
  EnergyModel energy_;
  Counter power_counter_;  // femtojoules of dynamic energy per window
};

}  // namespace npu::sim
