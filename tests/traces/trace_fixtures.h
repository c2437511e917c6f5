// Shared test inputs: a synthetic chip-like trace, and helpers to take
// writer output apart and to hand-build Perfetto bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "npusim/traces/trace.h"
#include "perfetto_trace.pb.h"

namespace npu::trace::testing {

// A trace shaped like the simulator's: a process per core with threads
// "control", "dma ch0".."dma ch3", "tensor core", "vector unit"; a "DRAM"
// process with counter tracks. Slices nest on the control thread, run back
// to back on the DMA channels and link DMA to tensor core work with flows.
// Events are recorded out of time order, as simulator layers would.
struct ChipTrace {
  Trace trace;
  std::vector<std::string> track_names;  // in order of addition
  std::vector<std::string> slice_names;  // distinct, sorted
  size_t slices = 0;
  size_t counter_samples = 0;
  size_t flows = 0;
};
ChipTrace make_chip_trace(int cores = 2, int ops_per_unit = 6);

// A trace with one process and one thread (ids 1 and 2) and the given
// slices on the thread, as {begin_ps, end_ps, name}.
struct SliceSpec {
  uint64_t begin_ps;
  uint64_t end_ps;
  std::string name;
};
Trace single_thread_trace(const std::vector<SliceSpec>& slices);

std::vector<pb::TracePacket> decode_packets(const std::string& bytes);
std::string encode_packets(const std::vector<pb::TracePacket>& packets);

// Packets for hand-built Perfetto traces, with a sequence id set.
pb::TracePacket thread_track(uint64_t uuid, const std::string& name);
pb::TracePacket counter_track(uint64_t uuid, const std::string& name);
pb::TracePacket slice_event(uint64_t timestamp, uint64_t track, pb::TrackEvent::Type type,
                            const std::string& name = {});
pb::TracePacket counter_event(uint64_t timestamp, uint64_t track, double value);

// True if some problem message contains every one of the fragments.
bool has_problem(const std::vector<std::string>& problems, const std::vector<std::string_view>& fragments);

// A path for a scratch file, unique to the running test and process.
std::string scratch_path(const std::string& file_name);

}  // namespace npu::trace::testing
