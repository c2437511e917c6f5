// Device DRAM: storage plus a per-channel, per-bank timing model (open-row
// state with hit / closed / conflict latencies, refresh, a data bus per
// channel), behind a TLM-2.0 target socket.
#pragma once

#include <systemc>
#include <tlm>
#include <tlm_utils/simple_target_socket.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "chip_context.h"
#include "npusim/sim/stats.h"
#include "divider.h"
#include "dram_interleave.h"
#include "timeline.h"
#include "zeroed_bytes.h"

namespace npu::sim {

class Dram : public sc_core::sc_module {
 public:
  tlm_utils::simple_target_socket<Dram> socket;

  Dram(sc_core::sc_module_name name, ChipContext& context);

  // Zero-time access for loaders and the host side (no timing, no stats).
  bool in_range(uint64_t address, uint64_t bytes) const { return address <= config_.size_bytes && bytes <= config_.size_bytes - address; }
  uint8_t* data(uint64_t address) { return storage_.data() + address; }

  // Times one access of `bytes` (within one interleave block) that reaches the
  // controller at `ready`; returns the cycle its data has crossed the bus.
  uint64_t access(uint64_t address, uint64_t bytes, bool is_write, uint64_t ready, uint64_t* wait_cycles);

  // One request of a burst (DmaTiming::PerStep): `bytes` at `address`, within
  // one interleave block, issued `offset` cycles after the burst's first.
  struct BurstRequest {
    uint64_t address;
    uint64_t bytes;
    uint64_t offset;
  };
  struct BurstTiming {
    uint64_t first_done;  // the first request's data has crossed the bus
    uint64_t done;        // the last request's data has
  };
  // Times requests that all go to one channel, the first reaching the
  // controller at `ready` and each later one its offset later: each meets its
  // bank's row state and follows the one before on the bus exactly as access()
  // would time it, but the bus and the trace take one reservation for them all.
  // `done` (resized to the requests) gets when each one's data has crossed the bus.
  BurstTiming access_burst(const std::vector<BurstRequest>& requests, bool is_write, uint64_t ready, uint64_t* wait_cycles,
                           std::vector<uint64_t>* done);

  const std::vector<DramChannelStats>& channel_stats() const { return stats_; }

 private:
  struct Bank {
    bool row_open = false;
    uint64_t open_row = 0;
    uint64_t ready = 0;  // earliest cycle the next command can start
  };
  struct Channel {
    std::vector<Bank> banks;
    Timeline bus;
    uint64_t refreshes_seen = 0;  // refresh windows already applied (they close every row)
    // Where apply_refresh() changes nothing: [quiet_from, quiet_until) (after
    // the last refresh applied, before the next).
    uint64_t quiet_from = 0, quiet_until = UINT64_MAX;
    // A stretch of the bus between two refreshes, as bus_slot() last found one: [from, until).
    uint64_t bus_gap_from = 0, bus_gap_until = 0;
  };

  void b_transport(tlm::tlm_generic_payload& payload, sc_core::sc_time& delay);
  // The bank an access of `address` uses, and how long until its data can
  // start on the bus (row hit, closed or conflict latency, counted in the
  // stats); updates the bank's row state. `start` becomes when it could start.
  // The first cycle at or after `ready` from which a burst of `burst` cycles misses every refresh.
  uint64_t bus_slot(Channel& channel, uint64_t ready, uint64_t burst) const;
  uint64_t open_row(Channel& channel, DramChannelStats& stats, uint64_t address, uint64_t* start);
  uint64_t apply_refresh(Channel& channel, DramChannelStats& stats, uint64_t start);

  ChipContext& context_;
  const DramConfig& config_;
  const DramInterleave interleave_;
  const Divider row_bytes_, banks_per_channel_, refresh_interval_, bus_width_;
  // A DRAM row of every channel spans channels x row_bytes of the address
  // space (interleave_bytes divides row_bytes): address / this = the row's
  // index in its channel, as channel_address(address) / row_bytes.
  const Divider channel_row_span_;
  ZeroedBytes storage_;
  std::vector<Channel> channels_;
  std::vector<DramChannelStats> stats_;
};

}  // namespace npu::sim
