// Field-by-field equality of typed configs, for round-trip tests. Kept in the
// tests: the models have no use for comparing configs.
#pragma once

#include <tuple>

#include "npusim/sim/chip_config.h"

namespace npu::sim {

inline bool operator==(const ControlUnitConfig& a, const ControlUnitConfig& b) {
  return std::tie(a.issue_cycles, a.branch_taken_cycles, a.queue_depth) ==
         std::tie(b.issue_cycles, b.branch_taken_cycles, b.queue_depth);
}

inline bool operator==(const TensorCoreConfig& a, const TensorCoreConfig& b) {
  return std::tie(a.rows, a.cols, a.dataflow, a.input_dtypes, a.weight_double_buffering, a.arrays, a.fold_timing) ==
         std::tie(b.rows, b.cols, b.dataflow, b.input_dtypes, b.weight_double_buffering, b.arrays, b.fold_timing);
}

inline bool operator==(const VectorOpCost& a, const VectorOpCost& b) {
  return std::tie(a.latency_cycles, a.cycles_per_vector) == std::tie(b.latency_cycles, b.cycles_per_vector);
}

inline bool operator==(const VectorUnitConfig& a, const VectorUnitConfig& b) {
  return std::tie(a.lanes, a.default_cost, a.op_costs) == std::tie(b.lanes, b.default_cost, b.op_costs);
}

inline bool operator==(const SramConfig& a, const SramConfig& b) {
  return std::tie(a.size_bytes, a.banks, a.bank_width_bytes) == std::tie(b.size_bytes, b.banks, b.bank_width_bytes);
}

inline bool operator==(const DmaConfig& a, const DmaConfig& b) {
  return std::tie(a.channels, a.descriptor_cycles, a.request_bytes, a.max_outstanding_requests, a.step_bytes, a.timing) ==
         std::tie(b.channels, b.descriptor_cycles, b.request_bytes, b.max_outstanding_requests, b.step_bytes, b.timing);
}

inline bool operator==(const CoreConfig& a, const CoreConfig& b) {
  return std::tie(a.control, a.tensor_core, a.vector_unit, a.scratchpad, a.accumulator, a.dma) ==
         std::tie(b.control, b.tensor_core, b.vector_unit, b.scratchpad, b.accumulator, b.dma);
}

inline bool operator==(const MeshPosition& a, const MeshPosition& b) { return a.x == b.x && a.y == b.y; }

inline bool operator==(const NocConfig& a, const NocConfig& b) {
  return std::tie(a.mesh_cols, a.mesh_rows, a.link_bytes_per_cycle, a.router_latency_cycles) ==
         std::tie(b.mesh_cols, b.mesh_rows, b.link_bytes_per_cycle, b.router_latency_cycles);
}

inline bool operator==(const DramConfig& a, const DramConfig& b) {
  return std::tie(a.size_bytes, a.channels, a.bytes_per_cycle_per_channel, a.banks_per_channel, a.row_bytes,
                  a.interleave_bytes, a.row_hit_cycles, a.row_closed_cycles, a.row_conflict_cycles,
                  a.refresh_interval_cycles, a.refresh_cycles, a.ports, a.address_map, a.bank_map) ==
         std::tie(b.size_bytes, b.channels, b.bytes_per_cycle_per_channel, b.banks_per_channel, b.row_bytes,
                  b.interleave_bytes, b.row_hit_cycles, b.row_closed_cycles, b.row_conflict_cycles,
                  b.refresh_interval_cycles, b.refresh_cycles, b.ports, b.address_map, b.bank_map);
}

inline bool operator==(const HostLinkConfig& a, const HostLinkConfig& b) {
  return std::tie(a.bytes_per_cycle, a.latency_cycles, a.port) == std::tie(b.bytes_per_cycle, b.latency_cycles, b.port);
}

inline bool operator==(const CommandProcessorConfig& a, const CommandProcessorConfig& b) {
  return std::tie(a.packet_cycles, a.launch_cycles, a.num_queues) ==
         std::tie(b.packet_cycles, b.launch_cycles, b.num_queues);
}

inline bool operator==(const SimulationConfig& a, const SimulationConfig& b) {
  return a.watchdog_cycles == b.watchdog_cycles && a.counter_window_cycles == b.counter_window_cycles;
}

inline bool operator==(const ChipConfig& a, const ChipConfig& b) {
  return std::tie(a.name, a.clock_mhz, a.num_cores, a.core, a.noc, a.dram, a.host_link, a.command_processor,
                  a.simulation) == std::tie(b.name, b.clock_mhz, b.num_cores, b.core, b.noc, b.dram, b.host_link,
                                            b.command_processor, b.simulation);
}

}  // namespace npu::sim
