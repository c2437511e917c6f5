// DmaTiming::PerStep and PerWindow for dma.send: a core-to-core copy over the
// NoC with the scratchpads' side timed a step at a time (step_bytes, as the
// per-request model yields; per window too: a window of
// max_outstanding_requests requests let a send run ahead of the transfers it
// shares links with, and the compiler's 4096^3 GEMM on `base` ran 3.1% faster
// than per request, with steps 0.7%). The transfer is cut into the
// same requests as the per-request model's (request_bytes, one issued a cycle,
// none before the request max_outstanding_requests earlier is done), and each
// request still crosses the links of its route one by one as in that model:
// the NoC is where sends contend (a step's requests as one cut-through block
// waited for a gap their whole length on a busy link, and the compiler's
// 2048^3 GEMM on `large`, whose sends bind it, ran 33% slower per window than
// per request). What a step times at once is the banks at both ends: its
// requests are one burst out of this core's scratchpad and one into the other
// core's (LocalMemory::burst, slowed by the streams there as a request is),
// which do not wait for other DMA requests' banks, as the per-step model's
// bursts do not. That is where the per-request model spends its host time on a
// send. docs/chip.md, "DMA timing", has the measured difference.
#include <algorithm>
#include <cstring>

#include "dma_engine.h"
#include "divider.h"
#include "noc.h"

namespace npu::sim {

DmaEngine::Outcome DmaEngine::send_in_steps(DmaRows& rows, uint64_t src, uint64_t dst, unsigned remote_core, uint64_t n0, uint64_t start,
                                             const Command& command) {
  const DmaConfig& config = context_.config.core.dma;
  const Divider request_bytes(config.request_bytes);
  Noc& mesh = *directory_.noc;
  LocalMemory& remote = *directory_.local_memories[remote_core];
  const MeshPosition from = context_.config.core_position(core_), to = context_.config.core_position(remote_core);
  const bool crosses_links = mesh.hops(from, to) > 0;
  in_flight_.assign(config.max_outstanding_requests, 0);
  size_t slot = 0;
  uint64_t next_issue = start + config.descriptor_cycles;
  uint64_t end = next_issue;
  uint64_t requests = 0;
  // The step's burst at each end: its requests' issue span and arrival span, bytes, the cycles they would
  // hold each side's banks, and where its first request reads and writes.
  struct Step {
    uint64_t first_issue = 0, last_issue = 0, first_arrival = 0, last_arrival = 0, bytes = 0, src_cycles = 0, dst_cycles = 0;
    uint64_t first_src = 0, first_dst = 0, requests = 0;
  } step;
  const auto finish_step = [&]() {
    uint64_t wait = 0;
    // (The waits a burst meets count once per request, as the per-step model counts them.)
    const uint64_t read = local_.burst(step.first_src, step.bytes, step.src_cycles, false, step.first_issue, step.last_issue - step.first_issue, &wait);
    sram_wait_ += wait * step.requests;
    const uint64_t written =
        remote.burst(step.first_dst, step.bytes, step.dst_cycles, true, step.first_arrival, step.last_arrival - step.first_arrival, &wait);
    sram_wait_ += wait * step.requests;
    // Streams that slow the banks past the requests' own times hold the step's end back.
    end = std::max({end, written, read + (step.last_arrival - step.last_issue)});
    step = Step{};
    // Let the rest of the chip catch up before issuing further ahead.
    return context_.wait_until(next_issue - 1, timer_);
  };
  for (uint64_t src_offset, dst_offset; rows.next(&src_offset, &dst_offset);) {
    // The row's bytes move at once (the per-request model moves each request's as it issues): nothing reads
    // them at the other core before the send's semaphore, nor writes them here before the send is done.
    if (timing_.move_data && n0 > 0) std::memcpy(remote.data(dst + dst_offset, n0), local_.data(src + src_offset, n0), n0);
    for (uint64_t done_bytes = 0; done_bytes < n0;) {
      const uint64_t from_address = src + src_offset + done_bytes, to_address = dst + dst_offset + done_bytes;
      const uint64_t bytes = std::min(n0 - done_bytes, config.request_bytes - request_bytes.remainder(from_address));
      const uint64_t issue = std::max(next_issue, in_flight_[slot]);
      // Out of the banks (uncontended: the burst times them), across the links as the per-request model does.
      const uint64_t read = issue + local_.access_cycles(from_address, bytes);
      uint64_t wait = 0;
      const uint64_t arrival = crosses_links ? mesh.transfer(from, to, bytes, read, &wait) : read;
      noc_wait_ += wait;
      const uint64_t done = arrival + remote.access_cycles(to_address, bytes);
      in_flight_[slot] = done;
      end = std::max(end, done);
      if (step.requests == 0) step.first_issue = issue, step.first_arrival = arrival, step.first_src = from_address, step.first_dst = to_address;
      step.last_issue = issue, step.last_arrival = std::max(step.last_arrival, arrival);
      step.bytes += bytes;
      step.src_cycles += local_.access_cycles(from_address, bytes);
      step.dst_cycles += remote.access_cycles(to_address, bytes);
      ++step.requests;
      if (++slot == in_flight_.size()) slot = 0;
      next_issue = issue + 1;
      done_bytes += bytes;
      ++requests;
      if (step.bytes >= config.step_bytes && !finish_step()) return {end, std::nullopt, {}};
    }
  }
  if (step.requests > 0 && !finish_step()) return {end, std::nullopt, {}};
  add_request_stalls(requests);
  raise_at_receiver(command, remote_core, end);
  return {end, std::nullopt, {}};
}

}  // namespace npu::sim
