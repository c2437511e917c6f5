#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "npusim/traces/writers.h"
#include "trace_fixtures.h"

namespace npu::trace {
namespace {

using testing::make_chip_trace;
using testing::scratch_path;
namespace fs = std::filesystem;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

size_t files_in(const fs::path& directory) {
  return static_cast<size_t>(std::distance(fs::directory_iterator(directory), fs::directory_iterator()));
}

TEST(WriteTrace, PicksTheFormatFromTheExtension) {
  const Trace trace = make_chip_trace().trace;
  const std::string pftrace = scratch_path("chip.pftrace");
  const std::string perfetto = scratch_path("chip.perfetto-trace");
  const std::string json = scratch_path("chip.json");
  write_trace(trace, pftrace);
  write_trace(trace, perfetto);
  write_trace(trace, json);
  EXPECT_EQ(read_file(pftrace), to_perfetto(trace));
  EXPECT_EQ(read_file(perfetto), to_perfetto(trace));
  EXPECT_EQ(read_file(json), to_chrome_json(trace));
  EXPECT_EQ(files_in(fs::path(json).parent_path()), 3u);  // no temporaries left
}

TEST(WriteTrace, RejectsOtherExtensions) {
  const Trace trace = make_chip_trace().trace;
  for (const char* name : {"chip.txt", "chip", "chip.JSON", "chip.json.gz", "chip.pftrace.bak"}) {
    const std::string path = scratch_path(name);
    EXPECT_THROW(write_trace(trace, path), std::invalid_argument) << name;
    EXPECT_FALSE(fs::exists(path)) << name;
  }
}

TEST(WriteTrace, ReplacesAnExistingFile) {
  const std::string path = scratch_path("chip.json");
  std::ofstream(path) << "old contents that are longer than nothing";
  write_chrome_json(Trace{}, path);
  EXPECT_EQ(read_file(path), to_chrome_json(Trace{}));
  EXPECT_EQ(files_in(fs::path(path).parent_path()), 1u);
}

TEST(WriteTrace, ThrowsWhenTheFileCannotBeWrittenAndLeavesNothing) {
  const std::string directory = scratch_path("missing");
  const std::string path = directory + "/chip.pftrace";
  try {
    write_perfetto(make_chip_trace().trace, path);
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find(path), std::string::npos) << error.what();
  }
  EXPECT_FALSE(fs::exists(directory));
  EXPECT_EQ(files_in(fs::path(directory).parent_path()), 0u);
}

TEST(WriteTrace, AFailedWriteKeepsTheOldFile) {
  // The writer refuses overlapping slices before anything touches the file.
  const std::string path = scratch_path("chip.pftrace");
  std::ofstream(path) << "previous trace";
  const Trace broken = testing::single_thread_trace({{0, 10000, "first"}, {5000, 15000, "second"}});
  EXPECT_THROW(write_trace(broken, path), std::invalid_argument);
  EXPECT_EQ(read_file(path), "previous trace");
  EXPECT_EQ(files_in(fs::path(path).parent_path()), 1u);
}

}  // namespace
}  // namespace npu::trace
