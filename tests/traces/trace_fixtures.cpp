#include "trace_fixtures.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <stdexcept>

#include <gtest/gtest.h>

namespace npu::trace::testing {
namespace {

constexpr uint64_t kCycle = 1000;  // ps: a 1 GHz clock

std::filesystem::path scratch_root() {
  return std::filesystem::temp_directory_path() / ("npusim_traces_tests_" + std::to_string(::getpid()));
}

// Removes every scratch file once all tests have run.
class ScratchCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(scratch_root(), ignored);
  }
};
[[maybe_unused]] const auto* const kScratchCleanup = ::testing::AddGlobalTestEnvironment(new ScratchCleanup);

}  // namespace

ChipTrace make_chip_trace(int cores, int ops_per_unit) {
  ChipTrace chip;
  std::set<std::string> slice_names;
  std::vector<Slice> slices;
  TrackId next_id = 1;
  const auto add_track = [&](TrackKind kind, TrackId parent, const std::string& name, int32_t sort_index,
                             CounterUnit unit = CounterUnit::Count) {
    const TrackId id = next_id++;
    chip.trace.add_track(Track{id, parent, kind, name, unit, sort_index});
    chip.track_names.push_back(name);
    return id;
  };
  const auto add_slice = [&](Slice slice) {
    slice_names.insert(slice.name);
    slices.push_back(std::move(slice));
  };
  uint64_t next_flow = 1;

  for (int core = 0; core < cores; ++core) {
    const TrackId process = add_track(TrackKind::Process, 0, "core " + std::to_string(core), core);
    const TrackId control = add_track(TrackKind::Thread, process, "control", 0);
    std::vector<TrackId> dma;
    for (int channel = 0; channel < 4; ++channel)
      dma.push_back(add_track(TrackKind::Thread, process, "dma ch" + std::to_string(channel), 1 + channel));
    const TrackId tensor = add_track(TrackKind::Thread, process, "tensor core", 5);
    const TrackId vector = add_track(TrackKind::Thread, process, "vector unit", 6);

    // An op is issued every 10 cycles: the control thread's "program" slice
    // encloses one "issue" slice per op, back to back. Each op's 40-cycle
    // DMA load runs on channel op % 4, so each channel is busy back to back,
    // and feeds (a flow) a matmul on the tensor core and a relu after it.
    const uint64_t start = static_cast<uint64_t>(core) * 7 * kCycle;
    for (int op = 0; op < ops_per_unit; ++op) {
      const uint64_t load_begin = start + static_cast<uint64_t>(op) * 10 * kCycle;
      const uint64_t load_end = load_begin + 40 * kCycle;
      const uint64_t flow = next_flow++;
      add_slice(Slice{dma[static_cast<size_t>(op) % 4], load_begin, load_end, "dma load", "dma",
                      {{"bytes", std::to_string(op * 64)}, {"src", "dram"}}, {flow}, {}});
      add_slice(Slice{tensor, load_end, load_end + 8 * kCycle + 500, "matmul", "compute",
                      {{"m", "16"}, {"n", "16"}}, {}, {flow}});
      add_slice(Slice{vector, load_end + 9 * kCycle, load_end + 9 * kCycle + 250, "relu", "compute", {}, {}, {}});
      add_slice(Slice{control, load_begin, load_begin + 10 * kCycle, "issue", "control",
                      {{"pc", std::to_string(op * 4)}}, {}, {}});
      ++chip.flows;
    }
    const uint64_t end = start + static_cast<uint64_t>(ops_per_unit) * 10 * kCycle;
    add_slice(Slice{control, start, end, "program", "control", {}, {}, {}});
  }

  const TrackId dram = add_track(TrackKind::Process, 0, "DRAM", cores);
  const TrackId read = add_track(TrackKind::Counter, dram, "read bandwidth", 0, CounterUnit::BytesPerCycle);
  const TrackId busy = add_track(TrackKind::Counter, dram, "busy", 1, CounterUnit::Percent);
  const TrackId resident = add_track(TrackKind::Counter, dram, "bytes resident", 2, CounterUnit::Bytes);
  const TrackId requests = add_track(TrackKind::Counter, dram, "open requests", 3, CounterUnit::Count);

  // Out of order on purpose: writers must sort.
  std::reverse(slices.begin(), slices.end());
  chip.slices = slices.size();
  for (Slice& slice : slices) chip.trace.add_slice(std::move(slice));
  for (int sample = 20; sample >= 0; --sample) {
    const uint64_t time = static_cast<uint64_t>(sample) * 5 * kCycle;
    chip.trace.add_counter(read, time, sample % 3 == 0 ? 0.0 : 12.5 * sample);
    chip.trace.add_counter(busy, time, sample % 2 == 0 ? 100.0 : 37.5);
    chip.trace.add_counter(resident, time, 4096.0 * sample);
    chip.trace.add_counter(requests, time, sample % 5);
    chip.counter_samples += 4;
  }
  chip.slice_names.assign(slice_names.begin(), slice_names.end());
  return chip;
}

Trace single_thread_trace(const std::vector<SliceSpec>& slices) {
  Trace trace;
  trace.add_track(Track{1, 0, TrackKind::Process, "core", CounterUnit::Count, 0});
  trace.add_track(Track{2, 1, TrackKind::Thread, "unit", CounterUnit::Count, 0});
  for (const SliceSpec& spec : slices) trace.add_slice(Slice{2, spec.begin_ps, spec.end_ps, spec.name, "", {}, {}, {}});
  return trace;
}

std::vector<pb::TracePacket> decode_packets(const std::string& bytes) {
  pb::Trace decoded;
  if (!decoded.ParseFromString(bytes)) throw std::runtime_error("not a serialized Trace");
  return {decoded.packet().begin(), decoded.packet().end()};
}

std::string encode_packets(const std::vector<pb::TracePacket>& packets) {
  pb::Trace trace;
  for (const pb::TracePacket& packet : packets) *trace.add_packet() = packet;
  return trace.SerializeAsString();
}

pb::TracePacket thread_track(uint64_t uuid, const std::string& name) {
  pb::TracePacket packet;
  packet.set_trusted_packet_sequence_id(7);
  pb::TrackDescriptor& descriptor = *packet.mutable_track_descriptor();
  descriptor.set_uuid(uuid);
  descriptor.mutable_thread()->set_pid(1);
  descriptor.mutable_thread()->set_tid(static_cast<int32_t>(uuid) + 1);
  descriptor.mutable_thread()->set_thread_name(name);
  return packet;
}

pb::TracePacket counter_track(uint64_t uuid, const std::string& name) {
  pb::TracePacket packet;
  packet.set_trusted_packet_sequence_id(7);
  pb::TrackDescriptor& descriptor = *packet.mutable_track_descriptor();
  descriptor.set_uuid(uuid);
  descriptor.set_name(name);
  descriptor.mutable_counter()->set_unit(pb::CounterDescriptor::UNIT_COUNT);
  return packet;
}

pb::TracePacket slice_event(uint64_t timestamp, uint64_t track, pb::TrackEvent::Type type, const std::string& name) {
  pb::TracePacket packet;
  packet.set_trusted_packet_sequence_id(7);
  packet.set_timestamp(timestamp);
  pb::TrackEvent& event = *packet.mutable_track_event();
  event.set_type(type);
  event.set_track_uuid(track);
  if (!name.empty()) event.set_name(name);
  return packet;
}

pb::TracePacket counter_event(uint64_t timestamp, uint64_t track, double value) {
  pb::TracePacket packet;
  packet.set_trusted_packet_sequence_id(7);
  packet.set_timestamp(timestamp);
  pb::TrackEvent& event = *packet.mutable_track_event();
  event.set_type(pb::TrackEvent::TYPE_COUNTER);
  event.set_track_uuid(track);
  event.set_double_counter_value(value);
  return packet;
}

bool has_problem(const std::vector<std::string>& problems, const std::vector<std::string_view>& fragments) {
  return std::any_of(problems.begin(), problems.end(), [&](const std::string& problem) {
    return std::all_of(fragments.begin(), fragments.end(),
                       [&](std::string_view fragment) { return problem.find(fragment) != std::string::npos; });
  });
}

std::string scratch_path(const std::string& file_name) {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::filesystem::path directory = scratch_root() / test->name();
  std::filesystem::create_directories(directory);
  return (directory / file_name).string();
}

}  // namespace npu::trace::testing
