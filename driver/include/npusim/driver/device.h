// A device as the driver sees it: identity, device memory (Buffers from an
// allocator with statistics), blocking copies between host and device
// memory, and its command queues (queue.h; docs/design/command_path.md).
// Every call is safe from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "npusim/driver/device_allocator.h"
#include "npusim/driver/device_link.h"
#include "npusim/driver/errors.h"
#include "npusim/driver/queue.h"
#include "npusim/firmware/counters.h"

namespace npu::isa {
struct Program;
}
namespace npu {
struct QueueSubmission;
}

namespace npu {

struct DeviceInfo {
  uint32_t isa_version = 0;
  uint32_t register_map_version = 0;
  uint32_t num_cores = 0;
  uint32_t num_queues = 0;
  uint64_t memory_bytes = 0;
  uint32_t clock_mhz = 0;
  // Device memory the driver keeps for its command queues (rings and fence
  // counters), at the top of memory; Buffers come from the rest.
  uint64_t reserved_bytes = 0;
  // Each core's scratchpad, and the part of it at its top that holds SRAM
  // buffers (DeviceOptions::sram_pool_bytes_per_core). Kernels that run while
  // SRAM buffers may be live must use only kernel_scratchpad_bytes.
  uint64_t scratchpad_bytes = 0;
  uint64_t sram_pool_bytes_per_core = 0;
  uint64_t kernel_scratchpad_bytes() const { return scratchpad_bytes - sram_pool_bytes_per_core; }
};

struct DeviceOptions {
  uint32_t ring_bytes = 64 << 10;  // each command queue's ring buffer (a multiple of 4, at least 64)
  // The top this many bytes of every core's scratchpad hold SRAM buffers
  // (allocate_sram): a multiple of 64, less than the scratchpad. 0: none.
  uint64_t sram_pool_bytes_per_core = 0;
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
  // Sets up every command queue and enables the interrupts.
  static std::shared_ptr<Device> open(std::unique_ptr<DeviceLink> link, const DeviceOptions& options = {});
  ~Device();

  const DeviceInfo& info() const { return info_; }

  // npu::OutOfMemoryError when no block fits (the message gives the sizes).
  Buffer allocate(uint64_t bytes, uint64_t alignment = 256);
  AllocatorStats memory_stats() const;
  // A buffer in one core's scratchpad, reached by DMA and the host link through
  // the core's window (a global address, so kernels take it as any buffer):
  // from the pool of the core with the most free bytes, or an empty Buffer when
  // no pool has room (callers fall back to allocate()). Its contents survive
  // device resets, as DRAM's do.
  Buffer allocate_sram(uint64_t bytes, uint64_t alignment = 256);
  AllocatorStats sram_stats() const;  // all cores' pools together (peak: the sum of each pool's peak)
  static bool is_sram_address(uint64_t address);
  void reset_peak_memory_stats();  // the peak restarts from what is in use now

  // Blocking copies through the host link; std::out_of_range outside the buffer.
  void copy_to_device(const Buffer& buffer, uint64_t offset, const void* data, uint64_t bytes);
  void copy_from_device(const Buffer& buffer, uint64_t offset, void* data, uint64_t bytes);

  DeviceLink& link() { return *link_; }

  // Command queue `index` (0 .. info().num_queues - 1).
  Queue queue(unsigned index);
  // Blocks until every queue has completed what was submitted to it; throws
  // as a fence wait does for a fault or a stopped queue, pending or not.
  void synchronize(std::chrono::nanoseconds timeout = kDefaultWaitTimeout);
  // The same, except that work abandoned by an earlier reset counts as done
  // (its cause, a fault, a queue error or a timeout, was thrown when it was
  // found): for callers that wait for "everything so far", such as a
  // framework's device synchronize, and must keep working after a fault.
  void drain(std::chrono::nanoseconds timeout = kDefaultWaitTimeout);

  // Called on a waiting thread every DeviceLink::kCancelCheckInterval of host
  // time while it waits for the device; when it returns true, the wait stops,
  // the device is reset (what was queued is abandoned, as after a timeout) and
  // the wait throws CancelledError. The PyTorch bridge checks for Ctrl-C here.
  void set_cancel_check(std::function<bool()> check);

  // The device's cycle counter, read through its registers.
  uint64_t now_cycle();
  std::chrono::nanoseconds cycles_to_time(uint64_t cycles) const;
  uint64_t time_to_cycles(std::chrono::nanoseconds time) const;

  // How many times the device has been reset (after faults, queue errors and
  // timeouts), and what the last reset abandoned, queue by queue.
  uint64_t resets() const;
  std::string last_reset_report() const;

  // What npu-smi prints, read live from the device: identity, memory in use
  // (and peak, free, fragmentation), status with any latched fault, interrupt
  // state, the cycle counter, resets, and the device counters (a COUNTERS
  // packet on the last queue, so it waits for that queue's earlier work).
  // Any process holding a Device can print it.
  std::string report();
  // The device counters now: a COUNTERS packet on the last queue (so after
  // that queue's earlier work), decoded.
  firmware::CounterSnapshot read_counters();

  Device(std::unique_ptr<DeviceLink> link, const DeviceInfo& info, const DeviceOptions& options);  // use open()

  static void check_range(const Buffer& buffer, uint64_t offset, uint64_t bytes);

 private:
  friend struct Buffer::State;
  friend class Queue;
  friend class Fence;
  friend class Event;
  friend uint64_t submit(QueueState& queue, QueueSubmission submission);
  // A launch that may be on a core, to name the instruction of a fault there.
  struct CoreLaunch {
    unsigned queue;
    uint64_t fence_value;
    std::shared_ptr<const isa::Program> program;
    unsigned core_id;  // the core's id within the launch
  };

  void free(uint64_t address);
  void setup_queues(const DeviceOptions& options);
  void program_queue_registers(QueueState& queue);
  // Waits until `queue` has completed `value`: interrupts serviced, faults
  // and queue errors turned into exceptions (after a reset), the timeout
  // enforced. `what` names the wait for messages and the trace.
  void wait_for_fence(QueueState& queue, uint64_t value, std::chrono::nanoseconds timeout, const std::string& what);
  // Reads the queue's completion counter and releases what completed work kept alive.
  uint64_t completed(QueueState& queue);
  // One round of interrupt service: throws after resetting the device on a
  // fault or queue error; returns whether any interrupt was pending.
  bool service_interrupts();
  DeviceFault read_fault();
  // Resets the device, marks all incomplete work abandoned because of `reason`.
  std::string reset_device(const std::string& reason);
  void note_launch(uint64_t core_mask, const CoreLaunch& launch);

  std::unique_ptr<DeviceLink> link_;
  DeviceInfo info_;
  mutable std::mutex mutex_;  // guards the allocator, core_launches_, the reset report
  DeviceAllocator allocator_;
  std::vector<DeviceAllocator> sram_pools_;  // one per core, over its window
  std::recursive_mutex wait_mutex_;  // one thread drives the device's waits and resets at a time
  // The driver's own device memory (not Buffers: those would keep the Device
  // alive): each queue's u64 completion counter, 64 bytes apart, and its ring.
  uint64_t fences_address_ = 0;
  std::vector<std::shared_ptr<QueueState>> queues_;
  std::vector<std::deque<CoreLaunch>> core_launches_;
  uint64_t resets_ = 0;
  std::string last_reset_report_;
  std::function<bool()> cancel_check_;  // guarded by mutex_
};

}  // namespace npu
