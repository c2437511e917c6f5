#include <string>

#include "npusim/common/output_files.h"
#include "event_order.h"
#include "npusim/traces/writers.h"
#include "perfetto_trace.pb.h"
#include "track_layout.h"

namespace npu::trace {
namespace {

// Perfetto drops events from packets without a sequence; any fixed non-zero
// id serves, since the whole trace is one sequence.
constexpr uint32_t kSequenceId = 1;
constexpr uint64_t kPicosecondsPerNanosecond = 1000;

// Appends packets to a serialized Trace one at a time, as the repeated field
// `packet = 1` (tag 0x0A, length, bytes), instead of building one huge Trace
// message.
class PacketStream {
 public:
  pb::TracePacket& next() {
    packet_.Clear();
    packet_.set_trusted_packet_sequence_id(kSequenceId);
    if (bytes_.empty()) packet_.set_sequence_flags(pb::TracePacket::SEQ_INCREMENTAL_STATE_CLEARED);
    return packet_;
  }

  void commit() {
    packet_.SerializeToString(&scratch_);
    bytes_.push_back(0x0A);
    for (uint64_t size = scratch_.size(); ; size >>= 7) {
      if (size < 0x80) {
        bytes_.push_back(static_cast<char>(size));
        break;
      }
      bytes_.push_back(static_cast<char>((size & 0x7F) | 0x80));
    }
    bytes_ += scratch_;
  }

  std::string take() { return std::move(bytes_); }

 private:
  pb::TracePacket packet_;
  std::string scratch_;
  std::string bytes_;
};

void describe_counter_unit(CounterUnit unit, pb::CounterDescriptor& counter) {
  switch (unit) {
    case CounterUnit::Count: counter.set_unit(pb::CounterDescriptor::UNIT_COUNT); return;
    case CounterUnit::Bytes: counter.set_unit(pb::CounterDescriptor::UNIT_SIZE_BYTES); return;
    case CounterUnit::BytesPerCycle: counter.set_unit_name("B/cycle"); return;
    case CounterUnit::Percent: counter.set_unit_name("%"); return;
    case CounterUnit::Watts: counter.set_unit_name("W"); return;
  }
}

void describe_track(const Trace& trace, const TrackLayout& layout, size_t index, pb::TrackDescriptor& descriptor) {
  const Track& track = trace.tracks()[index];
  descriptor.set_uuid(track.id);
  descriptor.set_sibling_order_rank(layout.rank[index]);
  switch (track.kind) {
    case TrackKind::Process: {
      descriptor.set_child_ordering(pb::TrackDescriptor::EXPLICIT);
      pb::ProcessDescriptor& process = *descriptor.mutable_process();
      process.set_pid(layout.pid[index]);
      process.set_process_name(track.name);
      break;
    }
    case TrackKind::Thread: {
      descriptor.set_parent_uuid(track.parent);
      pb::ThreadDescriptor& thread = *descriptor.mutable_thread();
      thread.set_pid(layout.pid[index]);
      thread.set_tid(layout.tid[index]);
      thread.set_thread_name(track.name);
      break;
    }
    case TrackKind::Counter:
      descriptor.set_parent_uuid(track.parent);
      descriptor.set_name(track.name);
      describe_counter_unit(track.unit, *descriptor.mutable_counter());
      break;
  }
}

void describe_slice_begin(const Slice& slice, pb::TrackEvent& event) {
  event.set_type(pb::TrackEvent::TYPE_SLICE_BEGIN);
  event.set_name(slice.name);
  if (!slice.category.empty()) event.add_categories(slice.category);
  for (const Arg& arg : slice.args) {
    pb::DebugAnnotation& annotation = *event.add_debug_annotations();
    annotation.set_name(arg.name);
    annotation.set_string_value(arg.value);
  }
  for (const uint64_t flow : slice.flows_out) event.add_flow_ids(flow);
  for (const uint64_t flow : slice.flows_in) event.add_terminating_flow_ids(flow);
}

}  // namespace

std::string to_perfetto(const Trace& trace) {
  const TrackLayout layout = lay_out_tracks(trace);
  PacketStream stream;
  for (size_t index = 0; index < trace.tracks().size(); ++index) {
    describe_track(trace, layout, index, *stream.next().mutable_track_descriptor());
    stream.commit();
  }
  for (const OrderedEvent& ordered : order_events(trace, kPicosecondsPerNanosecond)) {
    pb::TracePacket& packet = stream.next();
    packet.set_timestamp(ordered.time);
    pb::TrackEvent& event = *packet.mutable_track_event();
    event.set_track_uuid(trace.tracks()[ordered.track].id);
    switch (ordered.kind) {
      case EventKind::SliceBegin: describe_slice_begin(trace.slices()[ordered.item], event); break;
      case EventKind::SliceEnd: event.set_type(pb::TrackEvent::TYPE_SLICE_END); break;
      case EventKind::Counter:
        event.set_type(pb::TrackEvent::TYPE_COUNTER);
        event.set_double_counter_value(trace.counters()[ordered.item].value);
        break;
    }
    stream.commit();
  }
  return stream.take();
}

void write_perfetto(const Trace& trace, const std::string& path) { npu::write_file_atomically(path, to_perfetto(trace)); }

}  // namespace npu::trace
