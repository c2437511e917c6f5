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

TEST_F(Cli, ErrorsExitWithOneAndLeaveTheOutputAsItWas) {
  write("bad.s", ".code 0\n    add r1, r2\n    bogus\n");
  write("notes.txt", "a file that -o named by mistake");
  const ToolRun result = run(kAs + " " + path("bad.s") + " -o " + path("notes.txt"));
  EXPECT_EQ(result.status, 1);
  EXPECT_NE(result.err.find(path("bad.s") + ":2:5: error: 'add' takes 3 operands"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find(path("bad.s") + ":3:5: error: unknown instruction 'bogus'"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("2 errors in"), std::string::npos) << result.err;
  EXPECT_EQ(read(path("notes.txt")), "a file that -o named by mistake");
  const ToolRun fresh = run(kAs + " " + path("bad.s") + " -o " + path("new.npubin"));
  EXPECT_EQ(fresh.status, 1);
  EXPECT_FALSE(fs::exists(path("new.npubin")));
  for (const auto& entry : fs::directory_iterator(scratch_.path("")))
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << "a temporary left behind: " << entry.path();
}

TEST_F(Cli, AnOutputThatIsTheInputIsRefused) {
  write("p.s", ".code 0\n    halt\n");
  ASSERT_EQ(run(kAs + " " + path("p.s") + " -o " + path("p.npubin")).status, 0);
  const std::string program = read(path("p.npubin"));
  for (const std::string& command : {kAs + " " + path("p.s") + " -o " + path("p.s"), kAs + " " + path("p.npubin")}) {
    const ToolRun result = run(command);
    EXPECT_EQ(result.status, 2) << command;
    EXPECT_NE(result.err.find("is the input file"), std::string::npos) << result.err;
  }
  EXPECT_EQ(read(path("p.s")), ".code 0\n    halt\n");
  EXPECT_EQ(read(path("p.npubin")), program);
}

TEST_F(Cli, AnOutputThatIsNotARegularFileIsRefusedNotReplaced) {
  write("p.s", ".code 0\n    halt\n");
  fs::create_directory(path("dir"));
  for (const std::string& output : {std::string("/dev/null"), path("dir")}) {
    const ToolRun result = run(kAs + " " + path("p.s") + " -o " + output);
    EXPECT_EQ(result.status, 1) << output;
    EXPECT_NE(result.err.find("not a regular file"), std::string::npos) << result.err;
  }
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  EXPECT_TRUE(fs::is_directory(path("dir")));
  EXPECT_EQ(run(kAs + " " + path("p.s") + " -o " + path("missing/p.npubin")).status, 1);
}

TEST_F(Cli, AFailedWriteToTheStandardOutputIsExitStatusOne) {
  write("p.s", ".code 0\n    halt\n");
  ASSERT_EQ(run(kAs + " " + path("p.s") + " -o " + path("p.npubin")).status, 0);
  for (const std::string& command : {kObjdump + " " + path("p.npubin"), std::string(NPU_ISA_DOC_PATH)}) {
    const ToolRun result = run("sh -c '" + command + " >/dev/full'");
    EXPECT_EQ(result.status, 1) << command;
    EXPECT_NE(result.err.find("cannot write the standard output"), std::string::npos) << result.err;
  }
}

TEST_F(Cli, HostileSourcesAreErrorsNotCrashes) {
  // Deep nesting would overflow the parser's stack; a directory or an endless device is no source.
  write("parens.s", ".equ X, " + std::string(30000, '(') + "1" + std::string(30000, ')') + "\n");
  write("minus.s", ".equ X, " + std::string(50000, '-') + "1\n");
  fs::create_directory(path("src_dir"));
  write("includes_dir.s", ".include \"src_dir\"\n");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {path("parens.s"), "nested more than 256 deep"},
      {path("minus.s"), "nested more than 256 deep"},
      {path("src_dir"), "is a directory"},
      {path("includes_dir.s"), "is a directory"},
      {"/dev/zero", "MiB a source file may be"},
  };
  for (const auto& [input, message] : cases) {
    const ToolRun result = run(kAs + " " + input + " -o " + path("out.npubin"));
    EXPECT_EQ(result.status, 1) << input;
    EXPECT_NE(result.err.find(message), std::string::npos) << input << ": " << result.err;
  }
  EXPECT_FALSE(fs::exists(path("out.npubin")));
}

TEST_F(Cli, MissingInputExitsWithOne) {
  const ToolRun as = run(kAs + " " + path("nope.s"));
  EXPECT_EQ(as.status, 1);
  EXPECT_NE(as.err.find("error: cannot read"), std::string::npos) << as.err;
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
