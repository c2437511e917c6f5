// The command-line tools: exit status 0 / 1 / 2, messages, files left behind.
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <gtest/gtest.h>

#include "scratch_directory.h"

namespace {

namespace fs = std::filesystem;
using npu::testing::ToolRun;

class Cli : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return scratch_.path(name); }
  void write(const std::string& name, const std::string& bytes) const { scratch_.write(name, bytes); }
  static std::string read(const std::string& file) { return npu::testing::read_file(file); }
  ToolRun run(const std::string& command) const { return scratch_.run(command); }

  npu::testing::ScratchDirectory scratch_{"npusim_cli"};
};

const std::string kAs = NPU_AS_PATH;
const std::string kObjdump = NPU_OBJDUMP_PATH;

TEST_F(Cli, HelpAndVersion) {
  for (const std::string& tool : {kAs, kObjdump, std::string(NPU_ISA_DOC_PATH)}) {
    const ToolRun help = run(tool + " --help");
    EXPECT_EQ(help.status, 0) << tool;
    EXPECT_NE(help.out.find("Usage:"), std::string::npos) << tool;
    const ToolRun version = run(tool + " --version");
    EXPECT_EQ(version.status, 0) << tool;
    EXPECT_NE(version.out.find("(npusim)"), std::string::npos) << tool;
  }
  EXPECT_NE(run(kObjdump + " --help").out.find("--asm"), std::string::npos);
}

TEST_F(Cli, BadUsageExitsWithTwo) {
  for (const std::string& command : {kAs, kAs + " --bogus x.s", kObjdump, kObjdump + " a b"}) {
    const ToolRun result = run(command);
    EXPECT_EQ(result.status, 2) << command;
    EXPECT_NE(result.err.find("error:"), std::string::npos) << command;
  }
}

TEST_F(Cli, AssembleDisassembleReassembleIsByteIdentical) {
  write("prog.s", ".input x, f32, 16\n.code 0\nloop: la r1, x\n    dbnz r2, loop\n    halt\n");
  ASSERT_EQ(run(kAs + " " + path("prog.s") + " -o " + path("prog.npubin")).status, 0);
  const ToolRun listing = run(kObjdump + " " + path("prog.npubin"));
  EXPECT_EQ(listing.status, 0);
  EXPECT_NE(listing.out.find("dbnz r2, loop"), std::string::npos) << listing.out;
  const ToolRun assembly = run(kObjdump + " --asm " + path("prog.npubin"));
  ASSERT_EQ(assembly.status, 0);
  write("again.s", assembly.out);
  ASSERT_EQ(run(kAs + " " + path("again.s") + " -o " + path("again.npubin")).status, 0);
  EXPECT_EQ(read(path("again.npubin")), read(path("prog.npubin")));
}

TEST_F(Cli, DefaultOutputNameReplacesTheExtension) {
  write("k.s", ".code 0\n    halt\n");
  ASSERT_EQ(run(kAs + " " + path("k.s")).status, 0);
  EXPECT_TRUE(fs::exists(path("k.npubin")));
}

TEST_F(Cli, ErrorsExitWithOneAndLeaveNoOutputFile) {
  write("bad.s", ".code 0\n    add r1, r2\n    bogus\n");
  write("bad.npubin", "stale output of an earlier build");
  const ToolRun result = run(kAs + " " + path("bad.s") + " -o " + path("bad.npubin"));
  EXPECT_EQ(result.status, 1);
  EXPECT_NE(result.err.find(path("bad.s") + ":2:5: error: 'add' takes 3 operands"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find(path("bad.s") + ":3:5: error: unknown instruction 'bogus'"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("2 errors in"), std::string::npos) << result.err;
  EXPECT_FALSE(fs::exists(path("bad.npubin")));
  EXPECT_FALSE(fs::exists(path("bad.npubin.tmp")));
}

TEST_F(Cli, MissingInputExitsWithOne) {
  const ToolRun as = run(kAs + " " + path("nope.s"));
  EXPECT_EQ(as.status, 1);
  EXPECT_NE(as.err.find("error: cannot open"), std::string::npos);
  const ToolRun objdump = run(kObjdump + " " + path("nope.npubin"));
  EXPECT_EQ(objdump.status, 1);
  EXPECT_NE(objdump.err.find("error: cannot open"), std::string::npos);
}

TEST_F(Cli, MalformedInputNeverCrashesATool) {
  std::mt19937_64 rng(7);
  write("ok.s", ".input x, f32, 4\n.data d, f32\n .values 1, 2\n.code 0\n    la r1, x\n    halt\n");
  ASSERT_EQ(run(kAs + " " + path("ok.s") + " -o " + path("ok.npubin")).status, 0);
  const std::string valid = read(path("ok.npubin"));
  for (int i = 0; i < 40; ++i) {
    std::string bytes;
    if (i % 3 == 0) {
      for (int b = 0; b < 200; ++b) bytes += static_cast<char>(rng());  // random bytes
    } else if (i % 3 == 1) {
      bytes = valid.substr(0, 9 + rng() % (valid.size() - 9));  // truncated program (an empty file is a valid empty source)
    } else {
      bytes = "garbage ,,, text " + std::to_string(rng()) + " \x01\x02 :: .code\n\tli r1,\n";
    }
    write("in.bin", bytes);
    const ToolRun as = run(kAs + " " + path("in.bin") + " -o " + path("out.npubin"));
    EXPECT_EQ(as.status, 1) << "case " << i;
    EXPECT_NE(as.err.find("error:"), std::string::npos) << "case " << i;
    const ToolRun objdump = run(kObjdump + " " + path("in.bin"));
    EXPECT_EQ(objdump.status, 1) << "case " << i;
    EXPECT_NE(objdump.err.find("error:"), std::string::npos) << "case " << i;
  }
}

}  // namespace
