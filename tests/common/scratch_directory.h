// Running the command-line tools from tests: each test gets a scratch
// directory of its own (removed afterwards); a run captures the exit status,
// stdout and stderr.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace npu::testing {

struct ToolRun {
  int status;
  std::string out;
  std::string err;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class ScratchDirectory {
 public:
  // Named after the running test, so that parallel tests never share one.
  explicit ScratchDirectory(const std::string& prefix) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string(info->test_suite_name()) + "_" + info->name();
    for (char& c : name)
      if (c == '/') c = '_';
    dir_ = std::filesystem::temp_directory_path() / (prefix + "_" + std::to_string(::getpid()) + "_" + name);
    std::filesystem::create_directories(dir_);
  }
  ~ScratchDirectory() { std::filesystem::remove_all(dir_); }
  ScratchDirectory(const ScratchDirectory&) = delete;
  ScratchDirectory& operator=(const ScratchDirectory&) = delete;

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write(const std::string& name, const std::string& bytes) const { std::ofstream(path(name), std::ios::binary) << bytes; }

  // Runs a shell command with no standard input.
  ToolRun run(const std::string& command) const {
    const std::string out = path("stdout.txt"), err = path("stderr.txt");
    const int raw = std::system((command + " >" + out + " 2>" + err + " </dev/null").c_str());
    return {WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw), read_file(out), read_file(err)};
  }

 private:
  std::filesystem::path dir_;
};

}  // namespace npu::testing
