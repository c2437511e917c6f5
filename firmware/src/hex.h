// Hex text for packet words and field values, shared by messages, describe()
// and the docs so that all three spell numbers the same way.
#pragma once

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <string>

namespace npu::firmware {

// "0x" and lowercase digits, no padding: 0x0, 0x1000.
inline std::string hex(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%" PRIx64, value);
  return text;
}

// Exactly two digits, for opcodes: 0x01.
inline std::string hex2(uint8_t value) {
  char text[8];
  std::snprintf(text, sizeof text, "0x%02x", static_cast<unsigned>(value));
  return text;
}

}  // namespace npu::firmware
