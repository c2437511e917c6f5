// BankTimeline: reservations with usable gaps between them.
#include <gtest/gtest.h>

#include "bank_timeline.h"

#include <algorithm>
#include <random>
#include <vector>

namespace npu::sim {
namespace {

TEST(BankTimeline, AFutureReservationLeavesTheCyclesBeforeItFree) {
  BankTimeline bank;
  bank.reserve(100, 2);                     // a DMA request issued ahead: [100, 102)
  EXPECT_EQ(bank.first_free(10, 5), 10u);   // an access now fits before it
  EXPECT_EQ(bank.first_free(96, 4), 96u);   // exactly up to it
  EXPECT_EQ(bank.first_free(97, 4), 102u);  // overlapping: after it
  bank.reserve(102, 2);
  EXPECT_EQ(bank.first_free(99, 3), 104u);  // [99, 102) overlaps the first, [102, 105) the second
  bank.reserve(50, 10);
  EXPECT_EQ(bank.first_free(55, 1), 60u);
  EXPECT_EQ(bank.first_free(60, 40), 60u);  // the gap [60, 100) holds 40 cycles
  EXPECT_EQ(bank.first_free(60, 41), 104u);
}

TEST(BankTimeline, PruningForgetsOnlyWhatEndedByNow) {
  BankTimeline bank;
  for (uint64_t i = 0; i < 40; ++i) bank.reserve(10 * i, 5);
  EXPECT_TRUE(bank.crowded());
  bank.prune(200);  // intervals [0, 5) .. [190, 195) ended
  EXPECT_FALSE(bank.crowded());
  EXPECT_EQ(bank.first_free(200, 5), 205u);  // [200, 205) is still there; the gap after it holds 5
  EXPECT_EQ(bank.first_free(200, 6), 395u);  // no 5-cycle gap holds 6: after the last
  EXPECT_EQ(bank.first_free(395, 1), 395u);  // after the last, [390, 395)
  EXPECT_EQ(bank.first_free(392, 1), 395u);
}

// Back-to-back reservations, in order and out of it, join into one interval: a link kept busy by a
// stream of requests is not a list of one interval per request (to prune and to search).
TEST(BankTimeline, ReservationsThatTouchJoin) {
  BankTimeline bank;
  for (uint64_t i = 0; i < 100; ++i) bank.reserve(1000 + 4 * i, 4);  // [1000, 1400)
  EXPECT_FALSE(bank.crowded());
  EXPECT_EQ(bank.busy_.size(), 1u);
  bank.reserve(990, 4);   // before it, 6 cycles apart: its own
  bank.reserve(994, 6);   // fills the gap: the three are one
  bank.reserve(1500, 5);  // after it
  bank.reserve(1495, 5);  // touches only the one after it
  ASSERT_EQ(bank.busy_.size(), 2u);
  EXPECT_EQ(bank.busy_[0], std::make_pair(uint64_t{990}, uint64_t{1400}));
  EXPECT_EQ(bank.busy_[1], std::make_pair(uint64_t{1495}, uint64_t{1505}));
  EXPECT_EQ(bank.first_free(985, 5), 985u);
  EXPECT_EQ(bank.first_free(985, 6), 1400u);
  EXPECT_EQ(bank.first_free(1400, 95), 1400u);
  EXPECT_EQ(bank.first_free(1400, 96), 1505u);
}

// Against the definition, on random reservations: the first start at or after
// `ready` whose `duration` cycles overlap no reservation.
TEST(BankTimeline, FindsTheFirstGapThatHoldsTheAccessAsABruteForceSearchDoes) {
  std::mt19937_64 random(7);
  BankTimeline bank;
  std::vector<bool> busy(20000, false);
  uint64_t now = 0;
  for (int step = 0; step < 20000; ++step) {
    now += random() % 3;
    const uint64_t ready = now + random() % 300, duration = 1 + random() % (random() % 8 == 0 ? 150 : 4);
    uint64_t expected = ready;
    while (std::any_of(busy.begin() + static_cast<std::ptrdiff_t>(expected), busy.begin() + static_cast<std::ptrdiff_t>(expected + duration),
                       [](bool b) { return b; }))
      ++expected;
    ASSERT_EQ(bank.first_free(ready, duration), expected) << "step " << step << ": ready " << ready << ", duration " << duration;
    if (expected + duration >= busy.size() - 200) break;
    bank.reserve(expected, duration);
    std::fill(busy.begin() + static_cast<std::ptrdiff_t>(expected), busy.begin() + static_cast<std::ptrdiff_t>(expected + duration), true);
    if (bank.crowded()) bank.prune(now);
  }
}

}  // namespace
}  // namespace npu::sim
