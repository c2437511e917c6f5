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

namespace npu::sim {

class Dram : public sc_core::sc_module {
 public:
  tlm_utils::simple_target_socket<Dram> socket;

  Dram(sc_core::sc_module_name name, ChipContext& context);

  // Zero-time access for loaders and the host side (no timing, no stats).
  bool in_range(uint64_t address, uint64_t bytes) const { return address <= config_.size_bytes && bytes <= config_.size_bytes - address; }
  uint8_t* data(uint64_t address) { return storage_.get() + address; }

  // Times one access of `bytes` (within one interleave block) that reaches the
  // controller at `ready`; returns the cycle its data has crossed the bus.
  uint64_t access(uint64_t address, uint64_t bytes, bool is_write, uint64_t ready, uint64_t* wait_cycles);

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
  };

  void b_transport(tlm::tlm_generic_payload& payload, sc_core::sc_time& delay);
  uint64_t apply_refresh(Channel& channel, DramChannelStats& stats, uint64_t start);

  ChipContext& context_;
  const DramConfig& config_;
  const DramInterleave interleave_;
  const Divider row_bytes_, banks_per_channel_, refresh_interval_, bus_width_;
  struct Unmapper {
    uint64_t bytes;
    void operator()(uint8_t* memory) const;
  };
  static uint8_t* map_zeroed(uint64_t bytes);

  std::unique_ptr<uint8_t, Unmapper> storage_;
  std::vector<Channel> channels_;
  std::vector<DramChannelStats> stats_;
};

}  // namespace npu::sim
