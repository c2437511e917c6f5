// A shared resource (DRAM bus, NoC link) as a reservation timeline:
// it is busy until `busy_until`; a use reserves the first free interval at or
// after the time it is ready. This captures contention without simulating
// every cycle (ARCHITECTURE.md §4).
#pragma once

#include <algorithm>
#include <cstdint>

namespace npu::sim {

struct Timeline {
  uint64_t busy_until = 0;
  uint64_t busy_cycles = 0;

  // Reserves `duration` cycles starting at or after `ready`; returns the start.
  uint64_t reserve(uint64_t ready, uint64_t duration) {
    const uint64_t start = std::max(ready, busy_until);
    busy_until = start + duration;
    busy_cycles += duration;
    return start;
  }
};

inline uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

}  // namespace npu::sim
