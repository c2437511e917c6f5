// A device as the driver sees it: identity, device memory (Buffers from an
// allocator with statistics) and blocking copies between host and device
// memory. Every call is safe from any thread. Command queues, fences and
// program launches come with the firmware (docs/design/command_path.md).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "npusim/driver/device_allocator.h"
#include "npusim/driver/device_link.h"

namespace npu {

struct DeviceInfo {
  uint32_t isa_version = 0;
  uint32_t register_map_version = 0;
  uint32_t num_cores = 0;
  uint32_t num_queues = 0;
  uint64_t memory_bytes = 0;
};

class Device;

// A block of device memory, freed when the last handle goes away.
class Buffer {
 public:
  Buffer() = default;
  uint64_t address() const { return state_ ? state_->address : 0; }
  uint64_t size() const { return state_ ? state_->size : 0; }  // as requested
  explicit operator bool() const { return state_ != nullptr; }

 private:
  friend class Device;
  struct State {
    std::shared_ptr<Device> device;
    uint64_t address;
    uint64_t size;
    State(const State&) = delete;  // exactly one State frees each block
    State& operator=(const State&) = delete;
    ~State();
  };
  std::shared_ptr<State> state_;
};

class Device : public std::enable_shared_from_this<Device> {
 public:
  // Identifies the device behind `link` (npu::Error if it is not one of ours,
  // or speaks another register map version) and takes ownership of the link.
  static std::shared_ptr<Device> open(std::unique_ptr<DeviceLink> link);

  const DeviceInfo& info() const { return info_; }

  // npu::OutOfMemoryError when no block fits (the message gives the sizes).
  Buffer allocate(uint64_t bytes, uint64_t alignment = 256);
  AllocatorStats memory_stats() const;

  // Blocking copies through the host link; std::out_of_range outside the buffer.
  void copy_to_device(const Buffer& buffer, uint64_t offset, const void* data, uint64_t bytes);
  void copy_from_device(const Buffer& buffer, uint64_t offset, void* data, uint64_t bytes);

  DeviceLink& link() { return *link_; }

  // What npu-smi prints, read live from the device: identity, memory in use
  // (and peak, free, fragmentation), status with any latched fault, interrupt
  // state and the cycle counter. Any process holding a Device can print it.
  std::string report();

  explicit Device(std::unique_ptr<DeviceLink> link, const DeviceInfo& info);  // use open()

 private:
  friend struct Buffer::State;
  void free(uint64_t address);
  static void check_range(const Buffer& buffer, uint64_t offset, uint64_t bytes);

  std::unique_ptr<DeviceLink> link_;
  DeviceInfo info_;
  mutable std::mutex mutex_;  // guards the allocator
  DeviceAllocator allocator_;
};

}  // namespace npu
