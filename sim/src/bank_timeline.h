// An SRAM bank as a list of the short intervals for which it is reserved
// (DMA requests), with the gaps between them usable. Unlike Timeline's single
// "busy until", a reservation made for a future cycle (a DMA request issued
// ahead of its data) does not block accesses that come earlier.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <utility>
#include <vector>

namespace npu::sim {

class BankTimeline {
 public:
  // Whether every reservation has ended by `cycle`: the usual case for an access.
  bool free_from(uint64_t cycle) const { return live_ == busy_.size() || busy_.back().second <= cycle; }

  // The first cycle at or after `ready` from which the bank is free for `duration` cycles.
  uint64_t first_free(uint64_t ready, uint64_t duration) const {
    if (free_from(ready)) return ready;
    uint64_t start = ready;
    // Disjoint and sorted by start, so sorted by end too: skip those that end by `ready` in log time.
    auto it = busy_.begin() + static_cast<std::ptrdiff_t>(first_ending_after(start));
    for (; it != busy_.end(); ++it) {
      if (it->first >= start + duration) break;  // the gap before this one fits
      start = it->second;
    }
    return start;
  }

  // Reserves [start, start + duration), which must be free (first_free). A reservation that touches
  // a live one joins it: a gap of no cycles holds no access, so the answers stay the same, and a
  // link or bank kept busy by back-to-back requests is one interval, not one per request.
  void reserve(uint64_t start, uint64_t duration) {
    if (duration == 0) return;
    if (live_ == busy_.size()) {
      busy_.emplace_back(start, start + duration);
    } else if (busy_.back().first <= start) {  // usually the latest
      if (busy_.back().second == start) busy_.back().second = start + duration;
      else busy_.emplace_back(start, start + duration);
    } else {
      insert(start, start + duration);
    }
  }

  // Many intervals kept: time to prune.
  bool crowded() const { return busy_.size() - live_ > prune_at_; }
  // Drops the intervals that ended by `now` (no reservation starts before the
  // current cycle). What is still live after it (reservations issued ahead)
  // sets the next threshold at twice as many, so that a bank full of future
  // reservations is not pruned again at every access.
  void prune(uint64_t now) {
    while (live_ < busy_.size() && busy_[live_].second <= now) ++live_;
    if (live_ > busy_.size() / 2) {
      busy_.erase(busy_.begin(), busy_.begin() + static_cast<std::ptrdiff_t>(live_));
      live_ = 0;
    }
    prune_at_ = std::max<size_t>(kPruneAt, 2 * (busy_.size() - live_));
  }

  // A reservation before some made ahead of it: after the last one that starts by `from` (joined to
  // the live ones it touches).
  void insert(uint64_t from, uint64_t to) {
    const auto live = busy_.begin() + static_cast<std::ptrdiff_t>(live_);
    const auto at = std::partition_point(live, busy_.end(), [&](const std::pair<uint64_t, uint64_t>& interval) { return interval.first <= from; });
    const bool joins_before = at != live && std::prev(at)->second == from, joins_after = at != busy_.end() && at->first == to;
    if (joins_before && joins_after) {
      std::prev(at)->second = at->second;
      busy_.erase(at);
    } else if (joins_before) {
      std::prev(at)->second = to;
    } else if (joins_after) {
      at->first = from;
    } else {
      busy_.insert(at, {from, to});
    }
  }

  // The index of the first live interval that ends after `cycle` (busy_.size() if none): a binary
  // search without branches on the comparisons, which are unpredictable and dominated its time.
  size_t first_ending_after(uint64_t cycle) const {
    size_t first = live_, count = busy_.size() - live_;
    while (count > 0) {
      const size_t half = count / 2;
      const bool ended = busy_[first + half].second <= cycle;
      first = ended ? first + half + 1 : first;
      count = ended ? count - half - 1 : half;
    }
    return first;
  }

  static constexpr size_t kPruneAt = 32;
  size_t prune_at_ = kPruneAt;
  std::vector<std::pair<uint64_t, uint64_t>> busy_;  // [from, to), sorted by from, disjoint
  size_t live_ = 0;  // busy_[0 .. live_) ended before a past `now`
};

}  // namespace npu::sim
