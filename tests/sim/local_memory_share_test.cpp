// LocalMemory's bank shares: streams (vector and tensor-core operands) take a
// share of the banks they span, and a DMA burst meanwhile is slowed by the
// largest share among its banks. LocalMemory keeps the shares once while every
// bank's is the same (streams over all the banks leave them so); here against
// bookkeeping per bank, written out from the definition (local_memory.h), on
// random streams and bursts over all, some or one of the test chip's banks.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "chip_context.h"
#include "local_memory.h"
#include "test_chip.h"

namespace npu::sim {
namespace {

// The definition: per bank, until when streams share it and their share in 1/1024.
class SharesPerBank {
 public:
  SharesPerBank(uint64_t banks, uint64_t bank_width) : until_(banks, 0), share_(banks, 0), width_(bank_width) {}

  uint64_t stream(uint64_t address, uint64_t bytes, uint64_t ready, uint64_t duration) {
    const std::vector<uint64_t> span = banks_of(address, bytes);
    const uint64_t span_bytes_per_cycle = span.size() * width_;
    duration = std::max(duration, (bytes + span_bytes_per_cycle - 1) / span_bytes_per_cycle);
    const uint64_t share = std::min<uint64_t>(1024, (bytes * 1024 + span_bytes_per_cycle * duration - 1) / (span_bytes_per_cycle * duration));
    for (const uint64_t bank : span) {
      share_[bank] = std::min<uint64_t>(1024 * 7 / 8, (until_[bank] > ready ? share_[bank] : 0) + share);
      until_[bank] = std::max(until_[bank], ready + duration);
    }
    return ready + duration;
  }
  // A burst of `cycles` at full width over at least `duration`: when it is through.
  uint64_t burst(uint64_t address, uint64_t bytes, uint64_t cycles, uint64_t ready, uint64_t duration) const {
    uint64_t share = 0;
    for (const uint64_t bank : banks_of(address, bytes)) share = std::max(share, until_[bank] > ready ? share_[bank] : 0);
    const uint64_t slowed = share == 0 ? cycles : (cycles * 1024 + (1024 - share) - 1) / (1024 - share);
    return ready + std::max(slowed, duration);
  }

 private:
  std::vector<uint64_t> banks_of(uint64_t address, uint64_t bytes) const {
    const uint64_t banks = until_.size(), first = (address / width_) % banks;
    const uint64_t count = std::min(banks, (address % width_ + bytes + width_ - 1) / width_);
    std::vector<uint64_t> span;
    for (uint64_t i = 0; i < count; ++i) span.push_back((first + i) % banks);
    return span;
  }

  std::vector<uint64_t> until_, share_;
  uint64_t width_;
};

TEST(LocalMemoryShares, SlowBurstsAsBookkeepingPerBankDoes) {
  const ChipConfig config = testing::test_config();
  ChipContext context(config, false, false, nullptr);
  CoreStats stats;
  LocalMemory memory("local", context, stats);
  const uint64_t banks = config.core.scratchpad.banks, width = config.core.scratchpad.bank_width_bytes;
  SharesPerBank expected(banks, width);
  std::mt19937_64 random(5);
  uint64_t now = 0, slowed = 0;
  for (int step = 0; step < 20000; ++step) {
    now += random() % 40;
    // Mostly streams over every bank (as the tensor core's), sometimes over a few or one.
    const uint64_t kind = random() % 10;
    const uint64_t bytes = kind < 6 ? banks * width * (1 + random() % 8) : kind < 9 ? 1 + random() % (banks * width) : 1 + random() % width;
    const uint64_t address = (random() % (config.core.scratchpad.size_bytes - bytes)) & ~uint64_t{3};
    const uint64_t ready = now + random() % 20, duration = random() % 200;
    if (random() % 3 == 0) {
      ASSERT_EQ(memory.stream(address, bytes, false, ready, duration), expected.stream(address, bytes, ready, duration)) << "step " << step;
    } else {
      const uint64_t cycles = memory.access_cycles(address, bytes);
      uint64_t wait = 0;
      const uint64_t through = memory.burst(address, bytes, cycles, true, ready, duration, &wait);
      ASSERT_EQ(through, expected.burst(address, bytes, cycles, ready, duration)) << "step " << step;
      slowed += through > ready + std::max(cycles, duration);
    }
  }
  EXPECT_GT(slowed, 300u);  // (the streams' shares mattered)
}

}  // namespace
}  // namespace npu::sim
