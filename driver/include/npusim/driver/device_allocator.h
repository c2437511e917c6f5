// Hands out device memory from one address range [base, base + size).
//
// Policy: best fit (the smallest free block that holds the request once
// aligned; the lowest address among equals), and a freed block merges with
// free neighbours at once, so two free blocks never touch. Free blocks are
// kept ordered by address (to find neighbours, O(log n)) and by size (to find
// the best fit, O(log n) plus a short walk past blocks whose alignment padding
// leaves too little room). The same sequence of calls always gives the same
// addresses.
//
// Sizes: every block is a whole number of granules (64 bytes), so a request
// reserves its size rounded up to a granule (0 bytes reserves one granule,
// which gives every allocation an address of its own). "In use" counts these
// reserved sizes, and so in_use_bytes + free_bytes == size() always holds.
// Addresses are at least granule-aligned.
//
// Not thread-safe: the owner (the Device) serializes calls.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <utility>

namespace npu {

struct AllocatorStats {
  uint64_t in_use_bytes = 0;       // reserved bytes of live allocations
  uint64_t peak_in_use_bytes = 0;  // highest in_use_bytes since construction or reset_peak()
  uint64_t free_bytes = 0;
  uint64_t largest_free_bytes = 0;
  uint64_t allocations = 0;        // live allocations
  uint64_t total_allocations = 0;  // successful allocate() calls
  uint64_t total_frees = 0;        // successful free() calls
  double fragmentation = 0.0;      // 1 - largest_free / free; 0 when nothing is free
};

class DeviceAllocator {
 public:
  static constexpr uint64_t kGranule = 64;

  // base and size must be multiples of kGranule, and the range must not wrap
  // around the address space (std::invalid_argument otherwise).
  DeviceAllocator(uint64_t base, uint64_t size);

  // Returns the address of a block of at least `bytes` bytes aligned to
  // `alignment` (a power of two; std::invalid_argument otherwise). Throws
  // npu::OutOfMemoryError when no free block can hold it.
  uint64_t allocate(uint64_t bytes, uint64_t alignment = 256);

  // Returns a block to the free list. std::invalid_argument for an address
  // that is not the start of a live allocation (a double free, a pointer into
  // the middle of a block, an address never handed out).
  void free(uint64_t address);

  // The reserved size of the live allocation at `address` (std::invalid_argument
  // if there is none).
  uint64_t size_of(uint64_t address) const;

  AllocatorStats stats() const;
  void reset_peak() { peak_in_use_ = in_use_; }

  uint64_t base() const { return base_; }
  uint64_t size() const { return size_; }

 private:
  void insert_free(uint64_t address, uint64_t size);
  void erase_free(std::map<uint64_t, uint64_t>::iterator block);

  uint64_t base_;
  uint64_t size_;
  std::map<uint64_t, uint64_t> free_by_address_;          // address -> size
  std::set<std::pair<uint64_t, uint64_t>> free_by_size_;  // (size, address): best fit is the first that fits
  std::map<uint64_t, uint64_t> live_;                     // address -> reserved size
  uint64_t in_use_ = 0;
  uint64_t peak_in_use_ = 0;
  uint64_t total_allocations_ = 0;
  uint64_t total_frees_ = 0;
};

}  // namespace npu
