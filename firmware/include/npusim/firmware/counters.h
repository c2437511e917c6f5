// The device counter snapshot a COUNTERS packet writes: little-endian u64
// words, the chip-wide ones first, then the energy model's action counts
// (npusim/sim/actions.def, in its order), then kCounterWordsPerCore per core. The
// firmware encodes it, the driver decodes it; both use these definitions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "npusim/sim/energy.h"

namespace npu::firmware {

// Chip-wide words, in order.
enum class ChipCounter : size_t { Cycle, Cores, DramReadBytes, DramWriteBytes, DramRowHits, DramAccesses, Count };
// Per-core words, in order.
enum class CoreCounter : size_t { Instructions, Macs, TensorBusyCycles, VectorBusyCycles, DmaBusyCycles, StallCycles, Count };

inline constexpr size_t kChipCounterWords = static_cast<size_t>(ChipCounter::Count);
inline constexpr size_t kCounterWordsPerCore = static_cast<size_t>(CoreCounter::Count);

struct CoreCounters {
  uint64_t instructions = 0;        // all engines
  uint64_t macs = 0;
  uint64_t tensor_busy_cycles = 0;
  uint64_t vector_busy_cycles = 0;
  uint64_t dma_busy_cycles = 0;     // summed over the channels
  uint64_t stall_cycles = 0;        // summed over engines and reasons
};

struct CounterSnapshot {
  uint64_t cycle = 0;
  uint64_t dram_read_bytes = 0, dram_write_bytes = 0;
  uint64_t dram_row_hits = 0, dram_accesses = 0;
  sim::ActionCounts actions{};  // since the device opened: price the difference of two snapshots
  std::vector<CoreCounters> cores;
};

inline size_t counter_snapshot_words(size_t cores) { return kChipCounterWords + sim::kNumActions + kCounterWordsPerCore * cores; }

std::vector<uint64_t> encode_counter_snapshot(const CounterSnapshot& snapshot);
// Decodes `count` words (a snapshot cut short keeps the cores it has whole).
CounterSnapshot decode_counter_snapshot(const uint64_t* words, size_t count);

}  // namespace npu::firmware
