#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "json_format.h"
#include "json_parser.h"
#include "npusim/traces/writers.h"
#include "problems.h"

namespace npu::trace {
namespace {

using json::Value;

// Every phase of the Trace Event Format, deprecated ones included.
constexpr std::string_view kKnownPhases = "BEXiICbneSTpFsftPONDMVvRc()";

// Times are compared in integer picoseconds: summing microsecond doubles
// would make back-to-back slices (0.1 + 0.2 vs 0.3) look overlapping.
std::optional<int64_t> to_picoseconds(double microseconds) {
  const double picoseconds = std::round(microseconds * 1e6);
  if (!std::isfinite(picoseconds) || std::fabs(picoseconds) >= 9.2e18) return std::nullopt;
  return static_cast<int64_t>(picoseconds);
}

std::string format_time(int64_t picoseconds) {
  std::string out = picoseconds < 0 ? "-" : "";
  const auto magnitude = static_cast<uint64_t>(picoseconds);
  append_microseconds(out, picoseconds < 0 ? 0 - magnitude : magnitude);
  return out + " us";
}

struct Span {
  int64_t begin = 0;
  int64_t end = 0;
  size_t event = 0;
  std::string name;
};

struct ThreadState {
  std::vector<Span> slices;             // X events, checked for nesting at the end
  std::vector<std::string> open_begins;  // B events not yet ended, innermost last
  std::optional<int64_t> last_begin_end_time;
};

using ThreadKey = std::pair<int64_t, int64_t>;  // (pid, tid)

class ChromeJsonValidator {
 public:
  Problems& problems() { return problems_; }

  void check_event(size_t number, const Value& event) {
    number_ = number;
    event_ = &event;
    phase_ = 0;
    if (!event.is_object()) {
      problems_.add(where() + ": not an object");
      return;
    }
    const Value* phase_value = event.find("ph");
    if (phase_value == nullptr || !phase_value->is_string() || phase_value->string.size() != 1 ||
        kKnownPhases.find(phase_value->string[0]) == std::string_view::npos) {
      problems_.add(where() + ": missing or unknown \"ph\"");
      return;
    }
    phase_ = phase_value->string[0];

    const Value* scope = event.find("s");
    const bool global = scope != nullptr && scope->is_string() && scope->string == "g";
    const bool process_scoped = scope != nullptr && scope->is_string() && scope->string == "p";
    const bool instant = phase_ == 'i' || phase_ == 'I';
    const bool process_metadata = phase_ == 'M' && name().rfind("process_", 0) == 0;
    // The spec leaves out the thread (or process) where the event has none.
    const std::optional<int64_t> pid = integer_field("pid", !(instant && global));
    const std::optional<int64_t> tid =
        integer_field("tid", !(phase_ == 'C' || process_metadata || (instant && (global || process_scoped))));
    std::optional<int64_t> ts;
    if (phase_ != 'M') ts = time_field("ts", true);
    if (phase_ == 'X' || phase_ == 'B' || phase_ == 'C') require_name();

    switch (phase_) {
      case 'X': check_complete(pid, tid, ts); break;
      case 'B':
      case 'E': check_begin_end(pid, tid, ts); break;
      case 'C': check_counter(pid, ts); break;
      case 'M': check_metadata(pid, tid); break;
      case 's':
      case 't':
      case 'f': check_flow(); break;
      default: break;
    }
  }

  void check_display_time_unit(const Value& unit) {
    if (!unit.is_string() || (unit.string != "ms" && unit.string != "ns"))
      problems_.add("\"displayTimeUnit\" must be \"ms\" or \"ns\"");
  }

  std::vector<std::string> finish() {
    for (auto& [key, thread] : threads_) {
      check_nesting(key, thread.slices);
      for (const std::string& open : thread.open_begins)
        problems_.add(thread_name(key) + ": 'B' event '" + open + "' never ends");
    }
    for (const auto& [number, id] : flow_ends_)
      if (flow_starts_.count(id) == 0)
        problems_.add("event " + std::to_string(number) + ": flow id " + id + " ends or steps without a start ('s')");
    return problems_.take();
  }

 private:
  std::string name() const {
    const Value* value = event_->find("name");
    return value != nullptr && value->is_string() ? value->string : std::string();
  }

  std::string where() const {
    std::string text = "event " + std::to_string(number_);
    if (event_->is_object() && phase_ != 0) {
      text += std::string(" (ph '") + phase_ + "'";
      if (const Value* value = event_->find("name"); value != nullptr && value->is_string())
        text += ", '" + value->string + "'";
      text += ")";
    }
    return text;
  }

  static std::string thread_name(const ThreadKey& key) {
    return "pid " + std::to_string(key.first) + " tid " + std::to_string(key.second);
  }

  void require_name() {
    const Value* value = event_->find("name");
    if (value == nullptr || !value->is_string()) problems_.add(where() + ": no \"name\" string");
  }

  std::optional<int64_t> integer_field(const char* field, bool required) {
    const Value* value = event_->find(field);
    if (value == nullptr) {
      if (required) problems_.add(where() + ": no \"" + field + "\"");
      return std::nullopt;
    }
    if (!value->is_number() || std::trunc(value->number) != value->number || std::fabs(value->number) > 9e15) {
      problems_.add(where() + ": \"" + field + "\" is not an integer");
      return std::nullopt;
    }
    return static_cast<int64_t>(value->number);
  }

  std::optional<int64_t> time_field(const char* field, bool required) {
    const Value* value = event_->find(field);
    if (value == nullptr) {
      if (required) problems_.add(where() + ": no \"" + field + "\"");
      return std::nullopt;
    }
    std::optional<int64_t> picoseconds;
    if (value->is_number()) picoseconds = to_picoseconds(value->number);
    if (!picoseconds) problems_.add(where() + ": \"" + field + "\" is not a time in microseconds");
    return picoseconds;
  }

  void check_complete(std::optional<int64_t> pid, std::optional<int64_t> tid, std::optional<int64_t> ts) {
    const std::optional<int64_t> duration = time_field("dur", true);
    if (duration && *duration < 0) problems_.add(where() + ": negative \"dur\"");
    if (!pid || !tid || !ts || !duration || *duration < 0) return;
    threads_[{*pid, *tid}].slices.push_back(Span{*ts, *ts + *duration, number_, name()});
  }

  // B/E pairs are matched in file order, so their times must not go back.
  void check_begin_end(std::optional<int64_t> pid, std::optional<int64_t> tid, std::optional<int64_t> ts) {
    if (!pid || !tid || !ts) return;
    ThreadState& thread = threads_[{*pid, *tid}];
    if (thread.last_begin_end_time && *ts < *thread.last_begin_end_time)
      problems_.add(where() + ": \"ts\" goes back in time on its thread");
    thread.last_begin_end_time = *ts;
    if (phase_ == 'B') {
      thread.open_begins.push_back(name());
    } else if (thread.open_begins.empty()) {
      problems_.add(where() + ": 'E' with no open 'B' on its thread");
    } else {
      thread.open_begins.pop_back();
    }
  }

  void check_counter(std::optional<int64_t> pid, std::optional<int64_t> ts) {
    const Value* args = event_->find("args");
    if (args == nullptr || !args->is_object() || args->object.empty()) {
      problems_.add(where() + ": counter without \"args\" values");
    } else {
      for (const auto& [series, value] : args->object)
        if (!value.is_number()) problems_.add(where() + ": counter value \"" + series + "\" is not a number");
    }
    if (!pid || !ts) return;
    const Value* id = event_->find("id");
    const auto key = std::make_tuple(*pid, name(), id != nullptr ? id->string : std::string());
    const auto [last, inserted] = counter_times_.emplace(key, *ts);
    if (inserted) return;
    if (*ts < last->second) problems_.add(where() + ": \"ts\" goes back in time on its counter");
    last->second = *ts;
  }

  void check_metadata(std::optional<int64_t> pid, std::optional<int64_t> tid) {
    const std::string kind = name();
    if (kind.empty()) {
      problems_.add(where() + ": metadata without a \"name\"");
      return;
    }
    const Value* args = event_->find("args");
    const bool is_name = kind == "process_name" || kind == "thread_name";
    const bool is_sort_index = kind == "process_sort_index" || kind == "thread_sort_index";
    const Value* value = args != nullptr ? args->find(is_name ? "name" : "sort_index") : nullptr;
    if (is_name && (value == nullptr || !value->is_string())) problems_.add(where() + ": no \"args\".\"name\" string");
    if (is_sort_index && (value == nullptr || !value->is_number()))
      problems_.add(where() + ": no \"args\".\"sort_index\" number");
    if (!is_name || value == nullptr || !value->is_string() || !pid) return;
    if (kind == "process_name") {
      const auto [named, inserted] = process_names_.emplace(*pid, value->string);
      if (!inserted && named->second != value->string)
        problems_.add(where() + ": process " + std::to_string(*pid) + " already named '" + named->second + "'");
    } else if (tid) {
      const auto [named, inserted] = thread_names_.emplace(ThreadKey{*pid, *tid}, value->string);
      if (!inserted && named->second != value->string)
        problems_.add(where() + ": " + thread_name({*pid, *tid}) + " already named '" + named->second + "'");
    }
  }

  // Flow ids are compared as written: large integer ids do not survive a
  // trip through double.
  void check_flow() {
    const Value* id = event_->find("id");
    if (id == nullptr || (!id->is_number() && !id->is_string())) {
      problems_.add(where() + ": flow event without an \"id\"");
      return;
    }
    if (phase_ == 's')
      flow_starts_.insert(id->string);
    else
      flow_ends_.emplace_back(number_, id->string);
  }

  void check_nesting(const ThreadKey& key, std::vector<Span>& slices) {
    std::sort(slices.begin(), slices.end(), [](const Span& a, const Span& b) {
      if (a.begin != b.begin) return a.begin < b.begin;
      if (a.end != b.end) return a.end > b.end;
      return a.event < b.event;
    });
    std::vector<const Span*> open;
    for (const Span& slice : slices) {
      while (!open.empty() && open.back()->end <= slice.begin) open.pop_back();
      if (!open.empty() && slice.end > open.back()->end) {
        const Span& outer = *open.back();
        problems_.add(thread_name(key) + ": slices '" + outer.name + "' (event " + std::to_string(outer.event) +
                      ", " + format_time(outer.begin) + " to " + format_time(outer.end) + ") and '" + slice.name +
                      "' (event " + std::to_string(slice.event) + ", " + format_time(slice.begin) + " to " +
                      format_time(slice.end) + ") overlap without nesting");
        continue;
      }
      open.push_back(&slice);
    }
  }

  Problems problems_;
  size_t number_ = 0;
  const Value* event_ = nullptr;
  char phase_ = 0;
  std::map<ThreadKey, ThreadState> threads_;
  std::map<std::tuple<int64_t, std::string, std::string>, int64_t> counter_times_;  // (pid, name, id)
  std::set<std::string> flow_starts_;
  std::vector<std::pair<size_t, std::string>> flow_ends_;  // (event number, id)
  std::map<int64_t, std::string> process_names_;
  std::map<ThreadKey, std::string> thread_names_;
};

}  // namespace

std::vector<std::string> validate_chrome_json(const std::string& text) {
  ChromeJsonValidator validator;
  try {
    json::Reader reader(text);
    if (reader.peek_type() != Value::Type::Object) {
      validator.problems().add("the document is not a JSON object with a \"traceEvents\" array");
      return validator.finish();
    }
    bool has_events = false;
    reader.begin_object();
    std::string key;
    while (reader.next_member(key)) {
      if (key == "traceEvents" && reader.peek_type() == Value::Type::Array) {
        has_events = true;
        reader.begin_array();
        for (size_t number = 0; reader.next_element(); ++number) validator.check_event(number, reader.read_value());
      } else if (key == "displayTimeUnit") {
        validator.check_display_time_unit(reader.read_value());
      } else {
        reader.read_value();
      }
    }
    reader.finish();
    if (!has_events) validator.problems().add("no \"traceEvents\" array");
  } catch (const json::ParseError& error) {
    validator.problems().add(std::string("malformed JSON: ") + error.what());
  }
  return validator.finish();
}

}  // namespace npu::trace
