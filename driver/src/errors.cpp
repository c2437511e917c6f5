#include "npusim/driver/errors.h"

#include <cstdio>
#include <utility>

namespace npu {

namespace {

std::string hex(uint64_t value) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(value));
  return buf;
}

// The largest unit that states the duration exactly, so that no rounding
// hides what the caller asked for.
std::string duration_text(std::chrono::nanoseconds duration) {
  const int64_t ns = duration.count();
  if (ns != 0 && ns % 1'000'000'000 == 0) return std::to_string(ns / 1'000'000'000) + " s";
  if (ns != 0 && ns % 1'000'000 == 0) return std::to_string(ns / 1'000'000) + " ms";
  if (ns != 0 && ns % 1'000 == 0) return std::to_string(ns / 1'000) + " us";
  return std::to_string(ns) + " ns";
}

std::string out_of_memory_text(uint64_t requested, uint64_t alignment, uint64_t free_bytes, uint64_t largest) {
  return "out of device memory: requested " + std::to_string(requested) + " bytes (alignment " +
         std::to_string(alignment) + "); " + std::to_string(free_bytes) + " bytes free, largest free block " +
         std::to_string(largest) + " bytes";
}

}  // namespace

std::string describe(const DeviceFault& fault) {
  std::string text = "device fault: " + fault.kind + " at cycle " + std::to_string(fault.cycle);
  if (fault.core >= 0) text += ", core " + std::to_string(fault.core);
  if (!fault.engine.empty()) text += ", " + fault.engine;
  if (fault.pc >= 0) text += ", pc " + std::to_string(fault.pc);
  if (!fault.instruction.empty()) text += " `" + fault.instruction + "`";
  if (fault.has_address) text += ", address " + hex(fault.address);
  if (!fault.message.empty()) text += ": " + fault.message;
  return text;
}

DeviceError::DeviceError(DeviceFault fault) : Error(describe(fault)), fault_(std::move(fault)) {}

TimeoutError::TimeoutError(std::string awaited, std::chrono::nanoseconds waited)
    : Error("timed out after " + duration_text(waited) + " waiting for " + awaited),
      awaited_(std::move(awaited)),
      waited_(waited) {}

QueueError::QueueError(unsigned queue, uint32_t code, const std::string& message)
    : Error("command queue " + std::to_string(queue) + " stopped: error " + std::to_string(code) + " (" + message + ")"),
      queue_(queue),
      code_(code) {}

AbandonedError::AbandonedError(unsigned queue, uint64_t fence_value, const std::string& reason)
    : Error("submission " + std::to_string(fence_value) + " of queue " + std::to_string(queue) +
            " was abandoned when the device was reset after: " + reason),
      queue_(queue),
      fence_value_(fence_value) {}

OutOfMemoryError::OutOfMemoryError(uint64_t requested, uint64_t alignment, uint64_t free_bytes,
                                   uint64_t largest_free_bytes)
    : Error(out_of_memory_text(requested, alignment, free_bytes, largest_free_bytes)),
      requested_(requested),
      alignment_(alignment),
      free_bytes_(free_bytes),
      largest_free_bytes_(largest_free_bytes) {}

}  // namespace npu
