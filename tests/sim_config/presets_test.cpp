// The presets load and have the shapes configs/*.pbtxt and ARCHITECTURE.md promise.
#include <gtest/gtest.h>

#include "npusim/isa/isa.h"
#include "npusim/sim/config_loader.h"

namespace npu::sim {
namespace {

using isa::Opcode;

uint64_t peak_macs_per_cycle(const ChipConfig& c) {
  return uint64_t{c.num_cores} * c.core.tensor_core.rows * c.core.tensor_core.cols;
}

uint64_t dram_bytes_per_cycle(const ChipConfig& c) {
  return uint64_t{c.dram.channels} * c.dram.bytes_per_cycle_per_channel;
}

TEST(Presets, NamesInOrder) { EXPECT_EQ(preset_names(), (std::vector<std::string>{"tiny", "base", "large", "tpu_v4", "tpu_v5e", "tpu_v6e"})); }

TEST(Presets, EveryPresetLoads) {
  for (const std::string& name : preset_names()) {
    SCOPED_TRACE(name);
    const ChipConfig config = load_chip_config(name);
    EXPECT_EQ(config.name, name);
    EXPECT_LE(config.num_cores, config.noc.mesh_cols * config.noc.mesh_rows);
    EXPECT_EQ(config.core.vector_unit.op_costs.size(), 256u);
  }
}

TEST(Presets, TinyIsOneSmallCore) {
  const ChipConfig c = load_chip_config("tiny");
  EXPECT_EQ(c.num_cores, 1u);
  EXPECT_EQ(c.noc.mesh_cols, 1u);
  EXPECT_EQ(c.noc.mesh_rows, 1u);
  EXPECT_EQ(c.core.tensor_core.rows, 16u);
  EXPECT_EQ(c.core.tensor_core.cols, 16u);
  EXPECT_EQ(c.core.scratchpad.size_bytes, 256u * 1024);
  EXPECT_EQ(c.core.accumulator.size_bytes, 64u * 1024);
  EXPECT_EQ(c.dram.refresh_interval_cycles, 0u);  // predictable DRAM timing for unit tests
  // f32 matmuls, so tests can check results exactly.
  EXPECT_EQ(c.core.tensor_core.input_dtypes.front(), isa::DType::F32);
}

TEST(Presets, BaseIsFourCoresOnTwoByTwo) {
  const ChipConfig c = load_chip_config("base");
  EXPECT_EQ(c.clock_mhz, 1000u);
  EXPECT_EQ(c.cycle_ps(), 1000u);
  EXPECT_EQ(c.num_cores, 4u);
  EXPECT_EQ(c.noc.mesh_cols, 2u);
  EXPECT_EQ(c.noc.mesh_rows, 2u);
  EXPECT_EQ(c.core.tensor_core.rows, 128u);
  EXPECT_EQ(c.core.tensor_core.cols, 128u);
  EXPECT_EQ(c.core.tensor_core.dataflow, Dataflow::WeightStationary);
  EXPECT_EQ(c.core.scratchpad.size_bytes, 2u * 1024 * 1024);
  EXPECT_EQ(c.core.accumulator.size_bytes, 512u * 1024);
  EXPECT_EQ(c.core.vector_unit.lanes, 256u);
  EXPECT_EQ(c.core.dma.channels, 4u);
  EXPECT_EQ(peak_macs_per_cycle(c), 65536u);
  EXPECT_EQ(dram_bytes_per_cycle(c), 512u);  // 512 GB/s at 1 GHz: 128 MACs per DRAM byte, as TPU v5e
  EXPECT_GT(c.dram.refresh_interval_cycles, c.dram.refresh_cycles);
  EXPECT_EQ(c.host_link.bytes_per_cycle, 32u);
  EXPECT_EQ(c.host_link.latency_cycles, 1000u);
  EXPECT_EQ(c.simulation.watchdog_cycles, 1'000'000'000u);
  EXPECT_EQ(c.simulation.counter_window_cycles, 1000u);
  EXPECT_EQ(c.core_position(3).x, 1u);
  EXPECT_EQ(c.core_position(3).y, 1u);
}

TEST(Presets, BaseTranscendentalsCostMoreThanArithmetic) {
  const VectorUnitConfig& v = load_chip_config("base").core.vector_unit;
  for (Opcode op : {Opcode::V_EXP, Opcode::V_LOG, Opcode::V_TANH, Opcode::V_SIGMOID, Opcode::V_GELU, Opcode::V_SILU,
                    Opcode::V_SIN, Opcode::V_COS, Opcode::V_ERF, Opcode::V_RSQRT, Opcode::V_SQRT, Opcode::V_RECIP, Opcode::V_DIV,
                    Opcode::V_POW}) {
    SCOPED_TRACE(isa::find_instruction(op)->mnemonic);
    for (Opcode cheap : {Opcode::V_ADD, Opcode::V_MUL}) {
      EXPECT_GT(v.cost(op).latency_cycles, v.cost(cheap).latency_cycles);
      EXPECT_GT(v.cost(op).cycles_per_vector, v.cost(cheap).cycles_per_vector);
    }
  }
}

TEST(Presets, LargeIsSixteenCoresWithHbm) {
  const ChipConfig c = load_chip_config("large");
  const ChipConfig base = load_chip_config("base");
  EXPECT_EQ(c.num_cores, 16u);
  EXPECT_EQ(c.noc.mesh_cols, 4u);
  EXPECT_EQ(c.noc.mesh_rows, 4u);
  EXPECT_EQ(c.dram.channels, 16u);
  // 1536 GB/s against 512 (a TPU v6e against a v5e: more MACs per DRAM byte).
  EXPECT_EQ(dram_bytes_per_cycle(c) * c.clock_mhz, 3 * dram_bytes_per_cycle(base) * base.clock_mhz);
  EXPECT_GT(c.dram.ports.size(), 1u);
  for (const MeshPosition& port : c.dram.ports) {
    const bool on_edge = port.x == 0 || port.y == 0 || port.x + 1 == c.noc.mesh_cols || port.y + 1 == c.noc.mesh_rows;
    EXPECT_TRUE(on_edge) << "port (" << port.x << ", " << port.y << ")";
  }
  EXPECT_EQ(c.core.tensor_core.rows, base.core.tensor_core.rows);
  EXPECT_EQ(c.core.vector_unit.lanes, base.core.vector_unit.lanes);
  EXPECT_EQ(c.core.scratchpad.banks, base.core.scratchpad.banks);
}

TEST(VectorCost, UnlistedOpsUseTheDefault) {
  const VectorUnitConfig& v = load_chip_config("base").core.vector_unit;
  EXPECT_EQ(v.cost(Opcode::V_ADD).latency_cycles, v.default_cost.latency_cycles);
  EXPECT_EQ(v.cost(Opcode::V_ADD).cycles_per_vector, v.default_cost.cycles_per_vector);
}

// v.expsum is v.exp's special-function pass: unlisted, it takes v.exp's cycles per vector and v.exp's and
// v.rsum's latencies, so that a config that prices its transcendentals prices it too.
TEST(VectorCost, ExpSumFollowsExpUnlessListed) {
  for (const char* preset : {"tiny", "base", "large"}) {
    SCOPED_TRACE(preset);
    const VectorUnitConfig& v = load_chip_config(preset).core.vector_unit;
    EXPECT_EQ(v.cost(Opcode::V_EXPSUM).cycles_per_vector, v.cost(Opcode::V_EXP).cycles_per_vector);
    EXPECT_EQ(v.cost(Opcode::V_EXPSUM).latency_cycles, v.cost(Opcode::V_EXP).latency_cycles + v.cost(Opcode::V_RSUM).latency_cycles);
  }
  std::string text = dump_chip_config(load_chip_config("base"));  // lists every vector op's cost
  const std::string row = "op: \"v.expsum\" latency_cycles: 26 cycles_per_vector: 4";
  ASSERT_NE(text.find(row), std::string::npos) << text;
  text.replace(text.find(row), row.size(), "op: \"v.expsum\" latency_cycles: 3 cycles_per_vector: 2");
  const VectorUnitConfig listed = parse_chip_config(text, "listed").core.vector_unit;
  EXPECT_EQ(listed.cost(Opcode::V_EXPSUM).latency_cycles, 3u);
  EXPECT_EQ(listed.cost(Opcode::V_EXPSUM).cycles_per_vector, 2u);
}

TEST(VectorCost, EmptyTableMeansDefaultForEveryOp) {
  VectorUnitConfig v;
  v.default_cost = {7, 3};
  EXPECT_EQ(v.cost(Opcode::V_EXP).latency_cycles, 7u);
  EXPECT_EQ(v.cost(Opcode::V_EXP).cycles_per_vector, 3u);
}

}  // namespace
}  // namespace npu::sim
