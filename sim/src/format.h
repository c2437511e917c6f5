// Small text helpers shared by the chip model's messages.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace npu::sim {

inline std::string hex(uint64_t value) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(value));
  return buf;
}

}  // namespace npu::sim
