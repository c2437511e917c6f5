#include "random_program.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "npusim/isa/dtype.h"

namespace npu::isa::testing {
namespace {

int64_t uniform(std::mt19937_64& rng, int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); }

// Mostly edge values, so that field boundaries are always exercised.
int64_t pick_in_range(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  switch (uniform(rng, 0, 5)) {
    case 0: return lo;
    case 1: return hi;
    case 2: return lo <= 0 && hi >= 0 ? 0 : lo;
    default: return uniform(rng, lo, hi);
  }
}

}  // namespace

Instruction random_instruction(const InstructionSpec& spec, std::mt19937_64& rng, const std::vector<int64_t>& global_symbols) {
  Instruction instruction;
  instruction.opcode = spec.opcode;
  for (size_t i = 0; i < spec.operands.size(); ++i) {
    const OperandSpec& operand = spec.operands[i];
    if (operand.kind == OperandKind::Sym) {
      instruction.operands[i] = global_symbols[static_cast<size_t>(uniform(rng, 0, static_cast<int64_t>(global_symbols.size()) - 1))];
    } else {
      instruction.operands[i] = pick_in_range(rng, operand_min(operand), operand_max(operand));
    }
  }
  return instruction;
}

Program random_program(std::mt19937_64& rng) {
  Program program;
  std::vector<int64_t> global_symbols;
  const int buffers = static_cast<int>(uniform(rng, 1, 5));
  for (int i = 0; i < buffers; ++i) {
    Symbol symbol;
    symbol.name = "buf" + std::to_string(i);
    symbol.kind = static_cast<SymbolKind>(uniform(rng, 1, 3));
    symbol.dtype = static_cast<DType>(uniform(rng, 0, kNumDTypes - 1));
    for (int d = static_cast<int>(uniform(rng, 1, 4)); d > 0; --d) symbol.shape.push_back(static_cast<uint64_t>(uniform(rng, 1, 300)));
    global_symbols.push_back(static_cast<int64_t>(program.symbols.size()));
    program.symbols.push_back(symbol);
  }
  const int locals = static_cast<int>(uniform(rng, 0, 3));
  for (int i = 0; i < locals; ++i) {
    Symbol symbol;
    symbol.name = "L_" + std::to_string(i);
    symbol.kind = SymbolKind::Local;
    symbol.dtype = static_cast<DType>(uniform(rng, 0, kNumDTypes - 1));
    symbol.shape = {static_cast<uint64_t>(uniform(rng, 1, 64)), static_cast<uint64_t>(uniform(rng, 1, 64))};
    symbol.value = static_cast<uint64_t>(uniform(rng, 0, 1024)) * 64 + (uniform(rng, 0, 1) ? kAccumulatorBase : 0);
    program.symbols.push_back(symbol);
  }
  const int data_sections = static_cast<int>(uniform(rng, 0, 3));
  for (int i = 0; i < data_sections; ++i) {
    const auto dtype = static_cast<DType>(uniform(rng, 0, kNumDTypes - 1));
    const auto count = static_cast<size_t>(uniform(rng, 1, 40));
    DataSection section{dtype, {}};
    for (size_t e = 0; e < count; ++e) {
      uint32_t raw = static_cast<uint32_t>(rng());
      if (dtype_is_float(dtype) && uniform(rng, 0, 3) == 0) {
        const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-40f, 65504.0f, 3.0e38f};
        const float value = specials[uniform(rng, 0, 7)];
        raw = dtype == DType::F32 ? f32_bits(value) : dtype == DType::BF16 ? f32_to_bf16(value) : f32_to_f16(value);
      }
      for (unsigned b = 0; b < dtype_size_bytes(dtype); ++b) section.contents.push_back(static_cast<uint8_t>(raw >> (8 * b)));
    }
    Symbol symbol;
    symbol.name = "table" + std::to_string(i);
    symbol.kind = SymbolKind::Data;
    symbol.dtype = dtype;
    symbol.shape = count % 2 == 0 && uniform(rng, 0, 1) ? std::vector<uint64_t>{2, count / 2} : std::vector<uint64_t>{count};
    symbol.section = static_cast<uint32_t>(program.data.size());
    global_symbols.push_back(static_cast<int64_t>(program.symbols.size()));
    program.symbols.push_back(symbol);
    program.data.push_back(std::move(section));
  }
  const auto& table = instruction_table();
  const int sections = static_cast<int>(uniform(rng, 1, 4));
  uint64_t free_cores = kAllCores;
  std::vector<Symbol> labels;
  for (int s = 0; s < sections; ++s) {
    CodeSection section;
    if (s == 0 && sections == 1 && uniform(rng, 0, 3) == 0) {
      section.core_mask = kAllCores;
    } else {
      const uint64_t available = free_cores & 0xffff;
      if (available == 0) break;
      do {
        section.core_mask = rng() & available;
      } while (section.core_mask == 0);
    }
    free_cores &= ~section.core_mask;
    const auto length = static_cast<size_t>(uniform(rng, 0, 60));
    for (size_t pc = 0; pc < length; ++pc) {
      if (uniform(rng, 0, 30) == 0) {
        section.words.push_back(rng() | 0xff);  // opcode 0xff is never defined: stays raw
      } else {
        const InstructionSpec& spec = table[static_cast<size_t>(uniform(rng, 0, static_cast<int64_t>(table.size()) - 1))];
        section.words.push_back(*encode(random_instruction(spec, rng, global_symbols)));
      }
    }
    for (int l = static_cast<int>(uniform(rng, 0, 4)); l > 0; --l) {
      Symbol label;
      label.name = "label_" + std::to_string(labels.size());
      label.kind = SymbolKind::Label;
      label.section = static_cast<uint32_t>(program.code.size());
      label.value = static_cast<uint64_t>(uniform(rng, 0, static_cast<int64_t>(length)));
      labels.push_back(label);
    }
    program.code.push_back(std::move(section));
    if (free_cores == 0) break;
  }
  std::stable_sort(labels.begin(), labels.end(), [](const Symbol& a, const Symbol& b) {
    return std::tie(a.section, a.value) < std::tie(b.section, b.value);
  });
  program.symbols.insert(program.symbols.end(), labels.begin(), labels.end());
  program.metadata = {{"source", "random.s"}, {"note", "quote \" backslash \\ newline \n tab \t end"}};
  return program;
}

}  // namespace npu::isa::testing
