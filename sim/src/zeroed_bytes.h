// Memory that reads as zero until written, mapped from the OS: it costs host
// memory (and the time to zero it) only for the pages a program writes. Device
// DRAM can be larger than the host's memory (32 GiB on `large`), and a
// timing-only run never touches the scratchpads' bytes.
#pragma once

#include <cstdint>

namespace npu::sim {

class ZeroedBytes {
 public:
  ZeroedBytes() = default;
  // `what` names the memory in the error thrown when it cannot be mapped.
  ZeroedBytes(uint64_t size, const char* what);
  ~ZeroedBytes();
  ZeroedBytes(ZeroedBytes&& other) noexcept : data_(other.data_), size_(other.size_) { other.data_ = nullptr, other.size_ = 0; }
  ZeroedBytes& operator=(ZeroedBytes&& other) noexcept;
  ZeroedBytes(const ZeroedBytes&) = delete;
  ZeroedBytes& operator=(const ZeroedBytes&) = delete;

  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace npu::sim
