// dump_chip_config shows the effective config, and parsing it gives the same config.
#include <gtest/gtest.h>

#include "config_equal.h"
#include "config_text.h"
#include "npusim/isa/isa.h"
#include "npusim/sim/config_loader.h"

namespace npu::sim {
namespace {

using testing::contains;

TEST(RoundTrip, EveryPreset) {
  for (const std::string& name : preset_names()) {
    SCOPED_TRACE(name);
    const ChipConfig config = load_chip_config(name);
    const std::string text = dump_chip_config(config);
    const ChipConfig again = parse_chip_config(text, "dump of " + name);
    EXPECT_TRUE(again == config) << text;
    EXPECT_EQ(dump_chip_config(again), text);
  }
}

TEST(RoundTrip, EditedConfigKeepsTheEdit) {
  ChipConfig config = load_chip_config("base");
  config.core.vector_unit.op_costs[static_cast<uint8_t>(isa::Opcode::V_ADD)] = {9, 2};
  config.core.tensor_core.dataflow = Dataflow::OutputStationary;
  config.core.tensor_core.weight_double_buffering = false;  // an output-stationary array holds no weights
  config.dram.refresh_interval_cycles = 0;
  config.dram.refresh_cycles = 0;
  config.core.dma.timing = DmaTiming::PerStep;
  config.core.tensor_core.arrays = 4;
  config.core.tensor_core.fold_timing = FoldTiming::FullArray;
  config.dram.address_map = DramAddressMap::Hashed;
  config.dram.bank_map = DramBankMap::Xor;
  const std::string text = dump_chip_config(config);
  EXPECT_TRUE(contains(text, "fold_timing: FULL_ARRAY")) << text;
  EXPECT_TRUE(contains(text, "address_map: HASHED")) << text;
  EXPECT_TRUE(contains(text, "bank_map: XOR")) << text;
  EXPECT_TRUE(contains(text, "timing: PER_STEP")) << text;
  const ChipConfig again = parse_chip_config(text, "dump");
  EXPECT_TRUE(again == config);
  EXPECT_EQ(again.core.dma.timing, DmaTiming::PerStep);
  EXPECT_EQ(again.core.vector_unit.cost(isa::Opcode::V_ADD).latency_cycles, 9u);
  config.core.dma.timing = DmaTiming::PerWindow;
  const std::string window_text = dump_chip_config(config);
  EXPECT_TRUE(contains(window_text, "timing: PER_WINDOW")) << window_text;
  EXPECT_EQ(parse_chip_config(window_text, "dump").core.dma.timing, DmaTiming::PerWindow);
}

TEST(Dump, ShowsZeroFields) {
  const std::string text = dump_chip_config(load_chip_config("tiny"));
  EXPECT_TRUE(contains(text, "refresh_interval_cycles: 0\n"));
  EXPECT_TRUE(contains(text, "port { x: 0 y: 0 }"));
}

TEST(Dump, ListsTheCostOfEveryVectorOp) {
  const std::string text = dump_chip_config(load_chip_config("base"));
  for (const isa::InstructionSpec& spec : isa::instruction_table()) {
    if (spec.engine != isa::Engine::Vector) continue;
    EXPECT_TRUE(contains(text, "op: \"" + spec.mnemonic + "\""));
  }
  EXPECT_TRUE(contains(text, "op_costs { op: \"v.exp\" latency_cycles: 16 cycles_per_vector: 4 }"));
}

}  // namespace
}  // namespace npu::sim
