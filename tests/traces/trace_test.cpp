#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "npusim/traces/trace.h"

namespace npu::trace {
namespace {

Track process(TrackId id, const std::string& name = "core") {
  return Track{id, 0, TrackKind::Process, name, CounterUnit::Count, 0};
}
Track thread(TrackId id, TrackId parent, const std::string& name = "unit") {
  return Track{id, parent, TrackKind::Thread, name, CounterUnit::Count, 0};
}
Track counter(TrackId id, TrackId parent, const std::string& name = "bytes") {
  return Track{id, parent, TrackKind::Counter, name, CounterUnit::Bytes, 0};
}

// The message of the std::invalid_argument f throws; fails the test if it
// throws nothing or something else.
template <typename F>
std::string rejection(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  ADD_FAILURE() << "expected std::invalid_argument";
  return {};
}

class TraceApi : public ::testing::Test {
 protected:
  void SetUp() override {
    trace.add_track(process(1, "core 0"));
    trace.add_track(thread(2, 1, "dma ch0"));
    trace.add_track(counter(3, 1, "dram bytes"));
  }
  Trace trace;
};

TEST_F(TraceApi, KeepsTracksInOrderAndFindsThemById) {
  ASSERT_EQ(trace.tracks().size(), 3u);
  EXPECT_EQ(trace.tracks()[1].name, "dma ch0");
  ASSERT_NE(trace.find_track(3), nullptr);
  EXPECT_EQ(trace.find_track(3)->name, "dram bytes");
  EXPECT_EQ(trace.find_track(99), nullptr);
  EXPECT_EQ(trace.find_track(0), nullptr);
}

TEST_F(TraceApi, FindsTracksAfterManyAdditions) {
  for (TrackId id = 10; id < 5000; ++id) trace.add_track(thread(id, 1, "t" + std::to_string(id)));
  for (TrackId id = 10; id < 5000; ++id) ASSERT_EQ(trace.find_track(id)->name, "t" + std::to_string(id));
}

TEST_F(TraceApi, RejectsZeroAndDuplicateIds) {
  EXPECT_NE(rejection([&] { trace.add_track(process(0)); }).find("0"), std::string::npos);
  const std::string duplicate = rejection([&] { trace.add_track(thread(2, 1, "again")); });
  EXPECT_NE(duplicate.find("duplicate"), std::string::npos) << duplicate;
  EXPECT_NE(duplicate.find("dma ch0"), std::string::npos) << duplicate;
  EXPECT_EQ(trace.tracks().size(), 3u);
}

TEST_F(TraceApi, RejectsMissingOrWrongParents) {
  EXPECT_NE(rejection([&] { trace.add_track(thread(4, 0)); }).find("parent"), std::string::npos);
  EXPECT_NE(rejection([&] { trace.add_track(counter(4, 0)); }).find("parent"), std::string::npos);
  EXPECT_NE(rejection([&] { trace.add_track(thread(4, 42)); }).find("42"), std::string::npos);
  EXPECT_NE(rejection([&] { trace.add_track(thread(4, 2)); }).find("not a process"), std::string::npos);
  EXPECT_NE(rejection([&] { trace.add_track(counter(4, 3)); }).find("not a process"), std::string::npos);
  Track nested_process = process(4);
  nested_process.parent = 1;
  EXPECT_NE(rejection([&] { trace.add_track(nested_process); }).find("must not have a parent"), std::string::npos);
  EXPECT_EQ(trace.tracks().size(), 3u);
}

TEST_F(TraceApi, RejectsSlicesOnUnknownOrCounterTracks) {
  EXPECT_NE(rejection([&] { trace.add_slice(Slice{77, 0, 1, "op", "", {}, {}, {}}); }).find("77"), std::string::npos);
  const std::string on_counter = rejection([&] { trace.add_slice(Slice{3, 0, 1, "op", "", {}, {}, {}}); });
  EXPECT_NE(on_counter.find("counter track"), std::string::npos) << on_counter;
  EXPECT_TRUE(trace.slices().empty());
}

TEST_F(TraceApi, RejectsSlicesEndingBeforeTheyBegin) {
  const std::string message = rejection([&] { trace.add_slice(Slice{2, 10, 9, "backwards", "", {}, {}, {}}); });
  EXPECT_NE(message.find("backwards"), std::string::npos) << message;
  EXPECT_TRUE(trace.slices().empty());
}

TEST_F(TraceApi, AcceptsZeroLengthSlicesAndSlicesOnProcessTracks) {
  trace.add_slice(Slice{2, 10, 10, "instant", "", {}, {}, {}});
  trace.add_slice(Slice{1, 0, 100, "process-wide", "", {}, {}, {}});
  EXPECT_EQ(trace.slices().size(), 2u);
}

TEST_F(TraceApi, RejectsCounterSamplesOnUnknownOrNonCounterTracks) {
  rejection([&] { trace.add_counter(77, 0, 1.0); });
  EXPECT_NE(rejection([&] { trace.add_counter(2, 0, 1.0); }).find("thread track"), std::string::npos);
  EXPECT_NE(rejection([&] { trace.add_counter(1, 0, 1.0); }).find("process track"), std::string::npos);
  EXPECT_TRUE(trace.counters().empty());
  trace.add_counter(3, 5, -2.5);
  ASSERT_EQ(trace.counters().size(), 1u);
  EXPECT_EQ(trace.counters()[0].time_ps, 5u);
  EXPECT_EQ(trace.counters()[0].value, -2.5);
}

TEST_F(TraceApi, RejectsNonFiniteCounterValues) {
  rejection([&] { trace.add_counter(3, 0, std::nan("")); });
  rejection([&] { trace.add_counter(3, 0, std::numeric_limits<double>::infinity()); });
  EXPECT_TRUE(trace.counters().empty());
}

TEST(TraceIds, NextFreeIdIsUnused) {
  Trace trace;
  EXPECT_EQ(trace.next_free_id(), 1u);
  trace.add_track(process(trace.next_free_id()));
  trace.add_track(thread(trace.next_free_id(), 1));
  EXPECT_EQ(trace.next_free_id(), 3u);
  trace.add_track(process(100));
  EXPECT_EQ(trace.next_free_id(), 101u);
}

TEST(TraceIds, NextFreeIdFindsAGapWhenTheTopIdIsTaken) {
  Trace trace;
  trace.add_track(process(1));
  trace.add_track(process(std::numeric_limits<TrackId>::max()));
  EXPECT_EQ(trace.next_free_id(), 2u);
  trace.add_track(process(trace.next_free_id()));
  EXPECT_EQ(trace.next_free_id(), 3u);
}

TEST_F(TraceApi, SinceKeepsWhatBeginsFromATimeOnAndFlowsWithBothEnds) {
  trace.add_track(thread(4, 1, "queue 0"));
  Slice early{2, 100, 200, "before", "device", {}, {7}, {}};     // leaves flow 7, whose end is kept
  Slice chip{4, 0, 0, "chip base", "metadata", {{"clock_mhz", "1000"}}, {}, {}};
  Slice late{2, 500, 600, "after", "device", {}, {8}, {7}};      // ends flow 7, leaves flow 8
  Slice later{4, 700, 800, "later", "command", {}, {}, {8}};     // ends flow 8
  for (const Slice& s : {early, chip, late, later}) trace.add_slice(s);
  trace.add_counter(3, 100, 1.0);
  trace.add_counter(3, 500, 2.0);
  const Trace kept = since(trace, 500);
  ASSERT_EQ(kept.tracks().size(), trace.tracks().size());
  std::vector<std::string> names;
  for (const Slice& s : kept.slices()) names.push_back(s.name);
  EXPECT_EQ(names, (std::vector<std::string>{"chip base", "after", "later"}));
  const Slice& metadata = kept.slices()[0];
  EXPECT_EQ(metadata.begin_ps, 500u);  // what the trace describes stays, moved to its start
  EXPECT_EQ(metadata.args.size(), 1u);
  const Slice& after = kept.slices()[1];
  EXPECT_TRUE(after.flows_in.empty());  // flow 7 began before: dropped at both ends
  EXPECT_EQ(after.flows_out, (std::vector<uint64_t>{8}));
  EXPECT_EQ(kept.slices()[2].flows_in, (std::vector<uint64_t>{8}));
  ASSERT_EQ(kept.counters().size(), 1u);
  EXPECT_EQ(kept.counters()[0].time_ps, 500u);
}

}  // namespace
}  // namespace npu::trace
