#include <string>

#include <gtest/gtest.h>

#include "npusim/traces/writers.h"

namespace npu::trace {
namespace {

// A million slices: the writers and validators must cope with a long
// simulation's trace, not just unit-test sized ones. No timing is asserted.
TEST(LargeTrace, AMillionSlicesWriteAndValidate) {
  constexpr int kThreads = 8;
  constexpr uint64_t kGroupsPerThread = 125'000 / 5;  // 5 slices per group
  Trace trace;
  trace.add_track(Track{1, 0, TrackKind::Process, "core 0", CounterUnit::Count, 0});
  trace.add_track(Track{2, 1, TrackKind::Counter, "busy units", CounterUnit::Count, 0});
  for (int thread = 0; thread < kThreads; ++thread)
    trace.add_track(Track{static_cast<TrackId>(10 + thread), 1, TrackKind::Thread, "unit " + std::to_string(thread),
                          CounterUnit::Count, thread});
  // Per group of 100 ns on each thread: an op enclosing three back-to-back
  // steps, then a zero-length marker at its end.
  for (uint64_t group = 0; group < kGroupsPerThread; ++group) {
    const uint64_t start = group * 100'000;
    for (int thread = 0; thread < kThreads; ++thread) {
      const TrackId track = static_cast<TrackId>(10 + thread);
      trace.add_slice(Slice{track, start, start + 90'000, "op", "compute", {{"group", std::to_string(group)}}, {}, {}});
      for (uint64_t step = 0; step < 3; ++step)
        trace.add_slice(Slice{track, start + step * 30'000, start + (step + 1) * 30'000, "step", "", {}, {}, {}});
      trace.add_slice(Slice{track, start + 90'000, start + 90'000, "marker", "", {}, {}, {}});
    }
    trace.add_counter(2, start, static_cast<double>(group % kThreads));
  }
  ASSERT_EQ(trace.slices().size(), 1'000'000u);

  const std::string perfetto = to_perfetto(trace);
  const std::vector<std::string> perfetto_problems = validate_perfetto(perfetto);
  EXPECT_TRUE(perfetto_problems.empty()) << perfetto_problems.front();
  const TraceSummary summary = summarize_perfetto(perfetto);
  EXPECT_EQ(summary.slices, 1'000'000u);
  EXPECT_EQ(summary.counter_samples, kGroupsPerThread);
  EXPECT_EQ(summary.slice_names, (std::vector<std::string>{"marker", "op", "step"}));

  const std::string json = to_chrome_json(trace);
  const std::vector<std::string> json_problems = validate_chrome_json(json);
  EXPECT_TRUE(json_problems.empty()) << json_problems.front();
}

}  // namespace
}  // namespace npu::trace
