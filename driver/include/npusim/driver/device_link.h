// The only way the driver reaches a device: 32-bit MMIO registers, device
// memory, and interrupts (register map: docs/registers.md). An in-process
// simulator implements it today (SimulatorLink); an out-of-process link can
// replace it without changing the driver.
#pragma once

#include <cstdint>

namespace npu {

class DeviceLink {
 public:
  virtual ~DeviceLink() = default;

  virtual uint32_t read_register(uint32_t offset) = 0;
  virtual void write_register(uint32_t offset, uint32_t value) = 0;
  // Device memory through the host link; the calls return when the data has arrived.
  virtual void write_memory(uint64_t address, const void* data, uint64_t bytes) = 0;
  virtual void read_memory(uint64_t address, void* data, uint64_t bytes) = 0;
  // Lets the device run until an enabled interrupt is pending or `max_cycles`
  // of device time have passed; returns whether one is pending.
  virtual bool wait_for_interrupt(uint64_t max_cycles) = 0;
};

}  // namespace npu
