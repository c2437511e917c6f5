// Instruction and data-value text, in the syntax the assembler reads back.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "npusim/isa/isa.h"
#include "npusim/isa/program.h"

namespace npu::isa {

// Names for operands that refer to the program: buffer symbols and labels.
class OperandNamer {
 public:
  virtual ~OperandNamer() = default;
  virtual std::optional<std::string> symbol_name(int64_t index) const = 0;
  virtual std::optional<std::string> label_at(int64_t pc) const = 0;
};

// Names operands from a program's symbol table, for one code section.
class ProgramOperandNamer : public OperandNamer {
 public:
  ProgramOperandNamer(const Program& program, uint32_t section) : program_(program), section_(section) {}
  std::optional<std::string> symbol_name(int64_t index) const override;
  std::optional<std::string> label_at(int64_t pc) const override;

 private:
  const Program& program_;
  uint32_t section_;
};

// "mnemonic op, op, ..." for the instruction at `pc`. Branch targets print as
// the first label at the target, else as ".+N" / ".-N". Returns nullopt when a
// symbol operand has no name (the word then only prints as ".word").
std::optional<std::string> format_instruction(const Instruction& instruction, uint64_t pc, const OperandNamer* namer);

// Decodes and formats a word; undecodable words give "<invalid: reason>".
std::string describe_word(uint64_t word, uint64_t pc, const OperandNamer* namer);

// One element of a data section as assembler text (exact round trip:
// NaNs print as nan:0xBITS, other floats with enough digits).
std::string format_data_value(DType dtype, const uint8_t* element);

}  // namespace npu::isa
