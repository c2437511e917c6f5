// The system address map seen on the NoC: device DRAM at the bottom, then a
// window per core onto its local memories (scratchpad and accumulator). DMA
// reaches another core's scratchpad through its window (dma.send, and loads
// and stores whose global address lies in a window), and so does the host link:
// the driver's SRAM buffers live there.
#pragma once

#include <cstdint>

namespace npu::sim {

inline constexpr uint64_t kCoreWindowBase = uint64_t{1} << 48;
inline constexpr uint64_t kCoreWindowBytes = uint64_t{1} << 32;

inline constexpr uint64_t core_window_address(unsigned core, uint64_t local_address) {
  return kCoreWindowBase + core * kCoreWindowBytes + local_address;
}

inline constexpr bool in_core_window(uint64_t address) { return address >= kCoreWindowBase; }
inline constexpr unsigned window_core(uint64_t address) { return static_cast<unsigned>((address - kCoreWindowBase) / kCoreWindowBytes); }
inline constexpr uint64_t window_offset(uint64_t address) { return (address - kCoreWindowBase) % kCoreWindowBytes; }

}  // namespace npu::sim
