#include "npusim/isa/printer.h"

#include <cmath>
#include <cstdio>
#include <cstring>

#include "npusim/isa/dtype.h"

namespace npu::isa {

std::optional<std::string> ProgramOperandNamer::symbol_name(int64_t index) const {
  if (index < 0 || static_cast<size_t>(index) >= program_.symbols.size()) return std::nullopt;
  const Symbol& symbol = program_.symbols[static_cast<size_t>(index)];
  if (!symbol.is_global_buffer()) return std::nullopt;
  return symbol.name;
}

std::optional<std::string> ProgramOperandNamer::label_at(int64_t pc) const {
  for (const Symbol& symbol : program_.symbols)
    if (symbol.kind == SymbolKind::Label && symbol.section == section_ && static_cast<int64_t>(symbol.value) == pc)
      return symbol.name;
  return std::nullopt;
}

std::optional<std::string> format_instruction(const Instruction& instruction, uint64_t pc, const OperandNamer* namer) {
  const InstructionSpec* spec = find_instruction(instruction.opcode);
  if (spec == nullptr) return std::nullopt;
  std::string text = spec->mnemonic;
  for (size_t i = 0; i < spec->operands.size(); ++i) {
    const OperandSpec& operand = spec->operands[i];
    const int64_t value = instruction.operands[i];
    text += i == 0 ? " " : ", ";
    switch (operand.kind) {
      case OperandKind::Reg: text += "r" + std::to_string(value); break;
      case OperandKind::Sem: text += "s" + std::to_string(value); break;
      case OperandKind::SImm:
      case OperandKind::UImm: text += std::to_string(value); break;
      case OperandKind::Sym: {
        const auto name = namer ? namer->symbol_name(value) : std::nullopt;
        if (!name) return std::nullopt;
        text += *name;
        break;
      }
      case OperandKind::Target: {
        const auto label = namer ? namer->label_at(static_cast<int64_t>(pc) + value) : std::nullopt;
        if (label) {
          text += *label;
        } else {
          text += value < 0 ? ".-" + std::to_string(-value) : ".+" + std::to_string(value);
        }
        break;
      }
      case OperandKind::TcFlags: {
        const auto& names = operand_value_names(operand.kind);
        std::string flags;
        for (size_t bit = 0; bit < names.size(); ++bit)
          if (value & (int64_t{1} << bit)) flags += (flags.empty() ? "" : "|") + names[bit];
        text += flags.empty() ? "none" : flags;
        break;
      }
      default: text += operand_value_names(operand.kind).at(static_cast<size_t>(value)); break;
    }
  }
  return text;
}

namespace {

// Names what `inner` (if any) cannot name by its index: a fault record made without the program still shows
// every operand (`la r1, <symbol 0>`, where it once showed `la <symbol index out of range>` for a valid la).
class IndexOperandNamer : public OperandNamer {
 public:
  explicit IndexOperandNamer(const OperandNamer* inner) : inner_(inner) {}
  std::optional<std::string> symbol_name(int64_t index) const override {
    if (auto name = inner_ ? inner_->symbol_name(index) : std::nullopt) return name;
    return "<symbol " + std::to_string(index) + ">";
  }
  std::optional<std::string> label_at(int64_t pc) const override { return inner_ ? inner_->label_at(pc) : std::nullopt; }

 private:
  const OperandNamer* inner_;
};

}  // namespace

std::string describe_word(uint64_t word, uint64_t pc, const OperandNamer* namer) {
  std::string error;
  const auto instruction = decode(word, &error);
  if (!instruction) return "<invalid: " + error + ">";
  if (auto text = format_instruction(*instruction, pc, namer)) return *text;
  const IndexOperandNamer by_index(namer);
  return format_instruction(*instruction, pc, &by_index).value_or("<invalid: unknown opcode>");
}

std::string format_data_value(DType dtype, const uint8_t* element) {
  char buf[64];
  switch (dtype) {
    case DType::I8: return std::to_string(static_cast<int8_t>(element[0]));
    case DType::U8: return std::to_string(element[0]);
    case DType::I32: {
      int32_t value;
      std::memcpy(&value, element, 4);
      return std::to_string(value);
    }
    default: break;
  }
  float value = 0;
  uint32_t raw = 0;
  if (dtype == DType::F32) {
    std::memcpy(&raw, element, 4);
    value = f32_from_bits(raw);
  } else {
    const uint16_t bits = static_cast<uint16_t>(element[0] | (element[1] << 8));
    raw = bits;
    value = dtype == DType::BF16 ? bf16_to_f32(bits) : f16_to_f32(bits);
  }
  if (std::isnan(value)) {
    std::snprintf(buf, sizeof buf, "nan:0x%x", raw);
    return buf;
  }
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(value));
  return buf;
}

}  // namespace npu::isa
