#include "background_uses.h"

#include "background_work.h"

namespace npu::sim {

uint64_t BackgroundUses::scan(const BackgroundWork& work, uint64_t begin, uint64_t end) {
  const uint64_t done = work.done();
  uint64_t last = 0;
  size_t kept = 0;
  lowest_ = UINT64_MAX, highest_ = 0;
  for (const Use& use : uses_) {
    if (use.number <= done) continue;
    if (use.begin < end && begin < use.end) last = std::max(last, use.number);
    lowest_ = std::min(lowest_, use.begin), highest_ = std::max(highest_, use.end);
    uses_[kept++] = use;
  }
  uses_.resize(kept);
  return last;
}

void BackgroundUses::wait_for(BackgroundWork& work, uint64_t number) {
  work.wait_for(number);
  forget_done(work);
}

}  // namespace npu::sim
