// Fields set by path (npu-sim --set, npu-sweep's axes) and every field listed by path.
#include <gtest/gtest.h>

#include <map>

#include "npusim/sim/config_loader.h"

namespace npu::sim {
namespace {

std::string error_of(const std::vector<std::string>& settings) {
  try {
    load_chip_config("base", settings);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(Overrides, SetScalarsEnumsListsAndListElements) {
  const ChipConfig config = load_chip_config(
      "base", {"core.tensor_core.rows=64", "dram.type=LPDDR5X", "core.tensor_core.input_dtypes=bf16, i8", "dram.ports[1].x=0",
               "name=swept", "technology.process_nm=16"});
  EXPECT_EQ(config.core.tensor_core.rows, 64u);
  EXPECT_EQ(config.dram.type, DramType::Lpddr5x);
  EXPECT_EQ(config.core.tensor_core.input_dtypes, (std::vector<isa::DType>{isa::DType::BF16, isa::DType::I8}));
  EXPECT_EQ(config.dram.ports[1].x, 0u);
  EXPECT_EQ(config.name, "swept");
  EXPECT_EQ(config.technology.process_nm, 16u);
  // What was not set is the preset's.
  EXPECT_EQ(config.core.tensor_core.cols, load_chip_config("base").core.tensor_core.cols);
}

TEST(Overrides, BadPathsAndValuesNameTheSetting) {
  EXPECT_NE(error_of({"core.tensor_core.rowz=64"}).find("--set core.tensor_core.rowz=64: core.tensor_core has no field 'rowz' (fields: rows,"),
            std::string::npos);
  EXPECT_NE(error_of({"core.tensor_core=64"}).find("core.tensor_core is a section"), std::string::npos);
  EXPECT_NE(error_of({"dram.ports[9].x=0"}).find("index 9 is past the 4 listed"), std::string::npos);
  EXPECT_NE(error_of({"dram.type=HBM9"}).find("'HBM9' is not a value of dram.type"), std::string::npos);
  EXPECT_NE(error_of({"core.tensor_core.rows"}).find("expected FIELD.PATH=VALUE"), std::string::npos);
}

TEST(Overrides, ASetValueBreakingARuleIsReportedWithTheSetting) {
  const std::string error = error_of({"core.scratchpad.banks=3"});
  EXPECT_NE(error.find("configs/base.pbtxt:"), std::string::npos) << error;
  EXPECT_NE(error.find("core.scratchpad.banks must be a power of two (got 3)"), std::string::npos) << error;
  EXPECT_NE(error.find("(with --set core.scratchpad.banks=3)"), std::string::npos) << error;
}

TEST(Overrides, EveryFieldHasAPathThatSetsIt) {
  const ChipConfig base = load_chip_config("base");
  std::map<std::string, std::string> fields;
  for (const auto& [path, value] : chip_config_fields(base)) fields[path] = value;
  EXPECT_EQ(fields.at("core.tensor_core.rows"), "128");
  EXPECT_EQ(fields.at("dram.type"), "HBM2E");
  EXPECT_EQ(fields.at("core.tensor_core.input_dtypes"), "bf16,f16,i8");
  EXPECT_EQ(fields.at("dram.ports[3].y"), "1");
  // Setting every field to the value listed gives the same config back.
  std::vector<std::string> settings;
  for (const auto& [path, value] : fields)
    if (path.find("op_costs") == std::string::npos) settings.push_back(path + "=" + value);
  EXPECT_EQ(dump_chip_config(load_chip_config("base", settings)), dump_chip_config(base));
}

}  // namespace
}  // namespace npu::sim
