#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "npusim/traces/writers.h"
#include "trace_fixtures.h"

namespace npu::trace {
namespace {

using testing::has_problem;

std::string listed(const std::vector<std::string>& problems) {
  std::string text;
  for (const std::string& problem : problems) text += "\n  " + problem;
  return text;
}

// A trace document around the given events (comma-separated JSON objects).
std::string document(const std::string& events) { return R"({"traceEvents":[)" + events + "]}"; }

std::vector<std::string> validate_events(const std::string& events) { return validate_chrome_json(document(events)); }

const std::string kNames =
    R"({"ph":"M","pid":1,"name":"process_name","args":{"name":"core"}},)"
    R"({"ph":"M","pid":1,"tid":2,"name":"thread_name","args":{"name":"unit"}})";

TEST(ChromeJsonValidator, AcceptsNestedAndBackToBackSlices) {
  const std::vector<std::string> problems = validate_events(
      kNames + R"(,{"ph":"X","pid":1,"tid":2,"ts":0,"dur":10,"name":"outer"})"
               R"(,{"ph":"X","pid":1,"tid":2,"ts":0,"dur":4,"name":"left"})"
               R"(,{"ph":"X","pid":1,"tid":2,"ts":4,"dur":6,"name":"right"})"
               R"(,{"ph":"X","pid":1,"tid":2,"ts":10,"dur":0,"name":"after"})");
  EXPECT_TRUE(problems.empty()) << listed(problems);
}

TEST(ChromeJsonValidator, ComparesTimesWithoutFloatingPointDrift) {
  // 0.1 + 0.2 != 0.3 in doubles; in picoseconds the slices just touch.
  const std::vector<std::string> problems =
      validate_events(R"({"ph":"X","pid":1,"tid":2,"ts":0.1,"dur":0.2,"name":"a"},)"
                      R"({"ph":"X","pid":1,"tid":2,"ts":0.3,"dur":0.1,"name":"b"})");
  EXPECT_TRUE(problems.empty()) << listed(problems);
}

TEST(ChromeJsonValidator, ReportsSlicesOverlappingOnOneThread) {
  const std::vector<std::string> problems =
      validate_events(kNames + R"(,{"ph":"X","pid":1,"tid":2,"ts":5,"dur":10,"name":"second"})"
                               R"(,{"ph":"X","pid":1,"tid":2,"ts":0,"dur":10,"name":"first"})");
  EXPECT_TRUE(has_problem(problems, {"pid 1 tid 2", "'first'", "'second'", "overlap"})) << listed(problems);
}

TEST(ChromeJsonValidator, AllowsOverlapAcrossThreads) {
  const std::vector<std::string> problems =
      validate_events(R"({"ph":"X","pid":1,"tid":2,"ts":0,"dur":10,"name":"a"},)"
                      R"({"ph":"X","pid":1,"tid":3,"ts":5,"dur":10,"name":"b"},)"
                      R"({"ph":"X","pid":2,"tid":2,"ts":5,"dur":10,"name":"c"})");
  EXPECT_TRUE(problems.empty()) << listed(problems);
}

TEST(ChromeJsonValidator, ReportsMalformedJson) {
  for (const char* text : {R"({"traceEvents":[{"ph":"X",}]})", R"({"traceEvents":[)", R"({"traceEvents":[]} extra)",
                           "{'traceEvents':[]}", "", R"({"traceEvents":[{"ph":"X" "pid":1}]})"}) {
    const std::vector<std::string> problems = validate_chrome_json(text);
    EXPECT_TRUE(has_problem(problems, {"malformed JSON", "line 1"})) << text << listed(problems);
  }
}

TEST(ChromeJsonValidator, ReportsADocumentWithoutTraceEvents) {
  EXPECT_TRUE(has_problem(validate_chrome_json("[]"), {"not a JSON object"}));
  EXPECT_TRUE(has_problem(validate_chrome_json("{}"), {"no \"traceEvents\" array"}));
  EXPECT_TRUE(has_problem(validate_chrome_json(R"({"traceEvents":{}})"), {"no \"traceEvents\" array"}));
}

TEST(ChromeJsonValidator, ReportsEventsMissingRequiredFields) {
  const std::vector<std::string> problems =
      validate_events(R"(3,)"
                      R"({"pid":1,"tid":2,"ts":0},)"
                      R"({"ph":"Q","pid":1,"tid":2,"ts":0},)"
                      R"({"ph":"X","tid":2,"ts":0,"dur":1,"name":"no pid"},)"
                      R"({"ph":"X","pid":1,"ts":0,"dur":1,"name":"no tid"},)"
                      R"({"ph":"X","pid":1,"tid":2,"dur":1,"name":"no ts"},)"
                      R"({"ph":"X","pid":1,"tid":2,"ts":0,"name":"no dur"},)"
                      R"({"ph":"X","pid":1,"tid":2,"ts":0,"dur":-1,"name":"negative"},)"
                      R"({"ph":"X","pid":1.5,"tid":2,"ts":0,"dur":1,"name":"fractional pid"},)"
                      R"({"ph":"X","pid":1,"tid":2,"ts":"0","dur":1,"name":"string ts"},)"
                      R"({"ph":"X","pid":1,"tid":2,"ts":0,"dur":1})");
  EXPECT_TRUE(has_problem(problems, {"event 0", "not an object"})) << listed(problems);
  EXPECT_TRUE(has_problem(problems, {"event 1", "\"ph\""})) << listed(problems);
  EXPECT_TRUE(has_problem(problems, {"event 2", "\"ph\""})) << listed(problems);
  EXPECT_TRUE(has_problem(problems, {"event 3", "no \"pid\""})) << listed(problems);
  EXPECT_TRUE(has_problem(problems, {"event 4", "no \"tid\""})) << listed(problems);
  EXPECT_TRUE(has_problem(problems, {"event 5", "no \"ts\""})) << listed(problems);
  EXPECT_TRUE(has_problem(problems, {"event 6", "no \"dur\""})) << listed(problems);
  EXPECT_TRUE(has_problem(problems, {"event 7", "negative \"dur\""})) << listed(problems);
  EXPECT_TRUE(has_problem(problems, {"event 8", "\"pid\" is not an integer"})) << listed(problems);
  EXPECT_TRUE(has_problem(problems, {"event 9", "\"ts\" is not a time"})) << listed(problems);
  EXPECT_TRUE(has_problem(problems, {"event 10", "no \"name\""})) << listed(problems);
}

TEST(ChromeJsonValidator, AllowsWhatTheFormatLeavesOut) {
  // Process metadata and counters need no tid; global instants no pid.
  const std::vector<std::string> problems =
      validate_events(R"({"ph":"M","pid":1,"name":"process_name","args":{"name":"core"}},)"
                      R"({"ph":"M","pid":1,"name":"process_sort_index","args":{"sort_index":0}},)"
                      R"({"ph":"C","pid":1,"ts":0,"name":"bytes","args":{"value":1}},)"
                      R"({"ph":"i","s":"g","ts":0,"name":"marker"})");
  EXPECT_TRUE(problems.empty()) << listed(problems);
}

TEST(ChromeJsonValidator, ReportsCounterTimeGoingBack) {
  const std::vector<std::string> problems =
      validate_events(R"({"ph":"C","pid":1,"tid":1,"ts":5,"name":"bytes","args":{"value":1}},)"
                      R"({"ph":"C","pid":1,"tid":1,"ts":6,"name":"other","args":{"value":1}},)"
                      R"({"ph":"C","pid":2,"tid":2,"ts":1,"name":"bytes","args":{"value":1}},)"
                      R"({"ph":"C","pid":1,"tid":1,"ts":4,"name":"bytes","args":{"value":2}})");
  ASSERT_EQ(problems.size(), 1u) << listed(problems);
  EXPECT_TRUE(has_problem(problems, {"event 3", "goes back in time on its counter"})) << listed(problems);
}

TEST(ChromeJsonValidator, ReportsCountersWithoutNumericValues) {
  const std::vector<std::string> problems =
      validate_events(R"({"ph":"C","pid":1,"tid":1,"ts":5,"name":"a","args":{}},)"
                      R"({"ph":"C","pid":1,"tid":1,"ts":5,"name":"b","args":{"value":"1"}})");
  EXPECT_TRUE(has_problem(problems, {"event 0", "without \"args\""})) << listed(problems);
  EXPECT_TRUE(has_problem(problems, {"event 1", "\"value\" is not a number"})) << listed(problems);
}

TEST(ChromeJsonValidator, ChecksBeginEndPairs) {
  const std::vector<std::string> ok = validate_events(R"({"ph":"B","pid":1,"tid":2,"ts":0,"name":"a"},)"
                                                      R"({"ph":"B","pid":1,"tid":2,"ts":1,"name":"b"},)"
                                                      R"({"ph":"E","pid":1,"tid":2,"ts":2},)"
                                                      R"({"ph":"E","pid":1,"tid":2,"ts":3})");
  EXPECT_TRUE(ok.empty()) << listed(ok);
  const std::vector<std::string> problems = validate_events(R"({"ph":"E","pid":1,"tid":2,"ts":0},)"
                                                            R"({"ph":"B","pid":1,"tid":2,"ts":5,"name":"open"},)"
                                                            R"({"ph":"B","pid":1,"tid":2,"ts":4,"name":"early"})");
  EXPECT_TRUE(has_problem(problems, {"event 0", "no open 'B'"})) << listed(problems);
  EXPECT_TRUE(has_problem(problems, {"event 2", "goes back in time on its thread"})) << listed(problems);
  EXPECT_TRUE(has_problem(problems, {"'open'", "never ends"})) << listed(problems);
}

TEST(ChromeJsonValidator, ReportsFlowEndsWithoutAStart) {
  const std::vector<std::string> problems =
      validate_events(R"({"ph":"s","pid":1,"tid":2,"ts":0,"id":1,"cat":"flow","name":"flow"},)"
                      R"({"ph":"f","pid":1,"tid":2,"ts":1,"id":1,"cat":"flow","name":"flow","bp":"e"},)"
                      R"({"ph":"f","pid":1,"tid":2,"ts":1,"id":2,"cat":"flow","name":"flow","bp":"e"},)"
                      R"({"ph":"s","pid":1,"tid":2,"ts":1,"cat":"flow","name":"flow"})");
  EXPECT_TRUE(has_problem(problems, {"event 2", "flow id 2", "without a start"})) << listed(problems);
  EXPECT_TRUE(has_problem(problems, {"event 3", "without an \"id\""})) << listed(problems);
  EXPECT_EQ(problems.size(), 2u) << listed(problems);
}

TEST(ChromeJsonValidator, ReportsBadMetadata) {
  const std::vector<std::string> problems =
      validate_events(kNames + R"(,{"ph":"M","pid":1,"name":"process_name","args":{"name":"renamed"}})"
                               R"(,{"ph":"M","pid":1,"tid":2,"name":"thread_name","args":{}})"
                               R"(,{"ph":"M","pid":1,"tid":2,"name":"thread_sort_index","args":{"sort_index":"1"}})"
                               R"(,{"ph":"M","pid":1,"tid":2})");
  EXPECT_TRUE(has_problem(problems, {"event 2", "already named 'core'"})) << listed(problems);
  EXPECT_TRUE(has_problem(problems, {"event 3", "\"name\" string"})) << listed(problems);
  EXPECT_TRUE(has_problem(problems, {"event 4", "\"sort_index\" number"})) << listed(problems);
  EXPECT_TRUE(has_problem(problems, {"event 5", "metadata without a \"name\""})) << listed(problems);
}

TEST(ChromeJsonValidator, ReportsAnUnknownDisplayTimeUnit) {
  EXPECT_TRUE(
      has_problem(validate_chrome_json(R"({"traceEvents":[],"displayTimeUnit":"s"})"), {"displayTimeUnit"}));
  EXPECT_TRUE(validate_chrome_json(R"({"traceEvents":[],"displayTimeUnit":"ms","otherData":{"x":[1]}})").empty());
}

}  // namespace
}  // namespace npu::trace
