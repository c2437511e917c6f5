// Command queues, fences and events (docs/design/command_path.md).
//
// A Queue runs what is submitted to it in order, one submission after the
// other; different queues run side by side (on different cores, or the copy
// engine and the cores). Every submission returns a Fence that completes when
// it has. Waits are bounded by a timeout in *device* time (the simulated
// clock), so that a run is deterministic; a wait that times out, or that
// meets a device fault, resets the device (npu::TimeoutError,
// npu::DeviceError), and every submission that had not completed then is
// reported as abandoned: waiting on its fence throws npu::AbandonedError.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "npusim/driver/device_link.h"

namespace npu {

class Buffer;
class Device;
class Program;
struct QueueState;

// Default bound on a wait: a second of device time.
inline constexpr std::chrono::nanoseconds kDefaultWaitTimeout = std::chrono::seconds(1);

class Fence {
 public:
  Fence() = default;  // an empty fence: already complete
  // True once the submission has completed. Throws as wait() does when the
  // device has faulted or the submission was abandoned.
  bool query() const;
  // Returns once the submission has completed.
  void wait(std::chrono::nanoseconds timeout = kDefaultWaitTimeout) const;
  unsigned queue() const;
  uint64_t value() const { return value_; }  // the queue's submission count when it completes
  explicit operator bool() const { return state_ != nullptr; }

 private:
  friend class Queue;
  friend class Device;
  Fence(std::shared_ptr<QueueState> state, uint64_t value) : state_(std::move(state)), value_(value) {}
  std::shared_ptr<QueueState> state_;
  uint64_t value_ = 0;
};

// A point in a queue with the device time it was reached.
class Event {
 public:
  Event() = default;
  const Fence& fence() const { return fence_; }
  // The device cycle at which the queue reached the event; waits for it.
  uint64_t cycle(std::chrono::nanoseconds timeout = kDefaultWaitTimeout) const;
  // Device time from `start` to `end` (both waited for).
  static uint64_t elapsed_cycles(const Event& start, const Event& end);
  static std::chrono::nanoseconds elapsed(const Event& start, const Event& end);

 private:
  friend class Queue;
  Fence fence_;
  std::shared_ptr<const Buffer> timestamp_;  // u64 the device writes
  std::shared_ptr<Device> device_;
};

// Buffers bound to a program's symbols by name, for one launch.
struct Binding {
  std::string symbol;
  const Buffer* buffer;
};

class Queue {
 public:
  unsigned index() const;

  // Host memory given to these must stay valid (and, for copy_to_device,
  // unchanged) until the returned fence completes.
  Fence copy_to_device(const Buffer& dst, uint64_t dst_offset, const void* src, uint64_t bytes);
  Fence copy_from_device(void* dst, const Buffer& src, uint64_t src_offset, uint64_t bytes);
  Fence copy(const Buffer& dst, uint64_t dst_offset, const Buffer& src, uint64_t src_offset, uint64_t bytes);
  Fence fill(const Buffer& dst, uint64_t offset, uint64_t bytes, uint32_t pattern);

  // Runs `program` on the cores in core_mask (0: the program's own default,
  // Program::default_core_mask). Core i of the mask, counting from the
  // lowest, is the program's core id i. Every input and output symbol must
  // be bound; scratch and data symbols use the program's own buffers unless
  // bound. npu::Error for a missing or too small binding.
  // `annotations` go with the launch's span in the trace (what the kernel computes, for whom).
  Fence launch(const Program& program, const std::vector<Binding>& bindings, uint64_t core_mask = 0,
               const std::array<uint64_t, 8>& args = {}, const TraceArgs& annotations = {});

  // Later submissions of this queue wait (on the device) until `fence`,
  // usually another queue's, has completed.
  void wait_for(const Fence& fence);

  Event record_event();
  // The device's counters (docs/packets.md, COUNTERS) when the queue reaches this point.
  Fence snapshot_counters(std::vector<uint64_t>* words);

  // The fence of everything submitted so far.
  Fence last_fence() const;
  void synchronize(std::chrono::nanoseconds timeout = kDefaultWaitTimeout) { last_fence().wait(timeout); }

 private:
  friend class Device;
  explicit Queue(std::shared_ptr<QueueState> state) : state_(std::move(state)) {}
  std::shared_ptr<QueueState> state_;
};

}  // namespace npu
