#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "npusim/traces/writers.h"
#include "trace_fixtures.h"

namespace npu::trace {
namespace {

using testing::decode_packets;
using testing::make_chip_trace;
using testing::single_thread_trace;

// One line per slice event on the given track: "B name @ts" / "E @ts".
std::vector<std::string> slice_events(const std::vector<pb::TracePacket>& packets, uint64_t track) {
  std::vector<std::string> events;
  for (const pb::TracePacket& packet : packets) {
    if (!packet.has_track_event() || packet.track_event().track_uuid() != track) continue;
    const pb::TrackEvent& event = packet.track_event();
    const std::string at = " @" + std::to_string(packet.timestamp());
    if (event.type() == pb::TrackEvent::TYPE_SLICE_BEGIN) events.push_back("B " + event.name() + at);
    if (event.type() == pb::TrackEvent::TYPE_SLICE_END) events.push_back("E" + at);
  }
  return events;
}

TEST(PerfettoWriter, ChipTraceIsValidWithTheRightCountsAndNames) {
  const testing::ChipTrace chip = make_chip_trace();
  const std::string bytes = to_perfetto(chip.trace);
  const std::vector<std::string> problems = validate_perfetto(bytes);
  EXPECT_TRUE(problems.empty()) << problems.front();

  const TraceSummary summary = summarize_perfetto(bytes);
  EXPECT_EQ(summary.tracks, chip.trace.tracks().size());
  EXPECT_EQ(summary.slices, chip.slices);
  EXPECT_EQ(summary.counter_samples, chip.counter_samples);
  EXPECT_EQ(summary.track_names, chip.track_names);
  EXPECT_EQ(summary.slice_names, chip.slice_names);
}

TEST(PerfettoWriter, DescriptorsComeFirstThenEventsInTimeOrder) {
  const testing::ChipTrace chip = make_chip_trace();
  const std::vector<pb::TracePacket> packets = decode_packets(to_perfetto(chip.trace));
  const size_t tracks = chip.trace.tracks().size();
  ASSERT_EQ(packets.size(), tracks + 2 * chip.slices + chip.counter_samples);
  for (size_t i = 0; i < tracks; ++i) EXPECT_TRUE(packets[i].has_track_descriptor()) << i;
  for (size_t i = tracks; i < packets.size(); ++i) {
    ASSERT_TRUE(packets[i].has_track_event()) << i;
    if (i > tracks) {
      EXPECT_LE(packets[i - 1].timestamp(), packets[i].timestamp()) << i;
    }
  }
}

TEST(PerfettoWriter, EveryPacketIsOnOneSequenceThatStartsCleared) {
  const std::vector<pb::TracePacket> packets = decode_packets(to_perfetto(make_chip_trace().trace));
  ASSERT_FALSE(packets.empty());
  EXPECT_EQ(packets[0].sequence_flags(), static_cast<uint32_t>(pb::TracePacket::SEQ_INCREMENTAL_STATE_CLEARED));
  for (const pb::TracePacket& packet : packets) {
    ASSERT_TRUE(packet.has_trusted_packet_sequence_id());
    EXPECT_EQ(packet.trusted_packet_sequence_id(), packets[0].trusted_packet_sequence_id());
    EXPECT_NE(packet.trusted_packet_sequence_id(), 0u);
  }
}

TEST(PerfettoWriter, DescribesProcessesThreadsAndCounters) {
  const testing::ChipTrace chip = make_chip_trace(2, 2);
  const std::vector<pb::TracePacket> packets = decode_packets(to_perfetto(chip.trace));
  std::map<uint64_t, pb::TrackDescriptor> by_uuid;
  std::set<int32_t> pids;
  std::set<int32_t> tids;
  for (const pb::TracePacket& packet : packets)
    if (packet.has_track_descriptor()) by_uuid[packet.track_descriptor().uuid()] = packet.track_descriptor();

  for (const Track& track : chip.trace.tracks()) {
    ASSERT_EQ(by_uuid.count(track.id), 1u) << track.name;
    const pb::TrackDescriptor& descriptor = by_uuid[track.id];
    switch (track.kind) {
      case TrackKind::Process:
        ASSERT_TRUE(descriptor.has_process()) << track.name;
        EXPECT_EQ(descriptor.process().process_name(), track.name);
        EXPECT_TRUE(pids.insert(descriptor.process().pid()).second) << "pid reused";
        EXPECT_EQ(descriptor.child_ordering(), pb::TrackDescriptor::EXPLICIT);
        EXPECT_FALSE(descriptor.has_parent_uuid());
        break;
      case TrackKind::Thread:
        ASSERT_TRUE(descriptor.has_thread()) << track.name;
        EXPECT_EQ(descriptor.thread().thread_name(), track.name);
        EXPECT_EQ(descriptor.parent_uuid(), track.parent);
        EXPECT_EQ(descriptor.thread().pid(), by_uuid[track.parent].process().pid());
        EXPECT_TRUE(tids.insert(descriptor.thread().tid()).second) << "tid reused";
        break;
      case TrackKind::Counter:
        ASSERT_TRUE(descriptor.has_counter()) << track.name;
        EXPECT_EQ(descriptor.name(), track.name);
        EXPECT_EQ(descriptor.parent_uuid(), track.parent);
        break;
    }
  }
  for (const int32_t tid : tids) EXPECT_EQ(pids.count(tid), 0u) << "tid " << tid << " is also a pid";

  // Units: bytes and counts are Perfetto built-ins; the rest are named.
  std::map<std::string, pb::CounterDescriptor> counters;
  for (const auto& [uuid, descriptor] : by_uuid)
    if (descriptor.has_counter()) counters[descriptor.name()] = descriptor.counter();
  EXPECT_EQ(counters["bytes resident"].unit(), pb::CounterDescriptor::UNIT_SIZE_BYTES);
  EXPECT_EQ(counters["open requests"].unit(), pb::CounterDescriptor::UNIT_COUNT);
  EXPECT_EQ(counters["read bandwidth"].unit_name(), "B/cycle");
  EXPECT_EQ(counters["busy"].unit_name(), "%");
}

TEST(PerfettoWriter, SiblingRanksFollowSortIndexThenOrderOfAddition) {
  Trace trace;
  trace.add_track(Track{1, 0, TrackKind::Process, "second", CounterUnit::Count, 5});
  trace.add_track(Track{2, 0, TrackKind::Process, "first", CounterUnit::Count, -1});
  trace.add_track(Track{3, 1, TrackKind::Thread, "b", CounterUnit::Count, 0});
  trace.add_track(Track{4, 1, TrackKind::Thread, "a", CounterUnit::Count, 0});
  trace.add_track(Track{5, 1, TrackKind::Counter, "c", CounterUnit::Count, -3});
  std::map<uint64_t, int32_t> rank;
  for (const pb::TracePacket& packet : decode_packets(to_perfetto(trace)))
    rank[packet.track_descriptor().uuid()] = packet.track_descriptor().sibling_order_rank();
  EXPECT_EQ(rank[2], 0);
  EXPECT_EQ(rank[1], 1);
  EXPECT_EQ(rank[5], 0);
  EXPECT_EQ(rank[3], 1);
  EXPECT_EQ(rank[4], 2);
}

TEST(PerfettoWriter, SliceBeginCarriesNameCategoryArgsAndFlows) {
  Trace trace = single_thread_trace({});
  trace.add_slice(Slice{2, 0, 5000, "matmul", "compute", {{"m", "16"}, {"dtype", "bf16"}}, {11, 12}, {10}});
  const std::vector<pb::TracePacket> packets = decode_packets(to_perfetto(trace));
  ASSERT_EQ(packets.size(), 4u);
  const pb::TrackEvent& begin = packets[2].track_event();
  EXPECT_EQ(begin.type(), pb::TrackEvent::TYPE_SLICE_BEGIN);
  EXPECT_EQ(begin.track_uuid(), 2u);
  EXPECT_EQ(begin.name(), "matmul");
  ASSERT_EQ(begin.categories_size(), 1);
  EXPECT_EQ(begin.categories(0), "compute");
  ASSERT_EQ(begin.debug_annotations_size(), 2);
  EXPECT_EQ(begin.debug_annotations(1).name(), "dtype");
  EXPECT_EQ(begin.debug_annotations(1).string_value(), "bf16");
  ASSERT_EQ(begin.flow_ids_size(), 2);
  EXPECT_EQ(begin.flow_ids(0), 11u);
  EXPECT_EQ(begin.flow_ids(1), 12u);
  ASSERT_EQ(begin.terminating_flow_ids_size(), 1);
  EXPECT_EQ(begin.terminating_flow_ids(0), 10u);
  const pb::TrackEvent& end = packets[3].track_event();
  EXPECT_EQ(end.type(), pb::TrackEvent::TYPE_SLICE_END);
  EXPECT_EQ(end.track_uuid(), 2u);
  EXPECT_FALSE(end.has_name());
}

TEST(PerfettoWriter, FlowIdsAreWrittenUnpackedAsPerfettoExpects) {
  Trace trace = single_thread_trace({});
  trace.add_slice(Slice{2, 0, 5000, "dma", "", {}, {0x0102030405060708}, {}});
  const std::string bytes = to_perfetto(trace);
  // Field 47, wire type 1 (fixed64): tag 0xF9 0x02, then the id little-endian.
  const std::string unpacked = std::string("\xF9\x02\x08\x07\x06\x05\x04\x03\x02\x01", 10);
  EXPECT_NE(bytes.find(unpacked), std::string::npos);
}

TEST(PerfettoWriter, ConvertsPicosecondsToNanosecondsRoundingDown) {
  const Trace trace = single_thread_trace({{1500, 2999, "op"}});
  EXPECT_EQ(slice_events(decode_packets(to_perfetto(trace)), 2), (std::vector<std::string>{"B op @1", "E @2"}));
}

TEST(PerfettoWriter, WritesTimestampAndCounterValueZero) {
  Trace trace;
  trace.add_track(Track{1, 0, TrackKind::Process, "p", CounterUnit::Count, 0});
  trace.add_track(Track{2, 1, TrackKind::Counter, "c", CounterUnit::Count, 0});
  trace.add_counter(2, 0, 0.0);
  trace.add_counter(2, 7000, 2.5);
  const std::vector<pb::TracePacket> packets = decode_packets(to_perfetto(trace));
  ASSERT_EQ(packets.size(), 4u);
  EXPECT_TRUE(packets[2].has_timestamp());
  EXPECT_EQ(packets[2].timestamp(), 0u);
  EXPECT_EQ(packets[2].track_event().type(), pb::TrackEvent::TYPE_COUNTER);
  EXPECT_TRUE(packets[2].track_event().has_double_counter_value());
  EXPECT_EQ(packets[2].track_event().double_counter_value(), 0.0);
  EXPECT_EQ(packets[3].timestamp(), 7u);
  EXPECT_EQ(packets[3].track_event().double_counter_value(), 2.5);
}

TEST(PerfettoWriter, BackToBackSlicesEndBeforeTheNextBegins) {
  const Trace trace = single_thread_trace({{20000, 30000, "c"}, {10000, 20000, "b"}, {0, 10000, "a"}});
  const std::string bytes = to_perfetto(trace);
  EXPECT_TRUE(validate_perfetto(bytes).empty());
  EXPECT_EQ(slice_events(decode_packets(bytes), 2),
            (std::vector<std::string>{"B a @0", "E @10", "B b @10", "E @20", "B c @20", "E @30"}));
}

TEST(PerfettoWriter, NestedSlicesOpenOutermostFirstAndCloseInnermostFirst) {
  // Recorded innermost first; "outer" and "left" begin together, "outer"
  // and "right" end together.
  const Trace trace = single_thread_trace({{0, 40000, "left"},
                                           {60000, 100000, "right"},
                                           {60000, 80000, "right.inner"},
                                           {0, 100000, "outer"}});
  const std::string bytes = to_perfetto(trace);
  EXPECT_TRUE(validate_perfetto(bytes).empty());
  EXPECT_EQ(slice_events(decode_packets(bytes), 2),
            (std::vector<std::string>{"B outer @0", "B left @0", "E @40", "B right @60", "B right.inner @60", "E @80",
                                      "E @100", "E @100"}));
}

TEST(PerfettoWriter, ZeroLengthSlicesStayBalanced) {
  const Trace trace = single_thread_trace(
      {{10000, 10000, "tick"}, {0, 10000, "before"}, {10000, 20000, "after"}, {10000, 10000, "tock"}});
  const std::string bytes = to_perfetto(trace);
  EXPECT_TRUE(validate_perfetto(bytes).empty());
  EXPECT_EQ(slice_events(decode_packets(bytes), 2).size(), 8u);
}

TEST(PerfettoWriter, SlicesThatMergeAtNanosecondResolutionStayValid) {
  // Distinct in picoseconds, equal once rounded down to nanoseconds.
  const Trace trace = single_thread_trace({{1000, 1999, "a"}, {1200, 1800, "b"}, {1999, 2500, "c"}});
  EXPECT_TRUE(validate_perfetto(to_perfetto(trace)).empty());
}

TEST(PerfettoWriter, RejectsSlicesThatOverlapWithoutNesting) {
  const Trace trace = single_thread_trace({{0, 10000, "first"}, {5000, 15000, "second"}});
  try {
    to_perfetto(trace);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("first"), std::string::npos) << message;
    EXPECT_NE(message.find("second"), std::string::npos) << message;
    EXPECT_NE(message.find("unit"), std::string::npos) << message;
  }
}

TEST(PerfettoWriter, SlicesOnDifferentTracksMayOverlap) {
  Trace trace = single_thread_trace({{0, 10000, "first"}});
  trace.add_track(Track{3, 1, TrackKind::Thread, "other", CounterUnit::Count, 0});
  trace.add_slice(Slice{3, 5000, 15000, "second", "", {}, {}, {}});
  trace.add_slice(Slice{1, 2000, 12000, "process-wide", "", {}, {}, {}});
  EXPECT_TRUE(validate_perfetto(to_perfetto(trace)).empty());
}

TEST(PerfettoWriter, IsDeterministic) {
  EXPECT_EQ(to_perfetto(make_chip_trace().trace), to_perfetto(make_chip_trace().trace));
  const Trace trace = make_chip_trace().trace;
  EXPECT_EQ(to_perfetto(trace), to_perfetto(trace));
}

TEST(PerfettoWriter, OutputDoesNotDependOnRecordingOrder) {
  const Trace recorded = make_chip_trace().trace;
  Trace reversed;
  for (const Track& track : recorded.tracks()) reversed.add_track(track);
  for (auto slice = recorded.slices().rbegin(); slice != recorded.slices().rend(); ++slice) reversed.add_slice(*slice);
  for (auto sample = recorded.counters().rbegin(); sample != recorded.counters().rend(); ++sample)
    reversed.add_counter(sample->track, sample->time_ps, sample->value);
  EXPECT_EQ(to_perfetto(recorded), to_perfetto(reversed));
}

TEST(PerfettoWriter, EmptyTraceIsEmptyAndValid) {
  const std::string bytes = to_perfetto(Trace{});
  EXPECT_TRUE(bytes.empty());
  EXPECT_TRUE(validate_perfetto(bytes).empty());
  EXPECT_EQ(summarize_perfetto(bytes).tracks, 0u);
}

}  // namespace
}  // namespace npu::trace
