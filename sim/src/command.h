// An instruction on its way from the control unit to an engine: register
// operands are captured at dispatch (later register writes do not affect it).
#pragma once

#include <array>
#include <cstdint>

#include "npusim/isa/isa.h"

namespace npu::sim {

struct Command {
  isa::Opcode opcode = isa::Opcode::Invalid;
  std::array<int64_t, isa::kMaxOperands> operands{};  // register operands hold register values
  int64_t pc = -1;
  uint64_t word = 0;            // the instruction word, for fault reports and traces
  uint64_t dispatch_cycle = 0;  // when the control unit handed it over

  uint64_t u(size_t index) const { return static_cast<uint64_t>(operands[index]); }
};

}  // namespace npu::sim

namespace npu::sim {

// Index of a named operand of an opcode, from the instruction table (so the
// engines never hard-code operand positions). `name` is a string literal (the
// answer is remembered by its address). Aborts on a name the opcode does not
// have: that is a programming error.
size_t operand_index(isa::Opcode opcode, const char* name);

inline int64_t operand(const Command& command, const char* name) { return command.operands[operand_index(command.opcode, name)]; }
inline uint64_t uoperand(const Command& command, const char* name) { return static_cast<uint64_t>(operand(command, name)); }

}  // namespace npu::sim
