#include "command.h"

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace npu::sim {
namespace {

size_t search_operand(isa::Opcode opcode, const char* name) {
  const isa::InstructionSpec* spec = isa::find_instruction(opcode);
  if (spec != nullptr)
    for (size_t i = 0; i < spec->operands.size(); ++i)
      if (std::strcmp(spec->operands[i].name.c_str(), name) == 0) return i;
  std::fprintf(stderr, "npusim internal error: opcode 0x%02x has no operand '%s'\n", static_cast<unsigned>(opcode), name);
  std::abort();
}

}  // namespace

size_t operand_index(isa::Opcode opcode, const char* name) {
  // The engines ask for every instruction they run, by string literal: the answer is remembered by the
  // literal's address (a literal's text never changes), so that a repeated question costs no search.
  struct Answer {
    const char* name = nullptr;
    isa::Opcode opcode = isa::Opcode::Invalid;
    size_t index = 0;
  };
  thread_local std::array<Answer, 256> answers;
  Answer& answer = answers[(reinterpret_cast<uintptr_t>(name) / 4 ^ static_cast<uintptr_t>(opcode) * 31) % answers.size()];
  if (answer.name == name && answer.opcode == opcode) return answer.index;
  const size_t index = search_operand(opcode, name);
  answer = {name, opcode, index};
  return index;
}

}  // namespace npu::sim
