// The MMIO register map, derived from sim/registers.def.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace npu::sim {

inline constexpr uint32_t kDeviceId = 0x4e505531;  // "NPU1"
inline constexpr uint32_t kRegisterMapVersion = 1;
inline constexpr uint32_t kQueueRegisterBase = 0x100;
inline constexpr uint32_t kQueueRegisterStride = 0x40;
inline constexpr uint32_t kIrqFaultBit = 31;

enum class Register : uint32_t {
#define NPU_REGISTER(NAME, OFFSET, ACCESS, DESCRIPTION) NAME = OFFSET,
#include "registers.def"
};

enum class QueueRegister : uint32_t {
#define NPU_QUEUE_REGISTER(NAME, OFFSET, ACCESS, DESCRIPTION) NAME = OFFSET,
#include "registers.def"
};

inline constexpr uint32_t queue_register(unsigned queue, QueueRegister reg) {
  return kQueueRegisterBase + queue * kQueueRegisterStride + static_cast<uint32_t>(reg);
}

enum class RegisterAccess : uint8_t { RO, RW, WO, W1C };

struct RegisterSpec {
  std::string name;
  uint32_t offset;  // within the block, or within a queue's group
  RegisterAccess access;
  std::string description;
  bool per_queue;
};

const std::vector<RegisterSpec>& register_table();
// docs/registers.md, generated from the table.
std::string generate_register_markdown();

}  // namespace npu::sim
