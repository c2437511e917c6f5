// A first-in first-out queue in one array that doubles when full. The
// engines' instruction queues use it: std::deque allocates and frees a block
// every few elements as a queue moves along, once per handful of instructions
// (3% of a timing-only GEMM run); this allocates only while it grows.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace npu::sim {

template <typename T>
class Ring {
 public:
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  T& front() { return slots_[head_]; }
  const T& front() const { return slots_[head_]; }
  void push_back(const T& value) {
    if (size_ == slots_.size()) grow();
    slots_[(head_ + size_) & (slots_.size() - 1)] = value;
    ++size_;
  }
  void pop_front() {
    head_ = (head_ + 1) & (slots_.size() - 1);
    --size_;
  }
  void clear() { head_ = size_ = 0; }  // (the elements stay until overwritten: for plain values)

 private:
  void grow() {
    std::vector<T> slots(slots_.empty() ? 8 : 2 * slots_.size());  // (a power of two: the index is masked)
    for (size_t i = 0; i < size_; ++i) slots[i] = std::move(slots_[(head_ + i) & (slots_.size() - 1)]);
    slots_ = std::move(slots);
    head_ = 0;
  }

  std::vector<T> slots_;
  size_t head_ = 0, size_ = 0;
};

}  // namespace npu::sim
