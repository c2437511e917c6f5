// ProgramBuilder: what it emits is what the assembler would, labels resolve
// both ways, 64-bit constants load, and misuse is a logic error.
#include <gtest/gtest.h>

#include "npusim/compiler/program_builder.h"
#include "npusim/isa/assembler.h"
#include "npusim/isa/isa.h"

namespace npu::compiler {
namespace {

TEST(ProgramBuilder, EmitsWhatTheAssemblerAssembles) {
  ProgramBuilder b("test");
  b.input("x", isa::DType::F32, {16});
  const Reg r = b.reg(), n = b.reg();
  b.emit(isa::Opcode::LA, {r.index, 0});
  b.li(n, 3);
  const Label top = b.label(), out = b.label();
  b.bind(top);
  b.branch(isa::Opcode::BEQ, {n.index, kZero.index}, out);
  b.addi(r, r, 4);
  b.branch(isa::Opcode::DBNZ, {n.index}, top);
  b.bind(out);
  b.emit(isa::Opcode::HALT, {});
  const isa::Program built = b.finish();
  const auto assembled = isa::assemble_source(
      ".input x, f32, 16\n.code all\n    la r1, x\n    li r2, 3\ntop:\n    beq r2, r0, out\n    addi r1, r1, 4\n    dbnz r2, top\nout:\n    halt\n", "t.s");
  ASSERT_TRUE(assembled.program);
  EXPECT_EQ(built.code.at(0).words, assembled.program->code.at(0).words);
  EXPECT_EQ(built.symbols.size(), 1u);
}

TEST(ProgramBuilder, LoadsAny64BitConstant) {
  ProgramBuilder b("test");
  b.li(Reg{5}, 0x123456789abcdef0);
  b.li(Reg{6}, -7);
  EXPECT_EQ(b.instructions(), 3u);  // li + lih, then one li
}

TEST(ProgramBuilder, MisuseIsALogicError) {
  ProgramBuilder b("test");
  EXPECT_THROW(b.emit(isa::Opcode::ADD, {1, 2}), std::logic_error);           // operand count
  EXPECT_THROW(b.emit(isa::Opcode::SHLI, {1, 2, 64}), std::logic_error);      // uimm6 out of range
  EXPECT_THROW(b.branch(isa::Opcode::ADD, {1, 2}, b.label()), std::logic_error);
  for (int i = 0; i < 31; ++i) b.reg();
  EXPECT_THROW(b.reg(), std::logic_error);
  ProgramBuilder dangling("test");
  dangling.branch(isa::Opcode::JMP, {}, dangling.label());
  EXPECT_THROW(dangling.finish(), std::logic_error);
}

}  // namespace
}  // namespace npu::compiler
