#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "json_parser.h"
#include "npusim/traces/writers.h"
#include "trace_fixtures.h"

namespace npu::trace {
namespace {

using json::Value;
using testing::make_chip_trace;
using testing::single_thread_trace;

std::vector<Value> events_of(const std::string& text) {
  const Value document = json::parse(text);
  const Value* events = document.find("traceEvents");
  if (events == nullptr) throw std::runtime_error("no traceEvents");
  return events->array;
}

std::vector<Value> with_phase(const std::vector<Value>& events, const std::string& phase) {
  std::vector<Value> matching;
  for (const Value& event : events)
    if (event.find("ph")->string == phase) matching.push_back(event);
  return matching;
}

// A field's text as written ("1.5" for 1.5 microseconds).
std::string text_of(const Value& event, const char* field) { return event.find(field)->string; }

TEST(ChromeJsonWriter, ChipTraceIsValidWithTheRightCounts) {
  const testing::ChipTrace chip = make_chip_trace();
  const std::string text = to_chrome_json(chip.trace);
  const std::vector<std::string> problems = validate_chrome_json(text);
  EXPECT_TRUE(problems.empty()) << problems.front();

  const Value document = json::parse(text);
  ASSERT_NE(document.find("displayTimeUnit"), nullptr);
  EXPECT_EQ(document.find("displayTimeUnit")->string, "ns");
  const std::vector<Value> events = events_of(text);
  EXPECT_EQ(with_phase(events, "X").size(), chip.slices);
  EXPECT_EQ(with_phase(events, "C").size(), chip.counter_samples);
  EXPECT_EQ(with_phase(events, "s").size(), chip.flows);
  EXPECT_EQ(with_phase(events, "f").size(), chip.flows);

  std::vector<std::string> named;
  for (const Value& event : with_phase(events, "M")) {
    const std::string& kind = event.find("name")->string;
    if (kind == "process_name" || kind == "thread_name") named.push_back(event.find("args")->find("name")->string);
  }
  std::vector<std::string> expected;
  for (const Track& track : chip.trace.tracks())
    if (track.kind != TrackKind::Counter) expected.push_back(track.name);
  EXPECT_EQ(named, expected);

  std::set<std::string> slice_names;
  for (const Value& event : with_phase(events, "X")) slice_names.insert(event.find("name")->string);
  EXPECT_EQ(std::vector<std::string>(slice_names.begin(), slice_names.end()), chip.slice_names);
}

TEST(ChromeJsonWriter, NamesProcessesAndThreadsWithMatchingIds) {
  const testing::ChipTrace chip = make_chip_trace(2, 1);
  const std::vector<Value> events = events_of(to_chrome_json(chip.trace));
  std::map<std::string, double> process_pid;
  std::map<double, std::string> thread_by_tid;
  for (const Value& event : with_phase(events, "M")) {
    if (event.find("name")->string == "process_name")
      process_pid[event.find("args")->find("name")->string] = event.find("pid")->number;
    if (event.find("name")->string == "thread_name") {
      EXPECT_EQ(thread_by_tid.count(event.find("tid")->number), 0u) << "tid reused";
      thread_by_tid[event.find("tid")->number] = event.find("args")->find("name")->string;
    }
  }
  ASSERT_EQ(process_pid.size(), 3u);  // two cores and DRAM
  for (const Value& event : with_phase(events, "X")) {
    const std::string& thread = thread_by_tid.at(event.find("tid")->number);
    const std::string& name = event.find("name")->string;
    if (name == "matmul") {
      EXPECT_EQ(thread, "tensor core");
    } else if (name == "issue") {
      EXPECT_EQ(thread, "control");
    }
  }
  for (const Value& event : with_phase(events, "C")) EXPECT_EQ(event.find("pid")->number, process_pid["DRAM"]);
}

TEST(ChromeJsonWriter, WritesExactMicroseconds) {
  const Trace trace = single_thread_trace({{1'500'000, 1'500'001, "tiny"}, {0, 1'000'000, "one"},
                                           {2'000'000, 3'123'456'789'012, "long"}});
  const std::vector<Value> slices = with_phase(events_of(to_chrome_json(trace)), "X");
  ASSERT_EQ(slices.size(), 3u);
  EXPECT_EQ(text_of(slices[0], "ts"), "0");
  EXPECT_EQ(text_of(slices[0], "dur"), "1");
  EXPECT_EQ(text_of(slices[1], "ts"), "1.5");
  EXPECT_EQ(text_of(slices[1], "dur"), "0.000001");
  EXPECT_EQ(text_of(slices[2], "ts"), "2");
  EXPECT_EQ(text_of(slices[2], "dur"), "3123454.789012");
}

TEST(ChromeJsonWriter, SliceCarriesCategoryArgsAndFlows) {
  Trace trace = single_thread_trace({});
  trace.add_slice(Slice{2, 1000, 2000, "matmul", "compute", {{"m", "16"}, {"dtype", "bf16"}}, {11}, {10}});
  const std::vector<Value> events = events_of(to_chrome_json(trace));
  const std::vector<Value> slices = with_phase(events, "X");
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(slices[0].find("cat")->string, "compute");
  EXPECT_EQ(slices[0].find("args")->find("m")->string, "16");
  EXPECT_EQ(slices[0].find("args")->find("dtype")->string, "bf16");

  const std::vector<Value> starts = with_phase(events, "s");
  const std::vector<Value> finishes = with_phase(events, "f");
  ASSERT_EQ(starts.size(), 1u);
  ASSERT_EQ(finishes.size(), 1u);
  EXPECT_EQ(text_of(starts[0], "id"), "11");
  EXPECT_EQ(text_of(finishes[0], "id"), "10");
  EXPECT_EQ(finishes[0].find("bp")->string, "e");
  for (const Value& flow : {starts[0], finishes[0]}) {
    EXPECT_EQ(flow.find("cat")->string, "flow");
    EXPECT_EQ(flow.find("name")->string, "flow");
    EXPECT_EQ(text_of(flow, "ts"), "0.001");
    EXPECT_EQ(flow.find("tid")->number, slices[0].find("tid")->number);
  }
}

TEST(ChromeJsonWriter, FlowIdsKeepAll64Bits) {
  Trace trace = single_thread_trace({});
  trace.add_slice(Slice{2, 0, 1, "a", "", {}, {18446744073709551615u}, {}});
  trace.add_slice(Slice{2, 1, 2, "b", "", {}, {}, {18446744073709551615u}});
  const std::string text = to_chrome_json(trace);
  EXPECT_EQ(text_of(with_phase(events_of(text), "s")[0], "id"), "18446744073709551615");
  EXPECT_TRUE(validate_chrome_json(text).empty());
}

TEST(ChromeJsonWriter, CountersAreNamedByTheirTrackAndKeepTheirValue) {
  Trace trace;
  trace.add_track(Track{1, 0, TrackKind::Process, "DRAM", CounterUnit::Count, 0});
  trace.add_track(Track{2, 1, TrackKind::Counter, "read bandwidth", CounterUnit::BytesPerCycle, 0});
  trace.add_counter(2, 2000, 0.1);
  trace.add_counter(2, 1000, -3e-300);
  trace.add_counter(2, 3000, 0);
  const std::vector<Value> counters = with_phase(events_of(to_chrome_json(trace)), "C");
  ASSERT_EQ(counters.size(), 3u);
  EXPECT_EQ(counters[0].find("name")->string, "read bandwidth");
  EXPECT_EQ(text_of(counters[0], "ts"), "0.001");
  EXPECT_EQ(counters[0].find("args")->find("value")->number, -3e-300);
  EXPECT_EQ(counters[1].find("args")->find("value")->number, 0.1);
  EXPECT_EQ(text_of(*counters[2].find("args"), "value"), "0");
}

TEST(ChromeJsonWriter, EscapesNames) {
  const std::string nasty = "say \"hi\"\\ now\nnext\tline\r\b\f\x01\x1f\x7f caf\xC3\xA9 \xF0\x9F\x98\x80";
  Trace trace;
  trace.add_track(Track{1, 0, TrackKind::Process, nasty, CounterUnit::Count, 0});
  trace.add_track(Track{2, 1, TrackKind::Thread, nasty, CounterUnit::Count, 0});
  trace.add_slice(Slice{2, 0, 1, nasty, nasty, {{nasty, nasty}}, {}, {}});
  const std::string text = to_chrome_json(trace);
  EXPECT_TRUE(validate_chrome_json(text).empty());
  EXPECT_NE(text.find(R"(say \"hi\"\\ now\nnext\tline\r\b\f\u0001\u001f)"), std::string::npos) << text;

  const std::vector<Value> events = events_of(text);
  const Value slice = with_phase(events, "X").at(0);
  EXPECT_EQ(slice.find("name")->string, nasty);
  EXPECT_EQ(slice.find("cat")->string, nasty);
  EXPECT_EQ(slice.find("args")->find(nasty)->string, nasty);
  EXPECT_EQ(with_phase(events, "M").at(0).find("args")->find("name")->string, nasty);
}

TEST(ChromeJsonWriter, ReplacesBytesThatAreNotUtf8) {
  // A stray continuation byte, a truncated sequence, an overlong '/' and a
  // UTF-16 surrogate encoded as UTF-8.
  const std::string broken = "a\x80" "b\xE2\x82" "c\xC0\xAF" "d\xED\xA0\x80";
  const Trace trace = single_thread_trace({{0, 1, broken}});
  const std::string text = to_chrome_json(trace);
  EXPECT_TRUE(validate_chrome_json(text).empty());
  const std::string replacement = "\xEF\xBF\xBD";
  EXPECT_EQ(with_phase(events_of(text), "X").at(0).find("name")->string,
            "a" + replacement + "b" + replacement + replacement + "c" + replacement + replacement + "d" +
                replacement + replacement + replacement);
}

TEST(ChromeJsonWriter, EnclosingSliceIsWrittenBeforeWhatItEncloses) {
  const Trace trace = single_thread_trace({{0, 5, "inner"}, {0, 10, "outer"}, {10, 20, "next"}});
  std::vector<std::string> names;
  for (const Value& slice : with_phase(events_of(to_chrome_json(trace)), "X"))
    names.push_back(slice.find("name")->string);
  EXPECT_EQ(names, (std::vector<std::string>{"outer", "inner", "next"}));
}

TEST(ChromeJsonWriter, RejectsSlicesThatOverlapWithoutNesting) {
  const Trace trace = single_thread_trace({{0, 10, "first"}, {5, 15, "second"}});
  EXPECT_THROW(to_chrome_json(trace), std::invalid_argument);
}

TEST(ChromeJsonWriter, IsDeterministic) {
  EXPECT_EQ(to_chrome_json(make_chip_trace().trace), to_chrome_json(make_chip_trace().trace));
}

TEST(ChromeJsonWriter, EmptyTraceIsValid) {
  const std::string text = to_chrome_json(Trace{});
  EXPECT_TRUE(validate_chrome_json(text).empty()) << text;
  EXPECT_TRUE(events_of(text).empty());
}

}  // namespace
}  // namespace npu::trace
