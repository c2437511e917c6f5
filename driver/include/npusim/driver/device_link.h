// The only way the driver reaches a device: 32-bit MMIO registers, device
// memory, interrupts, and host memory registered for the device's own copies
// (register map: docs/registers.md). An in-process simulator implements it
// today (SimulatorLink); an out-of-process link can replace it without
// changing the driver.
//
// Writes are posted, as on PCIe: write_register and write_memory may return
// before the device has seen them, but the device sees all calls in the
// order they were made, and a read or a wait returns only after every
// earlier write has arrived.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace npu {

// Named values shown with a trace span, in order.
using TraceArgs = std::vector<std::pair<std::string, std::string>>;

class DeviceLink {
 public:
  virtual ~DeviceLink() = default;

  virtual uint32_t read_register(uint32_t offset) = 0;
  virtual void write_register(uint32_t offset, uint32_t value) = 0;
  // Device memory through the host link. write_memory copies `data` before it returns.
  virtual void write_memory(uint64_t address, const void* data, uint64_t bytes) = 0;
  virtual void read_memory(uint64_t address, void* data, uint64_t bytes) = 0;
  // Lets the device run until an enabled interrupt is pending or `max_cycles`
  // of device time have passed; returns whether one is pending. While the
  // device runs, the link calls `cancelled` on the calling thread every
  // kCancelCheckInterval of host time: once it returns true, the wait ends
  // soon (false: none pending), the device stopped where it stands.
  static constexpr std::chrono::milliseconds kCancelCheckInterval{50};
  virtual bool wait_for_interrupt(uint64_t max_cycles, const std::function<bool()>& cancelled) = 0;
  bool wait_for_interrupt(uint64_t max_cycles) { return wait_for_interrupt(max_cycles, {}); }

  // Host memory the device's copy engine may read and write (COPY packets):
  // returns the bus address the device knows it by. The memory must stay
  // valid until unregistered, which waits for nothing: unregister only when
  // no queued copy uses it any more.
  virtual uint64_t register_host_memory(void* data, uint64_t bytes) = 0;
  virtual void unregister_host_memory(uint64_t bus_address) = 0;

  // Host activity for the device's trace, on host track `track`, in device
  // time: a span opens when the device has seen every earlier call and
  // closes likewise. Each of flow_ids starts a flow that the device's span
  // of the same id ends; `args` are shown with the span (a kernel's op and layer). Links without a
  // trace ignore these.
  virtual void trace_begin(const std::string& /*track*/, const std::string& /*name*/, const std::vector<uint64_t>& /*flow_ids*/,
                           const TraceArgs& /*args*/) {}
  virtual void trace_end(const std::string& /*track*/) {}
};

}  // namespace npu
