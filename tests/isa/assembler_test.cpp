#include <map>
#include <random>

#include <gtest/gtest.h>

#include "npusim/isa/assembler.h"
#include "npusim/isa/dtype.h"
#include "npusim/isa/printer.h"
#include "random_program.h"

namespace npu::isa {
namespace {

AssembleResult assemble(const std::string& text, AssembleOptions options = {}) {
  if (!options.read_include) options.read_include = [](const std::string&) { return std::nullopt; };
  return assemble_source(text, "test.s", options);
}

Instruction decode_word(const Program& program, size_t section, size_t pc) {
  return *decode(program.code.at(section).words.at(pc));
}

// Assembles text that must fail with exactly one error; returns it.
Diagnostic single_error(const std::string& text) {
  const AssembleResult result = assemble(text);
  EXPECT_FALSE(result.program);
  EXPECT_EQ(result.errors.size(), 1u);
  if (result.errors.size() != 1)
    for (const Diagnostic& error : result.errors) ADD_FAILURE() << "seen: " << error.format();
  return result.errors.empty() ? Diagnostic{} : result.errors[0];
}

void expect_error(const std::string& text, int line, int column, const std::string& message) {
  const AssembleResult result = assemble(text);
  ASSERT_FALSE(result.program) << text;
  ASSERT_EQ(result.errors.size(), 1u) << result.errors[0].format();
  const Diagnostic& error = result.errors[0];
  EXPECT_EQ(error.file, "test.s");
  EXPECT_EQ(error.line, line) << error.format();
  EXPECT_EQ(error.column, column) << error.format();
  EXPECT_EQ(error.message, message) << error.format();
}

TEST(Assembler, AssemblesInstructionsLabelsAndExpressions) {
  const AssembleResult result = assemble(R"(
.equ TILE, 64
.equ BYTES, TILE * TILE * 2   # bf16 tile
.input a, bf16, 128, 64
.code 0-3
top:  la r1, a
      li r2, BYTES + (1 << 4) - 0x10
      addi r2, r2, -1
      dbnz r2, top
      beq r1, r2, .+2
      halt
)");
  ASSERT_TRUE(result.program) << result.errors[0].format();
  const Program& program = *result.program;
  ASSERT_EQ(program.code.size(), 1u);
  EXPECT_EQ(program.code[0].core_mask, 0xfu);
  EXPECT_EQ(decode_word(program, 0, 0).opcode, Opcode::LA);
  EXPECT_EQ(decode_word(program, 0, 0).operands[1], 0);  // symbol index of a
  EXPECT_EQ(decode_word(program, 0, 1).operands[1], 64 * 64 * 2);
  EXPECT_EQ(decode_word(program, 0, 2).operands[2], -1);
  EXPECT_EQ(decode_word(program, 0, 3).operands[1], -3);  // dbnz at pc 3 back to top (pc 0)
  EXPECT_EQ(decode_word(program, 0, 4).operands[2], 2);
  EXPECT_EQ(program.code[0].words.size(), 6u);
  const Symbol* top = program.find_symbol("top");
  ASSERT_NE(top, nullptr);
  EXPECT_EQ(top->kind, SymbolKind::Label);
  EXPECT_EQ(top->value, 0u);
}

TEST(Assembler, F32BitPatternsInExpressions) {
  const AssembleResult result = assemble(".code 0\n    li r1, f32(1.0)\n    li r2, f32(-0.125)\n    li r3, f32(2)\n    halt\n");
  ASSERT_TRUE(result.program) << result.errors[0].format();
  EXPECT_EQ(decode_word(*result.program, 0, 0).operands[1], 0x3f800000);
  EXPECT_EQ(static_cast<uint32_t>(decode_word(*result.program, 0, 1).operands[1]), 0xbe000000u);
  EXPECT_EQ(decode_word(*result.program, 0, 2).operands[1], 0x40000000);
  expect_error(".code 0\n    li r1, f32(x)\n", 2, 16, "f32() takes a number, got 'x'");
}

TEST(Assembler, NamedRegistersSemaphoresFlagsAndEnums) {
  const AssembleResult result = assemble(R"(
.reg acc_ptr, r7
.sem ready, s3
.code all
    tc.mm bf16, acc|tb, acc_ptr, r1, r2, r3, r4, r5
    tc.mm i8, none, zero, r1, r2, r3, r4, r5
    sync.signal dma2, ready
    v.add f16, col, r1, r2, r3, r4, r5
    v.rsum f32, axis1, r1, r2, r3, r4
    csrr r9, arg7
    dma.ld ch3, r1, r2, r3, r0, r0, r0, r0, r0, r0
    halt
)");
  ASSERT_TRUE(result.program) << result.errors[0].format();
  const Program& program = *result.program;
  EXPECT_EQ(program.code[0].core_mask, kAllCores);
  const Instruction mm = decode_word(program, 0, 0);
  EXPECT_EQ(mm.operands[0], static_cast<int64_t>(DType::BF16));
  EXPECT_EQ(mm.operands[1], kTcAcc | kTcTransposeB);
  EXPECT_EQ(mm.operands[2], 7);
  EXPECT_EQ(decode_word(program, 0, 1).operands[1], 0);
  EXPECT_EQ(decode_word(program, 0, 1).operands[2], 0);
  EXPECT_EQ(decode_word(program, 0, 2).operands[0], static_cast<int64_t>(EngineId::Dma2));
  EXPECT_EQ(decode_word(program, 0, 2).operands[1], 3);
  EXPECT_EQ(decode_word(program, 0, 3).operands[1], static_cast<int64_t>(Bcast::Col));
  EXPECT_EQ(decode_word(program, 0, 4).operands[1], static_cast<int64_t>(Axis::Axis1));
  EXPECT_EQ(decode_word(program, 0, 5).operands[1], static_cast<int64_t>(Csr::Arg0) + 7);
  EXPECT_EQ(decode_word(program, 0, 6).operands[0], 3);
}

TEST(Assembler, TypedDataSectionsAndSymbols) {
  const AssembleResult result = assemble(R"(
.input  x, f32, 4, 8
.output y, i8, 32
.buffer tmp, bf16, 16
.local  XBUF, f32, 0x100, 4, 8
.local  ACC, f32, 0x40000000, 4, 8
.data scale, f32, 2, 2
    .values 1.5, -0.0, inf, nan:0x7fc00001
.data idx, i32
    .values -1, 0x7fffffff, 3 * 4
    .zeros 2
.data half, f16
    .values 65504, 1e-8
.code 0
    li r1, XBUF + 4
    la r2, idx
    halt
)");
  ASSERT_TRUE(result.program) << result.errors[0].format();
  const Program& program = *result.program;
  ASSERT_EQ(program.data.size(), 3u);
  const Symbol* scale = program.find_symbol("scale");
  ASSERT_NE(scale, nullptr);
  EXPECT_EQ(scale->shape, (std::vector<uint64_t>{2, 2}));
  const auto f32_at = [&](const DataSection& section, size_t i) {
    uint32_t bits = 0;
    for (unsigned b = 0; b < 4; ++b) bits |= static_cast<uint32_t>(section.contents[i * 4 + b]) << (8 * b);
    return bits;
  };
  EXPECT_EQ(f32_at(program.data[0], 0), f32_bits(1.5f));
  EXPECT_EQ(f32_at(program.data[0], 1), 0x80000000u);
  EXPECT_EQ(f32_at(program.data[0], 2), 0x7f800000u);
  EXPECT_EQ(f32_at(program.data[0], 3), 0x7fc00001u);
  EXPECT_EQ(program.find_symbol("idx")->shape, (std::vector<uint64_t>{5}));
  EXPECT_EQ(f32_at(program.data[1], 0), 0xffffffffu);
  EXPECT_EQ(f32_at(program.data[1], 2), 12u);
  EXPECT_EQ(f32_at(program.data[1], 4), 0u);
  EXPECT_EQ(program.data[2].contents[0] | (program.data[2].contents[1] << 8), 0x7bff);
  EXPECT_EQ(program.data[2].contents[2] | (program.data[2].contents[3] << 8), 0x0000);  // 1e-8 underflows f16
  EXPECT_EQ(decode_word(program, 0, 0).operands[1], 0x104);
  EXPECT_EQ(decode_word(program, 0, 1).operands[1], 6);  // idx is the seventh symbol
  EXPECT_EQ(program.find_symbol("ACC")->value, kAccumulatorBase);
}

TEST(Assembler, IncludesAreReadRelativeToTheIncludingFile) {
  AssembleOptions options;
  std::map<std::string, std::string> files = {{"lib/consts.s", ".equ K, 7\n.include \"more.s\"\n"}, {"lib/more.s", ".equ J, 9\n"}};
  options.read_include = [&](const std::string& path) -> std::optional<std::string> {
    const auto it = files.find(path);
    if (it == files.end()) return std::nullopt;
    return it->second;
  };
  const AssembleResult result = assemble_source(".include \"lib/consts.s\"\n.code 0\n    li r1, K * J\n    halt\n", "main.s", options);
  ASSERT_TRUE(result.program) << result.errors[0].format();
  EXPECT_EQ(decode_word(*result.program, 0, 0).operands[1], 63);

  files["lib/more.s"] = ".equ J, 9\n    bogus r1\n";
  const AssembleResult bad = assemble_source(".include \"lib/consts.s\"\n.code 0\n", "main.s", options);
  ASSERT_EQ(bad.errors.size(), 1u);
  EXPECT_EQ(bad.errors[0].file, "lib/more.s");
  EXPECT_EQ(bad.errors[0].line, 2);

  files["lib/more.s"] = ".include \"consts.s\"\n";
  const AssembleResult cycle = assemble_source(".include \"lib/consts.s\"\n", "main.s", options);
  ASSERT_FALSE(cycle.errors.empty());
  EXPECT_NE(cycle.errors[0].message.find("includes itself"), std::string::npos) << cycle.errors[0].format();
}

// One test per error class: message text, line and column.
TEST(AssemblerErrors, UnknownMnemonic) {
  expect_error(".code 0\n    v.ad f32, full, r1, r2, r3, r4, r5\n", 2, 5, "unknown instruction 'v.ad'; did you mean 'v.add'?");
  expect_error(".code 0\n  frobnicate\n", 2, 3, "unknown instruction 'frobnicate'");
}

TEST(AssemblerErrors, WrongOperandCount) {
  expect_error(".code 0\n    add r1, r2\n", 2, 5, "'add' takes 3 operands (rd, rs1, rs2), got 2");
  expect_error(".code 0\n    halt r1\n", 2, 10, "'halt' takes 0 operands, got 1");  // points at the extra one
}

TEST(AssemblerErrors, WrongOperandKind) {
  expect_error(".code 0\n    add r1, 5, r3\n", 2, 13, "operand 'rs1' of 'add' must be a register (r0..r31), got '5'");
  expect_error(".code 0\n    add r1, r32, r3\n", 2, 13, "operand 'rs1' of 'add' must be a register (r0..r31), got 'r32'");
  expect_error(".code 0\n    sync.wait dma9, s1\n", 2, 15, "operand 'eng' of 'sync.wait' must be one of ctl, dma0, dma1, dma2, dma3, tc, vec, got 'dma9'");
  expect_error(".code 0\n    sync.wait tc, s32\n", 2, 19, "operand 'sem' of 'sync.wait' must be a semaphore (s0..s31), got 's32'");
  expect_error(".code 0\n    tc.mm bf16, acc|tx, r1, r2, r3, r4, r5, r6\n", 2, 21,
               "operand 'fl' of 'tc.mm' must be tensor-core flags ('none' or acc|ta|tb), got 'tx'");
}

TEST(AssemblerErrors, ImmediateOutOfRange) {
  expect_error(".code 0\n    li r1, 0x80000000\n", 2, 12,
               "immediate 2147483648 out of range for operand 'imm' of 'li': must be a signed 32-bit immediate (-2147483648..2147483647)");
  expect_error(".code 0\n    shli r1, r2, 64\n", 2, 18,
               "immediate 64 out of range for operand 'sh' of 'shli': must be an unsigned 6-bit immediate (0..63)");
  expect_error(".code 0\n    barrier -1\n", 2, 13,
               "immediate -1 out of range for operand 'id' of 'barrier': must be an unsigned 4-bit immediate (0..15)");
}

TEST(AssemblerErrors, UndefinedLabel) {
  expect_error(".code 0\n    jmp nowhere\n", 2, 9, "undefined label 'nowhere'");
}

TEST(AssemblerErrors, DuplicateLabel) {
  expect_error(".code 0\nagain:\n    nop\nagain: halt\n", 4, 1, "duplicate label 'again' (first defined at test.s:2:1)");
}

TEST(AssemblerErrors, LabelInAnotherSection) {
  expect_error(".code 0\nfirst: halt\n.code 1\n    jmp first\n", 4, 9, "label 'first' is in another code section");
}

TEST(AssemblerErrors, MisalignedAddress) {
  expect_error(".local buf, f32, 6, 16\n", 1, 18, "misaligned address 0x6 for 'buf': a f32 region must start at a multiple of 4 bytes");
  expect_error(".local buf, bf16, 0x3fffff00, 1024\n", 1, 19,
               "local region 'buf' runs from the scratchpad into the accumulator (ACC_BASE 0x40000000)");
}

TEST(AssemblerErrors, BadDirective) {
  expect_error(".code 0\n    .align 4\n", 2, 5, "unknown directive '.align'");
  expect_error(".input x, f32\n", 1, 1, "bad directive: .input expects NAME, DTYPE, DIM[, DIM...]");
  expect_error(".input x, f64, 3\n", 1, 11, "expected an element type (f32, bf16, f16, i8, i32, u8), got 'f64'");
  expect_error(".values 1, 2\n", 1, 1, ".values outside a data section (start one with '.data NAME, DTYPE')");
  expect_error(".code 0-70\n", 1, 7, "core range 0-70 is not within 0..63");
  expect_error(".code 0-3\n.code 2\n", 2, 1, "cores of this section already run the code section at test.s:1");
}

TEST(AssemblerErrors, BadDataValues) {
  expect_error(".data t, i8\n  .values 1, 200\n", 2, 14, "value 200 out of range for i8 (-128..127)");
  expect_error(".data t, f32, 3\n  .values 1, 2\n", 1, 1, "data section 't' has 2 values; its shape 3 needs 3");
}

TEST(AssemblerErrors, SymbolsAndConstants) {
  expect_error(".code 0\n    la r1, nothing\n", 2, 12, "undefined symbol 'nothing' (declare it with .input, .output, .buffer or .data)");
  expect_error(".local L, f32, 0, 4\n.code 0\n    la r1, L\n", 3, 12, "'L' is a local region, not a global buffer; load its address with li");
  expect_error(".code 0\n    li r1, SIZE\n", 2, 12, "undefined constant 'SIZE'");
  expect_error(".equ r3, 4\n", 1, 6, "'r3' is a reserved name");
  expect_error(".equ A, 1 / 0\n", 1, 11, "division by zero in expression");
}

TEST(AssemblerErrors, InstructionOutsideCode) {
  expect_error("    halt\n", 1, 5, "instruction outside a code section (start one with '.code CORES')");
}

TEST(AssemblerErrors, UnexpectedCharacter) {
  expect_error(".code 0\n    li r1, 4 $\n", 2, 14, "unexpected character '$'");
}

TEST(AssemblerErrors, AllErrorsAreReportedInSourceOrderUpToTheLimit) {
  std::string text = ".code 0\n";
  for (int i = 0; i < 5; ++i) text += "    jmp missing" + std::to_string(i) + "\n    bogus\n";
  const AssembleResult result = assemble(text);
  ASSERT_EQ(result.errors.size(), 10u);
  for (size_t i = 0; i < result.errors.size(); ++i) EXPECT_EQ(result.errors[i].line, static_cast<int>(i) + 2);

  AssembleOptions limited;
  limited.max_errors = 3;
  const AssembleResult capped = assemble(text, limited);
  ASSERT_EQ(capped.errors.size(), 4u);
  EXPECT_NE(capped.errors.back().message.find("too many errors"), std::string::npos);
}

TEST(AssemblerErrors, FormatShowsTheLineAndACaret) {
  const Diagnostic error = single_error(".code 0\n\tadd r1, 5, r3\n");
  EXPECT_EQ(error.format(), "test.s:2:10: error: operand 'rs1' of 'add' must be a register (r0..r31), got '5'\n"
                            "\tadd r1, 5, r3\n"
                            "\t        ^\n");
}

// print -> parse: every instruction the printer writes assembles to the same word.
TEST(PrintParse, IsIdentityForRandomInstructionsOfEveryOpcode) {
  std::mt19937_64 rng(3);
  std::string declarations;
  for (int i = 0; i < 12; ++i) declarations += ".buffer sym" + std::to_string(i) + ", f32, 4\n";
  struct Namer : OperandNamer {
    std::optional<std::string> symbol_name(int64_t index) const override { return "sym" + std::to_string(index); }
    std::optional<std::string> label_at(int64_t) const override { return std::nullopt; }
  } namer;
  const std::vector<int64_t> symbols = {0, 5, 11};
  for (const InstructionSpec& spec : instruction_table()) {
    std::string text = declarations + ".code 0\n";
    std::vector<uint64_t> words;
    for (int i = 0; i < 100; ++i) {
      const Instruction instruction = testing::random_instruction(spec, rng, symbols);
      words.push_back(*encode(instruction));
      text += "    " + *format_instruction(instruction, static_cast<uint64_t>(i), &namer) + "\n";
    }
    const AssembleResult result = assemble(text);
    ASSERT_TRUE(result.program) << spec.mnemonic << ": " << result.errors[0].format();
    EXPECT_EQ(result.program->code[0].words, words) << spec.mnemonic;
  }
}

}  // namespace
}  // namespace npu::isa
