// The system address map seen on the NoC: device DRAM at the bottom, then a
// window per core onto its local memories (scratchpad and accumulator), used
// by core-to-core transfers.
#pragma once

#include <cstdint>

namespace npu::sim {

inline constexpr uint64_t kCoreWindowBase = uint64_t{1} << 48;
inline constexpr uint64_t kCoreWindowBytes = uint64_t{1} << 32;

inline uint64_t core_window_address(unsigned core, uint64_t local_address) {
  return kCoreWindowBase + core * kCoreWindowBytes + local_address;
}

}  // namespace npu::sim
