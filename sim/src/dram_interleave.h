// The DRAM address map: which channel serves an address and where inside it.
// Consecutive interleave blocks go to consecutive channels; with the hashed map
// each group of `channels` blocks is rotated by the digit sum of the group's
// number in base `channels`, so strides of channels^j blocks spread over every
// channel. Either way a group's blocks go to distinct channels, so the address
// inside the channel is the group's number and the offset.
#pragma once

#include <cstdint>

#include "divider.h"
#include "npusim/sim/chip_config.h"

namespace npu::sim {

class DramInterleave {
 public:
  explicit DramInterleave(const DramConfig& config)
      : block_(config.interleave_bytes), channels_(config.channels),
        hashed_(config.address_map == DramAddressMap::Hashed && config.channels > 1) {}
  unsigned channel_of(uint64_t address) const {
    const uint64_t block = block_.quotient(address);
    if (!hashed_) return static_cast<unsigned>(channels_.remainder(block));
    uint64_t digits = 0;
    for (uint64_t group = channels_.quotient(block); group != 0; group = channels_.quotient(group)) digits += channels_.remainder(group);
    return static_cast<unsigned>(channels_.remainder(channels_.remainder(block) + digits));
  }
  // The address inside its channel: the channel-select bits of the interleave dropped.
  uint64_t channel_address(uint64_t address) const {
    return channels_.quotient(block_.quotient(address)) * block_.divisor() + block_.remainder(address);
  }
  // Whether channels are rotated per group of blocks (then two addresses a multiple of channels *
  // interleave apart may be served by different channels).
  bool hashed() const { return hashed_; }
  // Where the interleave block after the one holding `address` starts.
  uint64_t next_block(uint64_t address) const { return address - block_.remainder(address) + block_.divisor(); }

 private:
  Divider block_, channels_;
  bool hashed_;
};

}  // namespace npu::sim
