#include <string>

#include "npusim/common/output_files.h"
#include "event_order.h"
#include "json_format.h"
#include "npusim/traces/writers.h"
#include "track_layout.h"

namespace npu::trace {
namespace {

// Flow arrows in the Chrome format are matched by id, category and name;
// all of ours share one category and name.
constexpr std::string_view kFlowLabel = R"("cat":"flow","name":"flow")";

class ChromeJsonWriter {
 public:
  explicit ChromeJsonWriter(const Trace& trace) : trace_(trace), layout_(lay_out_tracks(trace)) {}

  std::string write() {
    out_ = "{\"traceEvents\":[";
    for (size_t index = 0; index < trace_.tracks().size(); ++index) write_metadata(index);
    // Ordered like the Perfetto output; in particular, a slice comes before
    // the slices it encloses, which viewers need when two begin together.
    for (const OrderedEvent& event : order_events(trace_, 1)) {
      if (event.kind == EventKind::SliceBegin) write_slice(event.track, trace_.slices()[event.item]);
      if (event.kind == EventKind::Counter) write_counter(event.track, trace_.counters()[event.item]);
    }
    out_ += "\n],\"displayTimeUnit\":\"ns\"}\n";
    return std::move(out_);
  }

 private:
  // Starts an event object with the fields every event has.
  void begin_event(char phase, size_t track) {
    out_ += first_event_ ? "\n{\"ph\":\"" : ",\n{\"ph\":\"";
    first_event_ = false;
    out_ += phase;
    out_ += "\",\"pid\":" + std::to_string(layout_.pid[track]) + ",\"tid\":" + std::to_string(layout_.tid[track]);
  }

  void write_name_metadata(size_t track, std::string_view what) {
    begin_event('M', track);
    out_ += ",\"name\":\"";
    out_ += what;
    out_ += "_name\",\"args\":{\"name\":";
    append_json_string(out_, trace_.tracks()[track].name);
    out_ += "}}";
    begin_event('M', track);
    out_ += ",\"name\":\"";
    out_ += what;
    out_ += "_sort_index\",\"args\":{\"sort_index\":" + std::to_string(layout_.rank[track]) + "}}";
  }

  // Counters need none: the Chrome format names a counter by its events.
  void write_metadata(size_t track) {
    switch (trace_.tracks()[track].kind) {
      case TrackKind::Process: write_name_metadata(track, "process"); break;
      case TrackKind::Thread: write_name_metadata(track, "thread"); break;
      case TrackKind::Counter: break;
    }
  }

  void write_timestamp(uint64_t picoseconds) {
    out_ += ",\"ts\":";
    append_microseconds(out_, picoseconds);
  }

  void write_slice(size_t track, const Slice& slice) {
    begin_event('X', track);
    write_timestamp(slice.begin_ps);
    out_ += ",\"dur\":";
    append_microseconds(out_, slice.end_ps - slice.begin_ps);
    out_ += ",\"name\":";
    append_json_string(out_, slice.name);
    out_ += ",\"cat\":";
    append_json_string(out_, slice.category);
    out_ += ",\"args\":{";
    for (size_t i = 0; i < slice.args.size(); ++i) {
      if (i > 0) out_ += ',';
      append_json_string(out_, slice.args[i].name);
      out_ += ':';
      append_json_string(out_, slice.args[i].value);
    }
    out_ += "}}";
    // Flow events bind to the slice enclosing their timestamp ("bp":"e"),
    // so they take the slice's begin; written right after it, they bind to
    // it rather than to a child beginning at the same time.
    for (const uint64_t flow : slice.flows_out) write_flow('s', track, slice.begin_ps, flow);
    for (const uint64_t flow : slice.flows_in) write_flow('f', track, slice.begin_ps, flow);
  }

  void write_flow(char phase, size_t track, uint64_t picoseconds, uint64_t id) {
    begin_event(phase, track);
    write_timestamp(picoseconds);
    out_ += ",\"id\":" + std::to_string(id) + ",";
    out_ += kFlowLabel;
    if (phase == 'f') out_ += ",\"bp\":\"e\"";
    out_ += '}';
  }

  // Chrome counters belong to a process and are named by their event.
  void write_counter(size_t track, const CounterSample& sample) {
    begin_event('C', track);
    write_timestamp(sample.time_ps);
    out_ += ",\"name\":";
    append_json_string(out_, trace_.tracks()[track].name);
    out_ += ",\"args\":{\"value\":";
    append_json_number(out_, sample.value);
    out_ += "}}";
  }

  const Trace& trace_;
  const TrackLayout layout_;
  std::string out_;
  bool first_event_ = true;
};

}  // namespace

std::string to_chrome_json(const Trace& trace) { return ChromeJsonWriter(trace).write(); }

void write_chrome_json(const Trace& trace, const std::string& path) {
  npu::write_file_atomically(path, to_chrome_json(trace));
}

}  // namespace npu::trace
