#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "generated_doc.h"

#include "npusim/isa/docgen.h"
#include "npusim/isa/isa.h"
#include "random_program.h"

namespace npu::isa {
namespace {

TEST(InstructionTable, OpcodesAndMnemonicsAreUniqueAndFieldsFitTheWord) {
  std::set<uint8_t> opcodes;
  std::set<std::string> mnemonics;
  for (const InstructionSpec& spec : instruction_table()) {
    EXPECT_NE(static_cast<uint8_t>(spec.opcode), 0) << spec.mnemonic;
    EXPECT_TRUE(opcodes.insert(static_cast<uint8_t>(spec.opcode)).second) << spec.mnemonic;
    EXPECT_TRUE(mnemonics.insert(spec.mnemonic).second) << spec.mnemonic;
    EXPECT_FALSE(spec.semantics.empty()) << spec.mnemonic;
    unsigned next_bit = kOpcodeBits;
    for (const OperandSpec& operand : spec.operands) {
      EXPECT_EQ(operand.shift, next_bit) << spec.mnemonic << " " << operand.name;
      next_bit += operand.bits;
    }
    EXPECT_LE(next_bit, kWordBits) << spec.mnemonic;
    EXPECT_EQ(find_instruction(spec.mnemonic), &spec);
    EXPECT_EQ(find_instruction(spec.opcode), &spec);
  }
  // The chip needs every engine to have instructions.
  for (const Engine engine : {Engine::Control, Engine::Dma, Engine::Tensor, Engine::Vector}) {
    EXPECT_TRUE(std::any_of(instruction_table().begin(), instruction_table().end(),
                            [&](const InstructionSpec& spec) { return spec.engine == engine; }))
        << engine_name(engine);
  }
}

TEST(InstructionTable, EnumeratedKindsMatchTheirFieldWidths) {
  for (const InstructionSpec& spec : instruction_table())
    for (const OperandSpec& operand : spec.operands)
      EXPECT_LE(operand_max(operand), (int64_t{1} << operand.bits) - 1) << spec.mnemonic << " " << operand.name;
  EXPECT_EQ(operand_value_names(OperandKind::DType).size(), 6u);
}

TEST(Encoding, KnownWordsArePinned) {
  // li r3, 256: opcode 0x03, rd=3 at bits 12:8, imm=256 at bits 44:13.
  Instruction li;
  li.opcode = Opcode::LI;
  li.operands[0] = 3;
  li.operands[1] = 256;
  EXPECT_EQ(*encode(li), 0x03u | (3u << 8) | (uint64_t{256} << 13));
  // li r1, -1: the immediate field is all ones, nothing above it.
  li.operands[0] = 1;
  li.operands[1] = -1;
  EXPECT_EQ(*encode(li), 0x03u | (1u << 8) | (uint64_t{0xffffffff} << 13));
  EXPECT_EQ(decode(*encode(li))->operands[1], -1);
}

TEST(Encoding, EncodeDecodeIsIdentityForRandomInstructionsOfEveryOpcode) {
  std::mt19937_64 rng(1);
  const std::vector<int64_t> symbols = {0, 1, 65535};
  for (const InstructionSpec& spec : instruction_table()) {
    for (int i = 0; i < 500; ++i) {
      const Instruction instruction = testing::random_instruction(spec, rng, symbols);
      std::string error;
      const auto word = encode(instruction, &error);
      ASSERT_TRUE(word) << spec.mnemonic << ": " << error;
      const auto decoded = decode(*word, &error);
      ASSERT_TRUE(decoded) << spec.mnemonic << ": " << error;
      EXPECT_EQ(*decoded, instruction) << spec.mnemonic;
      EXPECT_EQ(*encode(*decoded), *word);
    }
  }
}

TEST(Encoding, DecodeEncodeIsIdentityForEveryDecodableRandomWord) {
  std::mt19937_64 rng(2);
  int decodable = 0;
  for (int i = 0; i < 200000; ++i) {
    // Random words with a valid opcode and few high bits, so that many decode.
    const InstructionSpec& spec = instruction_table()[rng() % instruction_table().size()];
    const unsigned used = spec.operands.empty() ? kOpcodeBits : spec.operands.back().shift + spec.operands.back().bits;
    uint64_t word = rng();
    if (rng() % 4 != 0 && used < 64) word &= (uint64_t{1} << used) - 1;
    word = (word & ~uint64_t{0xff}) | static_cast<uint8_t>(spec.opcode);
    const auto decoded = decode(word);
    if (!decoded) continue;
    ++decodable;
    EXPECT_EQ(*encode(*decoded), word);
  }
  EXPECT_GT(decodable, 100000);
}

TEST(Encoding, RejectsOutOfRangeOperandsAndBadWords) {
  Instruction add;
  add.opcode = Opcode::ADD;
  add.operands[0] = 32;  // only r0..r31
  std::string error;
  EXPECT_FALSE(encode(add, &error));
  EXPECT_NE(error.find("out of range"), std::string::npos);

  EXPECT_FALSE(decode(0, &error));  // opcode 0 is never valid
  EXPECT_NE(error.find("invalid opcode 0x00"), std::string::npos);
  EXPECT_FALSE(decode(0xff, &error));
  EXPECT_FALSE(decode(0x02 | (uint64_t{1} << 40), &error));  // halt with a reserved bit set
  EXPECT_NE(error.find("reserved bits"), std::string::npos);
  // v.add with dtype field 7: no such type.
  EXPECT_FALSE(decode(static_cast<uint64_t>(Opcode::V_ADD) | (uint64_t{7} << 8), &error));
  EXPECT_NE(error.find("invalid value"), std::string::npos);
}

TEST(IsaDoc, DocsIsaMdIsGeneratedFromTheCurrentTable) {
  npu::testing::expect_generated_doc_is_current("docs/isa.md", generate_isa_markdown(), "build/bin/npu-isa-doc > docs/isa.md");
}

TEST(IsaDoc, DocumentsEveryInstruction) {
  const std::string doc = generate_isa_markdown();
  for (const InstructionSpec& spec : instruction_table()) {
    EXPECT_NE(doc.find("`" + spec.mnemonic), std::string::npos) << spec.mnemonic;
    std::string escaped;  // as written inside a Markdown table cell
    for (const char c : spec.semantics) escaped += c == '|' ? std::string("\\|") : std::string(1, c);
    EXPECT_NE(doc.find(escaped), std::string::npos) << spec.mnemonic;
  }
}

}  // namespace
}  // namespace npu::isa
