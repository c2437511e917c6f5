#include "zeroed_bytes.h"

#include <sys/mman.h>

#include <stdexcept>
#include <string>

namespace npu::sim {

ZeroedBytes::ZeroedBytes(uint64_t size, const char* what) : size_(size) {
  if (size == 0) return;
  // Without reserving swap: the OS hands out zero pages only where the program writes.
  void* memory = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (memory == MAP_FAILED) throw std::runtime_error("cannot map " + std::to_string(size) + " bytes of " + what);
  data_ = static_cast<uint8_t*>(memory);
}

ZeroedBytes::~ZeroedBytes() {
  if (data_) munmap(data_, size_);
}

ZeroedBytes& ZeroedBytes::operator=(ZeroedBytes&& other) noexcept {
  if (this != &other) {
    if (data_) munmap(data_, size_);
    data_ = other.data_, size_ = other.size_;
    other.data_ = nullptr, other.size_ = 0;
  }
  return *this;
}

}  // namespace npu::sim
