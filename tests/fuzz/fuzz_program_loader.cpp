// Fuzzes the .npubin loader. Inputs are used both as whole files and, so that
// the fuzzer gets past the checksum to the payload parser and validator, as
// payloads sealed with a correct header. Every accepted program must print
// and round-trip through the assembler byte-identically.
#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include "npusim/isa/assembler.h"
#include "npusim/isa/disassembler.h"
#include "npusim/isa/program.h"

namespace {

std::string seal(const std::string& payload) {
  std::string file("NPUBIN\0\0", 8);
  const auto append = [&](uint64_t value, unsigned bytes) {
    for (unsigned b = 0; b < bytes; ++b) file.push_back(static_cast<char>((value >> (8 * b)) & 0xff));
  };
  append(npu::isa::kProgramFormatVersion, 4);
  append(crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(payload.data()), static_cast<uInt>(payload.size())), 4);
  append(payload.size(), 8);
  return file + payload;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 256 * 1024) return 0;
  const std::string input(reinterpret_cast<const char*>(data), size);
  for (const std::string& file : {input, seal(input)}) {
    npu::isa::Program program;
    try {
      program = npu::isa::parse_program(file);
    } catch (const npu::isa::ProgramFormatError&) {
      continue;
    }
    std::ostringstream listing, assembly;
    npu::isa::write_listing(program, listing);
    npu::isa::write_assembly(program, assembly);
    npu::isa::AssembleOptions options;
    options.read_include = [](const std::string&) { return std::nullopt; };
    const npu::isa::AssembleResult again = npu::isa::assemble_source(assembly.str(), "again.s", options);
    if (!again.program || npu::isa::serialize_program(*again.program) != npu::isa::serialize_program(program)) std::abort();
  }
  return 0;
}
