// The timing model's exact division by config constants (sim/src/divider.h)
// against the hardware divide, at the edges where a reciprocal is off.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "divider.h"
#include "dram_interleave.h"

namespace npu::sim {
namespace {

TEST(Divider, QuotientsAndRemaindersAreExact) {
  std::mt19937_64 rng(1);
  for (const uint64_t d : {uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{7}, uint64_t{64}, uint64_t{1000}, uint64_t{3900}, uint64_t{1} << 32,
                           (uint64_t{1} << 63) + 1, UINT64_MAX}) {
    const Divider divider(d);
    std::vector<uint64_t> numbers = {0, 1, d - 1, d, d + 1, UINT64_MAX, UINT64_MAX - 1, UINT64_MAX / d * d, UINT64_MAX / d * d - 1};
    for (int i = 0; i < 10000; ++i) numbers.push_back(rng() >> (rng() % 64));
    for (const uint64_t n : numbers) {
      ASSERT_EQ(divider.quotient(n), n / d) << n << " / " << d;
      ASSERT_EQ(divider.remainder(n), n % d) << n << " % " << d;
    }
  }
}

TEST(DramInterleave, ChannelsTakeConsecutiveBlocks) {
  DramConfig config;
  config.interleave_bytes = 256, config.channels = 3;  // not a power of two
  const DramInterleave interleave(config);
  for (uint64_t address = 0; address < 10000; address += 37) {
    EXPECT_EQ(interleave.channel_of(address), address / 256 % 3);
    EXPECT_EQ(interleave.channel_address(address), address / 256 / 3 * 256 + address % 256);
    EXPECT_EQ(interleave.next_block(address), address / 256 * 256 + 256);
  }
}

// A column block of a row-major matrix (one block a row, rows channels * blocks apart) keeps to one
// channel when interleaved, and visits every channel when hashed; each channel's addresses stay distinct.
TEST(DramInterleave, HashedMapSpreadsPowerOfChannelsStrides) {
  for (const uint32_t channels : {4u, 3u}) {
    SCOPED_TRACE(channels);
    DramConfig config;
    config.interleave_bytes = 512, config.channels = channels;
    const DramInterleave interleaved(config);
    config.address_map = DramAddressMap::Hashed;
    const DramInterleave hashed(config);
    for (const uint64_t stride_blocks : {uint64_t{channels}, uint64_t{channels} * channels, uint64_t{channels} * channels * channels}) {
      std::set<unsigned> plain, spread;
      for (uint64_t row = 0; row < channels; ++row) {
        plain.insert(interleaved.channel_of(row * stride_blocks * 512 + 100));
        spread.insert(hashed.channel_of(row * stride_blocks * 512 + 100));
      }
      EXPECT_EQ(plain.size(), 1u) << stride_blocks;
      EXPECT_EQ(spread.size(), channels) << stride_blocks;
    }
    std::set<std::pair<unsigned, uint64_t>> places;
    for (uint64_t address = 0; address < 512 * 200; address += 64) {
      EXPECT_EQ(hashed.channel_address(address), interleaved.channel_address(address));
      EXPECT_TRUE(places.insert({hashed.channel_of(address), hashed.channel_address(address)}).second) << address;
    }
  }
}

}  // namespace
}  // namespace npu::sim
