// Typed chip configuration, built once from a validated protobuf config
// (sim/config/chip_config.proto, the schema and its documentation). Models
// take the part they need by const&. No protobuf types here, so model headers
// stay light.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "npusim/isa/isa.h"

namespace npu::sim {

enum class Dataflow : uint8_t { WeightStationary, OutputStationary };
// How a fold that fills part of the array is timed (chip_config.proto's FoldTiming).
enum class FoldTiming : uint8_t { UsedExtent, FullArray };
// Which channel serves an interleave block (chip_config.proto's DramAddressMap).
enum class DramAddressMap : uint8_t { Interleaved, Hashed };
// Which bank of its channel holds a row (chip_config.proto's DramBankMap).
enum class DramBankMap : uint8_t { RowInterleaved, Xor };
// The DRAM device kind, which names its energy table (chip_config.proto's DramType).
enum class DramType : uint8_t { Hbm2e, Hbm3, Lpddr5x, Ddr5 };
// How DMA transfers between DRAM and a scratchpad are timed (chip_config.proto's DmaTiming).
enum class DmaTiming : uint8_t { PerRequest, PerStep, PerWindow };

struct ControlUnitConfig {
  uint32_t issue_cycles = 1;
  uint32_t branch_taken_cycles = 1;
  uint32_t queue_depth = 16;
};

struct TensorCoreConfig {
  uint32_t rows = 16;
  uint32_t cols = 16;
  Dataflow dataflow = Dataflow::WeightStationary;
  std::vector<isa::DType> input_dtypes;
  bool weight_double_buffering = false;  // weight stationary: next fold's weights load during this fold
  uint32_t arrays = 1;                   // systolic arrays (MXUs), each rows x cols, sharing each tc.mm's folds
  FoldTiming fold_timing = FoldTiming::UsedExtent;
  uint64_t macs_per_cycle() const { return uint64_t{arrays} * rows * cols; }

  // The part of a tc.mm's n columns and row extent (k in weight stationary, m in output stationary) that
  // the slowest array takes: column folds are dealt to the arrays first; where there are fewer of them
  // than arrays, the arrays of a column fold split its row folds too. Shares are whole folds.
  struct ArrayShare {
    uint64_t n, row_extent;
  };
  ArrayShare array_share(uint64_t n, uint64_t row_extent) const {
    const auto share = [](uint64_t extent, uint64_t fold, uint64_t ways) {
      const uint64_t folds = (extent + fold - 1) / fold, per_way = (folds + ways - 1) / ways;
      return extent < per_way * fold ? extent : per_way * fold;
    };
    const uint64_t n_folds = (n + cols - 1) / cols;
    if (arrays <= 1) return {n, row_extent};
    return {share(n, cols, arrays), n_folds < arrays ? share(row_extent, rows, arrays / n_folds) : row_extent};
  }
};

struct VectorOpCost {
  uint32_t latency_cycles = 1;
  uint32_t cycles_per_vector = 1;
};

struct VectorUnitConfig {
  uint32_t lanes = 16;
  VectorOpCost default_cost;
  // Indexed by opcode (256 entries); ops without an entry use default_cost.
  std::vector<VectorOpCost> op_costs;

  const VectorOpCost& cost(isa::Opcode opcode) const;
};

struct SramConfig {
  uint64_t size_bytes = 0;
  uint32_t banks = 1;
  uint32_t bank_width_bytes = 4;
  uint64_t bytes_per_cycle() const { return uint64_t{banks} * bank_width_bytes; }
};

struct DmaConfig {
  uint32_t channels = 4;
  uint32_t descriptor_cycles = 0;
  uint32_t request_bytes = 64;
  uint32_t max_outstanding_requests = 16;
  uint32_t step_bytes = 4096;
  DmaTiming timing = DmaTiming::PerRequest;
};

struct CoreConfig {
  ControlUnitConfig control;
  TensorCoreConfig tensor_core;
  VectorUnitConfig vector_unit;
  SramConfig scratchpad;
  SramConfig accumulator;
  DmaConfig dma;
};

struct MeshPosition {
  uint32_t x = 0;
  uint32_t y = 0;
};

struct NocConfig {
  uint32_t mesh_cols = 1;
  uint32_t mesh_rows = 1;
  uint32_t link_bytes_per_cycle = 32;
  uint32_t router_latency_cycles = 1;
};

struct DramConfig {
  uint64_t size_bytes = 0;
  uint32_t channels = 1;
  uint32_t bytes_per_cycle_per_channel = 32;
  uint32_t banks_per_channel = 8;
  uint32_t row_bytes = 2048;
  uint32_t interleave_bytes = 256;
  uint32_t row_hit_cycles = 14;
  uint32_t row_closed_cycles = 28;
  uint32_t row_conflict_cycles = 42;
  uint32_t refresh_interval_cycles = 0;
  uint32_t refresh_cycles = 0;
  std::vector<MeshPosition> ports;
  DramAddressMap address_map = DramAddressMap::Interleaved;
  DramBankMap bank_map = DramBankMap::RowInterleaved;
  DramType type = DramType::Hbm2e;
};

struct HostLinkConfig {
  uint32_t bytes_per_cycle = 16;
  uint32_t latency_cycles = 500;
  MeshPosition port;
};

struct CommandProcessorConfig {
  uint32_t packet_cycles = 20;
  uint32_t launch_cycles = 100;
  uint32_t num_queues = 4;
};

struct SimulationConfig {
  uint64_t watchdog_cycles = 100'000'000;
  uint32_t counter_window_cycles = 1000;
  // How far a control unit may run ahead of the rest of the chip before it
  // synchronizes (temporal decoupling); it never affects results or cycles
  // of race-free programs, only how often the kernel switches threads.
  uint32_t quantum_cycles = 1000;
};

// What energy, power and area are priced at (sim/include/npusim/sim/energy.h).
struct TechnologyConfig {
  uint32_t process_nm = 7;
  uint32_t voltage_mv = 700;
  // Overrides of the default energy per action: "component.action" to femtojoules.
  std::vector<std::pair<std::string, uint64_t>> action_energy_fj;
};

struct ChipConfig {
  std::string name;
  uint32_t clock_mhz = 1000;
  uint32_t num_cores = 1;
  CoreConfig core;
  NocConfig noc;
  DramConfig dram;
  HostLinkConfig host_link;
  CommandProcessorConfig command_processor;
  SimulationConfig simulation;
  TechnologyConfig technology;

  // Picoseconds per cycle (rounded to the nearest picosecond).
  uint64_t cycle_ps() const { return (1'000'000 + clock_mhz / 2) / clock_mhz; }
  MeshPosition core_position(unsigned core_index) const { return {core_index % noc.mesh_cols, core_index / noc.mesh_cols}; }
};

}  // namespace npu::sim
