#include "npusim/isa/isa.h"

#include <cstdio>
#include <map>
#include <sstream>
#include <stdexcept>

namespace npu::isa {
namespace {

std::vector<std::string> split_words(std::string_view text) {
  std::vector<std::string> words;
  std::istringstream in{std::string(text)};
  std::string word;
  while (in >> word) words.push_back(word);
  return words;
}

struct KindInfo {
  OperandKind kind;
  const char* name;
  unsigned bits;  // 0: width given in the spec (simmN, uimmN, targetN)
};

constexpr KindInfo kKinds[] = {
    {OperandKind::Reg, "reg", kRegisterFieldBits}, {OperandKind::Sem, "sem", kSemaphoreFieldBits},
    {OperandKind::Eng, "eng", 3},         {OperandKind::DType, "dtype", 3},
    {OperandKind::Bcast, "bcast", 2},     {OperandKind::Axis, "axis", 1},
    {OperandKind::TcFlags, "tcflags", 3}, {OperandKind::Csr, "csr", 4},
    {OperandKind::Chan, "chan", 2},       {OperandKind::Sym, "sym", 16},
    {OperandKind::SImm, "simm", 0},       {OperandKind::UImm, "uimm", 0},
    {OperandKind::Target, "target", 0},
};

// Parses "name:kind ..." from isa.def. A malformed table is a programming
// error caught by the first test that touches the table.
std::vector<OperandSpec> parse_operands(std::string_view mnemonic, std::string_view text) {
  std::vector<OperandSpec> operands;
  unsigned shift = kOpcodeBits;
  for (const std::string& word : split_words(text)) {
    const auto colon = word.find(':');
    if (colon == std::string::npos)
      throw std::logic_error("isa.def: operand without kind in " + std::string(mnemonic));
    OperandSpec spec{word.substr(0, colon), OperandKind::Reg, 0, shift};
    const std::string kind = word.substr(colon + 1);
    bool found = false;
    for (const KindInfo& info : kKinds) {
      const std::string_view name = info.name;
      if (info.bits != 0 && kind == name) {
        spec.kind = info.kind;
        spec.bits = info.bits;
        found = true;
      } else if (info.bits == 0 && kind.size() > name.size() && kind.compare(0, name.size(), name) == 0) {
        spec.kind = info.kind;
        spec.bits = static_cast<unsigned>(std::stoul(kind.substr(name.size())));
        found = true;
      }
      if (found) break;
    }
    if (!found || spec.bits == 0 || spec.bits > 32)
      throw std::logic_error("isa.def: bad operand kind '" + kind + "' in " + std::string(mnemonic));
    shift += spec.bits;
    operands.push_back(spec);
  }
  if (shift > kWordBits || operands.size() > kMaxOperands)
    throw std::logic_error("isa.def: operands of " + std::string(mnemonic) + " do not fit the word");
  return operands;
}

Engine engine_from_token(std::string_view token) {
  if (token == "Control") return Engine::Control;
  if (token == "Dma") return Engine::Dma;
  if (token == "Tensor") return Engine::Tensor;
  return Engine::Vector;
}

struct Tables {
  std::vector<InstructionSpec> instructions;
  std::map<std::string, const InstructionSpec*, std::less<>> by_mnemonic;
  std::array<const InstructionSpec*, 256> by_opcode{};
  std::map<OperandKind, std::vector<std::string>> value_names;

  Tables() {
#define NPU_OPERAND_VALUES(KIND, NAMES) value_names[kind_from_name(#KIND)] = split_words(NAMES);
#define NPU_INSTRUCTION(ID, OPCODE, MNEMONIC, ENGINE, OPERANDS, SEMANTICS) \
  instructions.push_back({Opcode::ID, MNEMONIC, engine_from_token(#ENGINE), parse_operands(MNEMONIC, OPERANDS), SEMANTICS});
#include "isa.def"
    for (const InstructionSpec& spec : instructions) {
      const auto code = static_cast<uint8_t>(spec.opcode);
      if (code == 0 || by_opcode[code] != nullptr || by_mnemonic.count(spec.mnemonic) != 0)
        throw std::logic_error("isa.def: duplicate or zero opcode/mnemonic " + spec.mnemonic);
      by_opcode[code] = &spec;
      by_mnemonic[spec.mnemonic] = &spec;
    }
  }

  static OperandKind kind_from_name(std::string_view name) {
    for (const KindInfo& info : kKinds)
      if (name == info.name) return info.kind;
    throw std::logic_error("isa.def: unknown operand kind " + std::string(name));
  }
};

const Tables& tables() {
  static const Tables instance;
  return instance;
}

bool is_signed(OperandKind kind) { return kind == OperandKind::SImm || kind == OperandKind::Target; }

}  // namespace

const std::vector<InstructionSpec>& instruction_table() { return tables().instructions; }

const InstructionSpec* find_instruction(Opcode opcode) { return find_instruction(static_cast<uint8_t>(opcode)); }

const InstructionSpec* find_instruction(uint8_t opcode) { return tables().by_opcode[opcode]; }

const InstructionSpec* find_instruction(std::string_view mnemonic) {
  const auto& map = tables().by_mnemonic;
  const auto it = map.find(mnemonic);
  return it == map.end() ? nullptr : it->second;
}

const std::vector<std::string>& operand_value_names(OperandKind kind) {
  static const std::vector<std::string> kNone;
  const auto& map = tables().value_names;
  const auto it = map.find(kind);
  return it == map.end() ? kNone : it->second;
}

const char* operand_kind_name(OperandKind kind) {
  for (const KindInfo& info : kKinds)
    if (info.kind == kind) return info.name;
  return "?";
}

const char* engine_name(Engine engine) {
  switch (engine) {
    case Engine::Control: return "control";
    case Engine::Dma: return "dma";
    case Engine::Tensor: return "tensor";
    case Engine::Vector: return "vector";
  }
  return "?";
}

int64_t operand_min(const OperandSpec& operand) {
  return is_signed(operand.kind) ? -(int64_t{1} << (operand.bits - 1)) : 0;
}

int64_t operand_max(const OperandSpec& operand) {
  switch (operand.kind) {
    case OperandKind::SImm:
    case OperandKind::Target: return (int64_t{1} << (operand.bits - 1)) - 1;
    case OperandKind::TcFlags:
      return (int64_t{1} << operand_value_names(operand.kind).size()) - 1;
    case OperandKind::Eng:
    case OperandKind::DType:
    case OperandKind::Bcast:
    case OperandKind::Axis:
    case OperandKind::Csr:
    case OperandKind::Chan:
      return static_cast<int64_t>(operand_value_names(operand.kind).size()) - 1;
    default: return (int64_t{1} << operand.bits) - 1;
  }
}

std::string describe_operand(const OperandSpec& operand) {
  const auto join = [](const std::vector<std::string>& names, const char* sep) {
    std::string out;
    for (const std::string& name : names) out += (out.empty() ? "" : sep) + name;
    return out;
  };
  switch (operand.kind) {
    case OperandKind::Reg: return "a register (r0..r" + std::to_string(kNumRegisters - 1) + ")";
    case OperandKind::Sem: return "a semaphore (s0..s" + std::to_string(kNumSemaphores - 1) + ")";
    case OperandKind::Sym: return "a buffer symbol";
    case OperandKind::Target: return "a label";
    case OperandKind::SImm:
      return "a signed " + std::to_string(operand.bits) + "-bit immediate (" +
             std::to_string(operand_min(operand)) + ".." + std::to_string(operand_max(operand)) + ")";
    case OperandKind::UImm:
      return "an unsigned " + std::to_string(operand.bits) + "-bit immediate (0.." +
             std::to_string(operand_max(operand)) + ")";
    case OperandKind::TcFlags:
      return "tensor-core flags ('none' or " + join(operand_value_names(operand.kind), "|") + ")";
    default:
      return std::string("one of ") + join(operand_value_names(operand.kind), ", ");
  }
}

std::optional<uint64_t> encode(const Instruction& instruction, std::string* error) {
  const InstructionSpec* spec = find_instruction(instruction.opcode);
  if (spec == nullptr) {
    if (error) *error = "invalid opcode";
    return std::nullopt;
  }
  uint64_t word = static_cast<uint8_t>(instruction.opcode);
  for (size_t i = 0; i < spec->operands.size(); ++i) {
    const OperandSpec& operand = spec->operands[i];
    const int64_t value = instruction.operands[i];
    if (value < operand_min(operand) || value > operand_max(operand)) {
      if (error) *error = "operand '" + operand.name + "' of " + spec->mnemonic + " out of range";
      return std::nullopt;
    }
    const uint64_t mask = (uint64_t{1} << operand.bits) - 1;
    word |= (static_cast<uint64_t>(value) & mask) << operand.shift;
  }
  for (size_t i = spec->operands.size(); i < kMaxOperands; ++i) {
    if (instruction.operands[i] != 0) {
      if (error) *error = "extra operand value for " + spec->mnemonic;
      return std::nullopt;
    }
  }
  return word;
}

std::optional<Instruction> decode(uint64_t word, std::string* error) {
  const InstructionSpec* spec = find_instruction(static_cast<uint8_t>(word & 0xff));
  if (spec == nullptr) {
    if (error) *error = "invalid opcode 0x" + [&] {
      char buf[8];
      std::snprintf(buf, sizeof buf, "%02x", static_cast<unsigned>(word & 0xff));
      return std::string(buf);
    }();
    return std::nullopt;
  }
  Instruction instruction;
  instruction.opcode = spec->opcode;
  unsigned used_bits = kOpcodeBits;
  for (size_t i = 0; i < spec->operands.size(); ++i) {
    const OperandSpec& operand = spec->operands[i];
    const uint64_t mask = (uint64_t{1} << operand.bits) - 1;
    const uint64_t raw = (word >> operand.shift) & mask;
    int64_t value = static_cast<int64_t>(raw);
    if (is_signed(operand.kind) && (raw >> (operand.bits - 1)) != 0) value -= int64_t{1} << operand.bits;
    if (value > operand_max(operand)) {
      if (error) *error = "invalid value " + std::to_string(value) + " for operand '" + operand.name + "' of " + spec->mnemonic;
      return std::nullopt;
    }
    instruction.operands[i] = value;
    used_bits = operand.shift + operand.bits;
  }
  if (used_bits < kWordBits && (word >> used_bits) != 0) {
    if (error) *error = "reserved bits set in " + spec->mnemonic + " instruction";
    return std::nullopt;
  }
  return instruction;
}

}  // namespace npu::isa
