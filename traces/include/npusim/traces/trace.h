// The trace event model: every layer records into a Trace; writers turn it
// into Perfetto protobuf (.pftrace) or Chrome JSON (.json).
//
// A trace is a set of tracks (processes, threads, counters) and events on
// them. Timestamps are picoseconds of device time (host-side events are
// mapped onto the same time base by whoever records them). Events may be
// recorded in any order; writers sort them so that every track's timestamps
// are monotonic and slices on a track nest.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace npu::trace {

using TrackId = uint64_t;  // unique, non-zero

enum class TrackKind : uint8_t { Process, Thread, Counter };

enum class CounterUnit : uint8_t { Count, Bytes, BytesPerCycle, Percent, Watts };

struct Track {
  TrackId id = 0;
  TrackId parent = 0;  // Thread and Counter tracks: their process track; Process: 0
  TrackKind kind = TrackKind::Thread;
  std::string name;
  CounterUnit unit = CounterUnit::Count;  // Counter tracks only
  int32_t sort_index = 0;                 // display order among siblings
};

// A named argument shown with a slice.
struct Arg {
  std::string name;
  std::string value;
};

struct Slice {
  TrackId track = 0;
  uint64_t begin_ps = 0;
  uint64_t end_ps = 0;  // >= begin_ps
  std::string name;
  std::string category;
  std::vector<Arg> args;
  std::vector<uint64_t> flows_out;  // flow ids that start at this slice
  std::vector<uint64_t> flows_in;   // flow ids that end at this slice
};

struct CounterSample {
  TrackId track = 0;
  uint64_t time_ps = 0;
  double value = 0;
};

class Trace {
 public:
  // Adds a track; throws std::invalid_argument for a zero or duplicate id,
  // a missing parent, or a parent of the wrong kind.
  void add_track(Track track);
  // Records a slice / counter sample; throws std::invalid_argument for an
  // unknown track, end before begin, or a slice on a counter track (and a
  // sample on a non-counter track).
  void add_slice(Slice slice);
  void add_counter(TrackId track, uint64_t time_ps, double value);

  const std::vector<Track>& tracks() const { return tracks_; }
  const std::vector<Slice>& slices() const { return slices_; }
  const std::vector<CounterSample>& counters() const { return counters_; }
  const Track* find_track(TrackId id) const;

  // A fresh id for callers that do not manage their own.
  TrackId next_free_id() const;

 private:
  std::vector<Track> tracks_;
  std::vector<Slice> slices_;
  std::vector<CounterSample> counters_;
  std::unordered_map<TrackId, size_t> index_;  // id -> position in tracks_
};

// The part of `trace` from `begin_ps` on: every track, the slices that begin and the counter samples
// taken at or after it, and the flows whose two ends are both kept. Slices of category "metadata"
// (what the trace describes) are kept whenever they begin, moved to `begin_ps`.
Trace since(const Trace& trace, uint64_t begin_ps);

}  // namespace npu::trace
