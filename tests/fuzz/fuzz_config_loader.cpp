// Fuzzes the chip config loader (protobuf text format plus validation).
// Beyond "no crash": every accepted config must dump and re-parse to the same dump.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "npusim/sim/config_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  npu::sim::ChipConfig config;
  try {
    config = npu::sim::parse_chip_config(text, "fuzz.pbtxt");
  } catch (const npu::sim::ConfigError&) {
    return 0;
  }
  const std::string dump = npu::sim::dump_chip_config(config);
  if (npu::sim::dump_chip_config(npu::sim::parse_chip_config(dump, "dump.pbtxt")) != dump) std::abort();
  return 0;
}
