#include "npusim/driver/device_allocator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "npusim/driver/errors.h"

namespace npu {
namespace {

// The text of the exception `call` throws; a test failure if it throws none.
template <typename Exception, typename Call>
std::string message_of(Call call) {
  try {
    call();
  } catch (const Exception& error) {
    return error.what();
  }
  ADD_FAILURE() << "no exception thrown";
  return "";
}

void expect_stats(const DeviceAllocator& allocator, uint64_t in_use, uint64_t free_bytes, uint64_t largest,
                  uint64_t live) {
  const AllocatorStats stats = allocator.stats();
  EXPECT_EQ(stats.in_use_bytes, in_use);
  EXPECT_EQ(stats.free_bytes, free_bytes);
  EXPECT_EQ(stats.largest_free_bytes, largest);
  EXPECT_EQ(stats.allocations, live);
  EXPECT_EQ(stats.in_use_bytes + stats.free_bytes, allocator.size());
  const double fragmentation = free_bytes == 0 ? 0.0 : 1.0 - static_cast<double>(largest) / static_cast<double>(free_bytes);
  EXPECT_DOUBLE_EQ(stats.fragmentation, fragmentation);
}

TEST(DeviceAllocator, StatisticsFollowAKnownSequence) {
  DeviceAllocator allocator(0x10000, 65536);
  expect_stats(allocator, 0, 65536, 65536, 0);

  // 100 bytes reserve two granules.
  const uint64_t a = allocator.allocate(100);
  EXPECT_EQ(a, 0x10000u);
  EXPECT_EQ(allocator.size_of(a), 128u);
  expect_stats(allocator, 128, 65408, 65408, 1);

  // The free block starts at 0x10080; 256-alignment leaves 128 bytes of
  // padding in front, which stays free: 65408 - 128 - 1024 = 64256 behind.
  const uint64_t b = allocator.allocate(1000);
  EXPECT_EQ(b, 0x10100u);
  expect_stats(allocator, 1152, 64384, 64256, 2);

  // The 128-byte padding block is the best fit for 64 bytes.
  const uint64_t c = allocator.allocate(64, 64);
  EXPECT_EQ(c, 0x10080u);
  expect_stats(allocator, 1216, 64320, 64256, 3);
  EXPECT_EQ(allocator.stats().peak_in_use_bytes, 1216u);

  // b merges with the 64 bytes in front of it and everything behind it.
  allocator.free(b);
  expect_stats(allocator, 192, 65344, 65344, 2);
  EXPECT_EQ(allocator.stats().peak_in_use_bytes, 1216u);

  allocator.reset_peak();
  EXPECT_EQ(allocator.stats().peak_in_use_bytes, 192u);

  // a's 128 bytes cannot merge: c sits between them and the rest.
  allocator.free(a);
  expect_stats(allocator, 64, 65472, 65344, 1);

  allocator.free(c);
  expect_stats(allocator, 0, 65536, 65536, 0);
  const AllocatorStats stats = allocator.stats();
  EXPECT_EQ(stats.total_allocations, 3u);
  EXPECT_EQ(stats.total_frees, 3u);
  EXPECT_EQ(stats.peak_in_use_bytes, 192u);
}

TEST(DeviceAllocator, EveryAddressIsAligned) {
  // A base aligned to the granule only, so that every larger alignment needs padding.
  const uint64_t base = 0x1040;
  DeviceAllocator allocator(base, 64u << 20);
  const std::array<uint64_t, 8> sizes = {1, 3, 63, 65, 255, 257, 4097, 65535};
  for (uint64_t alignment = 1; alignment <= (1u << 20); alignment *= 2) {
    for (const uint64_t bytes : sizes) {
      const uint64_t address = allocator.allocate(bytes, alignment);
      EXPECT_EQ(address % alignment, 0u) << bytes << " bytes, alignment " << alignment;
      EXPECT_EQ(address % DeviceAllocator::kGranule, 0u);
      EXPECT_GE(address, base);
      EXPECT_LE(address + bytes, base + allocator.size());
      EXPECT_EQ(allocator.size_of(address), (bytes + 63) / 64 * 64);
    }
  }
  const AllocatorStats stats = allocator.stats();
  EXPECT_EQ(stats.in_use_bytes + stats.free_bytes, allocator.size());
}

TEST(DeviceAllocator, LargeAlignmentLeavesThePaddingFree) {
  DeviceAllocator allocator(0x40, 4u << 20);
  const uint64_t address = allocator.allocate(1, 1u << 20);
  EXPECT_EQ(address, 1u << 20);
  // Free: [0x40, 1 MiB) in front, and everything after the one granule.
  expect_stats(allocator, 64, (4u << 20) - 64, 0x400040 - 0x100040, 1);
  // The padding in front is allocatable.
  EXPECT_EQ(allocator.allocate((1u << 20) - 64, 64), 0x40u);
}

TEST(DeviceAllocator, ZeroBytesStillGetAddressesOfTheirOwn) {
  DeviceAllocator allocator(0, 4096);
  const uint64_t a = allocator.allocate(0);
  const uint64_t b = allocator.allocate(0);
  const uint64_t c = allocator.allocate(0, 1);
  EXPECT_NE(a, b);
  EXPECT_NE(b, c);
  EXPECT_NE(a, c);
  EXPECT_EQ(allocator.size_of(a), DeviceAllocator::kGranule);
  EXPECT_EQ(allocator.stats().allocations, 3u);
}

TEST(DeviceAllocator, FreedBlockIsReused) {
  DeviceAllocator allocator(0x100000, 1u << 20);
  const uint64_t a = allocator.allocate(4096);
  allocator.allocate(4096);  // keeps a's block from merging with the rest
  allocator.free(a);
  EXPECT_EQ(allocator.allocate(3000), a);
}

TEST(DeviceAllocator, BestFitTakesTheSmallestHoleThenTheLowest) {
  DeviceAllocator allocator(0, 65536);
  // Holes of 1024, 512, 768 and 512 bytes, each followed by a guard block.
  std::vector<uint64_t> holes;
  for (const uint64_t bytes : {1024, 512, 768, 512}) {
    holes.push_back(allocator.allocate(bytes));
    allocator.allocate(256);
  }
  for (const uint64_t hole : holes) allocator.free(hole);
  EXPECT_EQ(holes, (std::vector<uint64_t>{0, 1280, 2048, 3072}));

  EXPECT_EQ(allocator.allocate(500), 1280u);  // a 512 hole; the lower of the two
  EXPECT_EQ(allocator.allocate(500), 3072u);  // the other 512 hole
  EXPECT_EQ(allocator.allocate(600), 2048u);  // 768 beats 1024 and the big tail
  EXPECT_EQ(allocator.allocate(900), 0u);
}

TEST(DeviceAllocator, BestFitCountsAlignmentPadding) {
  DeviceAllocator allocator(0, 16384);
  allocator.allocate(64, 64);                        // [0, 64)
  const uint64_t hole = allocator.allocate(1088, 64);  // [64, 1152)
  allocator.allocate(64, 64);                        // [1152, 1216)
  allocator.free(hole);

  // The 1088-byte hole is big enough for 512 bytes, but aligned to 1024 only
  // 128 bytes of it are left: the tail block takes the request.
  EXPECT_EQ(allocator.allocate(512, 1024), 2048u);
  // 64 bytes aligned to 1024 do fit in the hole.
  EXPECT_EQ(allocator.allocate(64, 1024), 1024u);
}

TEST(DeviceAllocator, AdjacentBlocksCoalesceInAnyFreeOrder) {
  std::array<int, 3> order = {0, 1, 2};
  do {
    DeviceAllocator allocator(0x1000, 768);
    std::array<uint64_t, 3> blocks{};
    for (uint64_t& block : blocks) block = allocator.allocate(256);
    EXPECT_EQ(allocator.stats().free_bytes, 0u);

    std::array<bool, 3> freed = {false, false, false};
    for (const int index : order) {
      allocator.free(blocks[index]);
      freed[index] = true;
      // The largest free block is the longest run of freed neighbours.
      uint64_t run = 0;
      uint64_t longest = 0;
      for (const bool is_free : freed) {
        run = is_free ? run + 1 : 0;
        longest = std::max(longest, run);
      }
      EXPECT_EQ(allocator.stats().largest_free_bytes, longest * 256)
          << "order " << order[0] << order[1] << order[2];
    }
    expect_stats(allocator, 0, 768, 768, 0);
    EXPECT_EQ(allocator.allocate(768), 0x1000u);
  } while (std::next_permutation(order.begin(), order.end()));
}

TEST(DeviceAllocator, OutOfMemoryWhenFull) {
  DeviceAllocator allocator(0, 4096);
  allocator.allocate(4096);
  EXPECT_EQ(message_of<OutOfMemoryError>([&] { allocator.allocate(1); }),
            "out of device memory: requested 1 bytes (alignment 256); 0 bytes free, largest free block 0 bytes");
}

TEST(DeviceAllocator, OutOfMemoryWhenFragmented) {
  DeviceAllocator allocator(0, 4096);
  std::vector<uint64_t> blocks;
  for (int i = 0; i < 16; ++i) blocks.push_back(allocator.allocate(256));
  for (int i = 0; i < 16; i += 2) allocator.free(blocks[i]);
  const AllocatorStats before = allocator.stats();

  try {
    allocator.allocate(1000);
    FAIL() << "allocated 1000 bytes out of 256-byte holes";
  } catch (const OutOfMemoryError& error) {
    EXPECT_STREQ(error.what(),
                 "out of device memory: requested 1000 bytes (alignment 256); 2048 bytes free, "
                 "largest free block 256 bytes");
    EXPECT_EQ(error.requested(), 1000u);
    EXPECT_EQ(error.alignment(), 256u);
    EXPECT_GT(error.free_bytes(), error.requested());
    EXPECT_GT(error.requested(), error.largest_free_bytes());
  }
  // A failed request changes nothing.
  const AllocatorStats after = allocator.stats();
  EXPECT_EQ(after.in_use_bytes, before.in_use_bytes);
  EXPECT_EQ(after.total_allocations, before.total_allocations);
  EXPECT_DOUBLE_EQ(after.fragmentation, 0.875);
}

TEST(DeviceAllocator, OutOfMemoryWhenAlignmentLeavesTooLittle) {
  DeviceAllocator allocator(0, 8192);
  allocator.allocate(64, 64);
  // The one free block, [64, 8192), holds 8128 bytes, but aligned to 4096
  // only 4096 of them remain.
  EXPECT_EQ(message_of<OutOfMemoryError>([&] { allocator.allocate(4160, 4096); }),
            "out of device memory: requested 4160 bytes (alignment 4096); 8128 bytes free, "
            "largest free block 8128 bytes");
}

TEST(DeviceAllocator, OutOfMemoryForARequestLargerThanTheDevice) {
  DeviceAllocator allocator(0, 4096);
  EXPECT_EQ(message_of<OutOfMemoryError>([&] { allocator.allocate(std::numeric_limits<uint64_t>::max()); }),
            "out of device memory: requested 18446744073709551615 bytes (alignment 256); 4096 bytes free, "
            "largest free block 4096 bytes");
}

TEST(DeviceAllocator, DoubleFreeIsRejected) {
  DeviceAllocator allocator(0x2000, 4096);
  const uint64_t a = allocator.allocate(256);
  allocator.free(a);
  EXPECT_EQ(message_of<std::invalid_argument>([&] { allocator.free(a); }),
            "free: no live allocation at 0x2000 (freed already, or never allocated)");
  expect_stats(allocator, 0, 4096, 4096, 0);
  EXPECT_EQ(allocator.stats().total_frees, 1u);
}

TEST(DeviceAllocator, InteriorPointerIsRejected) {
  DeviceAllocator allocator(0x1000, 4096);
  const uint64_t a = allocator.allocate(1024);
  EXPECT_EQ(message_of<std::invalid_argument>([&] { allocator.free(a + 512); }),
            "free: address 0x1200 is inside the allocation at 0x1000 (1024 bytes), not its start");
  EXPECT_EQ(allocator.size_of(a), 1024u);  // still live
  EXPECT_EQ(allocator.stats().total_frees, 0u);
}

TEST(DeviceAllocator, UnknownAddressesAreRejected) {
  DeviceAllocator allocator(0x1000, 4096);
  allocator.allocate(256);
  EXPECT_THROW(allocator.free(0xdead0000), std::invalid_argument);
  EXPECT_THROW(allocator.free(0x1000 + 256), std::invalid_argument);  // free space
  EXPECT_THROW(allocator.size_of(0x1100), std::invalid_argument);
}

TEST(DeviceAllocator, AlignmentMustBeAPowerOfTwo) {
  DeviceAllocator allocator(0, 4096);
  for (const uint64_t alignment : {0, 3, 96, 1000}) {
    EXPECT_THROW(allocator.allocate(64, alignment), std::invalid_argument) << alignment;
  }
  EXPECT_EQ(allocator.stats().allocations, 0u);
}

TEST(DeviceAllocator, RangeMustBeWholeGranulesInsideTheAddressSpace) {
  EXPECT_THROW(DeviceAllocator(0x1001, 4096), std::invalid_argument);
  EXPECT_THROW(DeviceAllocator(0x1000, 100), std::invalid_argument);
  EXPECT_THROW(DeviceAllocator(std::numeric_limits<uint64_t>::max() - 4095, 8192), std::invalid_argument);
  DeviceAllocator empty(0, 0);
  EXPECT_THROW(empty.allocate(0), OutOfMemoryError);
}

TEST(DeviceAllocator, SameCallsGiveSameAddresses) {
  const auto run = [] {
    DeviceAllocator allocator(0x4000'0000, 1u << 24);
    std::mt19937_64 random(7);
    std::vector<uint64_t> live;
    std::vector<uint64_t> trace;
    for (int i = 0; i < 3000; ++i) {
      if (live.empty() || random() % 3 != 0) {
        try {
          live.push_back(allocator.allocate(random() % 65536, uint64_t{1} << (random() % 13)));
          trace.push_back(live.back());
        } catch (const OutOfMemoryError&) {
          trace.push_back(0);
        }
      } else {
        const size_t index = random() % live.size();
        allocator.free(live[index]);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(index));
      }
    }
    return trace;
  };
  EXPECT_EQ(run(), run());
}

}  // namespace
}  // namespace npu
