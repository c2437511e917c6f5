// npu-as: assembly text to Program. Syntax: docs/assembly.md.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "npusim/isa/program.h"

namespace npu::isa {

struct Diagnostic {
  std::string file;
  int line = 0;    // 1-based; 0 when the error has no position
  int column = 0;  // 1-based
  std::string message;
  std::string source_line;

  // "FILE:LINE:COL: error: MESSAGE", then the source line and a caret.
  std::string format() const;
};

// Reads an included file: returns its text, or nullopt if it cannot be read.
using IncludeReader = std::function<std::optional<std::string>(const std::string& path)>;

struct AssembleOptions {
  unsigned max_errors = 20;
  // Upper bound on the bytes of all data sections together.
  uint64_t max_data_bytes = kMaxDataBytes;
  // Upper bound on the bytes of each source file read (the input and each `.include`d file): the
  // assembler holds about 40 times a source's size while it works.
  uint64_t max_source_bytes = uint64_t{16} << 20;
  // Reads `.include`d files; the default reads from the file system.
  IncludeReader read_include;
  // Metadata added unless the source sets the key with `.meta`.
  std::vector<std::pair<std::string, std::string>> default_metadata;
};

struct AssembleResult {
  std::optional<Program> program;  // set only when there are no errors
  std::vector<Diagnostic> errors;
};

AssembleResult assemble_source(const std::string& text, const std::string& file_name, const AssembleOptions& options = {});
AssembleResult assemble_file(const std::string& path, const AssembleOptions& options = {});

}  // namespace npu::isa
