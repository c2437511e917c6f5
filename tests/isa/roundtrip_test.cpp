// assemble -> disassemble -> assemble is the identity, byte for byte.
#include <filesystem>
#include <random>
#include <sstream>

#include <gtest/gtest.h>

#include "npusim/isa/assembler.h"
#include "npusim/isa/disassembler.h"
#include "npusim/isa/printer.h"
#include "random_program.h"

namespace npu::isa {
namespace {

AssembleResult assemble_text(const std::string& text) {
  AssembleOptions options;
  options.read_include = [](const std::string&) { return std::nullopt; };
  return assemble_source(text, "roundtrip.s", options);
}

TEST(RoundTrip, ThousandsOfRandomProgramsReassembleByteIdentically) {
  std::mt19937_64 rng(4);
  for (int i = 0; i < 3000; ++i) {
    const Program program = testing::random_program(rng);
    const std::string original = serialize_program(program);
    std::ostringstream text;
    write_assembly(program, text);
    const AssembleResult result = assemble_text(text.str());
    ASSERT_TRUE(result.program) << "program " << i << ": " << result.errors[0].format() << "\n" << text.str();
    ASSERT_EQ(serialize_program(*result.program), original) << "program " << i << "\n" << text.str();
    // And the file format itself round-trips.
    ASSERT_EQ(serialize_program(parse_program(original)), original);
  }
}

TEST(RoundTrip, EveryExampleAssemblesAndReassemblesByteIdentically) {
  const std::filesystem::path examples = std::filesystem::path(NPUSIM_SOURCE_DIR) / "examples";
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(examples)) {
    if (entry.path().extension() != ".s") continue;
    ++count;
    const AssembleResult first = assemble_file(entry.path().string());
    ASSERT_TRUE(first.program) << entry.path() << ": " << first.errors[0].format();
    std::ostringstream text;
    write_assembly(*first.program, text);
    const AssembleResult second = assemble_text(text.str());
    ASSERT_TRUE(second.program) << entry.path() << ": " << second.errors[0].format();
    EXPECT_EQ(serialize_program(*second.program), serialize_program(*first.program)) << entry.path();
  }
  EXPECT_GE(count, 3) << "examples/ should hold at least the GEMM, softmax and transpose programs";
}

TEST(RoundTrip, ListingShowsSectionsSymbolsAndInstructions) {
  const AssembleResult result = assemble_text(R"(
.input x, f32, 8
.data k, i32
  .values 1, 2
.code 0-3
start: la r1, x
    jmp start
    .word 0xff
)");
  ASSERT_TRUE(result.program) << result.errors[0].format();
  std::ostringstream listing;
  write_listing(*result.program, listing);
  const std::string text = listing.str();
  EXPECT_NE(text.find("npubin format 1, ISA version 2"), std::string::npos) << text;
  EXPECT_NE(text.find("input  x"), std::string::npos) << text;
  EXPECT_NE(text.find("data section 0 (i32, 8 bytes)"), std::string::npos) << text;
  EXPECT_NE(text.find("01 00 00 00 02 00 00 00"), std::string::npos) << text;
  EXPECT_NE(text.find("code section 0 (cores 0-3), 3 instructions"), std::string::npos) << text;
  EXPECT_NE(text.find("start:\n  000000:  0000000000000105  la r1, x"), std::string::npos) << text;
  EXPECT_NE(text.find("jmp start"), std::string::npos) << text;
  EXPECT_NE(text.find("<invalid: invalid opcode 0xff>"), std::string::npos) << text;
}

}  // namespace
}  // namespace npu::isa

namespace {

// A word disassembled alone (a fault record made without its program) still shows every operand; with the
// program, the symbols' names.
TEST(DescribeWord, NamesSymbolsWithTheProgramAndByIndexWithout) {
  const npu::isa::AssembleResult result = npu::isa::assemble_source(".input x, f32, 16\n.code 0\n    la r1, x\n    halt\n", "t.s");
  ASSERT_TRUE(result.program);
  const npu::isa::Program& program = *result.program;
  const uint64_t la = program.code.at(0).words.at(0);
  EXPECT_EQ(npu::isa::describe_word(la, 0, nullptr), "la r1, <symbol 0>");
  const npu::isa::ProgramOperandNamer namer(program, 0);
  EXPECT_EQ(npu::isa::describe_word(la, 0, &namer), "la r1, x");
}

}  // namespace
