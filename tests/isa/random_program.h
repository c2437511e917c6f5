// Random valid instructions and programs for the property tests.
#pragma once

#include <random>

#include "npusim/isa/isa.h"
#include "npusim/isa/program.h"

namespace npu::isa::testing {

// A random instruction of the given spec; symbol operands pick among
// `global_symbols` (which must be non-empty if the spec has one).
Instruction random_instruction(const InstructionSpec& spec, std::mt19937_64& rng, const std::vector<int64_t>& global_symbols);

// A random program that passes validate_program: buffers, locals, data
// sections of every dtype (NaNs, infinities and negative zeros included),
// several code sections with labels, instructions of every kind, and raw
// words that do not decode.
Program random_program(std::mt19937_64& rng);

}  // namespace npu::isa::testing
