#include "test_chip.h"

#include <stdexcept>

namespace npu::sim::testing {

ChipConfig test_config(unsigned cores, unsigned mesh_cols, unsigned mesh_rows) {
  ChipConfig config;
  config.name = "test";
  config.clock_mhz = 1000;
  config.num_cores = cores;
  config.core.control = {1, 1, 16};
  config.core.tensor_core = {4, 4, Dataflow::WeightStationary, {isa::DType::F32, isa::DType::BF16, isa::DType::F16, isa::DType::I8}};
  config.core.vector_unit.lanes = 8;
  config.core.vector_unit.default_cost = {4, 1};
  config.core.vector_unit.op_costs.assign(256, {4, 1});
  config.core.scratchpad = {64 * 1024, 8, 8};
  config.core.accumulator = {16 * 1024, 4, 16};
  config.core.dma = {2, 5, 64, 64, 1024};
  config.noc = {mesh_cols, mesh_rows, 16, 2};
  config.dram.size_bytes = 16 << 20;
  config.dram.channels = 2;
  config.dram.bytes_per_cycle_per_channel = 32;
  config.dram.banks_per_channel = 4;
  config.dram.row_bytes = 1024;
  config.dram.interleave_bytes = 256;
  config.dram.row_hit_cycles = 10;
  config.dram.row_closed_cycles = 20;
  config.dram.row_conflict_cycles = 30;
  config.dram.refresh_interval_cycles = 0;
  config.dram.refresh_cycles = 0;
  config.dram.ports = {{0, 0}};
  config.simulation.watchdog_cycles = 10'000'000;
  config.simulation.counter_window_cycles = 100;
  config.simulation.quantum_cycles = 100;
  return config;
}

isa::Program assemble(const std::string& source) {
  isa::AssembleOptions options;
  options.read_include = [](const std::string&) { return std::nullopt; };
  const isa::AssembleResult result = isa::assemble_source(source, "test.s", options);
  if (!result.program) throw std::runtime_error(result.errors.at(0).format());
  return *result.program;
}

std::vector<uint64_t> bind_symbols(const isa::Program& program) {
  std::vector<uint64_t> addresses;
  uint64_t next = 0;
  for (const isa::Symbol& symbol : program.symbols) {
    if (!symbol.is_global_buffer()) {
      addresses.push_back(kUnboundSymbol);
      continue;
    }
    addresses.push_back(next);
    next += (symbol.size_bytes() + 0xffff) / 0x10000 * 0x10000;
  }
  return addresses;
}

}  // namespace npu::sim::testing
