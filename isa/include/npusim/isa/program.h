// In-memory program and the .npubin file format (a protobuf container).
// Every reader goes through load_program(), which validates the whole file.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "npusim/isa/isa.h"

namespace npu::isa {

inline constexpr uint32_t kProgramFormatVersion = 1;
inline constexpr uint64_t kAllCores = ~uint64_t{0};
// Upper bound on what a loader accepts, so a corrupt size cannot exhaust memory.
inline constexpr uint64_t kMaxProgramFileBytes = uint64_t{1} << 30;
// Upper bound on the bytes of all data sections of a program together.
inline constexpr uint64_t kMaxDataBytes = uint64_t{256} << 20;
// The most dims a symbol's shape has (the assembler's directives take as many).
inline constexpr size_t kMaxSymbolDims = 8;

enum class SymbolKind : uint8_t { Input = 1, Output, Scratch, Data, Local, Label };

struct CodeSection {
  uint64_t core_mask = kAllCores;
  std::vector<uint64_t> words;
};

struct DataSection {
  DType dtype = DType::F32;
  std::vector<uint8_t> contents;
};

struct Symbol {
  std::string name;
  SymbolKind kind = SymbolKind::Input;
  DType dtype = DType::F32;
  std::vector<uint64_t> shape;
  uint32_t section = 0;  // data section (Data) or code section (Label)
  uint64_t value = 0;    // instruction index (Label) or local address (Local)

  uint64_t element_count() const;
  uint64_t size_bytes() const;
  bool is_global_buffer() const;
};

struct Program {
  uint32_t isa_version = kIsaVersion;
  std::vector<CodeSection> code;
  std::vector<DataSection> data;
  std::vector<Symbol> symbols;
  std::vector<std::pair<std::string, std::string>> metadata;

  const Symbol* find_symbol(const std::string& name) const;
  // The code section that core `core` runs, or nullptr.
  const CodeSection* code_for_core(unsigned core) const;
};

// Thrown for a file that cannot be read or is not a valid program.
class ProgramFormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

const char* symbol_kind_name(SymbolKind kind);
// Names: [A-Za-z_][A-Za-z0-9_.]*, at most 256 characters.
bool is_valid_identifier(const std::string& name);
// Register and semaphore names, "zero" and "none" cannot name symbols.
bool is_reserved_name(const std::string& name);

// Checks the invariants every program must hold (unique names, section
// indices, sizes matching shapes, disjoint core masks, symbol operands that
// name global buffers). Instruction words that do not decode are allowed:
// running them is the device's fault to report, and tools print them raw.
// Throws ProgramFormatError naming what is wrong.
void validate_program(const Program& program);

std::string serialize_program(const Program& program);
Program parse_program(const std::string& bytes);  // validates
void save_program(const Program& program, const std::string& path);
Program load_program(const std::string& path);  // validates

}  // namespace npu::isa
