// The order both writers emit events in: by time, and on each track in an
// order a slice stack can replay, whatever order the events were recorded in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "npusim/traces/trace.h"

namespace npu::trace {

enum class EventKind : uint8_t { SliceBegin, SliceEnd, Counter };

struct OrderedEvent {
  uint64_t time = 0;   // in the writer's ticks: picoseconds / ps_per_tick
  size_t item = 0;     // index into trace.slices() or trace.counters()
  uint32_t track = 0;  // index into trace.tracks()
  EventKind kind = EventKind::SliceBegin;
};

// Every slice's begin and end and every counter sample, sorted by time, then
// by track, then so that on each track ends come before begins at the same
// time (back-to-back slices) and an enclosing slice begins before and ends
// after what it encloses (the longer of two slices beginning together
// encloses the shorter). Throws std::invalid_argument if two slices on one
// track overlap without one enclosing the other, since no slice stack
// (Perfetto's or a trace viewer's) can show that.
std::vector<OrderedEvent> order_events(const Trace& trace, uint64_t ps_per_tick);

}  // namespace npu::trace
