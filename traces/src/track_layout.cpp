#include "track_layout.h"

#include <algorithm>

namespace npu::trace {

size_t track_index(const Trace& trace, TrackId id) {
  return static_cast<size_t>(trace.find_track(id) - trace.tracks().data());
}

TrackLayout lay_out_tracks(const Trace& trace) {
  const std::vector<Track>& tracks = trace.tracks();
  TrackLayout layout;
  layout.pid.assign(tracks.size(), 0);
  layout.tid.assign(tracks.size(), 0);
  layout.rank.assign(tracks.size(), 0);

  // Pids count processes from 1. Tids continue after the last pid, so no tid
  // is ever mistaken for a process's main thread (tid == pid) or reused
  // across processes, which Perfetto would merge.
  int32_t next_pid = 1;
  for (size_t i = 0; i < tracks.size(); ++i)
    if (tracks[i].kind == TrackKind::Process) layout.pid[i] = layout.tid[i] = next_pid++;
  int32_t next_tid = next_pid;
  std::vector<std::vector<size_t>> children(tracks.size() + 1);  // last: the processes
  for (size_t i = 0; i < tracks.size(); ++i) {
    if (tracks[i].kind == TrackKind::Process) {
      children.back().push_back(i);
      continue;
    }
    const size_t parent = track_index(trace, tracks[i].parent);
    layout.pid[i] = layout.pid[parent];
    layout.tid[i] = tracks[i].kind == TrackKind::Thread ? next_tid++ : layout.pid[i];
    children[parent].push_back(i);
  }

  for (std::vector<size_t>& siblings : children) {
    std::stable_sort(siblings.begin(), siblings.end(),
                     [&](size_t a, size_t b) { return tracks[a].sort_index < tracks[b].sort_index; });
    for (size_t position = 0; position < siblings.size(); ++position)
      layout.rank[siblings[position]] = static_cast<int32_t>(position);
  }
  return layout;
}

}  // namespace npu::trace
