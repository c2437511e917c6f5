#include "event_order.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "track_layout.h"

namespace npu::trace {
namespace {

struct Span {
  uint64_t begin = 0;
  uint64_t end = 0;
  size_t slice = 0;
};

[[noreturn]] void reject_overlap(const Trace& trace, const Span& outer, const Span& inner, uint64_t ps_per_tick) {
  const auto describe = [&](const Span& span) {
    const Slice& slice = trace.slices()[span.slice];
    return "'" + slice.name + "' [" + std::to_string(slice.begin_ps) + ", " + std::to_string(slice.end_ps) + "] ps";
  };
  const Track& track = *trace.find_track(trace.slices()[outer.slice].track);
  std::string message = "slices " + describe(outer) + " and " + describe(inner) + " on track '" + track.name +
                        "' overlap without nesting";
  if (ps_per_tick > 1) message += " (at the output's " + std::to_string(ps_per_tick) + " ps resolution)";
  throw std::invalid_argument(message);
}

// Appends one track's slices as begin/end events in stack order.
void order_track(const Trace& trace, uint32_t track, std::vector<Span>& spans, uint64_t ps_per_tick,
                 std::vector<OrderedEvent>& events) {
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end > b.end;  // the longer encloses the shorter
    return a.slice < b.slice;
  });
  std::vector<const Span*> open;
  const auto close = [&] {
    events.push_back(OrderedEvent{open.back()->end, open.back()->slice, track, EventKind::SliceEnd});
    open.pop_back();
  };
  for (const Span& span : spans) {
    // A slice ending exactly where this one begins is closed first, so
    // back-to-back slices stay siblings.
    while (!open.empty() && open.back()->end <= span.begin) close();
    if (!open.empty() && span.end > open.back()->end) reject_overlap(trace, *open.back(), span, ps_per_tick);
    events.push_back(OrderedEvent{span.begin, span.slice, track, EventKind::SliceBegin});
    open.push_back(&span);
  }
  while (!open.empty()) close();
}

}  // namespace

std::vector<OrderedEvent> order_events(const Trace& trace, uint64_t ps_per_tick) {
  const std::vector<Slice>& slices = trace.slices();
  const std::vector<CounterSample>& counters = trace.counters();

  std::vector<std::vector<Span>> spans_by_track(trace.tracks().size());
  for (size_t i = 0; i < slices.size(); ++i)
    spans_by_track[track_index(trace, slices[i].track)].push_back(
        Span{slices[i].begin_ps / ps_per_tick, slices[i].end_ps / ps_per_tick, i});

  std::vector<OrderedEvent> events;
  events.reserve(2 * slices.size() + counters.size());
  for (size_t track = 0; track < spans_by_track.size(); ++track) {
    order_track(trace, static_cast<uint32_t>(track), spans_by_track[track], ps_per_tick, events);
    spans_by_track[track] = {};  // release memory early: large traces hold millions of spans
  }
  for (size_t i = 0; i < counters.size(); ++i)
    events.push_back(OrderedEvent{counters[i].time_ps / ps_per_tick, i,
                                  static_cast<uint32_t>(track_index(trace, counters[i].track)), EventKind::Counter});

  // Stable: each track's events are already in the order its stack needs.
  std::stable_sort(events.begin(), events.end(), [](const OrderedEvent& a, const OrderedEvent& b) {
    if (a.time != b.time) return a.time < b.time;
    return a.track < b.track;
  });
  return events;
}

}  // namespace npu::trace
