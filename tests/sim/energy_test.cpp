// The energy model: its prices against the published figures by hand, a run's action counts against what
// the program does, pricing (ours and Accelergy's format) against a hand sum, and monotonicity.
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "npusim/sim/config_loader.h"
#include "npusim/sim/energy.h"
#include "npusim/sim/simulator.h"
#include "test_chip.h"

namespace npu::sim {
namespace {

using testing::assemble;
using testing::bind_symbols;
using testing::test_config;

uint64_t fj(const EnergyModel& model, Action action) { return model.energy_fj[static_cast<size_t>(action)]; }

// At 45 nm and its nominal 0.9 V every on-die figure is the published one.
ChipConfig reference_config() {
  ChipConfig config = test_config();
  config.technology = {45, 900, {}};
  return config;
}

TEST(Energy, PricesAreThePublishedFiguresAt45nm) {
  const EnergyModel model = energy_model(reference_config());
  // bf16 MAC: Horowitz's fp16 multiply 1.1 pJ x TPUv4i's bf16/fp16 ratio 0.21/0.34, his fp32 add 0.9 pJ,
  // and 16 + 32 register bits at 0.009 pJ (Aladdin): 0.6794 + 0.9 + 0.432 = 2.0114 pJ.
  EXPECT_EQ(fj(model, Action::MacBf16), 2011u);
  EXPECT_EQ(fj(model, Action::MacI8), 200u + 100u + 360u);  // 0.2 + 0.1 + 40 bits x 0.009
  EXPECT_EQ(fj(model, Action::MacF32), 3700u + 900u + 576u);
  // test_config's scratchpad: 64 KiB in 8 banks of 8 KiB: Horowitz's 10 pJ per 8-byte access of 8 KB.
  EXPECT_EQ(fj(model, Action::ScratchpadReadByte), 1250u);
  // Its accumulator: 16 KiB in 4 banks of 4 KiB: 10 pJ x sqrt(1/2) / 8.
  EXPECT_EQ(fj(model, Action::AccumulatorWriteByte), 884u);
  EXPECT_EQ(fj(model, Action::VectorSimple), 900u + 864u);
  EXPECT_EQ(fj(model, Action::ControlInstruction), 70000u);
  // Off the die: O'Connor's HBM2 data movement and I/O, 2.54 pJ/bit; 909 pJ per 1 KiB row opened.
  EXPECT_EQ(fj(model, Action::DramReadByte), 20320u);
  EXPECT_EQ(fj(model, Action::DramActivation), 909000u);
  EXPECT_EQ(fj(model, Action::HostLinkByte), 31120u);  // 1.93 + 1.96 pJ/bit
}

TEST(Energy, NodeAndVoltageScaleOnDieActionsOnly) {
  ChipConfig config = reference_config();
  const EnergyModel at45 = energy_model(config);
  config.technology = {7, 700, {}};
  const EnergyModel at7 = energy_model(config);
  EXPECT_NEAR(static_cast<double>(fj(at7, Action::MacBf16)), 2011.4 * 0.348, 1.0);
  EXPECT_EQ(fj(at7, Action::DramReadByte), fj(at45, Action::DramReadByte));
  config.technology.voltage_mv = 980;
  const EnergyModel high = energy_model(config);
  EXPECT_NEAR(static_cast<double>(fj(high, Action::MacBf16)), 2011.4 * 0.348 * 1.4 * 1.4, 1.0);
  EXPECT_NEAR(high.leakage_w(), at7.leakage_w() * 1.4, at7.leakage_w() * 1e-9);
  EXPECT_NEAR(at7.area_mm2(), at45.area_mm2() * 0.059, at45.area_mm2() * 1e-9);
}

TEST(Energy, ConfigOverridesAnActionsEnergy) {
  ChipConfig config = reference_config();
  config.technology.action_energy_fj = {{"dram.read_byte", 12345}};
  EXPECT_EQ(fj(energy_model(config), Action::DramReadByte), 12345u);
  EXPECT_EQ(fj(energy_model(config), Action::DramWriteByte), 20320u);
}

// 4 KiB in from DRAM, an 8 x 8 x 8 bf16 product, a 64-element add and 64-element exp, 1 KiB back out.
constexpr const char* kProgram = R"(
.buffer src, u8, 4096
.buffer dst, u8, 1024
.code 0
    la r1, src
    la r2, dst
    li r5, 4096
    li r6, 1
    dma.ld ch0, r0, r1, r5, r6, r6, r0, r0, r0, r0
    fence
    li r7, 8
    li r8, 0x40000000
    tc.mm bf16, none, r8, r0, r0, r7, r7, r7
    li r9, 2048
    v.add f32, full, r9, r0, r0, r7, r7
    v.exp f32, r9, r0, r7, r7
    fence
    li r5, 1024
    dma.st ch0, r2, r0, r5, r6, r6, r0, r0, r0, r0
    halt
)";

struct RunCounts {
  ChipStats stats;
  ActionCounts counts;
};

RunCounts run(const ChipConfig& config, const char* source) {
  Simulator simulator(config);
  const isa::Program program = assemble(source);
  simulator.launch(program, 1, bind_symbols(program));
  const RunResult result = simulator.run(10'000'000);
  EXPECT_FALSE(result.fault) << result.fault->to_string();
  RunCounts out{simulator.stats(), {}};
  out.stats.cycles = result.cycles();
  out.counts = action_counts(out.stats);
  return out;
}

uint64_t count(const ActionCounts& counts, Action action) { return counts[static_cast<size_t>(action)]; }

TEST(Energy, ActionCountsAreWhatTheProgramDid) {
  const RunCounts r = run(reference_config(), kProgram);
  EXPECT_EQ(count(r.counts, Action::DramReadByte), 4096u);
  EXPECT_EQ(count(r.counts, Action::DramWriteByte), 1024u);
  EXPECT_EQ(count(r.counts, Action::MacBf16), 512u);
  EXPECT_EQ(count(r.counts, Action::MacF32), 0u);
  EXPECT_EQ(count(r.counts, Action::VectorSimple), 64u);
  EXPECT_EQ(count(r.counts, Action::VectorSpecial), 64u);
  EXPECT_EQ(count(r.counts, Action::DmaDescriptor), 2u);
  EXPECT_GT(count(r.counts, Action::DramActivation), 0u);
  EXPECT_GT(count(r.counts, Action::ControlInstruction), 15u);
  EXPECT_EQ(count(r.counts, Action::ScratchpadWriteByte), r.stats.cores[0].scratchpad_write_bytes);
}

// Accelergy's two files, read back: {component.action: number}.
std::map<std::string, std::string> read_accelergy(const std::string& text, const std::string& value_key) {
  std::map<std::string, std::string> values;
  std::istringstream lines(text);
  std::string line, component, action;
  while (std::getline(lines, line)) {
    const auto value = [&](const std::string& key) { return line.substr(line.find(key) + key.size()); };
    if (line.rfind("  - name: npu.", 0) == 0) component = value("npu.");
    else if (line.rfind("    - name: ", 0) == 0) action = value("- name: ");
    else if (line.find(value_key) != std::string::npos) values[component + "." + action] = value(value_key);
  }
  return values;
}

TEST(Energy, PricingIsTheSumOfCountsTimesEnergiesAsAccelergyWouldSumThem) {
  ChipConfig config = reference_config();
  const RunCounts r = run(config, kProgram);
  const EnergyModel model = energy_model(config);
  const EnergyReport report = price(model, r.counts, r.stats.cycles, config.clock_mhz);

  std::ostringstream counts_yaml, ert_yaml;
  write_accelergy_action_counts(counts_yaml, r.counts);
  write_accelergy_ert(ert_yaml, model);
  const auto counts = read_accelergy(counts_yaml.str(), "counts: ");
  const auto energies = read_accelergy(ert_yaml.str(), "energy: ");
  ASSERT_EQ(counts.size(), kNumActions);
  ASSERT_EQ(energies.size(), kNumActions);
  uint64_t hand_fj = 0;
  for (const auto& [name, n] : counts) {
    // The table prints picojoules to the femtojoule: "2.011  # pJ".
    const std::string pj = energies.at(name).substr(0, energies.at(name).find(' '));
    const uint64_t energy_fj = std::stoull(pj.substr(0, pj.find('.'))) * 1000 + std::stoull(pj.substr(pj.find('.') + 1));
    hand_fj += std::stoull(n) * energy_fj;
  }
  EXPECT_EQ(report.dynamic_fj(), hand_fj);
  // The DRAM's part by hand: 4096 + 1024 bytes at 20.32 pJ, and its rows opened at 909 pJ.
  const uint64_t dram_fj = 5120 * 20320 + count(r.counts, Action::DramActivation) * 909000;
  for (const ComponentEnergy& c : report.components)
    if (c.name == "dram") {
      EXPECT_EQ(c.dynamic_fj, dram_fj);
    }
  // Leakage: each component's power over the run's time.
  const double seconds = static_cast<double>(r.stats.cycles) / 1e9;
  EXPECT_NEAR(report.total_pj, static_cast<double>(hand_fj) / 1000 + model.leakage_w() * seconds * 1e12, 1e-6 * report.total_pj);
}

TEST(Energy, MoreSramMeansMoreAreaAndLeakage) {
  ChipConfig config = reference_config();
  const EnergyModel small = energy_model(config);
  config.core.scratchpad.size_bytes *= 2;
  const EnergyModel large = energy_model(config);
  EXPECT_GT(large.area_mm2(), small.area_mm2());
  EXPECT_GT(large.leakage_w(), small.leakage_w());
  // A bigger bank costs more per byte.
  EXPECT_GT(fj(large, Action::ScratchpadReadByte), fj(small, Action::ScratchpadReadByte));
}

// One simulator per process: the two programs run one after the other on it, each priced by its own counts.
TEST(Energy, MoreDramTrafficMeansMoreDramEnergy) {
  const ChipConfig config = reference_config();
  const EnergyModel model = energy_model(config);
  std::string twice = kProgram;
  twice.replace(twice.find(".buffer src, u8, 4096"), 21, ".buffer src, u8, 8192");
  twice.replace(twice.find("li r5, 4096"), 11, "li r5, 8192");
  Simulator simulator(config);
  std::vector<uint64_t> dram_fj;
  ActionCounts before{};
  for (const std::string& source : {std::string(kProgram), twice}) {
    const isa::Program program = assemble(source);
    simulator.launch(program, 1, bind_symbols(program));
    const RunResult result = simulator.run(10'000'000);
    ASSERT_FALSE(result.fault) << result.fault->to_string();
    const ActionCounts after = action_counts(simulator.stats());
    ActionCounts delta{};
    for (size_t i = 0; i < kNumActions; ++i) delta[i] = after[i] - before[i];
    before = after;
    for (const ComponentEnergy& c : price(model, delta, result.cycles(), config.clock_mhz).components)
      if (c.name == "dram") dram_fj.push_back(c.dynamic_fj);
  }
  ASSERT_EQ(dram_fj.size(), 2u);
  EXPECT_GT(dram_fj[1], dram_fj[0]);
}

TEST(Energy, DramTypesDifferInEnergyPerByte) {
  ChipConfig config = reference_config();
  std::map<DramType, uint64_t> per_byte;
  for (DramType type : {DramType::Hbm2e, DramType::Hbm3, DramType::Lpddr5x, DramType::Ddr5}) {
    config.dram.type = type;
    per_byte[type] = fj(energy_model(config), Action::DramReadByte);
  }
  EXPECT_LT(per_byte[DramType::Hbm2e], per_byte[DramType::Lpddr5x]);
  EXPECT_LT(per_byte[DramType::Lpddr5x], per_byte[DramType::Ddr5]);
}

TEST(Energy, PeakPowerBoundsEveryRunsAveragePower) {
  const ChipConfig config = reference_config();
  const RunCounts r = run(config, kProgram);
  const EnergyReport report = price(energy_model(config), r.counts, r.stats.cycles, config.clock_mhz);
  EXPECT_GT(report.average_power_w, 0.0);
  EXPECT_LT(report.average_power_w, report.peak_power_w);
}

TEST(Energy, ConfigRejectsUnknownNodesAndActions) {
  const std::string base = dump_chip_config(test_config());
  const auto with = [&](const std::string& from, const std::string& to) {
    std::string text = base;
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  try {
    parse_chip_config(with("process_nm: 7", "process_nm: 8"), "x.pbtxt");
    FAIL() << "process_nm 8 was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("technology.process_nm must be one of 45, 32, 20, 16, 14, 10 or 7"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("x.pbtxt:"), std::string::npos) << e.what();
  }
  try {
    parse_chip_config(with("voltage_mv: 700", "voltage_mv: 700\n  action_energy { action: \"dram.reads\" femtojoules: 1 }"), "x.pbtxt");
    FAIL() << "an unknown action was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("must name a priced action"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace npu::sim
