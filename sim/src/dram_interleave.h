// The DRAM address map: which channel serves an address (consecutive
// interleave blocks go to consecutive channels) and where inside it.
#pragma once

#include <cstdint>

#include "divider.h"
#include "npusim/sim/chip_config.h"

namespace npu::sim {

class DramInterleave {
 public:
  explicit DramInterleave(const DramConfig& config) : block_(config.interleave_bytes), channels_(config.channels) {}
  unsigned channel_of(uint64_t address) const { return static_cast<unsigned>(channels_.remainder(block_.quotient(address))); }
  // The address inside its channel: the channel-select bits of the interleave dropped.
  uint64_t channel_address(uint64_t address) const {
    return channels_.quotient(block_.quotient(address)) * block_.divisor() + block_.remainder(address);
  }
  // Where the interleave block after the one holding `address` starts.
  uint64_t next_block(uint64_t address) const { return address - block_.remainder(address) + block_.divisor(); }

 private:
  Divider block_, channels_;
};

}  // namespace npu::sim
