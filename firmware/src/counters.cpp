#include "npusim/firmware/counters.h"

#include <algorithm>

namespace npu::firmware {

std::vector<uint64_t> encode_counter_snapshot(const CounterSnapshot& s) {
  std::vector<uint64_t> words = {s.cycle, s.cores.size(), s.dram_read_bytes, s.dram_write_bytes, s.dram_row_hits, s.dram_accesses};
  words.insert(words.end(), s.actions.begin(), s.actions.end());
  for (const CoreCounters& c : s.cores) {
    const uint64_t core[] = {c.instructions, c.macs, c.tensor_busy_cycles, c.vector_busy_cycles, c.dma_busy_cycles, c.stall_cycles};
    words.insert(words.end(), std::begin(core), std::end(core));
  }
  return words;
}

CounterSnapshot decode_counter_snapshot(const uint64_t* words, size_t count) {
  CounterSnapshot s;
  if (count < kChipCounterWords + sim::kNumActions) return s;
  const auto chip = [&](ChipCounter c) { return words[static_cast<size_t>(c)]; };
  s.cycle = chip(ChipCounter::Cycle);
  s.dram_read_bytes = chip(ChipCounter::DramReadBytes);
  s.dram_write_bytes = chip(ChipCounter::DramWriteBytes);
  s.dram_row_hits = chip(ChipCounter::DramRowHits);
  s.dram_accesses = chip(ChipCounter::DramAccesses);
  std::copy(words + kChipCounterWords, words + kChipCounterWords + sim::kNumActions, s.actions.begin());
  const size_t first_core = kChipCounterWords + sim::kNumActions;
  const uint64_t cores = std::min<uint64_t>(chip(ChipCounter::Cores), (count - first_core) / kCounterWordsPerCore);
  for (uint64_t i = 0; i < cores; ++i) {
    const uint64_t* w = words + first_core + i * kCounterWordsPerCore;
    const auto core = [&](CoreCounter c) { return w[static_cast<size_t>(c)]; };
    s.cores.push_back({core(CoreCounter::Instructions), core(CoreCounter::Macs), core(CoreCounter::TensorBusyCycles),
                       core(CoreCounter::VectorBusyCycles), core(CoreCounter::DmaBusyCycles), core(CoreCounter::StallCycles)});
  }
  return s;
}

}  // namespace npu::firmware
