// The driver's host activity lands in the chip's trace: host tracks for
// submissions and waits, with flows to the command processor's packet spans,
// which sit beside the cores' spans. The trace is valid in both formats.
#include <gtest/gtest.h>

#include <algorithm>

#include "driver_fixture.h"
#include "simulator_link.h"
#include "npusim/traces/writers.h"

namespace npu {
namespace {

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

void run_gemm_traced(const std::string& path) {
  const long m = 64, n = 64, k = 64;
  const auto device = testing::open_device("base", {}, path);
  const Program gemm = Program::load(device, testing::gemm_program(m, n, k));
  const std::vector<uint16_t> a = testing::random_bf16(size_t(m * k), 1), b = testing::random_bf16(size_t(k * n), 2);
  std::vector<uint16_t> c(size_t(m * n));
  Buffer A = device->allocate(a.size() * 2), B = device->allocate(b.size() * 2), C = device->allocate(c.size() * 2);
  Queue queue = device->queue(0);
  queue.copy_to_device(A, 0, a.data(), a.size() * 2);
  queue.copy_to_device(B, 0, b.data(), b.size() * 2);
  queue.launch(gemm, {{"A", &A}, {"B", &B}, {"C", &C}});
  queue.copy_from_device(c.data(), C, 0, c.size() * 2).wait();
  EXPECT_TRUE(testing::gemm_matches(a, b, c, m, n, k));
}  // closing the device writes the trace

TEST(DriverTrace, HostSubmissionsAndWaitsFlowIntoTheChipTrace) {
  testing::ScratchDirectory scratch("npusim_driver_trace");
  const std::string path = scratch.path("run.pftrace");
  run_gemm_traced(path);
  const std::string bytes = testing::read_file(path);
  ASSERT_FALSE(bytes.empty());
  EXPECT_EQ(trace::validate_perfetto(bytes), std::vector<std::string>{});
  const trace::TraceSummary summary = trace::summarize_perfetto(bytes);
  for (const char* track : {"host (driver)", "queue 0 submissions", "waits", "command processor", "queue 0", "core 0", "tensor core"})
    EXPECT_TRUE(contains(summary.track_names, track)) << track;
  for (const char* slice : {"launch program", "copy to device 8192 B", "wait fence 4 on queue 0"})
    EXPECT_TRUE(contains(summary.slice_names, slice)) << slice << " not among " << ::testing::PrintToString(summary.slice_names);
  // The command processor's span of the LAUNCH packet.
  EXPECT_TRUE(std::any_of(summary.slice_names.begin(), summary.slice_names.end(),
                          [](const std::string& name) { return name.rfind("LAUNCH descriptor=", 0) == 0; }));
}

TEST(DriverTrace, ChromeJsonFlowsEachEndWhereOneStarted) {
  testing::ScratchDirectory scratch("npusim_driver_trace_json");
  const std::string path = scratch.path("run.json");
  run_gemm_traced(path);
  const std::string text = testing::read_file(path);
  EXPECT_EQ(trace::validate_chrome_json(text), std::vector<std::string>{});
  // Every packet of every submission has its flow: starts and ends pair up.
  size_t starts = 0, ends = 0;
  for (size_t at = text.find("\"ph\":\"s\""); at != std::string::npos; at = text.find("\"ph\":\"s\"", at + 1)) ++starts;
  for (size_t at = text.find("\"ph\":\"f\""); at != std::string::npos; at = text.find("\"ph\":\"f\"", at + 1)) ++ends;
  EXPECT_EQ(starts, 8u);  // four submissions of two packets each (the work and its fence)
  EXPECT_EQ(starts, ends);
}

// A link opened without a trace records one on demand (npusim.profile(path)): from then on only,
// launches carrying their annotations, and nothing once it stops.
TEST(DriverTrace, ATraceStartedMidRunHoldsWhatCameAfterAndStops) {
  testing::ScratchDirectory scratch("npusim_driver_trace_started");
  const std::string path = scratch.path("block.json");
  const long m = 64, n = 64, k = 64;
  const auto device = testing::open_device("base", {}, "");
  auto* link = dynamic_cast<SimulatorLink*>(&device->link());
  ASSERT_NE(link, nullptr);
  EXPECT_FALSE(link->tracing());
  const Program gemm = Program::load(device, testing::gemm_program(m, n, k));
  Buffer A = device->allocate(m * k * 2), B = device->allocate(k * n * 2), C = device->allocate(m * n * 2);
  Queue queue = device->queue(0);
  queue.launch(gemm, {{"A", &A}, {"B", &B}, {"C", &C}}, 0, {}, {{"layer", "before"}}).wait();
  ASSERT_TRUE(link->start_trace());
  EXPECT_FALSE(link->start_trace());  // one at a time
  const uint64_t since = link->now_ps();
  queue.launch(gemm, {{"A", &A}, {"B", &B}, {"C", &C}}, 0, {}, {{"layer", "traced"}, {"op", "aten::mm"}}).wait();
  link->write_trace(path, since);
  link->stop_trace();
  EXPECT_FALSE(link->tracing());
  queue.launch(gemm, {{"A", &A}, {"B", &B}, {"C", &C}}).wait();  // runs untraced after the stop
  const std::string text = testing::read_file(path);
  EXPECT_EQ(trace::validate_chrome_json(text), std::vector<std::string>{});
  EXPECT_NE(text.find("\"layer\":\"traced\""), std::string::npos);
  EXPECT_NE(text.find("\"op\":\"aten::mm\""), std::string::npos);
  EXPECT_EQ(text.find("\"layer\":\"before\""), std::string::npos);
  EXPECT_NE(text.find("\"cat\":\"metadata\""), std::string::npos);  // the chip describes itself
  size_t launches = 0;
  for (size_t at = text.find("LAUNCH descriptor="); at != std::string::npos; at = text.find("LAUNCH descriptor=", at + 1)) ++launches;
  EXPECT_EQ(launches, 1u);
}

}  // namespace
}  // namespace npu
