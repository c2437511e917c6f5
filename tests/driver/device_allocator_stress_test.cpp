// A randomized allocate/copy/free workload over a simulated device memory.
// Every allocation is filled with a pattern of its own and its checksum kept;
// if the allocator ever lost a block or handed out overlapping ones, some
// checksum would change. Placement and statistics are also checked directly,
// against a model rebuilt from the live allocations after every operation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "npusim/driver/device_allocator.h"
#include "npusim/driver/errors.h"

namespace npu {
namespace {

constexpr uint64_t kBase = 0x8000'0000;
constexpr uint64_t kSize = 8u << 20;
constexpr int kOperations = 20000;
constexpr uint64_t kMaxBytes = 64u << 10;
constexpr unsigned kMaxAlignmentLog2 = 12;  // 4 KiB

uint64_t reserved_size(uint64_t bytes) {
  const uint64_t granule = DeviceAllocator::kGranule;
  return (std::max<uint64_t>(bytes, 1) + granule - 1) / granule * granule;
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

struct Allocation {
  uint64_t bytes = 0;
  uint64_t pattern = 0;   // seeds the contents; a copy shares its source's
  uint64_t checksum = 0;  // of the `bytes` bytes written at allocation
};

struct Gap {
  uint64_t address;
  uint64_t size;
};

class Workload {
 public:
  explicit Workload(uint64_t seed) : allocator_(kBase, kSize), memory_(kSize), random_(seed) {}

  // One random operation, then the statistics check.
  testing::AssertionResult step() {
    const unsigned choice = random_() % 100;
    testing::AssertionResult result = testing::AssertionSuccess();
    if (live_.empty() || choice < 50) {
      result = allocate_new();
    } else if (choice < 65) {
      result = copy_one();
    } else {
      result = free_one();
    }
    if (!result) return result;
    return check_stats();
  }

  // Verifies and frees every live allocation, in random order.
  testing::AssertionResult drain() {
    for (const auto& [address, allocation] : live_) {
      if (auto result = check_contents(address, allocation); !result) return result;
    }
    while (!live_.empty()) {
      if (auto result = free_one(); !result) return result;
      if (auto result = check_stats(); !result) return result;
    }
    return testing::AssertionSuccess();
  }

  const DeviceAllocator& allocator() const { return allocator_; }
  int allocations() const { return allocations_; }
  int copies() const { return copies_; }
  int frees() const { return frees_; }
  int out_of_memory() const { return out_of_memory_; }

 private:
  uint64_t random_alignment() { return uint64_t{1} << (random_() % (kMaxAlignmentLog2 + 1)); }

  uint8_t* bytes_at(uint64_t address) { return memory_.data() + (address - kBase); }

  void fill(uint64_t address, uint64_t bytes, uint64_t pattern) {
    uint8_t* data = bytes_at(address);
    for (uint64_t offset = 0; offset < bytes; offset += 8) {
      const uint64_t word = splitmix64(pattern * 0x100000 + offset / 8);
      std::memcpy(data + offset, &word, std::min<uint64_t>(8, bytes - offset));
    }
  }

  uint64_t checksum(uint64_t address, uint64_t bytes) {
    const uint8_t* data = bytes_at(address);
    uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a
    for (uint64_t i = 0; i < bytes; ++i) hash = (hash ^ data[i]) * 0x100000001b3ull;
    return hash;
  }

  // Allocates and checks where the block landed; nullopt when the allocator
  // reported out of memory and that report was right.
  testing::AssertionResult try_allocate(uint64_t bytes, uint64_t alignment, std::optional<uint64_t>& address) {
    address.reset();
    try {
      address = allocator_.allocate(bytes, alignment);
    } catch (const OutOfMemoryError& error) {
      ++out_of_memory_;
      return check_out_of_memory(error, bytes, alignment);
    }
    return check_placement(*address, bytes, alignment);
  }

  testing::AssertionResult allocate_new() {
    const uint64_t bytes = 1 + random_() % kMaxBytes;
    std::optional<uint64_t> address;
    if (auto result = try_allocate(bytes, random_alignment(), address); !result) return result;
    if (!address) return free_one();  // make room, as a real user would
    const uint64_t pattern = ++next_pattern_;
    fill(*address, bytes, pattern);
    live_[*address] = Allocation{bytes, pattern, checksum(*address, bytes)};
    ++allocations_;
    return testing::AssertionSuccess();
  }

  // A device-to-device copy of a live allocation into a new one.
  testing::AssertionResult copy_one() {
    const auto source = pick();
    const Allocation original = source->second;
    std::optional<uint64_t> address;
    if (auto result = try_allocate(original.bytes, random_alignment(), address); !result) return result;
    if (!address) return free_one();
    std::memcpy(bytes_at(*address), bytes_at(source->first), original.bytes);
    live_[*address] = original;
    ++copies_;
    // Equal to the source's checksum from when it was written: both the
    // source and the copy are intact.
    return check_contents(*address, original);
  }

  testing::AssertionResult free_one() {
    const auto victim = pick();
    if (auto result = check_contents(victim->first, victim->second); !result) return result;
    allocator_.free(victim->first);
    live_.erase(victim);
    ++frees_;
    return testing::AssertionSuccess();
  }

  std::map<uint64_t, Allocation>::iterator pick() {
    auto it = live_.begin();
    std::advance(it, static_cast<std::ptrdiff_t>(random_() % live_.size()));
    return it;
  }

  testing::AssertionResult check_contents(uint64_t address, const Allocation& allocation) {
    if (checksum(address, allocation.bytes) != allocation.checksum) {
      return testing::AssertionFailure() << "the " << allocation.bytes << " bytes at 0x" << std::hex << address
                                         << " changed while allocated";
    }
    return testing::AssertionSuccess();
  }

  // Aligned, inside the device, clear of every live block, the right size.
  testing::AssertionResult check_placement(uint64_t address, uint64_t bytes, uint64_t alignment) {
    const uint64_t reserved = reserved_size(bytes);
    if (address % alignment != 0) {
      return testing::AssertionFailure() << "0x" << std::hex << address << " is not aligned to " << std::dec
                                         << alignment;
    }
    if (address < kBase || address + reserved > kBase + kSize) {
      return testing::AssertionFailure() << "0x" << std::hex << address << " is outside device memory";
    }
    if (allocator_.size_of(address) != reserved) {
      return testing::AssertionFailure() << "size_of gives " << allocator_.size_of(address) << ", expected "
                                         << reserved;
    }
    const auto next = live_.lower_bound(address);
    if (next != live_.end() && next->first < address + reserved) {
      return testing::AssertionFailure() << "0x" << std::hex << address << " overlaps the block at 0x" << next->first;
    }
    if (next != live_.begin()) {
      const auto prev = std::prev(next);
      if (prev->first + reserved_size(prev->second.bytes) > address) {
        return testing::AssertionFailure() << "0x" << std::hex << address << " overlaps the block at 0x"
                                           << prev->first;
      }
    }
    return testing::AssertionSuccess();
  }

  // Since free neighbours always merge, the allocator's free blocks are
  // exactly the gaps between live allocations.
  std::vector<Gap> gaps() const {
    std::vector<Gap> result;
    uint64_t cursor = kBase;
    for (const auto& [address, allocation] : live_) {
      if (address > cursor) result.push_back({cursor, address - cursor});
      cursor = address + reserved_size(allocation.bytes);
    }
    if (cursor < kBase + kSize) result.push_back({cursor, kBase + kSize - cursor});
    return result;
  }

  testing::AssertionResult check_stats() {
    uint64_t in_use = 0;
    for (const auto& [address, allocation] : live_) in_use += reserved_size(allocation.bytes);
    uint64_t free_bytes = 0;
    uint64_t largest = 0;
    for (const Gap& gap : gaps()) {
      free_bytes += gap.size;
      largest = std::max(largest, gap.size);
    }
    peak_ = std::max(peak_, in_use);
    const double fragmentation =
        free_bytes == 0 ? 0.0 : 1.0 - static_cast<double>(largest) / static_cast<double>(free_bytes);

    const AllocatorStats stats = allocator_.stats();
    if (free_bytes + in_use != kSize || stats.in_use_bytes != in_use || stats.free_bytes != free_bytes ||
        stats.largest_free_bytes != largest || stats.peak_in_use_bytes != peak_ || stats.allocations != live_.size() ||
        stats.total_allocations != static_cast<uint64_t>(allocations_ + copies_) ||
        stats.total_frees != static_cast<uint64_t>(frees_) || stats.fragmentation != fragmentation) {
      return testing::AssertionFailure()
             << "allocator stats (in use " << stats.in_use_bytes << ", free " << stats.free_bytes << ", largest "
             << stats.largest_free_bytes << ", peak " << stats.peak_in_use_bytes << ", live " << stats.allocations
             << ", fragmentation " << stats.fragmentation << ") differ from the model (in use " << in_use
             << ", free " << free_bytes << ", largest " << largest << ", peak " << peak_ << ", live " << live_.size()
             << ", fragmentation " << fragmentation << ")";
    }
    return testing::AssertionSuccess();
  }

  // The numbers in the error are the model's, and no gap could in fact hold
  // the request once aligned.
  testing::AssertionResult check_out_of_memory(const OutOfMemoryError& error, uint64_t bytes, uint64_t alignment) {
    const uint64_t reserved = reserved_size(bytes);
    const uint64_t align = std::max(alignment, DeviceAllocator::kGranule);
    uint64_t free_bytes = 0;
    uint64_t largest = 0;
    for (const Gap& gap : gaps()) {
      free_bytes += gap.size;
      largest = std::max(largest, gap.size);
      const uint64_t start = (gap.address + align - 1) / align * align;
      if (start + reserved <= gap.address + gap.size) {
        return testing::AssertionFailure() << "out of memory for " << bytes << " bytes aligned to " << alignment
                                           << ", but the gap at 0x" << std::hex << gap.address << " holds them";
      }
    }
    const std::string expected = "out of device memory: requested " + std::to_string(bytes) + " bytes (alignment " +
                                 std::to_string(alignment) + "); " + std::to_string(free_bytes) +
                                 " bytes free, largest free block " + std::to_string(largest) + " bytes";
    if (error.what() != expected || error.requested() != bytes || error.alignment() != alignment ||
        error.free_bytes() != free_bytes || error.largest_free_bytes() != largest) {
      return testing::AssertionFailure() << "got \"" << error.what() << "\", expected \"" << expected << "\"";
    }
    return testing::AssertionSuccess();
  }

  DeviceAllocator allocator_;
  std::vector<uint8_t> memory_;  // the device memory the allocator hands out
  std::mt19937_64 random_;
  std::map<uint64_t, Allocation> live_;  // address -> allocation
  uint64_t next_pattern_ = 0;
  uint64_t peak_ = 0;
  int allocations_ = 0;
  int copies_ = 0;
  int frees_ = 0;
  int out_of_memory_ = 0;
};

TEST(DeviceAllocatorStress, RandomAllocateCopyFreeKeepsEveryByte) {
  Workload workload(0x5eed);
  for (int operation = 0; operation < kOperations; ++operation) {
    ASSERT_TRUE(workload.step()) << "operation " << operation;
  }
  ASSERT_TRUE(workload.drain());

  // The workload did what it is meant to: filled the memory until requests
  // failed, in a mix of all three operations.
  EXPECT_GE(workload.allocations() + workload.copies() + workload.frees(), 10000);
  EXPECT_GT(workload.copies(), 1000);
  EXPECT_GT(workload.out_of_memory(), 100);
  const AllocatorStats stats = workload.allocator().stats();
  EXPECT_EQ(stats.in_use_bytes, 0u);
  EXPECT_EQ(stats.largest_free_bytes, kSize);
  EXPECT_EQ(stats.fragmentation, 0.0);
  EXPECT_GT(stats.peak_in_use_bytes, kSize * 9 / 10);
  RecordProperty("allocations", workload.allocations());
  RecordProperty("copies", workload.copies());
  RecordProperty("frees", workload.frees());
  RecordProperty("out_of_memory", workload.out_of_memory());
}

}  // namespace
}  // namespace npu
