// Ring: the engines' instruction queues, against std::deque on random pushes,
// pops and clears (so that it wraps around and grows while wrapped).
#include <gtest/gtest.h>

#include <deque>
#include <random>

#include "ring.h"

namespace npu::sim {
namespace {

TEST(Ring, KeepsFirstInFirstOutOrderAsADequeDoes) {
  std::mt19937_64 random(11);
  Ring<uint64_t> ring;
  std::deque<uint64_t> expected;
  uint64_t next = 0;
  for (int step = 0; step < 100000; ++step) {
    const uint64_t choice = random() % 100;
    if (choice < 52) {
      ring.push_back(next);
      expected.push_back(next++);
    } else if (choice < 99) {
      if (expected.empty()) continue;
      ASSERT_EQ(ring.front(), expected.front()) << "step " << step;
      ring.pop_front();
      expected.pop_front();
    } else {
      ring.clear();
      expected.clear();
    }
    ASSERT_EQ(ring.size(), expected.size());
    ASSERT_EQ(ring.empty(), expected.empty());
    if (!expected.empty()) {
      ASSERT_EQ(ring.front(), expected.front());
    }
  }
  EXPECT_GT(next, 1000u);
}

TEST(Ring, GrowsWhileWrappedAround) {
  Ring<int> ring;
  for (int i = 0; i < 6; ++i) ring.push_back(i);  // 8 slots
  for (int i = 0; i < 5; ++i) ring.pop_front();   // the head at slot 5
  for (int i = 6; i < 20; ++i) ring.push_back(i);  // wraps, then grows to 16 and 32 slots
  for (int i = 5; i < 20; ++i) {
    ASSERT_FALSE(ring.empty());
    EXPECT_EQ(ring.front(), i);
    ring.pop_front();
  }
  EXPECT_TRUE(ring.empty());
}

}  // namespace
}  // namespace npu::sim
