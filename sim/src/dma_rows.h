// The rows of a DMA transfer (dma_engine.cpp, dma_steps.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

namespace npu::sim {

// The rows of a transfer, in order, as (source offset, destination offset)
// pairs. A 3-D block's (n2 planes of n1 rows; an extent register holding 0
// counts as 1) are computed as they are walked, so that a large block costs
// no list; a gather's are listed, read from its index array before any byte
// moves. Offsets wrap modulo 2^64, as the registers do.
class DmaRows {
 public:
  DmaRows(uint64_t n1, uint64_t n2, uint64_t src_s1, uint64_t dst_s1, uint64_t src_s2, uint64_t dst_s2)
      : n1_(std::max<uint64_t>(n1, 1)), n2_(std::max<uint64_t>(n2, 1)), src_s1_(src_s1), dst_s1_(dst_s1), src_s2_(src_s2), dst_s2_(dst_s2) {}
  explicit DmaRows(std::vector<std::pair<uint64_t, uint64_t>> listed) : listed_(std::move(listed)), is_listed_(true) {}

  // The next row's offsets; false after the last.
  uint64_t count() const { return is_listed_ ? listed_.size() : n1_ * n2_; }
  bool next(uint64_t* src_offset, uint64_t* dst_offset) {
    if (is_listed_) {
      if (index_ == listed_.size()) return false;
      std::tie(*src_offset, *dst_offset) = listed_[index_++];
      return true;
    }
    if (plane_ == n2_) return false;
    *src_offset = src_row_, *dst_offset = dst_row_;
    if (++row_ < n1_) {
      src_row_ += src_s1_, dst_row_ += dst_s1_;
    } else {
      row_ = 0, ++plane_;
      src_row_ = src_plane_ += src_s2_, dst_row_ = dst_plane_ += dst_s2_;
    }
    return true;
  }

  // How many rows, from the next one on, are left in its plane, evenly spaced by the source and
  // destination strides it sets (a listed transfer's rows: one at a time).
  uint64_t run_length(uint64_t* src_stride, uint64_t* dst_stride) const {
    if (is_listed_) {
      *src_stride = *dst_stride = 0;
      return index_ < listed_.size() ? 1 : 0;
    }
    *src_stride = src_s1_, *dst_stride = dst_s1_;
    return plane_ == n2_ ? 0 : n1_ - row_;
  }
  // Skips `rows` rows of the plane, at most run_length() (next() then gives the one after them).
  void skip(uint64_t rows) {
    if (rows == 0) return;
    if (row_ + rows < n1_) {
      row_ += rows;
      src_row_ += rows * src_s1_, dst_row_ += rows * dst_s1_;
    } else {
      row_ = 0, ++plane_;
      src_row_ = src_plane_ += src_s2_, dst_row_ = dst_plane_ += dst_s2_;
    }
  }

  // For a block whose strides are all below 2^63 (none "negative"): how far
  // its last row starts past its first, for source and destination. A row
  // lies between the first row's start and the last row's end.
  bool last_row(unsigned __int128* src_offset, unsigned __int128* dst_offset) const {
    constexpr uint64_t kSign = uint64_t{1} << 63;
    if (is_listed_ || ((src_s1_ | dst_s1_ | src_s2_ | dst_s2_) & kSign)) return false;
    *src_offset = static_cast<unsigned __int128>(n1_ - 1) * src_s1_ + static_cast<unsigned __int128>(n2_ - 1) * src_s2_;
    *dst_offset = static_cast<unsigned __int128>(n1_ - 1) * dst_s1_ + static_cast<unsigned __int128>(n2_ - 1) * dst_s2_;
    return true;
  }

 private:
  uint64_t n1_ = 1, n2_ = 1, src_s1_ = 0, dst_s1_ = 0, src_s2_ = 0, dst_s2_ = 0;
  uint64_t row_ = 0, plane_ = 0;
  uint64_t src_row_ = 0, dst_row_ = 0, src_plane_ = 0, dst_plane_ = 0;
  std::vector<std::pair<uint64_t, uint64_t>> listed_;
  size_t index_ = 0;
  bool is_listed_ = false;
};

}  // namespace npu::sim
