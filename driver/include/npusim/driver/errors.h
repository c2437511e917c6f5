// The exceptions the driver throws. Every one derives from npu::Error, so a
// caller can catch driver failures apart from everything else.
#pragma once

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace npu {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What the chip reported about a fault. Plain fields rather than the sim's
// FaultRecord, so that the driver's API does not depend on the sim; the
// device link converts one into the other.
struct DeviceFault {
  std::string kind;         // "address out of range", "watchdog timeout", ...
  int core = -1;            // -1: not tied to one core (watchdog)
  std::string engine;       // "control", "dma ch0", "tensor core", "vector unit"; empty if none
  int64_t pc = -1;          // instruction index in the core's code section, -1 if none
  std::string instruction;  // disassembly of the faulting instruction; empty if none
  bool has_address = false;
  uint64_t address = 0;     // meaningful only when has_address
  uint64_t cycle = 0;
  std::string message;      // the chip's detail, e.g. which check failed
};

// "device fault: address out of range at cycle 1234, core 0, dma ch1, pc 17
// `dma.ld ...`, address 0x...: message" (the same text npu-sim prints).
std::string describe(const DeviceFault& fault);

class DeviceError : public Error {
 public:
  explicit DeviceError(DeviceFault fault);

  const DeviceFault& fault() const { return fault_; }
  const std::string& kind() const { return fault_.kind; }
  int core() const { return fault_.core; }
  const std::string& engine() const { return fault_.engine; }
  int64_t pc() const { return fault_.pc; }
  const std::string& instruction() const { return fault_.instruction; }
  bool has_address() const { return fault_.has_address; }
  uint64_t address() const { return fault_.address; }
  uint64_t cycle() const { return fault_.cycle; }
  const std::string& message() const { return fault_.message; }  // the chip's detail; what() is the whole text

 private:
  DeviceFault fault_;
};

// A wait that gave up. The device may still finish the work later.
class TimeoutError : public Error {
 public:
  // awaited names the thing waited for ("fence 3 on queue 0"); the message
  // reads "timed out after 250 ms waiting for fence 3 on queue 0".
  TimeoutError(std::string awaited, std::chrono::nanoseconds waited);

  const std::string& awaited() const { return awaited_; }
  std::chrono::nanoseconds waited() const { return waited_; }

 private:
  std::string awaited_;
  std::chrono::nanoseconds waited_;
};

// A command queue stopped on a malformed packet (docs/packets.md lists the
// codes); the device was reset, as after a fault.
class QueueError : public Error {
 public:
  QueueError(unsigned queue, uint32_t code, const std::string& message);
  unsigned queue() const { return queue_; }
  uint32_t code() const { return code_; }

 private:
  unsigned queue_;
  uint32_t code_;
};

// A wait that the host cancelled (Device::set_cancel_check said so): the
// device was reset, and the work queued then was abandoned,
// as after a timeout. what() says what was waited for and what was dropped.
class CancelledError : public Error {
 public:
  using Error::Error;
};

// Work that was still queued or running when the device was reset (after a
// fault, a queue error or a timeout): it did not run, or not to the end.
// what() says why the device was reset.
class AbandonedError : public Error {
 public:
  AbandonedError(unsigned queue, uint64_t fence_value, const std::string& reason);
  unsigned queue() const { return queue_; }
  uint64_t fence_value() const { return fence_value_; }

 private:
  unsigned queue_;
  uint64_t fence_value_;
};

// "out of device memory: requested N bytes (alignment A); F bytes free,
// largest free block L bytes". Free and largest tell apart a full memory
// (F < N) from a fragmented one (F >= N > L).
class OutOfMemoryError : public Error {
 public:
  OutOfMemoryError(uint64_t requested, uint64_t alignment, uint64_t free_bytes, uint64_t largest_free_bytes);

  uint64_t requested() const { return requested_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t free_bytes() const { return free_bytes_; }
  uint64_t largest_free_bytes() const { return largest_free_bytes_; }

 private:
  uint64_t requested_;
  uint64_t alignment_;
  uint64_t free_bytes_;
  uint64_t largest_free_bytes_;
};

}  // namespace npu
