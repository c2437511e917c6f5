// Arithmetic the simulation hands to a second host thread: the tensor core's
// products (functional mode), the conversions of them and the DMA stores of
// those, so that they run while the simulation goes on. Work runs one item at
// a time in the order it was submitted; whoever reads or writes bytes an item
// uses waits for it first (BackgroundUses::settle, which the local memories
// and DRAM call on every access), so every result is the one the simulation
// would compute itself, and no item may touch anything else the simulation
// can change.
//
// fork() copies only the thread that calls it: every BackgroundWork finishes
// its items before a fork, and in the child runs later items at once, on the
// thread that submits them (a forked DataLoader worker, say, keeps working).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace npu::sim {

class BackgroundWork {
 public:
  BackgroundWork();
  BackgroundWork(const BackgroundWork&) = delete;
  BackgroundWork& operator=(const BackgroundWork&) = delete;
  ~BackgroundWork();  // finishes what was submitted

  // Queues `work` and returns its number (1, 2, ...). Starts the thread at
  // the first call; waits while kMaxQueued items are still queued, which
  // bounds the memory their captured operands hold.
  uint64_t submit(std::function<void()> work);
  // The number of the last item done (items finish in order).
  uint64_t done() const { return done_.load(std::memory_order_acquire); }
  // Whether a submit() now would wait for room (kMaxQueued items queued): a
  // moment where the submitting thread has time for work of its own.
  bool full() const { return queued_.load(std::memory_order_acquire) - done() >= kMaxQueued; }
  // Returns once item `number` is done; rethrows what an item threw (once).
  void wait_for(uint64_t number);
  void wait_all() { wait_for(submitted_); }
  // Returns once every item is done, whatever they threw (for destructors).
  void finish() noexcept;

  static constexpr size_t kMaxQueued = 16;

  // Tests only: every item waits this long before it runs, so that the
  // simulation is sure to reach the accesses after it while it is still
  // queued (a check of the waits for it that cannot pass by luck).
  static void set_item_delay_for_tests(std::chrono::microseconds delay) { item_delay_us_.store(delay.count()); }

 private:
  friend struct ForkHandlers;
  void run();

  std::mutex mutex_;
  std::condition_variable work_ready_, work_done_;
  std::deque<std::function<void()>> queue_;  // (guarded by mutex_)
  bool stopping_ = false;                     // (guarded by mutex_)
  std::exception_ptr error_;                  // the first an item threw (guarded by mutex_)
  uint64_t submitted_ = 0;                    // (written by the simulating thread, under mutex_: a fork reads it)
  std::atomic<uint64_t> done_{0};
  std::atomic<uint64_t> queued_{0};  // items submitted so far, for the thread's spinning
  static constexpr int kSpinsBeforeSleeping = 2000;
  static inline std::atomic<int64_t> item_delay_us_{0};
  std::unique_ptr<std::thread> thread_;  // null until the first item
  bool forked_ = false;                  // in a child of fork(): no thread, items run at once
};

}  // namespace npu::sim
