// The chip's peak rates, all cores and DRAM channels together: what rooflines are drawn against, what
// the compiler's estimates start from, and what traces and the Python bindings report.
#pragma once

#include <cstdint>

#include "npusim/sim/chip_config.h"

namespace npu::sim {

inline uint64_t peak_macs_per_cycle(const ChipConfig& config) { return uint64_t{config.num_cores} * config.core.tensor_core.macs_per_cycle(); }
inline uint64_t peak_vector_elements_per_cycle(const ChipConfig& config) { return uint64_t{config.num_cores} * config.core.vector_unit.lanes; }
inline uint64_t peak_dram_bytes_per_cycle(const ChipConfig& config) {
  return uint64_t{config.dram.channels} * config.dram.bytes_per_cycle_per_channel;
}

}  // namespace npu::sim
