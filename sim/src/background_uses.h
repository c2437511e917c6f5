// The address ranges of one memory that items of a BackgroundWork
// (background_work.h) read or write: whoever else touches bytes in them waits
// for those items first.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace npu::sim {

class BackgroundWork;

// (Used by the simulating thread alone.)
class BackgroundUses {
 public:
  // Item `number` of `work` reads or writes [begin, end).
  void add(uint64_t number, uint64_t begin, uint64_t end) {
    uses_.push_back({number, begin, end});
    lowest_ = std::min(lowest_, begin), highest_ = std::max(highest_, end);
  }
  // The number of the last item not done that uses any of [begin, end) (0 if none).
  uint64_t last_user(const BackgroundWork& work, uint64_t begin, uint64_t end) {
    // (Most accesses lie outside every range in use: DMA loads, while stores are in the background.)
    return uses_.empty() || end <= lowest_ || highest_ <= begin ? 0 : scan(work, begin, end);
  }
  // Waits for the items that use any of [begin, end) (`work` is only read
  // where something was added).
  void settle(BackgroundWork* work, uint64_t begin, uint64_t end) {
    if (uses_.empty()) return;
    if (const uint64_t last = last_user(*work, begin, end)) wait_for(*work, last);
  }
  // Forgets the ranges of items done, keeping the list short.
  void forget_done(const BackgroundWork& work) {
    if (!uses_.empty()) scan(work, 0, 0);
  }
  bool empty() const { return uses_.empty(); }

 private:
  // last_user() by looking at every range, forgetting those of items done.
  uint64_t scan(const BackgroundWork& work, uint64_t begin, uint64_t end);
  void wait_for(BackgroundWork& work, uint64_t number);
  struct Use {
    uint64_t number, begin, end;
  };
  std::vector<Use> uses_;  // (may hold some of items already done)
  uint64_t lowest_ = UINT64_MAX, highest_ = 0;  // of every range in uses_
};

}  // namespace npu::sim
