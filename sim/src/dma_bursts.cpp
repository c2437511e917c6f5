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
    std::memcpy(local_.data(copy.local, copy.bytes), dram_.data(copy.global, copy.bytes), copy.bytes);
  } else if (!deferred_stores_.empty() || (context_.background && local_.in_background(copy.local, copy.bytes))) {
    // Waiting here for the background's products would leave the thread idle while this one waits, and
    // then this one idle while that one has nothing queued: the store runs there, after them. (Once one
    // row is deferred, the transfer's later rows follow it, in order, in the same batch.)
    if (deferred_stores_.empty()) deferred_local_begin_ = deferred_global_begin_ = UINT64_MAX, deferred_local_end_ = deferred_global_end_ = 0;
    deferred_local_begin_ = std::min(deferred_local_begin_, copy.local);
    deferred_local_end_ = std::max(deferred_local_end_, copy.local + copy.bytes);
    deferred_global_begin_ = std::min(deferred_global_begin_, copy.global);
    deferred_global_end_ = std::max(deferred_global_end_, copy.global + copy.bytes);
    deferred_stores_.push_back({dram_.data(copy.global), local_.data(copy.local), copy.bytes});
  } else {
    std::memcpy(dram_.data(copy.global, copy.bytes), local_.data(copy.local, copy.bytes), copy.bytes);
  }
  copy.bytes = 0;
}

void DmaEngine::hand_over_stores() {
  if (deferred_stores_.empty()) return;
  // One item for the batch: the spans of both sides stand for its rows (a span may cover bytes between
  // them, which only makes someone wait who need not have).
  const uint64_t number = local_.run_in_background({{deferred_local_begin_, deferred_local_end_ - deferred_local_begin_}},
                                                   [stores = std::move(deferred_stores_)] {
                                                     for (const DeferredStore& store : stores) std::memcpy(store.dram, store.local, store.bytes);
                                                   });
  dram_.add_background_use(number, deferred_global_begin_, deferred_global_end_ - deferred_global_begin_);
  deferred_stores_.clear();  // (moved from: emptied for the next batch)
}

}  // namespace npu::sim
