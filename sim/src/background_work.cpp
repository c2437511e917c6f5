#include "background_work.h"

#include <immintrin.h>
#include <pthread.h>

#include <algorithm>
#include <new>
#include <utility>
#include <vector>

namespace npu::sim {

// Around fork(): every instance's items finished and its lock held, so that
// the child's copy of each is idle and unlocked; in the child, no thread.
struct ForkHandlers {
  static std::mutex& registry_mutex() {
    static std::mutex* mutex = new std::mutex;  // (never destroyed: a fork may come after static destructors)
    return *mutex;
  }
  static std::vector<BackgroundWork*>& live() {
    static auto* instances = new std::vector<BackgroundWork*>;
    return *instances;
  }
  static void prepare() {
    registry_mutex().lock();
    for (BackgroundWork* work : live()) {
      work->finish();
      work->mutex_.lock();
    }
  }
  static void parent() {
    for (BackgroundWork* work : live()) work->mutex_.unlock();
    registry_mutex().unlock();
  }
  static void child() {
    static auto* abandoned = new std::vector<std::thread*>;  // (kept reachable: not a leak)
    for (BackgroundWork* work : live()) {
      if (work->thread_) {
        abandoned->push_back(work->thread_.release());  // (the parent's thread: not the child's to join)
        work->forked_ = true;
        // The parent's thread may have been waiting on them: fresh ones, which nobody waits on.
        new (&work->work_ready_) std::condition_variable;
        new (&work->work_done_) std::condition_variable;
      }
      work->mutex_.unlock();
    }
    registry_mutex().unlock();
  }
};

BackgroundWork::BackgroundWork() {
  static const bool registered = pthread_atfork(ForkHandlers::prepare, ForkHandlers::parent, ForkHandlers::child) == 0;
  (void)registered;
  std::lock_guard<std::mutex> lock(ForkHandlers::registry_mutex());
  ForkHandlers::live().push_back(this);
}

BackgroundWork::~BackgroundWork() {
  {
    std::lock_guard<std::mutex> lock(ForkHandlers::registry_mutex());
    auto& live = ForkHandlers::live();
    live.erase(std::find(live.begin(), live.end(), this));
  }
  if (!thread_) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_one();
  thread_->join();  // (after the queue is empty: the thread finishes it first)
}

uint64_t BackgroundWork::submit(std::function<void()> work) {
  if (forked_) {
    work();
    done_.store(++submitted_, std::memory_order_release);
    return submitted_;
  }
  if (!thread_) thread_ = std::make_unique<std::thread>([this] { run(); });
  uint64_t number;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    work_done_.wait(lock, [this] { return queue_.size() < kMaxQueued; });
    queue_.push_back(std::move(work));
    queued_.fetch_add(1, std::memory_order_release);
    number = ++submitted_;
  }
  work_ready_.notify_one();
  return number;
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
    if (const int64_t delay_us = item_delay_us_.load()) std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
    try {
      work();
    } catch (...) {
      error = std::current_exception();
    }
    work = nullptr;  // (what it holds is released before it counts as done: nothing of it is left at a fork)
    lock.lock();
    if (error && !error_) error_ = error;
    queue_.pop_front();
    done_.fetch_add(1, std::memory_order_release);
    work_done_.notify_all();
  }
}

}  // namespace npu::sim
