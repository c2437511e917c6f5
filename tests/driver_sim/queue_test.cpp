// Command queues over the simulated chip and its firmware: order, overlap of
// queues, fences across queues, ring wrap-around, backpressure, events,
// counters, and the GEMM example end to end through the driver.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "driver_fixture.h"
#include "npusim/driver/errors.h"
#include "npusim/firmware/counters.h"

namespace npu {
namespace {

using testing::open_device;

std::vector<uint32_t> read_words(Device& device, const Buffer& buffer, size_t count) {
  std::vector<uint32_t> words(count);
  device.copy_from_device(buffer, 0, words.data(), count * 4);
  return words;
}

TEST(Queue, GemmEndToEndOnFourCores) {
  const long m = 150, n = 100, k = 200;  // not multiples of the kernel's tiles
  const auto device = open_device("base");
  const Program gemm = Program::load(device, testing::gemm_program(m, n, k));
  EXPECT_EQ(gemm.default_core_mask(), 0xfu);
  const std::vector<uint16_t> a = testing::random_bf16(size_t(m * k), 1), b = testing::random_bf16(size_t(k * n), 2);
  Buffer A = device->allocate(a.size() * 2), B = device->allocate(b.size() * 2), C = device->allocate(size_t(m * n) * 2);
  Queue queue = device->queue(0);
  queue.copy_to_device(A, 0, a.data(), a.size() * 2);
  queue.copy_to_device(B, 0, b.data(), b.size() * 2);
  const Event start = queue.record_event();
  queue.launch(gemm, {{"A", &A}, {"B", &B}, {"C", &C}}, 0xf);
  const Event end = queue.record_event();
  std::vector<uint16_t> c(size_t(m * n));
  const Fence done = queue.copy_from_device(c.data(), C, 0, c.size() * 2);
  done.wait();
  EXPECT_TRUE(done.query());
  EXPECT_TRUE(testing::gemm_matches(a, b, c, m, n, k));
  EXPECT_GT(Event::elapsed_cycles(start, end), 1000u);
  EXPECT_EQ(Event::elapsed(start, end), device->cycles_to_time(Event::elapsed_cycles(start, end)));
}

TEST(Queue, RunsItsSubmissionsInOrder) {
  const auto device = open_device("tiny");
  Queue queue = device->queue(0);
  Buffer a = device->allocate(4096), b = device->allocate(4096), c = device->allocate(4096);
  // Each step reads what the one before wrote: any reordering shows.
  const Fence f1 = queue.fill(a, 0, 4096, 0x11111111);
  const Fence f2 = queue.copy(b, 0, a, 0, 4096);
  const Fence f3 = queue.fill(a, 0, 4096, 0x22222222);
  const Fence f4 = queue.copy(c, 0, a, 0, 2048);
  EXPECT_LT(f1.value(), f2.value());
  EXPECT_LT(f3.value(), f4.value());
  f4.wait();
  EXPECT_TRUE(f1.query() && f2.query() && f3.query());
  for (const uint32_t w : read_words(*device, b, 1024)) ASSERT_EQ(w, 0x11111111u);
  const auto cw = read_words(*device, c, 1024);
  for (size_t i = 0; i < 512; ++i) ASSERT_EQ(cw[i], 0x22222222u);
}

TEST(Queue, FillWritesAnyByteCountWithThePattern) {
  const auto device = open_device("tiny");
  Buffer buffer = device->allocate(64);
  device->queue(0).fill(buffer, 0, 64, 0).wait();
  device->queue(0).fill(buffer, 3, 10, 0x44332211).wait();
  std::vector<uint8_t> bytes(64);
  device->copy_from_device(buffer, 0, bytes.data(), 64);
  const uint8_t expected[] = {0, 0, 0, 0x11, 0x22, 0x33, 0x44, 0x11, 0x22, 0x33, 0x44, 0x11, 0x22, 0};
  EXPECT_TRUE(std::equal(std::begin(expected), std::end(expected), bytes.begin()));
}

// A compute-bound program (the tensor core multiplies local data arg0
// times; no DRAM or NoC traffic) on cores 0-1 from queue 0 and on cores 2-3
// from queue 1: together they take the longer of their times, not the sum.
const char* kTensorLoop = R"(
.code all
    csrr r1, arg0
    li r2, 0x40000000
    li r3, 0
    li r4, 32768
    li r5, 128
    li r6, 32
loop:
    tc.mm bf16, none, r2, r3, r4, r5, r6, r6
    dbnz r1, loop
    halt
)";

TEST(Queue, LaunchesOnDisjointCoresFromTwoQueuesOverlap) {
  const auto device = open_device("base");
  const Program program = Program::load(device, testing::assemble(kTensorLoop));
  Queue q0 = device->queue(0), q1 = device->queue(1);
  const auto timed = [&](Queue& queue, uint64_t mask, uint64_t iterations) {
    const Event start = queue.record_event();
    queue.launch(program, {}, mask, {iterations});
    return std::make_pair(start, queue.record_event());
  };
  // Alone, one after the other.
  auto [s0, e0] = timed(q0, 0x3, 200);
  e0.fence().wait();
  auto [s1, e1] = timed(q1, 0xc, 300);
  e1.fence().wait();
  const uint64_t alone0 = Event::elapsed_cycles(s0, e0), alone1 = Event::elapsed_cycles(s1, e1);
  // Together.
  auto [t0, f0] = timed(q0, 0x3, 200);
  auto [t1, f1] = timed(q1, 0xc, 300);
  const uint64_t together = std::max(f0.cycle(), f1.cycle()) - std::min(t0.cycle(), t1.cycle());
  const uint64_t longer = std::max(alone0, alone1);
  std::printf("alone: %llu and %llu cycles; together: %llu cycles\n", (unsigned long long)alone0, (unsigned long long)alone1,
              (unsigned long long)together);
  EXPECT_GT(alone1, alone0 * 5 / 4);  // the loop dominates the launch overhead
  // The longer one, plus at most the few packets that queue 1's submission
  // starts after queue 0's (50 cycles each on base).
  EXPECT_GE(together, longer);
  EXPECT_LE(together, longer + 4 * 50);
}

// The GEMM example on cores 0-1 and on cores 2-3 at the same time: both
// results are right (each launch has its own core ids and barriers).
TEST(Queue, TwoGemmsOnDisjointCoresAtOnceBothComputeTheirResult) {
  const long m = 96, n = 80, k = 72;
  const auto device = open_device("base");
  const Program gemm = Program::load(device, testing::gemm_program(m, n, k));
  const std::vector<uint16_t> a = testing::random_bf16(size_t(m * k), 3), b = testing::random_bf16(size_t(k * n), 4);
  const std::vector<uint16_t> a2 = testing::random_bf16(size_t(m * k), 13);
  Buffer A = device->allocate(a.size() * 2), A2 = device->allocate(a.size() * 2), B = device->allocate(b.size() * 2);
  Buffer C0 = device->allocate(size_t(m * n) * 2), C1 = device->allocate(size_t(m * n) * 2);
  device->copy_to_device(A, 0, a.data(), a.size() * 2);
  device->copy_to_device(A2, 0, a2.data(), a2.size() * 2);
  device->copy_to_device(B, 0, b.data(), b.size() * 2);
  const Fence f0 = device->queue(0).launch(gemm, {{"A", &A}, {"B", &B}, {"C", &C0}}, 0x3);
  const Fence f1 = device->queue(1).launch(gemm, {{"A", &A2}, {"B", &B}, {"C", &C1}}, 0xc);
  f0.wait();
  f1.wait();
  std::vector<uint16_t> c0(size_t(m * n)), c1(size_t(m * n));
  device->copy_from_device(C0, 0, c0.data(), c0.size() * 2);
  device->copy_from_device(C1, 0, c1.data(), c1.size() * 2);
  EXPECT_TRUE(testing::gemm_matches(a, b, c0, m, n, k));
  EXPECT_TRUE(testing::gemm_matches(a2, b, c1, m, n, k));
}

TEST(Queue, FenceWaitOrdersWorkAcrossQueues) {
  const long m = 128, n = 128, k = 512;
  const auto device = open_device("base");
  const Program gemm = Program::load(device, testing::gemm_program(m, n, k));
  const std::vector<uint16_t> a = testing::random_bf16(size_t(m * k), 5), b = testing::random_bf16(size_t(k * n), 6);
  Buffer A = device->allocate(a.size() * 2), B = device->allocate(b.size() * 2), C = device->allocate(size_t(m * n) * 2);
  Buffer D = device->allocate(size_t(m * n) * 2);
  device->copy_to_device(A, 0, a.data(), a.size() * 2);
  device->copy_to_device(B, 0, b.data(), b.size() * 2);
  Queue producer = device->queue(0), consumer = device->queue(1);
  device->queue(1).fill(D, 0, D.size(), 0).wait();
  const Fence produced = producer.launch(gemm, {{"A", &A}, {"B", &B}, {"C", &C}});
  const Event launched = producer.record_event();
  consumer.wait_for(produced);
  const Event waited = consumer.record_event();
  consumer.copy(D, 0, C, 0, D.size()).wait();
  // The consumer went on only after the producer's launch completed, and
  // copied its result. The producer's event is written one packet (50 cycles
  // on base) after the launch's fence; the consumer's, at least two packets
  // (its own fence, then the event) after it saw that fence.
  EXPECT_GE(waited.cycle() + 50, launched.cycle());
  std::vector<uint16_t> c(size_t(m * n)), d(size_t(m * n));
  device->copy_from_device(C, 0, c.data(), c.size() * 2);
  device->copy_from_device(D, 0, d.data(), d.size() * 2);
  EXPECT_TRUE(testing::gemm_matches(a, b, c, m, n, k));
  EXPECT_EQ(c, d);
}

// A 256-byte ring holds a few submissions: 300 of them wrap it many times and
// the driver must wait for room (backpressure) without losing any.
TEST(Queue, SmallRingWrapsAroundAndAppliesBackpressure) {
  DeviceOptions options;
  options.ring_bytes = 256;
  const auto device = open_device("tiny", options);
  Queue queue = device->queue(0);
  constexpr unsigned kFills = 300;
  Buffer buffer = device->allocate(kFills * 64);
  std::vector<Fence> fences;
  unsigned already_done_at_submission = 0;
  for (unsigned i = 0; i < kFills; ++i) {
    fences.push_back(queue.fill(buffer, i * 64, 64, 0x01010101u * (i % 251 + 1)));
    // A fill and its fence take 11 words; a 256-byte ring holds 5 such submissions.
    if (i >= 6 && fences[i - 6].query()) ++already_done_at_submission;
  }
  // The host could only run ahead of the device by a ring's worth.
  EXPECT_EQ(already_done_at_submission, kFills - 6);
  fences.back().wait();
  std::vector<uint8_t> bytes(kFills * 64);
  device->copy_from_device(buffer, 0, bytes.data(), bytes.size());
  for (unsigned i = 0; i < kFills; ++i) ASSERT_EQ(bytes[i * 64 + 63], uint8_t(i % 251 + 1)) << i;
}

TEST(Queue, CopiesHostMemoryBothWaysAsQueuedWork) {
  const auto device = open_device("tiny");
  std::vector<uint32_t> in(10000), out(10000, 0);
  std::iota(in.begin(), in.end(), 7);
  Buffer buffer = device->allocate(in.size() * 4);
  Queue queue = device->queue(1);
  queue.copy_to_device(buffer, 0, in.data(), in.size() * 4);
  const Fence fence = queue.copy_from_device(out.data(), buffer, 0, out.size() * 4);
  fence.wait();
  EXPECT_EQ(in, out);
}

TEST(Queue, CounterSnapshotCountsTheWorkDone) {
  const long m = 64, n = 64, k = 64;
  const auto device = open_device("base");
  const Program gemm = Program::load(device, testing::gemm_program(m, n, k));
  Buffer A = device->allocate(size_t(m * k) * 2), B = device->allocate(size_t(k * n) * 2), C = device->allocate(size_t(m * n) * 2);
  Queue queue = device->queue(0);
  std::vector<uint64_t> before, after;
  queue.snapshot_counters(&before);
  queue.launch(gemm, {{"A", &A}, {"B", &B}, {"C", &C}}, 0x1);
  queue.snapshot_counters(&after);
  const auto b = firmware::decode_counter_snapshot(before.data(), before.size());
  const auto a = firmware::decode_counter_snapshot(after.data(), after.size());
  ASSERT_EQ(a.cores.size(), 4u);
  EXPECT_GT(a.cycle, b.cycle);
  EXPECT_EQ(a.cores[0].macs - b.cores[0].macs, uint64_t(m * n * k));
  EXPECT_EQ(a.cores[1].macs, b.cores[1].macs);  // core 1 did not run
  EXPECT_GT(a.cores[0].instructions, b.cores[0].instructions);
  EXPECT_GE(a.dram_read_bytes - b.dram_read_bytes, uint64_t((m * k + k * n) * 2));
}

TEST(Queue, LaunchChecksItsBindings) {
  const auto device = open_device("tiny");
  const Program gemm = Program::load(device, testing::gemm_program(8, 8, 8));
  Buffer small = device->allocate(16), ok = device->allocate(128);
  Queue queue = device->queue(0);
  try {
    queue.launch(gemm, {{"A", &ok}, {"B", &ok}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'C' is not bound"), std::string::npos) << e.what();
  }
  try {
    queue.launch(gemm, {{"A", &small}, {"B", &ok}, {"C", &ok}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'A' needs 128 bytes; its buffer has 16"), std::string::npos) << e.what();
  }
  EXPECT_THROW(queue.launch(gemm, {{"nope", &ok}}), Error);
  EXPECT_THROW(queue.launch(gemm, {{"A", &ok}, {"B", &ok}, {"C", &ok}}, 0x2), Error);  // tiny has one core
}

}  // namespace
}  // namespace npu
