#include "npusim/isa/disassembler.h"

#include <cstdio>

#include "npusim/isa/dtype.h"
#include "npusim/isa/printer.h"

namespace npu::isa {
namespace {

std::string format_shape(const std::vector<uint64_t>& shape, const char* separator) {
  std::string out;
  for (const uint64_t dim : shape) out += (out.empty() ? "" : separator) + std::to_string(dim);
  return out;
}

std::string hex_word(uint64_t word) {
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(word));
  return buf;
}

std::string quote(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (byte < 0x20 || byte == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", byte);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Labels of a code section, by instruction index.
std::vector<std::vector<const Symbol*>> labels_by_pc(const Program& program, uint32_t section) {
  std::vector<std::vector<const Symbol*>> labels(program.code[section].words.size() + 1);
  for (const Symbol& symbol : program.symbols)
    if (symbol.kind == SymbolKind::Label && symbol.section == section) labels[symbol.value].push_back(&symbol);
  return labels;
}

}  // namespace

std::string format_core_mask(uint64_t mask) {
  if (mask == kAllCores) return "all";
  std::string out;
  for (unsigned core = 0; core < 64;) {
    if (!(mask & (uint64_t{1} << core))) {
      ++core;
      continue;
    }
    unsigned last = core;
    while (last + 1 < 64 && (mask & (uint64_t{1} << (last + 1)))) ++last;
    out += (out.empty() ? "" : ", ") + std::to_string(core) + (last > core ? "-" + std::to_string(last) : "");
    core = last + 1;
  }
  return out;
}

void write_listing(const Program& program, std::ostream& out) {
  out << "npubin format " << kProgramFormatVersion << ", ISA version " << program.isa_version << "\n";
  if (!program.metadata.empty()) {
    out << "\nmetadata:\n";
    for (const auto& [key, value] : program.metadata) out << "  " << key << " = " << quote(value) << "\n";
  }
  out << "\nsymbols:\n";
  if (program.symbols.empty()) out << "  (none)\n";
  for (size_t i = 0; i < program.symbols.size(); ++i) {
    const Symbol& symbol = program.symbols[i];
    char buf[256];
    if (symbol.kind == SymbolKind::Label) {
      std::snprintf(buf, sizeof buf, "  [%3zu] %-6s %-24s code %u @ %llu\n", i, symbol_kind_name(symbol.kind), symbol.name.c_str(),
                    symbol.section, static_cast<unsigned long long>(symbol.value));
    } else {
      const std::string place = symbol.kind == SymbolKind::Local ? "local @ 0x" + [&] {
        char a[20];
        std::snprintf(a, sizeof a, "%llx", static_cast<unsigned long long>(symbol.value));
        return std::string(a);
      }() : symbol.kind == SymbolKind::Data ? "data " + std::to_string(symbol.section) : "global";
      std::snprintf(buf, sizeof buf, "  [%3zu] %-6s %-24s %-4s [%s] %llu bytes, %s\n", i, symbol_kind_name(symbol.kind), symbol.name.c_str(),
                    std::string(dtype_name(symbol.dtype)).c_str(), format_shape(symbol.shape, "x").c_str(),
                    static_cast<unsigned long long>(symbol.size_bytes()), place.c_str());
    }
    out << buf;
  }
  for (size_t i = 0; i < program.data.size(); ++i) {
    const DataSection& section = program.data[i];
    out << "\ndata section " << i << " (" << dtype_name(section.dtype) << ", " << section.contents.size() << " bytes):\n";
    for (size_t offset = 0; offset < section.contents.size(); offset += 16) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "  %06zx:", offset);
      out << buf;
      for (size_t b = offset; b < offset + 16 && b < section.contents.size(); ++b) {
        std::snprintf(buf, sizeof buf, " %02x", section.contents[b]);
        out << buf;
      }
      out << "\n";
    }
  }
  for (uint32_t s = 0; s < program.code.size(); ++s) {
    const CodeSection& section = program.code[s];
    out << "\ncode section " << s << " (cores " << format_core_mask(section.core_mask) << "), " << section.words.size()
        << " instructions:\n";
    const auto labels = labels_by_pc(program, s);
    const ProgramOperandNamer namer(program, s);
    for (size_t pc = 0; pc <= section.words.size(); ++pc) {
      for (const Symbol* label : labels[pc]) out << label->name << ":\n";
      if (pc == section.words.size()) break;
      char address[32];
      std::snprintf(address, sizeof address, "  %06zx:", pc);
      out << address << "  " << hex_word(section.words[pc]) << "  " << describe_word(section.words[pc], pc, &namer) << "\n";
    }
  }
}

void write_assembly(const Program& program, std::ostream& out) {
  out << "# npu-objdump --asm: assembles back to the same .npubin\n";
  for (const auto& [key, value] : program.metadata) out << ".meta " << key << ", " << quote(value) << "\n";
  for (const Symbol& symbol : program.symbols) {
    const std::string dtype(dtype_name(symbol.dtype));
    const std::string shape = format_shape(symbol.shape, ", ");
    switch (symbol.kind) {
      case SymbolKind::Input:
      case SymbolKind::Output:
      case SymbolKind::Scratch:
        out << "." << symbol_kind_name(symbol.kind) << " " << symbol.name << ", " << dtype << ", " << shape << "\n";
        break;
      case SymbolKind::Local:
        out << ".local " << symbol.name << ", " << dtype << ", " << symbol.value << ", " << shape << "\n";
        break;
      case SymbolKind::Data: {
        out << ".data " << symbol.name << ", " << dtype << ", " << shape << "\n";
        const DataSection& section = program.data[symbol.section];
        const size_t size = dtype_size_bytes(section.dtype);
        const size_t count = section.contents.size() / size;
        for (size_t i = 0; i < count; i += 8) {
          out << "  .values ";
          for (size_t j = i; j < i + 8 && j < count; ++j)
            out << (j == i ? "" : ", ") << format_data_value(section.dtype, &section.contents[j * size]);
          out << "\n";
        }
        break;
      }
      case SymbolKind::Label: break;
    }
  }
  for (uint32_t s = 0; s < program.code.size(); ++s) {
    const CodeSection& section = program.code[s];
    out << "\n.code " << format_core_mask(section.core_mask) << "\n";
    const auto labels = labels_by_pc(program, s);
    const ProgramOperandNamer namer(program, s);
    for (size_t pc = 0; pc <= section.words.size(); ++pc) {
      for (const Symbol* label : labels[pc]) out << label->name << ":\n";
      if (pc == section.words.size()) break;
      const uint64_t word = section.words[pc];
      const auto instruction = decode(word);
      const auto text = instruction ? format_instruction(*instruction, pc, &namer) : std::nullopt;
      if (text) {
        out << "    " << *text << "\n";
      } else {
        char buf[32];
        std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(word));
        out << "    .word " << buf << "\n";
      }
    }
  }
}

}  // namespace npu::isa
