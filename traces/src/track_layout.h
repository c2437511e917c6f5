// How the tracks of a Trace map onto the process/thread model both output
// formats share: pids, tids and display ranks, assigned deterministically.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "npusim/traces/trace.h"

namespace npu::trace {

struct TrackLayout {
  // All indexed like trace.tracks().
  std::vector<int32_t> pid;   // the track's process (its own pid for a process track)
  std::vector<int32_t> tid;   // thread tracks: a tid unique in the whole trace; others: the pid
  std::vector<int32_t> rank;  // position among its siblings: by sort_index, then order of addition
};

TrackLayout lay_out_tracks(const Trace& trace);

// Position of a track known to be in the trace.
size_t track_index(const Trace& trace, TrackId id);

}  // namespace npu::trace
