// DmaTiming::PerWindow: a DMA transfer between DRAM and the scratchpad timed a
// window at a time. The transfer is cut into the same requests as the
// per-request model's (at request_bytes boundaries of the DRAM address, one
// issued a cycle), and a window is max_outstanding_requests of them: the ones
// the per-request model can have in flight together. Requests are counted
// into their DRAM channel's share of the window (bytes; bus, link and bank
// cycles), and where they move to another DRAM row they meet its bank's state
// then (Dram::window_row). Rows that are cut alike (DRAM addresses a multiple
// of the interleave pattern apart; not with the hashed address map) are counted
// from one row's cut, a group of rows at a time, so that the work is per DRAM
// row, not per request. Each share is then timed in closed form:
//   - in DRAM, by Dram::window_end: the bus serves the requests in order;
//   - on the NoC and in the scratchpad as one cut-through burst, as a per-step
//     burst is (DmaEngine::into_scratchpad, to_controller: dma_bursts.cpp).
// The window stands in for the ring of completions: the next window's request
// i waits for this one's request i, so it starts when this window's first
// request is done (and not before this one has issued) and issues at the pace
// this one's requests completed. Per window, a channel's bus and each link are
// reserved once and the engine yields once, where the per-step model does so
// every step_bytes. What changes against per step: requests of other
// transfers do not interleave with a window's on a bus or a link (its share
// goes as one block, first come first served), nor do their DRAM rows (each
// stream keeps the rows it opens through its window), and a bank's busy time
// holds back only the same stream's next activation (Dram::window_row says
// why); the pacing inside a window is uniform; a store's rows meet their
// banks as if its writes had met no contention before DRAM (what they met
// delays the share as a whole); and the stall statistics are estimates (a
// share's delay times its requests). docs/chip.md "DMA timing" has the
// measured difference.
#include <algorithm>
#include <numeric>
#include <vector>

#include "dma_engine.h"
#include "divider.h"
#include "noc.h"

namespace npu::sim {

DmaEngine::WindowTimes DmaEngine::time_window(bool load, uint64_t start, uint64_t spacing_256ths) {
  Noc& mesh = *directory_.noc;
  const MeshPosition node = context_.config.core_position(core_);
  const uint64_t row_hit_cycles = context_.config.dram.row_hit_cycles;
  const auto issued = [&](uint64_t index) { return start + ((index * spacing_256ths) >> 8); };
  WindowTimes times{UINT64_MAX, start};
  for (const unsigned channel : step_channels_) {
    ChannelWindow& window = channel_windows_[channel];
    const MeshPosition port = mesh.dram_port_of_channel(channel);
    const unsigned hops = mesh.hops(node, port);
    const uint64_t first_issue = issued(window.first_index), last_issue = issued(window.last_index);
    const BurstPath path{port, hops, window.dram.bytes, window.link_cycles, window.sram_cycles, window.first_local, window.first_bytes,
                         window.last_bytes, window.dram.requests};
    uint64_t first_done, done;
    if (load) {
      // The read requests reached the controller after their router latencies; the data comes back.
      const Dram::WindowTiming read = dram_.window_end(channel, window.dram, false, 0);
      dram_wait_ += read.wait_cycles;
      const BurstEnds written = into_scratchpad(path, read.first_done, read.done);
      first_done = written.first, done = written.last;
    } else {
      const BurstEnds arrival = to_controller(path, first_issue, last_issue);
      // The writes were counted as reaching the controller uncontended, from ready on: what they met delays them all.
      const uint64_t uncontended = window.ready + (first_issue - start);
      const Dram::WindowTiming write = dram_.window_end(channel, window.dram, true, arrival.first > uncontended ? arrival.first - uncontended : 0);
      dram_wait_ += write.wait_cycles;
      first_done = write.first_done;
      done = std::max(write.done, arrival.last + row_hit_cycles + dram_.bus_cycles(window.last_bytes));
    }
    times.first_done = std::min(times.first_done, first_done);
    times.done = std::max(times.done, done);
    window.dram.requests = 0;
  }
  step_channels_.clear();
  return times;
}

DmaEngine::Outcome DmaEngine::transfer_in_windows(DmaRows& rows, bool load, uint64_t global, uint64_t local, uint64_t n0, uint64_t start) {
  const DmaConfig& config = context_.config.core.dma;
  const DramConfig& dram = context_.config.dram;
  const Divider request_bytes(config.request_bytes);
  const Noc& mesh = *directory_.noc;
  const MeshPosition node = context_.config.core_position(core_);
  const uint64_t window_requests = config.max_outstanding_requests;
  uint64_t window_start = start + config.descriptor_cycles;
  uint64_t spacing_256ths = 256;  // one request a cycle
  uint64_t end = window_start;
  uint64_t index = 0;  // of the next request in its window
  uint64_t requests = 0;
  // The bytes move with their window, a row at a time; rows that continue each other on both sides in one copy.
  PendingCopy copy;
  const auto move_row = [&](uint64_t global_row, uint64_t local_row) {
    if (timing_.move_data) add_to_copy(copy, load, global_row, local_row, n0);
  };
  // The engine yields until a window's last request has issued, as the per-request model yields as it issues,
  // before it counts the next window's requests (catch_up()): not after a transfer's last window, as it waits
  // for the transfer's end next (with wake slots, ChipContext::new_slot, a wait that leads to nothing
  // changes nothing).
  uint64_t yield_to = UINT64_MAX;  // (UINT64_MAX: no yield due)
  // Times the window (its data moves with it).
  const auto finish_window = [&]() {
    move_copy(copy, load);
    hand_over_stores();
    const WindowTimes times = time_window(load, window_start, spacing_256ths);
    end = std::max(end, times.done);
    const uint64_t last_issue = window_start + (((index - 1) * spacing_256ths) >> 8);
    // The next window's request i takes this one's request i's place: it issues once that one is done.
    const uint64_t completion_256ths = index > 1 ? ((times.done - times.first_done) << 8) / (index - 1) : 256;
    spacing_256ths = std::max<uint64_t>(256, completion_256ths);
    window_start = std::max(last_issue + 1, times.first_done);
    index = 0;
    yield_to = last_issue;
  };
  // The yield finish_window() left due; false where the run faulted or the chip was reset meanwhile.
  const auto catch_up = [&]() {
    if (yield_to == UINT64_MAX) return true;
    // Rows of the next window already deferred (move_copy) go to the background before anyone else acts:
    // then whoever touches their bytes waits for them, as if they had moved before the yield.
    hand_over_stores();
    const uint64_t to = yield_to;
    yield_to = UINT64_MAX;
    return context_.wait_until(to, timer_);
  };
  // Counts a piece into its channel's share of the window: requests to one channel, all in one DRAM row, the
  // first and the last at these indices of the window.
  const auto count = [&](const SharePiece& piece) {
    ChannelWindow& window = channel_windows_[piece.channel];
    Dram::WindowShare& share = window.dram;
    if (share.requests == 0) {
      // The channel's first request in the window.
      step_channels_.push_back(piece.channel);
      window.first_local = piece.first_local, window.first_index = piece.first_index, window.first_bytes = piece.first_bytes;
      window.link_cycles = window.sram_cycles = 0;
      share = Dram::WindowShare{};
      share.first_bus_cycles = piece.first_bus;
      // Uncontended, its requests reach the controller a route after they issue (a store's after its
      // first bytes are read out of the scratchpad and over the first link).
      const unsigned hops = mesh.hops(node, mesh.dram_port_of_channel(piece.channel));
      window.ready = window_start + mesh.route_cycles(hops);
      if (!load) window.ready += local_.access_cycles(piece.first_local, piece.first_bytes) + (hops > 0 ? mesh.serialization_cycles(piece.first_bytes) : 0);
      dram_.window_begin(piece.channel, window.ready + ((piece.first_index * spacing_256ths) >> 8));
      window.last_row_span = ~piece.row_span;
    }
    if (piece.row_span != window.last_row_span) {
      const uint64_t data = dram_.window_row(piece.channel, piece.row_span, window.ready + ((piece.first_index * spacing_256ths) >> 8), stream_);
      if (share.row_starts++ == 0) share.first_data = data;
      share.latest_row_data = std::max(share.latest_row_data, static_cast<int64_t>(data) - static_cast<int64_t>(share.bus_cycles));
      window.last_row_span = piece.row_span;
    }
    share.last_arrival = window.ready + ((piece.last_index * spacing_256ths) >> 8), share.last_bus_cycles = piece.last_bus;
    window.last_index = piece.last_index, window.last_bytes = piece.last_bytes;
    window.link_cycles += piece.link;
    window.sram_cycles += piece.sram;
    share.requests += piece.requests;
    share.bytes += piece.bytes;
    share.bus_cycles += piece.bus;
  };
  uint64_t row_requests = 0;  // in the current run's rows
  // Counts `groups` groups of `group` rows from a row's cut (its pieces, by channel): the first from the
  // window's next request on, in DRAM row `row_span`, each next one span_step DRAM rows further. The
  // same counts as count() for each group in turn, with only the row starts done group by group.
  const auto count_groups = [&](const SharePiece& piece, uint64_t group, uint64_t groups, uint64_t span_step, uint64_t first_local,
                                uint64_t row_span) {
    const uint64_t group_requests = group * row_requests;
    count({piece.channel, index + piece.first_index, index + (group - 1) * row_requests + piece.last_index, piece.requests * group,
           piece.bytes * group, piece.bus * group, piece.link * group, piece.sram * group, first_local + piece.first_local,
           piece.first_bytes, piece.last_bytes, piece.first_bus, piece.last_bus, row_span});
    if (groups == 1) return;
    ChannelWindow& window = channel_windows_[piece.channel];
    Dram::WindowShare& share = window.dram;
    const uint64_t group_bus = piece.bus * group;
    for (uint64_t g = 1; g < groups; ++g) {
      // (span_step > 0: every group opens another row.)
      const uint64_t span = row_span + g * span_step, first = index + g * group_requests + piece.first_index;
      const uint64_t data = dram_.window_row(piece.channel, span, window.ready + ((first * spacing_256ths) >> 8), stream_);
      ++share.row_starts;
      share.latest_row_data =
          std::max(share.latest_row_data, static_cast<int64_t>(data) - static_cast<int64_t>(share.bus_cycles + (g - 1) * group_bus));
    }
    window.last_row_span = row_span + (groups - 1) * span_step;
    const uint64_t more = groups - 1;
    share.requests += more * piece.requests * group;
    share.bytes += more * piece.bytes * group;
    share.bus_cycles += more * group_bus;
    window.link_cycles += more * piece.link * group;
    window.sram_cycles += more * piece.sram * group;
    window.last_index = index + more * group_requests + (group - 1) * row_requests + piece.last_index;
    share.last_arrival = window.ready + ((window.last_index * spacing_256ths) >> 8);
  };
  // A request's cycles on the DRAM bus, a link and the banks depend on its size alone (the local memory is
  // one for the whole transfer): computed for a full request and for the last other size met.
  struct RequestCycles {
    uint64_t bytes = 0, bus = 0, link = 0, sram = 0;
  };
  const auto cycles_of = [&](uint64_t bytes) {
    return RequestCycles{bytes, dram_.bus_cycles(bytes), mesh.serialization_cycles(bytes), local_.access_cycles(local, bytes)};
  };
  const RequestCycles full = cycles_of(config.request_bytes);
  RequestCycles part;
  // Cuts a row into requests and counts each (where a row spans two DRAM rows or two windows, or has no
  // row like it: the rows below take them in groups).
  const auto count_row = [&](uint64_t global_row, uint64_t local_row) {
    move_row(global_row, local_row);
    for (uint64_t done_bytes = 0; done_bytes < n0;) {
      const uint64_t address = global_row + done_bytes;
      const uint64_t bytes = std::min(n0 - done_bytes, config.request_bytes - request_bytes.remainder(address));
      if (!catch_up()) return false;
      if (bytes != config.request_bytes && bytes != part.bytes) part = cycles_of(bytes);
      const RequestCycles& cycles = bytes == config.request_bytes ? full : part;
      count({interleave_.channel_of(address), index, index, 1, bytes, cycles.bus, cycles.link, cycles.sram, local_row + done_bytes, bytes,
             bytes, cycles.bus, cycles.bus, dram_.row_span(address)});
      done_bytes += bytes;
      ++requests;
      if (++index == window_requests) finish_window();
    }
    return true;
  };
  // Rows whose DRAM addresses differ by a multiple of this are cut into the same requests on the same
  // channels (with the interleaved address map; the hashed one moves them to other channels): a run of them
  // is counted from one row's cut (its pieces, by channel), in groups of rows that lie in one DRAM row and
  // one window, where the requests are too many to count one by one.
  const uint64_t row_span_bytes = uint64_t{dram.channels} * dram.row_bytes;
  const uint64_t pattern_bytes = std::lcm<uint64_t>(config.request_bytes, uint64_t{dram.channels} * dram.interleave_bytes);
  std::vector<SharePiece>& row_pieces = row_pieces_;
  for (;;) {
    uint64_t src_stride, dst_stride, src_offset, dst_offset;
    const uint64_t run = rows.run_length(&src_stride, &dst_stride);
    if (run == 0 || !rows.next(&src_offset, &dst_offset)) break;
    const uint64_t global_row = global + (load ? src_offset : dst_offset), local_row = local + (load ? dst_offset : src_offset);
    const uint64_t global_stride = load ? src_stride : dst_stride, local_stride = load ? dst_stride : src_stride;
    if (run == 1 || global_stride % pattern_bytes != 0 || interleave_.hashed()) {
      if (!count_row(global_row, local_row)) return {end, std::nullopt, {}};
      continue;
    }
    // The first row's cut, as pieces by channel (indices from the row's first request, one DRAM row).
    row_pieces.clear();
    row_requests = 0;
    for (uint64_t done_bytes = 0; done_bytes < n0; ++row_requests) {
      const uint64_t address = global_row + done_bytes;
      const uint64_t bytes = std::min(n0 - done_bytes, config.request_bytes - request_bytes.remainder(address));
      const RequestCycles cycles = cycles_of(bytes);
      const unsigned channel = interleave_.channel_of(address);
      auto piece = std::find_if(row_pieces.begin(), row_pieces.end(), [&](const SharePiece& p) { return p.channel == channel; });
      if (piece == row_pieces.end()) {
        row_pieces.push_back({channel, row_requests, row_requests, 0, 0, 0, 0, 0, done_bytes, bytes, bytes, cycles.bus, cycles.bus, 0});
        piece = row_pieces.end() - 1;
      }
      piece->last_index = row_requests, piece->last_bytes = bytes, piece->last_bus = cycles.bus;
      ++piece->requests, piece->bytes += bytes, piece->bus += cycles.bus, piece->link += cycles.link, piece->sram += cycles.sram;
      done_bytes += bytes;
    }
    // (Divisions by run constants, here per group of rows: a divide instruction costs tens of cycles.)
    const Divider per_row(row_requests), per_stride(std::max<uint64_t>(global_stride, 1));
    for (uint64_t row = 0; row < run;) {
      const uint64_t group_global = global_row + row * global_stride, group_local = local_row + row * local_stride;
      const uint64_t row_span = dram_.row_span(group_global);
      const uint64_t in_window = per_row.quotient(window_requests - index);
      if (in_window == 0 || dram_.row_span(group_global + n0 - 1) != row_span) {
        if (!count_row(group_global, group_local)) return {end, std::nullopt, {}};
        ++row;
        continue;
      }
      // Rows from this one on that end in its DRAM row, and fit in the window.
      const uint64_t in_row_span =
          global_stride == 0 ? run - row : per_stride.quotient((row_span + 1) * row_span_bytes - (group_global + n0)) + 1;
      const uint64_t group = std::min({run - row, in_row_span, in_window});
      // Where the stride is a multiple of a DRAM row (a group is one row) or a whole DRAM row is a whole
      // number of strides (and this group fills its row), the groups after this one are the same shape, a
      // DRAM row (or stride / row) further on each: as many as fit in the run and the window go together.
      uint64_t groups = 1, span_step = 0;
      if (global_stride != 0) {
        if (global_stride % row_span_bytes == 0) {
          span_step = global_stride / row_span_bytes;
        } else if (row_span_bytes % global_stride == 0 && group == row_span_bytes / global_stride) {
          span_step = 1;
        }
        if (span_step != 0) groups = std::min((run - row) / group, (window_requests - index) / (group * row_requests));
      }
      if (!catch_up()) return {end, std::nullopt, {}};
      for (const SharePiece& piece : row_pieces) count_groups(piece, group, groups, span_step, group_local, row_span);
      if (timing_.move_data)
        for (uint64_t i = 0; i < group * groups; ++i) move_row(group_global + i * global_stride, group_local + i * local_stride);
      index += groups * group * row_requests;
      requests += groups * group * row_requests;
      row += groups * group;
      if (index == window_requests) finish_window();
    }
    rows.skip(run - 1);
  }
  if (index > 0) finish_window();
  add_request_stalls(requests);
  return {end, std::nullopt, {}};
}

}  // namespace npu::sim
