#include "background_work.h"

#include <immintrin.h>

#include <utility>

namespace npu::sim {

BackgroundWork::~BackgroundWork() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_one();
  thread_.join();  // (after the queue is empty: the thread finishes it first)
}

uint64_t BackgroundWork::submit(std::function<void()> work) {
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  {
    std::unique_lock<std::mutex> lock(mutex_);
    work_done_.wait(lock, [this] { return queue_.size() < kMaxQueued; });
    queue_.push_back(std::move(work));
    queued_.fetch_add(1, std::memory_order_release);
  }
  work_ready_.notify_one();
  return ++submitted_;
}

void BackgroundWork::wait_for(uint64_t number) {
  // Most waits are short (the rest of one product): spin a little before sleeping.
  for (int spin = 0; spin < 4096 && done() < number; ++spin) _mm_pause();
  std::unique_lock<std::mutex> lock(mutex_);
  work_done_.wait(lock, [this, number] { return done() >= number || error_ != nullptr; });
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void BackgroundWork::finish() noexcept {
  std::unique_lock<std::mutex> lock(mutex_);
  work_done_.wait(lock, [this] { return done() >= submitted_; });
}

void BackgroundWork::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (queue_.empty() && !stopping_) {
      // The next item usually comes within microseconds: spin a little before sleeping (waking costs more).
      lock.unlock();
      for (int spin = 0; spin < kSpinsBeforeSleeping && queued_.load(std::memory_order_acquire) == done(); ++spin) _mm_pause();
      lock.lock();
    }
    work_ready_.wait(lock, [this] { return !queue_.empty() || stopping_; });
    if (queue_.empty()) return;  // stopping, and all done
    std::function<void()> work = std::move(queue_.front());
    lock.unlock();
    std::exception_ptr error;
    try {
      work();
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error && !error_) error_ = error;
    queue_.pop_front();
    done_.fetch_add(1, std::memory_order_release);
    work_done_.notify_all();
  }
}

}  // namespace npu::sim
