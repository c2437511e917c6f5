// DmaTiming::PerStep: a DMA transfer between DRAM and the scratchpad timed a
// step at a time. The transfer is cut into the same requests as the
// per-request model's (at request_bytes boundaries of the DRAM address, one
// issued a cycle, none before the request max_outstanding_requests earlier is
// done), and a step is the same step_bytes between yields, or less: it ends
// at max_outstanding_requests requests and before a request that waits long
// for the window. Within a step, the requests to one DRAM channel form a burst:
//   - in DRAM each still meets its bank's row state and follows the one before
//     it on the channel's bus as in the per-request model (Dram::access_burst);
//   - on the NoC and in the scratchpad the burst is one transfer, cut through,
//     holding each link and the banks for the cycles its requests would hold
//     them one by one: its bytes start across the links when the first
//     request's are ready, and it is done no earlier than the last request's
//     would be.
// Each step reserves a link or a bank a few times instead of once per request,
// which is where the per-request model spends its host time. What changes is
// the fine order of requests on a shared link or bank within a step (another
// engine's transfer sees the burst's reservation as one block, and bursts do
// not wait for each other's scratchpad banks), and the window: a request's
// completion is estimated from its DRAM bus time and what follows it
// uncontended, within its burst's end. The per-request model stays
// the reference; docs/chip.md "DMA timing" has the measured difference.
#include <algorithm>

#include "dma_engine.h"
#include "divider.h"
#include "noc.h"

namespace npu::sim {

uint64_t DmaEngine::time_step(bool load, uint64_t issue) {
  Noc& mesh = *directory_.noc;
  const MeshPosition node = context_.config.core_position(core_);
  const DramConfig& dram = context_.config.dram;
  uint64_t done = issue;
  for (const unsigned channel : step_channels_) {
    ChannelBurst& burst = channel_bursts_[channel];
    const uint64_t bytes = burst.bytes;
    const uint64_t first_bytes = burst.requests.front().bytes, last_bytes = burst.requests.back().bytes;
    const uint64_t first_issue = issue + burst.requests.front().offset, last_issue = issue + burst.requests.back().offset;
    const MeshPosition port = mesh.dram_port(burst.requests.front().address);
    const unsigned hops = mesh.hops(node, port);
    const BurstPath path{port, hops, bytes, burst.link_cycles, burst.sram_cycles, burst.first_local, first_bytes, last_bytes, 1};
    uint64_t wait = 0;
    uint64_t burst_done;
    if (load) {
      // The read requests reach the controller after their router latencies; the data comes back.
      const Dram::BurstTiming read = dram_.access_burst(burst.requests, false, first_issue + mesh.route_cycles(hops), &wait, &dram_done_);
      dram_wait_ += wait;
      burst_done = into_scratchpad(path, read.first_done, read.done).last;
    } else {
      const BurstEnds arrival = to_controller(path, first_issue, last_issue);
      const Dram::BurstTiming write = dram_.access_burst(burst.requests, true, arrival.first, &wait, &dram_done_);
      dram_wait_ += wait;
      burst_done = std::max(write.done, arrival.last + dram.row_hit_cycles + ceil_div(last_bytes, dram.bytes_per_cycle_per_channel));
    }
    done = std::max(done, burst_done);
    // Each request done when its data has crossed the DRAM bus (a store), or, for a load, has come over the
    // links and into the scratchpad from there (uncontended: the burst's contention there lands on its end).
    for (size_t i = 0; i < burst.requests.size(); ++i) {
      const uint64_t request_bytes = burst.requests[i].bytes;
      const uint64_t request_done =
          load ? dram_done_[i] + (hops > 0 ? mesh.route_cycles(hops) + mesh.serialization_cycles(request_bytes) : 0) +
                     local_.access_cycles(burst.first_local, request_bytes)
               : dram_done_[i];
      in_flight_[burst.slots[i]] = std::min(burst_done, request_done);
    }
    burst.requests.clear();
    burst.slots.clear();
  }
  step_channels_.clear();
  return done;
}

DmaEngine::Outcome DmaEngine::transfer_in_steps(DmaRows& rows, bool load, uint64_t global, uint64_t local, uint64_t n0, uint64_t start) {
  const DmaConfig& config = context_.config.core.dma;
  const Divider request_bytes(config.request_bytes);
  const Noc& mesh = *directory_.noc;
  in_flight_.assign(config.max_outstanding_requests, 0);
  size_t slot = 0;
  uint64_t next_issue = start + config.descriptor_cycles;
  uint64_t step_issue = 0;  // of the step's first request
  uint64_t end = next_issue;
  uint64_t requests = 0, step_bytes = 0, step_requests = 0;
  PendingCopy copy;  // bytes to move, contiguous on both sides
  // Times the step's requests and yields, as the per-request model yields after each step.
  const auto finish_step = [&]() {
    move_copy(copy, load);
    hand_over_stores();
    end = std::max(end, time_step(load, step_issue));
    step_bytes = step_requests = 0;
    // Let the rest of the chip catch up before issuing further ahead.
    return context_.wait_until(next_issue - 1, timer_);
  };
  // Rows as (source offset, destination offset): the DRAM side is the source of a load.
  for (uint64_t src_offset, dst_offset; rows.next(&src_offset, &dst_offset);) {
    const uint64_t global_row = global + (load ? src_offset : dst_offset);
    const uint64_t local_row = local + (load ? dst_offset : src_offset);
    for (uint64_t done_bytes = 0; done_bytes < n0;) {
      const uint64_t address = global_row + done_bytes;
      const uint64_t local_address = local_row + done_bytes;
      const uint64_t bytes = std::min(n0 - done_bytes, config.request_bytes - request_bytes.remainder(address));
      // Each request's slot in the window was last held by a request of an earlier step, already timed (a
      // step ends at max_outstanding_requests requests), and a step's requests issue close together: it
      // also ends before a request that would wait for the window longer than max_outstanding_requests
      // cycles. (A burst whose requests issued far apart holds a DRAM channel's bus from its first to its
      // last: every other transfer there queues behind it, and on ResNet-18 the waits grew until the
      // watchdog fired. Ending the step at every wait for the window instead made the GEMM of
      // bench/sim_speed.py 11% faster than the per-request model, and slower to simulate.)
      if (step_requests > 0 &&
          (step_requests == config.max_outstanding_requests || in_flight_[slot] > next_issue + config.max_outstanding_requests)) {
        if (!finish_step()) return {end, std::nullopt, {}};
      }
      // The bytes move with their step, as the per-request model moves each request's when it is issued: a
      // step's data moves before the step is timed, never more than a step ahead. Requests that continue
      // each other on both sides move in one copy.
      if (timing_.move_data) add_to_copy(copy, load, address, local_address, bytes);
      const uint64_t issue = std::max(next_issue, in_flight_[slot]);
      if (step_requests == 0) step_issue = issue;
      const unsigned channel = interleave_.channel_of(address);
      ChannelBurst& burst = channel_bursts_[channel];
      if (burst.requests.empty()) {
        step_channels_.push_back(channel);
        burst.first_local = local_address;
        burst.bytes = burst.link_cycles = burst.sram_cycles = 0;
      }
      // (Filled in place: a pushed temporary is read back before its stores retire, a stall on every request.)
      Dram::BurstRequest& request = burst.requests.emplace_back();
      request.address = address, request.bytes = bytes, request.offset = issue - step_issue;
      burst.slots.push_back(slot);
      burst.bytes += bytes;
      burst.link_cycles += mesh.serialization_cycles(bytes);
      burst.sram_cycles += local_.access_cycles(local_address, bytes);
      if (++slot == in_flight_.size()) slot = 0;
      next_issue = issue + 1;
      done_bytes += bytes;
      step_bytes += bytes;
      ++step_requests;
      ++requests;
      if (step_bytes >= config.step_bytes && !finish_step()) return {end, std::nullopt, {}};
    }
  }
  if (step_requests > 0 && !finish_step()) return {end, std::nullopt, {}};
  add_request_stalls(requests);
  return {end, std::nullopt, {}};
}

}  // namespace npu::sim
