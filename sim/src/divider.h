// Exact unsigned division by a divisor fixed at construction: one 64 x 64 -> 128
// bit multiply and a correction, where a hardware divide costs tens of cycles.
// The timing model divides picosecond times and addresses by config constants
// (cycle length, interleave, row size, banks) several times per memory request.
#pragma once

#include <cstdint>

namespace npu::sim {

class Divider {
 public:
  explicit Divider(uint64_t divisor = 1)
      : divisor_(divisor), inverse_(UINT64_MAX / divisor), shift_((divisor & (divisor - 1)) == 0 ? __builtin_ctzll(divisor) : -1) {}

  uint64_t divisor() const { return divisor_; }
  uint64_t quotient(uint64_t n) const {
    // Most of the config's sizes (interleave, rows, banks, widths) are powers of two: a shift.
    if (shift_ >= 0) return n >> shift_;
    // floor(n * floor((2^64 - 1) / d) / 2^64) is at most floor(n / d) and at least floor(n / d) - 2.
    uint64_t q = static_cast<uint64_t>((static_cast<unsigned __int128>(n) * inverse_) >> 64);
    while (n - q * divisor_ >= divisor_) ++q;
    return q;
  }
  uint64_t remainder(uint64_t n) const { return shift_ >= 0 ? n & (divisor_ - 1) : n - quotient(n) * divisor_; }
  // ceil(n / d), as ceil_div(n, d) computes it.
  uint64_t ceil_quotient(uint64_t n) const { return quotient(n + divisor_ - 1); }

 private:
  uint64_t divisor_;
  uint64_t inverse_;
  int shift_;  // log2 of a power-of-two divisor, else -1
};

}  // namespace npu::sim
