#include <string>
#include <map>
#include <vector>

#include "npusim/traces/writers.h"
#include "perfetto_reader.h"
#include "problems.h"

namespace npu::trace {
namespace {

struct TrackState {
  bool counter = false;
  bool has_events = false;
  uint64_t last_timestamp = 0;
  std::vector<std::string> open_slices;  // names, innermost last
};

std::string type_name(pb::TrackEvent::Type type) {
  switch (type) {
    case pb::TrackEvent::TYPE_SLICE_BEGIN: return "SLICE_BEGIN";
    case pb::TrackEvent::TYPE_SLICE_END: return "SLICE_END";
    case pb::TrackEvent::TYPE_INSTANT: return "INSTANT";
    case pb::TrackEvent::TYPE_COUNTER: return "COUNTER";
    default: return "type " + std::to_string(static_cast<int>(type));
  }
}

class PerfettoValidator {
 public:
  void visit(size_t number, const pb::TracePacket& packet) {
    number_ = number;
    if (!packet.has_trusted_packet_sequence_id())
      problems_.add(where() + ": no trusted_packet_sequence_id (Perfetto drops such packets)");
    if (packet.has_track_descriptor()) on_descriptor(packet.track_descriptor());
    if (packet.has_track_event()) {
      if (!packet.has_timestamp()) problems_.add(where() + ": track event without a timestamp");
      on_event(packet.timestamp(), packet.track_event());
    }
  }

  std::vector<std::string> finish() {
    for (const auto& [uuid, parent] : parents_)
      if (tracks_.count(parent) == 0)
        problems_.add("track " + std::to_string(uuid) + ": parent_uuid " + std::to_string(parent) +
                      " is never described");
    for (const auto& [uuid, track] : tracks_)
      for (const std::string& name : track.open_slices)
        problems_.add("track " + std::to_string(uuid) + ": slice '" + name + "' never ends");
    return problems_.take();
  }

  Problems& problems() { return problems_; }

 private:
  // Messages are built only when there is a problem: valid traces of
  // millions of events should not pay for them.
  std::string where() const { return "packet " + std::to_string(number_); }

  void on_descriptor(const pb::TrackDescriptor& descriptor) {
    const uint64_t uuid = descriptor.uuid();
    if (uuid == 0) {
      problems_.add(where() + ": track descriptor without a non-zero uuid");
      return;
    }
    if (tracks_.count(uuid) != 0) {
      problems_.add(where() + ": track uuid " + std::to_string(uuid) + " described twice");
      return;
    }
    tracks_[uuid].counter = descriptor.has_counter();
    if (descriptor.has_parent_uuid()) parents_.emplace_back(uuid, descriptor.parent_uuid());
  }

  void on_event(uint64_t timestamp, const pb::TrackEvent& event) {
    const auto what = [&] { return where() + ": " + type_name(event.type()) + " event"; };
    const auto on_track = [&] { return what() + " on track " + std::to_string(event.track_uuid()); };
    if (!event.has_track_uuid()) {
      problems_.add(what() + " without a track_uuid");
      return;
    }
    const auto found = tracks_.find(event.track_uuid());
    if (found == tracks_.end()) {
      problems_.add(on_track() + ", not described before");
      return;
    }
    TrackState& track = found->second;
    if (track.has_events && timestamp < track.last_timestamp)
      problems_.add(on_track() + ": timestamp " + std::to_string(timestamp) + " is before the track's previous " +
                    std::to_string(track.last_timestamp));
    track.has_events = true;
    track.last_timestamp = timestamp;

    switch (event.type()) {
      case pb::TrackEvent::TYPE_SLICE_BEGIN:
      case pb::TrackEvent::TYPE_SLICE_END:
      case pb::TrackEvent::TYPE_INSTANT:
        if (track.counter) {
          problems_.add(on_track() + ": a slice event on a counter track");
          return;
        }
        if (event.type() == pb::TrackEvent::TYPE_SLICE_BEGIN) track.open_slices.push_back(event.name());
        if (event.type() != pb::TrackEvent::TYPE_SLICE_END) return;
        if (track.open_slices.empty())
          problems_.add(on_track() + ": no open slice to end");
        else
          track.open_slices.pop_back();
        return;
      case pb::TrackEvent::TYPE_COUNTER:
        if (!track.counter) problems_.add(on_track() + ": a counter value on a track without a counter descriptor");
        if (!event.has_counter_value() && !event.has_double_counter_value())
          problems_.add(on_track() + ": a counter event without a value");
        return;
      default:
        problems_.add(on_track() + ": unknown event type");
        return;
    }
  }

  size_t number_ = 0;
  Problems problems_;
  std::map<uint64_t, TrackState> tracks_;
  std::vector<std::pair<uint64_t, uint64_t>> parents_;  // (uuid, parent uuid), checked at the end
};

}  // namespace

std::vector<std::string> validate_perfetto(const std::string& bytes) {
  PerfettoValidator validator;
  const std::string error =
      for_each_packet(bytes, [&](size_t number, const pb::TracePacket& packet) { validator.visit(number, packet); });
  if (!error.empty()) validator.problems().add("not a valid Perfetto trace: " + error);
  return validator.finish();
}

}  // namespace npu::trace
