#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "npusim/traces/writers.h"
#include "trace_fixtures.h"

namespace npu::trace {
namespace {

using testing::counter_event;
using testing::counter_track;
using testing::encode_packets;
using testing::has_problem;
using testing::slice_event;
using testing::thread_track;

constexpr auto kBegin = pb::TrackEvent::TYPE_SLICE_BEGIN;
constexpr auto kEnd = pb::TrackEvent::TYPE_SLICE_END;

std::vector<std::string> validate(const std::vector<pb::TracePacket>& packets) {
  return validate_perfetto(encode_packets(packets));
}

// Prints the problems when an expectation fails.
std::string listed(const std::vector<std::string>& problems) {
  std::string text;
  for (const std::string& problem : problems) text += "\n  " + problem;
  return text;
}

// The baseline the broken traces below depart from: it must pass, so each
// failure below is due to its one defect.
std::vector<pb::TracePacket> valid_packets() {
  return {thread_track(1, "unit"), counter_track(2, "bytes"), slice_event(10, 1, kBegin, "outer"),
          slice_event(10, 1, kBegin, "inner"), counter_event(15, 2, 3.0), slice_event(20, 1, kEnd),
          slice_event(30, 1, kEnd), slice_event(30, 1, kBegin, "next"), slice_event(40, 1, kEnd)};
}

TEST(PerfettoValidator, AcceptsTheHandBuiltBaseline) {
  const std::vector<std::string> problems = validate(valid_packets());
  EXPECT_TRUE(problems.empty()) << listed(problems);
  const TraceSummary summary = summarize_perfetto(encode_packets(valid_packets()));
  EXPECT_EQ(summary.tracks, 2u);
  EXPECT_EQ(summary.slices, 3u);
  EXPECT_EQ(summary.counter_samples, 1u);
  EXPECT_EQ(summary.track_names, (std::vector<std::string>{"unit", "bytes"}));
  EXPECT_EQ(summary.slice_names, (std::vector<std::string>{"inner", "next", "outer"}));
}

TEST(PerfettoValidator, ReportsAnEventOnAnUndescribedTrack) {
  std::vector<pb::TracePacket> packets = valid_packets();
  packets.push_back(slice_event(50, 9, kBegin, "lost"));
  packets.push_back(slice_event(60, 9, kEnd));
  const std::vector<std::string> problems = validate(packets);
  EXPECT_TRUE(has_problem(problems, {"packet 9", "track 9", "not described"})) << listed(problems);
}

TEST(PerfettoValidator, ReportsATrackDescribedOnlyAfterItsFirstUse) {
  std::vector<pb::TracePacket> packets = valid_packets();
  packets.push_back(slice_event(50, 9, kBegin, "early"));
  packets.push_back(thread_track(9, "late"));
  packets.push_back(slice_event(60, 9, kEnd));
  EXPECT_TRUE(has_problem(validate(packets), {"track 9", "not described"}));
}

TEST(PerfettoValidator, ReportsAnEndWithoutABegin) {
  std::vector<pb::TracePacket> packets = valid_packets();
  packets.push_back(slice_event(50, 1, kEnd));
  const std::vector<std::string> problems = validate(packets);
  EXPECT_TRUE(has_problem(problems, {"packet 9", "SLICE_END", "no open slice"})) << listed(problems);
}

TEST(PerfettoValidator, ReportsABeginThatNeverEnds) {
  std::vector<pb::TracePacket> packets = valid_packets();
  packets.push_back(slice_event(50, 1, kBegin, "dangling"));
  EXPECT_TRUE(has_problem(validate(packets), {"dangling", "never ends"}));
}

TEST(PerfettoValidator, ReportsTimestampsGoingBackOnATrack) {
  std::vector<pb::TracePacket> packets = valid_packets();
  packets.push_back(slice_event(35, 1, kBegin, "late"));
  packets.push_back(slice_event(36, 1, kEnd));
  const std::vector<std::string> problems = validate(packets);
  EXPECT_TRUE(has_problem(problems, {"packet 9", "timestamp 35", "previous 40"})) << listed(problems);
}

TEST(PerfettoValidator, AllowsTimestampsToInterleaveAcrossTracks) {
  std::vector<pb::TracePacket> packets = valid_packets();
  packets.push_back(counter_event(16, 2, 1.0));  // after the slice track's 40, but the counter track is at 15
  EXPECT_TRUE(validate(packets).empty());
}

TEST(PerfettoValidator, ReportsADuplicateUuid) {
  std::vector<pb::TracePacket> packets = valid_packets();
  packets.insert(packets.begin() + 2, thread_track(1, "again"));
  EXPECT_TRUE(has_problem(validate(packets), {"uuid 1", "described twice"}));
}

TEST(PerfettoValidator, ReportsAZeroUuid) {
  std::vector<pb::TracePacket> packets = valid_packets();
  packets.insert(packets.begin(), thread_track(0, "zero"));
  EXPECT_TRUE(has_problem(validate(packets), {"packet 0", "non-zero uuid"}));
}

TEST(PerfettoValidator, ReportsAParentThatIsNeverDescribed) {
  std::vector<pb::TracePacket> packets = valid_packets();
  packets[0].mutable_track_descriptor()->set_parent_uuid(77);
  EXPECT_TRUE(has_problem(validate(packets), {"parent_uuid 77", "never described"}));
}

TEST(PerfettoValidator, ReportsACounterValueOnASliceTrack) {
  std::vector<pb::TracePacket> packets = valid_packets();
  packets.push_back(counter_event(50, 1, 2.0));
  const std::vector<std::string> problems = validate(packets);
  EXPECT_TRUE(has_problem(problems, {"COUNTER", "track 1", "without a counter descriptor"})) << listed(problems);
}

TEST(PerfettoValidator, ReportsASliceOnACounterTrack) {
  std::vector<pb::TracePacket> packets = valid_packets();
  packets.push_back(slice_event(50, 2, kBegin, "misplaced"));
  EXPECT_TRUE(has_problem(validate(packets), {"SLICE_BEGIN", "track 2", "counter track"}));
}

TEST(PerfettoValidator, ReportsACounterEventWithoutAValue) {
  std::vector<pb::TracePacket> packets = valid_packets();
  packets.push_back(counter_event(50, 2, 1.0));
  packets.back().mutable_track_event()->clear_double_counter_value();
  EXPECT_TRUE(has_problem(validate(packets), {"without a value"}));
}

TEST(PerfettoValidator, ReportsPacketsWithoutSequenceIdOrTimestamp) {
  std::vector<pb::TracePacket> packets = valid_packets();
  packets[2].clear_trusted_packet_sequence_id();
  packets[3].clear_timestamp();
  const std::vector<std::string> problems = validate(packets);
  EXPECT_TRUE(has_problem(problems, {"packet 2", "trusted_packet_sequence_id"})) << listed(problems);
  EXPECT_TRUE(has_problem(problems, {"packet 3", "without a timestamp"})) << listed(problems);
}

TEST(PerfettoValidator, ReportsAnEventWithoutATrackOrType) {
  std::vector<pb::TracePacket> packets = valid_packets();
  packets.push_back(slice_event(50, 1, kBegin, "x"));
  packets.back().mutable_track_event()->clear_track_uuid();
  packets.push_back(slice_event(50, 1, pb::TrackEvent::TYPE_UNSPECIFIED));
  const std::vector<std::string> problems = validate(packets);
  EXPECT_TRUE(has_problem(problems, {"packet 9", "without a track_uuid"})) << listed(problems);
  EXPECT_TRUE(has_problem(problems, {"packet 10", "unknown event type"})) << listed(problems);
}

TEST(PerfettoValidator, ReportsBytesThatAreNotATrace) {
  const std::string bytes = encode_packets(valid_packets());
  EXPECT_TRUE(has_problem(validate_perfetto(bytes.substr(0, bytes.size() - 3)), {"not a valid Perfetto trace"}));
  EXPECT_TRUE(has_problem(validate_perfetto("hello, world"), {"not a valid Perfetto trace"}));
  EXPECT_TRUE(has_problem(validate_perfetto(std::string("\x0A\x03\xFF\xFF\xFF", 5)), {"does not decode"}));
  EXPECT_THROW(summarize_perfetto("hello, world"), std::runtime_error);
}

TEST(PerfettoValidator, CapsTheNumberOfProblemsReported) {
  std::vector<pb::TracePacket> packets = valid_packets();
  for (int i = 0; i < 1000; ++i) packets.push_back(slice_event(100, 1, kEnd));
  const std::vector<std::string> problems = validate(packets);
  ASSERT_EQ(problems.size(), 101u);
  EXPECT_EQ(problems.back(), "... and 900 more problems");
}

}  // namespace
}  // namespace npu::trace
