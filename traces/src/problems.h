// Collects a validator's findings. A trace broken the same way a million
// times should yield a readable report, not a million lines.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace npu::trace {

class Problems {
 public:
  static constexpr size_t kMaxReported = 100;

  void add(std::string problem) {
    if (list_.size() < kMaxReported)
      list_.push_back(std::move(problem));
    else
      ++omitted_;
  }

  std::vector<std::string> take() {
    if (omitted_ > 0) list_.push_back("... and " + std::to_string(omitted_) + " more problems");
    return std::move(list_);
  }

 private:
  std::vector<std::string> list_;
  size_t omitted_ = 0;
};

}  // namespace npu::trace
