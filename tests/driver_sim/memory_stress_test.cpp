// Device memory through the whole stack: 10,000 random allocate / copy / free
// operations on the simulated chip (host copies, queued device-to-device
// copies and fills). Every live buffer's contents are known on the host and
// checked against the device (checksums), so a lost, overlapping or
// misplaced block, or a copy that went astray, shows; the statistics are
// checked exactly against the live set after every operation.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "driver_fixture.h"
#include "npusim/driver/errors.h"

namespace npu {
namespace {

uint64_t checksum(const std::vector<uint8_t>& bytes) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (const uint8_t b : bytes) hash = (hash ^ b) * 0x100000001b3ull;
  return hash;
}

struct Live {
  Buffer buffer;
  std::vector<uint8_t> contents;  // what the device must hold
  uint64_t alignment;
};

TEST(DeviceMemoryStress, TenThousandOperationsLoseAndOverlapNothing) {
  const auto device = testing::open_device("tiny");
  Queue queue = device->queue(0);
  std::mt19937_64 rng(7);
  std::vector<Live> live;
  uint64_t allocations = 0, frees = 0, copies = 0, fills = 0, peak = 0;
  const auto reserved = [](uint64_t bytes) { return (std::max<uint64_t>(bytes, 1) + 63) / 64 * 64; };
  const auto check_device = [&](const Live& l) {
    std::vector<uint8_t> back(l.contents.size());
    device->copy_from_device(l.buffer, 0, back.data(), back.size());
    return checksum(back) == checksum(l.contents);
  };
  for (int op = 0; op < 10000; ++op) {
    const unsigned kind = unsigned(rng() % 10);
    if (kind < 4 || live.size() < 2) {
      // Allocate and fill from the host.
      const uint64_t bytes = 1 + rng() % (kind == 0 ? 65536 : 2048);
      const uint64_t alignment = uint64_t{64} << (rng() % 7);
      Live l{device->allocate(bytes, alignment), std::vector<uint8_t>(bytes), alignment};
      ASSERT_EQ(l.buffer.address() % alignment, 0u);
      for (uint8_t& b : l.contents) b = uint8_t(rng());
      device->copy_to_device(l.buffer, 0, l.contents.data(), bytes);
      live.push_back(std::move(l));
      ++allocations;
    } else if (kind < 7) {
      // Free one, after checking it kept its contents (once the queued work
      // has run: a buffer in use by queued work stays allocated until then).
      queue.synchronize();
      const size_t i = rng() % live.size();
      ASSERT_TRUE(check_device(live[i])) << "operation " << op;
      live.erase(live.begin() + long(i));
      ++frees;
    } else if (kind < 9) {
      // Queued device-to-device copy of a random range between two live buffers.
      const size_t d = rng() % live.size(), s = (d + 1 + rng() % (live.size() - 1)) % live.size();  // s != d
      Live& dst = live[d];
      const Live& src = live[s];
      const uint64_t bytes = 1 + rng() % std::min(dst.contents.size(), src.contents.size());
      const uint64_t dst_offset = rng() % (dst.contents.size() - bytes + 1), src_offset = rng() % (src.contents.size() - bytes + 1);
      queue.copy(dst.buffer, dst_offset, src.buffer, src_offset, bytes);
      std::copy_n(src.contents.begin() + long(src_offset), bytes, dst.contents.begin() + long(dst_offset));
      ++copies;
    } else {
      // Queued fill of a random range.
      Live& dst = live[rng() % live.size()];
      const uint64_t offset = rng() % dst.contents.size(), bytes = 1 + rng() % (dst.contents.size() - offset);
      const uint32_t pattern = uint32_t(rng());
      queue.fill(dst.buffer, offset, bytes, pattern);
      for (uint64_t i = 0; i < bytes; ++i) dst.contents[offset + i] = uint8_t(pattern >> (8 * (i % 4)));
      ++fills;
    }
    // The statistics, exactly, against the live set.
    uint64_t in_use = 0;
    for (const Live& l : live) in_use += reserved(l.buffer.size());
    peak = std::max(peak, in_use);
    const AllocatorStats stats = device->memory_stats();
    ASSERT_EQ(stats.in_use_bytes, in_use) << "operation " << op;
    ASSERT_EQ(stats.allocations, live.size());
    ASSERT_EQ(stats.total_allocations, allocations);
    ASSERT_EQ(stats.total_frees, frees);
    ASSERT_EQ(stats.free_bytes + stats.in_use_bytes, device->info().memory_bytes - device->info().reserved_bytes);
    if (op % 1000 == 999) queue.synchronize();
  }
  queue.synchronize();
  // No two live blocks overlap, and every one holds what it should.
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const Live& l : live) ranges.emplace_back(l.buffer.address(), l.buffer.address() + l.buffer.size());
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) ASSERT_LE(ranges[i - 1].second, ranges[i].first);
  for (const Live& l : live) ASSERT_TRUE(check_device(l));
  EXPECT_EQ(device->memory_stats().peak_in_use_bytes, peak);
  std::printf("%llu allocations, %llu frees, %llu queued copies, %llu fills; %zu live at the end, peak %llu bytes\n",
              (unsigned long long)allocations, (unsigned long long)frees, (unsigned long long)copies, (unsigned long long)fills, live.size(),
              (unsigned long long)peak);
  live.clear();
  EXPECT_EQ(device->memory_stats().in_use_bytes, 0u);
}

}  // namespace
}  // namespace npu
