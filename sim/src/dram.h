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

#include "background_uses.h"
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
  // The bytes at `address`, for reading or writing [address, +bytes): once
  // the work in the background that uses any of them is done (a DMA store of
  // results still being computed there, DmaEngine::move_copy).
  uint8_t* data(uint64_t address, uint64_t bytes) {
    in_background_.settle(context_.background, address, address + bytes);
    return data(address);
  }
  // The same without waiting: for work handed to the background, which runs in order after what is there.
  uint8_t* data(uint64_t address) { return storage_.data() + address; }
  // Work number `number` in the background (ChipContext::background) reads or writes [address, +bytes).
  void add_background_use(uint64_t number, uint64_t address, uint64_t bytes) {
    in_background_.forget_done(*context_.background);
    in_background_.add(number, address, address + bytes);
  }

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

  // DmaTiming::PerWindow (dma_windows.cpp): a window of DMA requests' share of one channel, timed in closed
  // form. The DMA engine counts the share's requests into a WindowShare, calls window_begin() at the
  // first and window_row() at each that moves to another DRAM row, then window_end() once.
  struct WindowShare {
    uint64_t requests = 0, bytes = 0, bus_cycles = 0, row_starts = 0;
    uint64_t first_bus_cycles = 0, last_bus_cycles = 0;
    uint64_t last_arrival = 0;     // when the last request reaches the controller
    uint64_t first_data = 0;       // when the first request's data could start on the bus (window_row())
    int64_t latest_row_data = 0;   // the latest, over the row starts, of that minus the bus cycles before it
  };
  // The share's first request reaches the controller at `arrival`: a refresh due by then closes the rows.
  void window_begin(unsigned channel, uint64_t arrival) { apply_refresh(channels_[channel], stats_[channel], arrival); }
  // A request of DMA stream `stream` (a DMA channel's number, from 1) that moves to DRAM row `row_span`
  // (row_span()) reaches the controller at `arrival`: it meets its bank's open row as access() does (and
  // counts it), and its bank's busy time where the same stream's activation set it (see below); returns
  // when its data could start on the bus. (Defined below the class, inline: it runs for every DRAM row a
  // window's requests open.)
  inline uint64_t window_row(unsigned channel, uint64_t row_span, uint64_t arrival, unsigned stream);
  struct WindowTiming {
    uint64_t first_done;   // the first request's data has crossed the bus
    uint64_t done;         // the last request's has
    uint64_t wait_cycles;  // past the share's time alone on an idle channel, times its requests
  };
  // Times the share, every time in it `delay` cycles later (the writes of a store that met contention on
  // the way): the bus serves the requests in order, so its last data crosses at the latest of (the bus's
  // backlog, or the first request's data) plus all their bus cycles, each row start's data plus the bus
  // cycles from it on, and the last request's arrival plus a hit; a refresh that begins while the data
  // crosses holds the bus for its duration. One reservation of the bus, one span in the trace.
  WindowTiming window_end(unsigned channel, const WindowShare& share, bool is_write, uint64_t delay);
  // The DRAM row, of every channel, an address lies in: address / (channels x row_bytes).
  uint64_t row_span(uint64_t address) const { return channel_row_span_.quotient(address); }
  // Cycles `bytes` take on a channel's bus.
  uint64_t bus_cycles(uint64_t bytes) const { return bus_width_.ceil_quotient(bytes); }

  const std::vector<DramChannelStats>& channel_stats() const { return stats_; }

 private:
  struct Bank {
    bool row_open = false;
    uint64_t open_row = 0;
    uint64_t ready = 0;  // earliest cycle the next command can start
    unsigned window_stream = 0;  // the DMA stream whose window_row() set `ready` (0: an access())
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
  // The bank of its channel that holds row `row_global` (the row's index in its channel), by the
  // config's bank map. Either map is one to one for the rows of a bank (row_global / banks).
  uint64_t bank_of(uint64_t row_global) const {
    if (config_.bank_map == DramBankMap::RowInterleaved) return banks_per_channel_.remainder(row_global);
    const uint64_t next = banks_per_channel_.quotient(row_global);
    return banks_per_channel_.remainder(row_global ^ next ^ banks_per_channel_.quotient(next));
  }
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
  BackgroundUses in_background_;
  std::vector<Channel> channels_;
  std::vector<DramChannelStats> stats_;
};

inline uint64_t Dram::window_row(unsigned channel_index, uint64_t row_span, uint64_t arrival, unsigned stream) {
  Channel& channel = channels_[channel_index];
  DramChannelStats& stats = stats_[channel_index];
  Bank& bank = channel.banks[bank_of(row_span)];
  const uint64_t row = banks_per_channel_.quotient(row_span);
  // A bank activating for a row is busy (the per-request model's bank.ready), but another stream's windows
  // are timed up to a window ahead of their requests, so the busy times they leave lie in this one's
  // future (the per-request model's: a step ahead at most). Only the stream's own activations hold its
  // next ones back: waiting for every stream's made the compiler's 4096 x 4096 x 1024 GEMM on base 12.9%
  // slower than per request, and waiting for none made examples/gemm.s at 4096^3, whose every request
  // opens a row, 29% faster (with the stream's own: 24% faster, as other streams' activations for the
  // same banks are not waited for; waiting for those that began before the request made the GEMM above
  // 4.8% slower and this one no closer).
  const uint64_t start = bank.window_stream == stream ? std::max(arrival, bank.ready) : arrival;
  uint64_t latency = config_.row_hit_cycles;
  if (!bank.row_open) {
    latency = config_.row_closed_cycles;
    ++stats.row_closed;
  } else if (bank.open_row != row) {
    latency = config_.row_conflict_cycles;
    ++stats.row_conflicts;
  } else {
    ++stats.row_hits;
  }
  bank.row_open = true;
  bank.open_row = row;
  bank.ready = start + (latency - config_.row_hit_cycles);
  bank.window_stream = stream;
  return start + latency;
}

}  // namespace npu::sim
