#include "command.h"

#include <cstdlib>
#include <cstring>
#include <cstdio>

namespace npu::sim {

size_t operand_index(isa::Opcode opcode, const char* name) {
  const isa::InstructionSpec* spec = isa::find_instruction(opcode);
  if (spec != nullptr)
    for (size_t i = 0; i < spec->operands.size(); ++i)
      if (std::strcmp(spec->operands[i].name.c_str(), name) == 0) return i;
  std::fprintf(stderr, "npusim internal error: opcode 0x%02x has no operand '%s'\n", static_cast<unsigned>(opcode), name);
  std::abort();
}

}  // namespace npu::sim
