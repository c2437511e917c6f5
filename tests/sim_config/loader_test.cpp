// Loading by preset name and by path, and the messages of text that is not a
// chip config at all (syntax, unknown fields, wrong types, missing files).
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "config_equal.h"
#include "config_text.h"
#include "npusim/sim/config_loader.h"

namespace npu::sim {
namespace {

using testing::contains;
using testing::edit_preset;
using testing::kSource;
using testing::load_error;
using testing::parse_error;
using testing::position_in;
using testing::starts_with;

// A file in a fresh temporary directory, removed with it.
class TempFile {
 public:
  TempFile(const std::string& name, const std::string& text)
      : dir_(std::filesystem::temp_directory_path() /
             ("npusim_sim_config_test_" + std::to_string(::getpid()) + "_" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / name).string();
    std::ofstream(path_) << text;
  }
  ~TempFile() { std::filesystem::remove_all(dir_); }
  const std::string& path() const { return path_; }
  std::string dir() const { return dir_.string(); }

 private:
  std::filesystem::path dir_;
  std::string path_;
};

TEST(Load, ByPath) {
  const ChipConfig tiny = load_chip_config("tiny");
  const TempFile file("my_chip.pbtxt", dump_chip_config(tiny));
  EXPECT_TRUE(load_chip_config(file.path()) == tiny);
}

TEST(Load, PathWithSlashNeedsNoExtension) {
  const ChipConfig tiny = load_chip_config("tiny");
  const TempFile file("my_chip.txt", dump_chip_config(tiny));
  EXPECT_TRUE(load_chip_config(file.path()) == tiny);
}

// The embedded copy is the file in configs/: a stale build would differ.
TEST(Load, EmbeddedPresetsMatchTheirFiles) {
  for (const std::string& name : preset_names()) {
    SCOPED_TRACE(name);
    const std::string path = std::string(NPUSIM_SOURCE_DIR) + "/configs/" + name + ".pbtxt";
    EXPECT_TRUE(load_chip_config(path) == load_chip_config(name));
  }
}

TEST(Load, MessagesNameTheFile) {
  std::string text = dump_chip_config(load_chip_config("tiny"));
  text.replace(text.find("clock_mhz: 1000"), 15, "clock_mhz: 0");
  const TempFile file("bad.pbtxt", text);
  EXPECT_TRUE(contains(load_error(file.path()), file.path() + ":"));
  EXPECT_TRUE(contains(load_error(file.path()), "clock_mhz must be in 1..10000 (got 0)"));
}

TEST(Load, MissingFile) {
  EXPECT_EQ(load_error("/nonexistent/npusim/chip.pbtxt"),
            "/nonexistent/npusim/chip.pbtxt: cannot open: No such file or directory");
}

TEST(Load, PbtxtExtensionMeansPath) {
  // A name ending in .pbtxt is a file even without a '/', and is looked up in the working directory.
  EXPECT_TRUE(contains(load_error("no_such_dir_npusim.pbtxt"), "no_such_dir_npusim.pbtxt: cannot open"));
}

TEST(Load, Directory) {
  const TempFile file("x.pbtxt", "");
  EXPECT_EQ(load_error(file.dir() + "/"), file.dir() + "/: is a directory, not a chip config");
}

TEST(Load, UnknownPresetListsThePresets) {
  const std::string message = load_error("huge");
  EXPECT_TRUE(contains(message, "unknown chip preset \"huge\""));
  EXPECT_TRUE(contains(message, "tiny, base, large, tpu_v4, tpu_v5e, tpu_v6e"));
}

TEST(Parse, UnknownTopLevelField) {
  std::string text = dump_chip_config(load_chip_config("tiny"));
  const size_t at = text.find("num_cores:");
  text.insert(at, "turbo_mode: 1\n");
  EXPECT_EQ(parse_error(text),
            position_in(text, at) + ": Message type \"npu.sim.pb.ChipConfig\" has no field named \"turbo_mode\".");
}

TEST(Parse, UnknownNestedField) {
  const auto edit = edit_preset("tiny", "dram {", "channels:", "chanels:");
  EXPECT_EQ(parse_error(edit.text),
            edit.where + ": Message type \"npu.sim.pb.DramConfig\" has no field named \"chanels\".");
}

// Tabs count to the next multiple of 8, as in protobuf's own columns.
TEST(Parse, UnknownFieldAfterTab) {
  EXPECT_EQ(parse_error("name: \"x\"\n\tturbo: 1\n"),
            kSource + ":2:9: Message type \"npu.sim.pb.ChipConfig\" has no field named \"turbo\".");
}

TEST(Parse, SyntaxError) {
  const auto edit = edit_preset("tiny", "noc {", "mesh_cols: 1", "mesh_cols 1 }");
  EXPECT_TRUE(starts_with(parse_error(edit.text), kSource + ":"));
  EXPECT_TRUE(starts_with(parse_error("name: \"x\"\ncore {\n"), kSource + ":3:1: "));
}

TEST(Parse, WrongValueType) {
  const auto edit = edit_preset("tiny", "clock_mhz", "1000", "\"fast\"");
  EXPECT_EQ(parse_error(edit.text), edit.where + ": Expected integer, got: \"fast\"");
}

TEST(Parse, NegativeValue) {
  const auto edit = edit_preset("tiny", "num_cores", "1", "-1");
  EXPECT_TRUE(starts_with(parse_error(edit.text), edit.where + ": "));
}

TEST(Parse, ValueTooLargeForField) {
  const auto edit = edit_preset("tiny", "clock_mhz", "1000", "4294967296");
  EXPECT_TRUE(starts_with(parse_error(edit.text), edit.where + ": "));
}

TEST(Parse, FieldGivenTwice) {
  std::string text = dump_chip_config(load_chip_config("tiny"));
  const size_t at = text.size();
  text += "clock_mhz: 500\nnum_cores: 1\n";
  EXPECT_EQ(parse_error(text),
            position_in(text, at) + ": Non-repeated field \"clock_mhz\" is specified multiple times.");
}

TEST(Parse, UnknownEnumValue) {
  const auto edit = edit_preset("tiny", "dataflow", "WEIGHT_STATIONARY", "ROW_STATIONARY");
  EXPECT_EQ(parse_error(edit.text),
            edit.where + ": Unknown enumeration value of \"ROW_STATIONARY\" for field \"dataflow\".");
}

}  // namespace
}  // namespace npu::sim
