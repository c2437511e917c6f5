// BankTimeline: reservations with usable gaps between them.
#include <gtest/gtest.h>

#include "bank_timeline.h"

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

}  // namespace
}  // namespace npu::sim
