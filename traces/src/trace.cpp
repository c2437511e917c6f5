#include "npusim/traces/trace.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <stdexcept>

namespace npu::trace {
namespace {

const char* kind_name(TrackKind kind) {
  switch (kind) {
    case TrackKind::Process: return "process";
    case TrackKind::Thread: return "thread";
    case TrackKind::Counter: return "counter";
  }
  return "unknown";
}

std::string describe(const Track& track) {
  return std::string(kind_name(track.kind)) + " track " + std::to_string(track.id) + " ('" + track.name + "')";
}

[[noreturn]] void reject(const std::string& message) { throw std::invalid_argument(message); }

}  // namespace

void Trace::add_track(Track track) {
  if (track.id == 0) reject("add_track: track id 0 is reserved ('" + track.name + "')");
  if (const Track* existing = find_track(track.id))
    reject("add_track: duplicate track id " + std::to_string(track.id) + ": " + describe(track) + " clashes with " +
           describe(*existing));
  if (track.kind == TrackKind::Process) {
    if (track.parent != 0) reject("add_track: " + describe(track) + " must not have a parent");
  } else {
    if (track.parent == 0) reject("add_track: " + describe(track) + " needs a parent process track");
    const Track* parent = find_track(track.parent);
    if (parent == nullptr)
      reject("add_track: " + describe(track) + " names unknown parent " + std::to_string(track.parent));
    if (parent->kind != TrackKind::Process)
      reject("add_track: " + describe(track) + " has parent " + describe(*parent) + ", not a process track");
  }
  index_.emplace(track.id, tracks_.size());
  tracks_.push_back(std::move(track));
}

void Trace::add_slice(Slice slice) {
  const Track* track = find_track(slice.track);
  if (track == nullptr)
    reject("add_slice: slice '" + slice.name + "' on unknown track " + std::to_string(slice.track));
  if (track->kind == TrackKind::Counter) reject("add_slice: slice '" + slice.name + "' on " + describe(*track));
  if (slice.end_ps < slice.begin_ps)
    reject("add_slice: slice '" + slice.name + "' ends (" + std::to_string(slice.end_ps) + " ps) before it begins (" +
           std::to_string(slice.begin_ps) + " ps)");
  slices_.push_back(std::move(slice));
}

void Trace::add_counter(TrackId track_id, uint64_t time_ps, double value) {
  const Track* track = find_track(track_id);
  if (track == nullptr) reject("add_counter: sample on unknown track " + std::to_string(track_id));
  if (track->kind != TrackKind::Counter) reject("add_counter: sample on " + describe(*track));
  // JSON has no spelling for NaN or infinity; refusing here points at the
  // code that computed the value rather than at a writer much later.
  if (!std::isfinite(value)) reject("add_counter: non-finite value on " + describe(*track));
  counters_.push_back(CounterSample{track_id, time_ps, value});
}

const Track* Trace::find_track(TrackId id) const {
  const auto found = index_.find(id);
  return found == index_.end() ? nullptr : &tracks_[found->second];
}

TrackId Trace::next_free_id() const {
  TrackId highest = 0;
  for (const Track& track : tracks_) highest = std::max(highest, track.id);
  if (highest < std::numeric_limits<TrackId>::max()) return highest + 1;
  // Someone used the top id: fall back to the lowest gap.
  TrackId id = 1;
  while (index_.count(id) != 0) ++id;
  return id;
}

Trace since(const Trace& trace, uint64_t begin_ps) {
  Trace kept;
  for (const Track& track : trace.tracks()) kept.add_track(track);
  std::unordered_map<uint64_t, int> ends;  // flow id -> its ends kept (out: 1, in: 2)
  for (const Slice& slice : trace.slices()) {
    if (slice.begin_ps < begin_ps) continue;
    for (uint64_t flow : slice.flows_out) ends[flow] |= 1;
    for (uint64_t flow : slice.flows_in) ends[flow] |= 2;
  }
  const auto both_kept = [&](uint64_t flow) { return ends[flow] == 3; };
  for (const Slice& slice : trace.slices()) {
    if (slice.category == "metadata" && slice.begin_ps < begin_ps) {
      Slice moved = slice;
      moved.begin_ps = moved.end_ps = begin_ps;
      moved.flows_out.clear(), moved.flows_in.clear();
      kept.add_slice(std::move(moved));
      continue;
    }
    if (slice.begin_ps < begin_ps) continue;
    Slice copy = slice;
    copy.flows_out.clear(), copy.flows_in.clear();
    std::copy_if(slice.flows_out.begin(), slice.flows_out.end(), std::back_inserter(copy.flows_out), both_kept);
    std::copy_if(slice.flows_in.begin(), slice.flows_in.end(), std::back_inserter(copy.flows_in), both_kept);
    kept.add_slice(std::move(copy));
  }
  for (const CounterSample& sample : trace.counters())
    if (sample.time_ps >= begin_ps) kept.add_counter(sample.track, sample.time_ps, sample.value);
  return kept;
}

}  // namespace npu::trace
