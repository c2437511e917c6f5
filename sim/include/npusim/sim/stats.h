// Statistics of a run, gathered by the models and written as JSON
// (`npu-sim --stats`) and as a human summary.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace npu::sim {

// Why an engine was not doing useful work while it had something to do.
enum class StallReason : uint8_t { Semaphore, DmaData, SramBankConflict, Noc, Dram, QueueFull, Fence, Barrier, Count };
const char* stall_reason_name(StallReason reason);

struct EngineStats {
  std::string name;
  uint64_t instructions = 0;
  uint64_t busy_cycles = 0;  // cycles spent executing instructions (excluding waits)
  std::array<uint64_t, static_cast<size_t>(StallReason::Count)> stall_cycles{};
};

// Vector ops by what their arithmetic costs (energy.h prices each class).
enum class VectorOpClass : uint8_t { Simple, Multiply, Special, Count };

struct CoreStats {
  std::vector<EngineStats> engines;  // control, dma ch0..chN, tensor core, vector unit
  uint64_t macs = 0;
  std::array<uint64_t, 8> macs_by_dtype{};  // indexed by isa::DType
  uint64_t vector_elements = 0;
  std::array<uint64_t, static_cast<size_t>(VectorOpClass::Count)> vector_elements_by_class{};
  uint64_t scratchpad_read_bytes = 0, scratchpad_write_bytes = 0;
  uint64_t accumulator_read_bytes = 0, accumulator_write_bytes = 0;
  uint64_t finish_cycle = 0;
};

struct DramChannelStats {
  uint64_t read_bytes = 0, write_bytes = 0;
  uint64_t row_hits = 0, row_closed = 0, row_conflicts = 0;
  uint64_t busy_cycles = 0;  // data bus
  uint64_t refreshes = 0;
};

struct NocLinkStats {
  std::string name;  // "(0,0)->(1,0)"
  uint64_t bytes = 0;
  uint64_t busy_cycles = 0;
};

// A memory transfer over the host link, from the cycle it started (the host's request, or the copy
// engine's data ready) to the cycle its last byte arrived.
struct HostTransfer {
  uint64_t start_cycle = 0, end_cycle = 0;
  uint64_t address = 0;  // device side
  uint64_t bytes = 0;
  bool to_device = true;
  bool by_copy_engine = false;  // a COPY packet of a command queue; false: the host's own copy
};

struct EnergyModel;

struct ChipStats {
  uint64_t cycles = 0;  // of the run: launch to the last core finishing
  uint64_t clock_mhz = 0;
  bool timing_only = false;
  std::vector<CoreStats> cores;
  std::vector<DramChannelStats> dram_channels;
  std::vector<NocLinkStats> noc_links;
  uint64_t host_link_bytes = 0;  // memory transfers and register accesses, both directions
  uint64_t peak_macs_per_cycle = 0;

  // With a model (energy.h), also the run's energy, power and area, and its action counts.
  void write_json(std::ostream& out, const EnergyModel* energy = nullptr) const;
  void write_summary(std::ostream& out, const EnergyModel* energy = nullptr) const;
};

}  // namespace npu::sim
