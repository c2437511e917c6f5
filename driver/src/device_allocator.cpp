#include "npusim/driver/device_allocator.h"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string>

#include "npusim/driver/errors.h"

namespace npu {

namespace {

std::string hex(uint64_t value) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(value));
  return buf;
}

bool is_power_of_two(uint64_t value) { return value != 0 && (value & (value - 1)) == 0; }

}  // namespace

DeviceAllocator::DeviceAllocator(uint64_t base, uint64_t size) : base_(base), size_(size) {
  if (base % kGranule != 0 || size % kGranule != 0) {
    throw std::invalid_argument("device memory range [" + hex(base) + ", +" + std::to_string(size) +
                                ") is not a multiple of " + std::to_string(kGranule) + " bytes");
  }
  if (size > std::numeric_limits<uint64_t>::max() - base) {
    throw std::invalid_argument("device memory range [" + hex(base) + ", +" + std::to_string(size) +
                                ") runs past the end of the address space");
  }
  if (size > 0) insert_free(base, size);
}

uint64_t DeviceAllocator::allocate(uint64_t bytes, uint64_t alignment) {
  if (!is_power_of_two(alignment)) {
    throw std::invalid_argument("allocate: alignment " + std::to_string(alignment) + " is not a power of two");
  }
  const AllocatorStats now = stats();
  if (bytes > size_) throw OutOfMemoryError(bytes, alignment, now.free_bytes, now.largest_free_bytes);
  // Cannot overflow: bytes <= size_, and size_ is a multiple of the granule below 2^64.
  const uint64_t reserved = (std::max<uint64_t>(bytes, 1) + kGranule - 1) / kGranule * kGranule;
  const uint64_t align = std::max(alignment, kGranule);

  // Blocks come in order of size, then address, so the first that fits is the
  // best fit. Only blocks smaller than reserved + align - kGranule can be
  // skipped (their alignment padding leaves too little room), so the walk is
  // short unless many free blocks sit in that narrow band of sizes.
  for (auto it = free_by_size_.lower_bound({reserved, 0}); it != free_by_size_.end(); ++it) {
    const auto [block_size, block_address] = *it;
    const uint64_t padding = (align - (block_address & (align - 1))) & (align - 1);
    if (padding > block_size - reserved) continue;

    const uint64_t address = block_address + padding;
    const uint64_t tail = block_size - padding - reserved;
    erase_free(free_by_address_.find(block_address));
    // The padding in front becomes a free block of its own rather than part of
    // the allocation: its bytes stay usable by a later, less aligned request,
    // in_use counts only what was asked for, and free() finds the block by the
    // address the caller holds. It never touches another free block (its left
    // neighbour was already allocated), so nothing needs merging.
    if (padding > 0) insert_free(block_address, padding);
    if (tail > 0) insert_free(address + reserved, tail);
    live_.emplace(address, reserved);
    in_use_ += reserved;
    peak_in_use_ = std::max(peak_in_use_, in_use_);
    ++total_allocations_;
    return address;
  }
  throw OutOfMemoryError(bytes, alignment, now.free_bytes, now.largest_free_bytes);
}

void DeviceAllocator::free(uint64_t address) {
  const auto live = live_.find(address);
  if (live == live_.end()) {
    // Name the likely mistake: a pointer into a block, or a block already freed.
    const auto after = live_.upper_bound(address);
    if (after != live_.begin()) {
      const auto holder = std::prev(after);
      if (address < holder->first + holder->second) {
        throw std::invalid_argument("free: address " + hex(address) + " is inside the allocation at " +
                                    hex(holder->first) + " (" + std::to_string(holder->second) +
                                    " bytes), not its start");
      }
    }
    throw std::invalid_argument("free: no live allocation at " + hex(address) +
                                " (freed already, or never allocated)");
  }

  uint64_t start = live->first;
  uint64_t size = live->second;
  live_.erase(live);
  in_use_ -= size;
  ++total_frees_;

  // Merge with free neighbours now, so that free blocks never touch and the
  // largest free block is always a single entry.
  const auto next = free_by_address_.find(start + size);
  if (next != free_by_address_.end()) {
    size += next->second;
    erase_free(next);
  }
  const auto after = free_by_address_.lower_bound(start);
  if (after != free_by_address_.begin()) {
    const auto prev = std::prev(after);
    if (prev->first + prev->second == start) {
      start = prev->first;
      size += prev->second;
      erase_free(prev);
    }
  }
  insert_free(start, size);
}

uint64_t DeviceAllocator::size_of(uint64_t address) const {
  const auto live = live_.find(address);
  if (live == live_.end()) throw std::invalid_argument("size_of: no live allocation at " + hex(address));
  return live->second;
}

AllocatorStats DeviceAllocator::stats() const {
  AllocatorStats stats;
  stats.in_use_bytes = in_use_;
  stats.peak_in_use_bytes = peak_in_use_;
  stats.free_bytes = size_ - in_use_;
  stats.largest_free_bytes = free_by_size_.empty() ? 0 : free_by_size_.rbegin()->first;
  stats.allocations = live_.size();
  stats.total_allocations = total_allocations_;
  stats.total_frees = total_frees_;
  if (stats.free_bytes > 0) {
    stats.fragmentation = 1.0 - static_cast<double>(stats.largest_free_bytes) / static_cast<double>(stats.free_bytes);
  }
  return stats;
}

void DeviceAllocator::insert_free(uint64_t address, uint64_t size) {
  free_by_address_.emplace(address, size);
  free_by_size_.emplace(size, address);
}

void DeviceAllocator::erase_free(std::map<uint64_t, uint64_t>::iterator block) {
  free_by_size_.erase({block->second, block->first});
  free_by_address_.erase(block);
}

}  // namespace npu
