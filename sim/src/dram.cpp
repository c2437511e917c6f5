#include "dram.h"

#include <algorithm>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <cstring>
#include <new>

#include "chip_trace.h"
#include "timing_extension.h"

namespace npu::sim {

Dram::Dram(sc_core::sc_module_name name, ChipContext& context)
    : sc_module(name),
      socket("socket"),
      context_(context),
      config_(context.config.dram),
      interleave_(config_),
      row_bytes_(config_.row_bytes),
      banks_per_channel_(config_.banks_per_channel),
      refresh_interval_(config_.refresh_interval_cycles ? config_.refresh_interval_cycles : 1),
      bus_width_(config_.bytes_per_cycle_per_channel),
      channel_row_span_(uint64_t{config_.channels} * config_.row_bytes),
      storage_(config_.size_bytes, "device DRAM"),
      channels_(config_.channels),
      stats_(config_.channels) {
  for (Channel& channel : channels_) {
    channel.banks.resize(config_.banks_per_channel);
    channel.quiet_until = config_.refresh_interval_cycles ? config_.refresh_interval_cycles : UINT64_MAX;
  }
  socket.register_b_transport(this, &Dram::b_transport);
}

uint64_t Dram::apply_refresh(Channel& channel, DramChannelStats& stats, uint64_t start) {
  if (config_.refresh_interval_cycles == 0) return start;
  // Between the last refresh applied and the next: nothing to do (the common case, on every access).
  if (start >= channel.quiet_from && start < channel.quiet_until) return start;
  // Refresh k occupies [k * tREFI, k * tREFI + tRFC) for k >= 1 and closes every row.
  const uint64_t window = refresh_interval_.quotient(start);
  if (window > channel.refreshes_seen) {
    stats.refreshes += window - channel.refreshes_seen;
    channel.refreshes_seen = window;
    for (Bank& bank : channel.banks) bank.row_open = false;
  }
  const uint64_t window_start = window * config_.refresh_interval_cycles;
  channel.quiet_from = window >= 1 ? window_start + config_.refresh_cycles : 0;
  channel.quiet_until = window_start + config_.refresh_interval_cycles;
  if (window >= 1 && start < window_start + config_.refresh_cycles) return window_start + config_.refresh_cycles;
  return start;
}

uint64_t Dram::bus_slot(Channel& channel, uint64_t ready, uint64_t burst) const {
  if (config_.refresh_interval_cycles == 0) return ready;
  // Within the gap between two refreshes found last time: nothing to do (the common case).
  if (ready >= channel.bus_gap_from && ready + burst <= channel.bus_gap_until) return ready;
  // An all-bank refresh moves no data: a burst that would overlap refresh k, [k tREFI, k tREFI + tRFC)
  // for k >= 1, starts after it.
  const uint64_t window = refresh_interval_.quotient(ready + burst - 1);
  const uint64_t refresh_start = window * config_.refresh_interval_cycles, refresh_end = window == 0 ? 0 : refresh_start + config_.refresh_cycles;
  const uint64_t slot = ready < refresh_end && ready + burst > refresh_start ? refresh_end : ready;
  // The gap the burst lies in: after refresh `window` (if it has begun by then), before the next.
  if (slot >= refresh_end) channel.bus_gap_from = refresh_end, channel.bus_gap_until = refresh_start + config_.refresh_interval_cycles;
  return slot;
}

uint64_t Dram::open_row(Channel& channel, DramChannelStats& stats, uint64_t address, uint64_t* start) {
  const uint64_t row_global = row_bytes_.quotient(interleave_.channel_address(address));
  Bank& bank = channel.banks[bank_of(row_global)];
  const uint64_t row = banks_per_channel_.quotient(row_global);

  *start = apply_refresh(channel, stats, std::max(*start, bank.ready));
  uint64_t latency;
  if (bank.row_open && bank.open_row == row) {
    latency = config_.row_hit_cycles;
    ++stats.row_hits;
  } else if (!bank.row_open) {
    latency = config_.row_closed_cycles;
    ++stats.row_closed;
  } else {
    latency = config_.row_conflict_cycles;
    ++stats.row_conflicts;
  }
  bank.row_open = true;
  bank.open_row = row;
  // The bank is busy while it precharges and activates; column accesses to an
  // open row pipeline behind each other on the bus.
  bank.ready = *start + (latency - config_.row_hit_cycles);
  bank.window_stream = 0;
  return latency;
}

uint64_t Dram::access(uint64_t address, uint64_t bytes, bool is_write, uint64_t ready, uint64_t* wait_cycles) {
  const unsigned channel_index = interleave_.channel_of(address);
  Channel& channel = channels_[channel_index];
  DramChannelStats& stats = stats_[channel_index];
  uint64_t start = ready;
  const uint64_t latency = open_row(channel, stats, address, &start);
  const uint64_t burst = bus_width_.ceil_quotient(bytes);
  const uint64_t bus_start = channel.bus.reserve(bus_slot(channel, std::max(start + latency, channel.bus.busy_until), burst), burst);
  stats.busy_cycles += burst;
  (is_write ? stats.write_bytes : stats.read_bytes) += bytes;
  if (context_.trace) context_.trace->dram_transfer(channel_index, bus_start, bus_start + burst, bytes);
  // Ideal: a row hit on an idle bank and bus.
  const uint64_t done = bus_start + burst;
  const uint64_t ideal = ready + config_.row_hit_cycles + burst;
  if (wait_cycles) *wait_cycles = done > ideal ? done - ideal : 0;
  return done;
}

Dram::BurstTiming Dram::access_burst(const std::vector<BurstRequest>& requests, bool is_write, uint64_t ready, uint64_t* wait_cycles,
                                     std::vector<uint64_t>* done) {
  done->resize(requests.size());
  const unsigned channel_index = interleave_.channel_of(requests.front().address);
  Channel& channel = channels_[channel_index];
  DramChannelStats& stats = stats_[channel_index];
  const uint64_t first_offset = requests.front().offset;
  // The bus as access() would leave it after each request, without touching the timeline until the end.
  uint64_t bus_free = channel.bus.busy_until;
  uint64_t first_bus_start = 0, first_done = 0, busy = 0, bytes = 0, waited = 0;
  uint64_t previous_row = UINT64_MAX;  // of the request before, in channel_row_span_ units
  Bank* previous_bank = nullptr;
  for (size_t i = 0; i < requests.size(); ++i) {
    const BurstRequest& request = requests[i];
    const uint64_t request_ready = ready + (request.offset - first_offset);
    uint64_t start = request_ready;
    uint64_t latency;
    const uint64_t row = channel_row_span_.quotient(request.address);
    if (row == previous_row && std::max(start, previous_bank->ready) >= channel.quiet_from &&
        std::max(start, previous_bank->ready) < channel.quiet_until) {
      // The row the request before opened, with no refresh between: a hit, as open_row() would find.
      start = std::max(start, previous_bank->ready);
      latency = config_.row_hit_cycles;
      ++stats.row_hits;
      previous_bank->ready = start;
    } else {
      latency = open_row(channel, stats, request.address, &start);
      previous_row = row;
      previous_bank = &channel.banks[bank_of(row)];  // (the bank open_row() used)
    }
    const uint64_t burst = bus_width_.ceil_quotient(request.bytes);
    const uint64_t bus_start = bus_slot(channel, std::max(start + latency, bus_free), burst);
    bus_free = bus_start + burst;
    (*done)[i] = bus_free;
    if (i == 0) first_bus_start = bus_start, first_done = bus_free;
    busy += burst;
    bytes += request.bytes;
    const uint64_t ideal = request_ready + config_.row_hit_cycles + burst;
    waited += bus_free > ideal ? bus_free - ideal : 0;
  }
  channel.bus.busy_until = bus_free;
  channel.bus.busy_cycles += busy;
  stats.busy_cycles += busy;
  (is_write ? stats.write_bytes : stats.read_bytes) += bytes;
  if (context_.trace) context_.trace->dram_transfer(channel_index, first_bus_start, bus_free, bytes);
  if (wait_cycles) *wait_cycles = waited;
  return {first_done, bus_free};
}

Dram::WindowTiming Dram::window_end(unsigned channel_index, const WindowShare& share, bool is_write, uint64_t delay) {
  Channel& channel = channels_[channel_index];
  DramChannelStats& stats = stats_[channel_index];
  const uint64_t hit = config_.row_hit_cycles;
  const uint64_t bus_start = bus_slot(channel, std::max(share.first_data + delay, channel.bus.busy_until), share.first_bus_cycles);
  uint64_t done = bus_start + share.bus_cycles;
  const int64_t latest_row = share.latest_row_data + static_cast<int64_t>(delay + share.bus_cycles);
  if (latest_row > 0) done = std::max(done, static_cast<uint64_t>(latest_row));
  const uint64_t last_arrival = share.last_arrival + delay;
  done = std::max(done, last_arrival + hit + share.last_bus_cycles);
  if (config_.refresh_interval_cycles > 0) {
    for (uint64_t next = (refresh_interval_.quotient(bus_start) + 1) * config_.refresh_interval_cycles; next < done;
         next += config_.refresh_interval_cycles) {
      done += config_.refresh_cycles;
    }
  }
  // The requests after a row start hit the row it opened (window_row() counted the row starts).
  stats.row_hits += share.requests - share.row_starts;
  // Held to the share's last data, as the per-request model holds the bus to its last request's: a share
  // timed after it waits for it. (Reserving only its bus cycles, so that another share's requests would
  // fill the gaps where its own come sparser than the bus serves them, made the same GEMM 9.6% slower;
  // why is not pinned down.)
  channel.bus.busy_until = done;
  channel.bus.busy_cycles += share.bus_cycles;
  stats.busy_cycles += share.bus_cycles;
  (is_write ? stats.write_bytes : stats.read_bytes) += share.bytes;
  if (context_.trace) context_.trace->dram_transfer(channel_index, bus_start, done, share.bytes);
  // The wait: past the share's time alone on an idle bus (its own rows, no backlog).
  const uint64_t alone = std::max(share.first_data + delay + share.bus_cycles, last_arrival + hit + share.last_bus_cycles);
  return {bus_start + share.first_bus_cycles, done, done > alone ? (done - alone) * share.requests : 0};
}

void Dram::b_transport(tlm::tlm_generic_payload& payload, sc_core::sc_time& delay) {
  const uint64_t address = payload.get_address();
  const uint64_t bytes = payload.get_data_length();
  if (!in_range(address, bytes)) {
    payload.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
    return;
  }
  const bool is_write = payload.is_write();
  uint64_t wait = 0;
  uint64_t done = 0;
  auto* timing = payload.get_extension<TimingExtension>();
  // A request that spans interleave blocks is served by several channels in parallel.
  const uint64_t ready = transport_cycle(context_, timing, delay);
  for (uint64_t offset = 0; offset < bytes;) {
    const uint64_t block_end = interleave_.next_block(address + offset);
    const uint64_t chunk = std::min<uint64_t>(bytes - offset, block_end - (address + offset));
    uint64_t chunk_wait = 0;
    done = std::max(done, access(address + offset, chunk, is_write, ready, &chunk_wait));
    wait = std::max(wait, chunk_wait);
    offset += chunk;
  }
  if (!timing || timing->move_data) {
    if (is_write) {
      std::memcpy(data(address, bytes), payload.get_data_ptr(), bytes);
    } else {
      std::memcpy(payload.get_data_ptr(), data(address, bytes), bytes);
    }
  }
  if (timing) timing->dram_wait_cycles += wait;
  set_transport_cycle(context_, timing, delay, done);
  payload.set_response_status(tlm::TLM_OK_RESPONSE);
}

}  // namespace npu::sim
