// Fuzzes the readers of traces read back (tools and tests check the traces
// the chip writes with them): the Perfetto validator and summary, and the
// Chrome JSON validator, on any bytes. They must say what is wrong (a list
// of problems, or std::runtime_error from the summary), never crash, hang or
// read outside the input.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "npusim/traces/writers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  npu::trace::validate_perfetto(bytes);
  try {
    npu::trace::summarize_perfetto(bytes);
  } catch (const std::runtime_error&) {
  }
  npu::trace::validate_chrome_json(bytes);
  return 0;
}
