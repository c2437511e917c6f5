// What DMA timed per step (dma_steps.cpp) and per window (dma_windows.cpp)
// share: a burst's way over the NoC and through the scratchpad, and the
// data a transfer moves.
#include <algorithm>
#include <cstring>

#include "dma_engine.h"
#include "noc.h"

namespace npu::sim {

DmaEngine::BurstEnds DmaEngine::into_scratchpad(const BurstPath& path, uint64_t first_read, uint64_t last_read) {
  const Noc& mesh = *directory_.noc;
  uint64_t wait = 0, first_arrival = first_read, last_arrival = last_read;
  if (path.hops > 0) {
    const uint64_t through = directory_.noc->transfer(path.port, context_.config.core_position(core_), path.bytes, path.link_cycles, first_read, &wait);
    noc_wait_ += wait * path.wait_weight;
    first_arrival = through - path.link_cycles + mesh.serialization_cycles(path.first_bytes);
    last_arrival = std::max(through, last_read + mesh.route_cycles(path.hops) + mesh.serialization_cycles(path.last_bytes));
  }
  const uint64_t written = local_.burst(path.first_local, path.bytes, path.sram_cycles, true, first_arrival, last_arrival - first_arrival, &wait);
  sram_wait_ += wait * path.wait_weight;
  return {first_arrival + local_.access_cycles(path.first_local, path.first_bytes),
          std::max(written, last_arrival + local_.access_cycles(path.first_local, path.last_bytes))};
}

DmaEngine::BurstEnds DmaEngine::to_controller(const BurstPath& path, uint64_t first_issue, uint64_t last_issue) {
  const Noc& mesh = *directory_.noc;
  uint64_t wait = 0;
  const uint64_t read = local_.burst(path.first_local, path.bytes, path.sram_cycles, false, first_issue, last_issue - first_issue, &wait);
  sram_wait_ += wait * path.wait_weight;
  uint64_t first_arrival = first_issue + local_.access_cycles(path.first_local, path.first_bytes);
  uint64_t last_arrival = std::max(read, last_issue + local_.access_cycles(path.first_local, path.last_bytes));
  if (path.hops > 0) {
    const uint64_t through = directory_.noc->transfer(context_.config.core_position(core_), path.port, path.bytes, path.link_cycles, first_arrival, &wait);
    noc_wait_ += wait * path.wait_weight;
    first_arrival = through - path.link_cycles + mesh.serialization_cycles(path.first_bytes);
    last_arrival = std::max(through, last_arrival + mesh.route_cycles(path.hops) + mesh.serialization_cycles(path.last_bytes));
  }
  return {first_arrival, last_arrival};
}

void DmaEngine::add_to_copy(PendingCopy& copy, bool load, uint64_t global, uint64_t local, uint64_t bytes) {
  if (copy.bytes > 0 && (global != copy.global + copy.bytes || local != copy.local + copy.bytes)) move_copy(copy, load);
  if (copy.bytes == 0) copy.global = global, copy.local = local;
  copy.bytes += bytes;
}

void DmaEngine::move_copy(PendingCopy& copy, bool load) {
  if (copy.bytes == 0) return;
  if (load) {
    std::memcpy(local_.data(copy.local, copy.bytes), dram_.data(copy.global), copy.bytes);
  } else {
    std::memcpy(dram_.data(copy.global), local_.data(copy.local, copy.bytes), copy.bytes);
  }
  copy.bytes = 0;
}

}  // namespace npu::sim
