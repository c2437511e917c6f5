#include <set>
#include <stdexcept>
#include <string>

#include "npusim/traces/writers.h"
#include "perfetto_reader.h"

namespace npu::trace {
namespace {

std::string track_name(const pb::TrackDescriptor& descriptor) {
  if (descriptor.has_name()) return descriptor.name();
  if (descriptor.has_thread()) return descriptor.thread().thread_name();
  if (descriptor.has_process()) return descriptor.process().process_name();
  return {};
}

}  // namespace

TraceSummary summarize_perfetto(const std::string& bytes) {
  TraceSummary summary;
  std::set<std::string> slice_names;
  const std::string error = for_each_packet(bytes, [&](size_t, const pb::TracePacket& packet) {
    if (packet.has_track_descriptor()) {
      ++summary.tracks;
      summary.track_names.push_back(track_name(packet.track_descriptor()));
    }
    if (!packet.has_track_event()) return;
    const pb::TrackEvent& event = packet.track_event();
    switch (event.type()) {
      case pb::TrackEvent::TYPE_SLICE_BEGIN:
      case pb::TrackEvent::TYPE_INSTANT:
        ++summary.slices;
        slice_names.insert(event.name());
        break;
      case pb::TrackEvent::TYPE_COUNTER: ++summary.counter_samples; break;
      default: break;
    }
  });
  if (!error.empty()) throw std::runtime_error("summarize_perfetto: " + error);
  summary.slice_names.assign(slice_names.begin(), slice_names.end());
  return summary;
}

}  // namespace npu::trace
