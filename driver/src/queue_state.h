// What the driver keeps per command queue (shared by Queue, Fence, Event handles).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "npusim/driver/device.h"
#include "npusim/firmware/packets.h"

namespace npu {

struct QueueState {
  std::weak_ptr<Device> device;
  unsigned index = 0;
  std::string track;  // host trace track

  // Guarded by mutex: the ring and the submission counters.
  std::mutex mutex;
  uint64_t ring_address = 0;
  uint32_t ring_bytes = 0;
  uint32_t tail = 0;        // byte offset, as written to TAIL
  uint32_t head = 0;        // last HEAD read from the device
  uint64_t submitted = 0;   // fence value of the latest submission
  uint64_t packets = 0;     // packets written since the last reset (trace flow ids)

  // What completed work kept alive until it completed; guarded by mutex.
  struct Pending {
    uint64_t value;
    std::vector<Buffer> buffers;
    std::vector<uint64_t> host_registrations;
  };
  std::deque<Pending> pending;

  // Submissions (completed_at_reset, abandoned_up_to] were abandoned by the
  // reset described by abandon_reason; guarded by mutex.
  uint64_t completed_at_reset = 0;
  uint64_t abandoned_up_to = 0;
  std::string abandon_reason;
  // The last completion counter read; written under mutex, read without it
  // by the fault decoder (which launches could still be on a core).
  std::atomic<uint64_t> completed{0};

  std::shared_ptr<Device> lock_device() const {
    auto d = device.lock();
    if (!d) throw Error("the device of this queue is closed");
    return d;
  }
};

// What one submission consists of (queue.cpp writes it).
struct QueueSubmission {
  std::vector<firmware::Packet> packets;
  std::string name;
  TraceArgs trace_args;  // shown with its host span
  QueueState::Pending keep;
};

// Writes the submission's packets plus its FENCE_SIGNAL (waiting while the
// ring is full); returns its fence value.
uint64_t submit(QueueState& queue, QueueSubmission submission);

}  // namespace npu
