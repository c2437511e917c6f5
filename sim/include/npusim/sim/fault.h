// A device fault: what went wrong, where, and when. Produced by the chip
// model; printed by npu-sim and raised by the driver as npu::DeviceError.
#pragma once

#include <cstdint>
#include <string>

namespace npu::sim {

enum class FaultKind : uint8_t {
  InvalidInstruction,  // a word that does not decode, or an operand the engine cannot execute
  AddressOutOfRange,   // a global or local address outside every memory
  Misaligned,          // a local operand not aligned to its element size
  SramOverflow,        // a local operand that runs past the end of the scratchpad or accumulator
  ExecutionError,      // the instruction itself failed (integer division by zero, gather index out of range)
  Deadlock,            // nothing can make progress: every unfinished engine waits on a semaphore or barrier
  Watchdog,            // the run did not finish within the cycle limit
};

struct FaultRecord {
  FaultKind kind = FaultKind::InvalidInstruction;
  int core = -1;            // -1: not tied to one core (watchdog)
  std::string engine;       // "control", "dma ch0", "tensor core", "vector unit"
  int64_t pc = -1;          // instruction index in the core's code section, -1 if none
  std::string instruction;  // disassembly of the faulting instruction
  bool has_address = false;
  uint64_t address = 0;
  uint64_t cycle = 0;
  std::string message;

  // "device fault: address out of range at cycle 1234, core 0, dma ch1, pc 17 `dma.ld ...`: address 0x... (message)"
  std::string to_string() const;
};

inline const char* fault_kind_name(FaultKind kind) {
  switch (kind) {
    case FaultKind::InvalidInstruction: return "invalid instruction";
    case FaultKind::AddressOutOfRange: return "address out of range";
    case FaultKind::Misaligned: return "misaligned access";
    case FaultKind::SramOverflow: return "SRAM overflow";
    case FaultKind::ExecutionError: return "execution error";
    case FaultKind::Deadlock: return "deadlock";
    case FaultKind::Watchdog: return "watchdog timeout";
  }
  return "unknown fault";
}

}  // namespace npu::sim
