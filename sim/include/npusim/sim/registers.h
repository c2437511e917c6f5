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
// The fault message's window: FAULT_MESSAGE_INDEX selects one of these 32-bit words.
inline constexpr uint32_t kFaultMessageWords = 64;

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

// FAULT_ENGINE's encoding of the engine names in FaultRecord::engine.
inline uint32_t fault_engine_code(const std::string& engine) {
  if (engine == "control") return 1;
  if (engine == "tensor core") return 2;
  if (engine == "vector unit") return 3;
  if (engine.rfind("dma ch", 0) == 0 && engine.size() > 6) return 16 + static_cast<uint32_t>(std::stoul(engine.substr(6)));
  return 0;
}
inline std::string fault_engine_name(uint32_t code) {
  switch (code) {
    case 0: return "";
    case 1: return "control";
    case 2: return "tensor core";
    case 3: return "vector unit";
    default: return code >= 16 ? "dma ch" + std::to_string(code - 16) : "engine " + std::to_string(code);
  }
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
