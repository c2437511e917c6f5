// Fuzzes npu-as's parser. Beyond "no crash, no sanitizer report", every
// accepted source must survive disassembly and reassembly byte-identically.
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include "npusim/isa/assembler.h"
#include "npusim/isa/disassembler.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;
  npu::isa::AssembleOptions options;
  options.max_data_bytes = 1 << 20;  // keep inputs like ".zeros 100000000" within the fuzzer's memory limit
  // Includes resolve to a fixed small file, so the include path is fuzzed too.
  options.read_include = [](const std::string& path) -> std::optional<std::string> {
    if (path == "lib.s") return std::string(".equ LIB, 3\n.reg lr, r31\n");
    return std::nullopt;
  };
  const std::string text(reinterpret_cast<const char*>(data), size);
  const npu::isa::AssembleResult result = npu::isa::assemble_source(text, "fuzz.s", options);
  if (!result.program) {
    for (const npu::isa::Diagnostic& error : result.errors) (void)error.format();
    return 0;
  }
  const std::string bytes = npu::isa::serialize_program(*result.program);
  std::ostringstream assembly;
  npu::isa::write_assembly(*result.program, assembly);
  const npu::isa::AssembleResult again = npu::isa::assemble_source(assembly.str(), "again.s", options);
  if (!again.program || npu::isa::serialize_program(*again.program) != bytes) std::abort();
  return 0;
}
