// BackgroundWork (the second host thread that runs the tensor core's products
// in functional mode) and the chip's use of it: whatever reads or writes what
// such work uses sees the bytes as if the work had been done at once.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <stdexcept>
#include <thread>
#include <vector>

#include "background_work.h"
#include "npusim/isa/dtype.h"
#include "npusim/sim/simulator.h"
#include "test_chip.h"

namespace npu::sim {
namespace {

TEST(BackgroundWork, RunsItsWorkInOrderAndWaitsForAnItem) {
  std::vector<int> order;
  BackgroundWork background;
  uint64_t last = 0;
  for (int i = 0; i < 3 * int(BackgroundWork::kMaxQueued); ++i) {  // more than it queues: submit waits for room
    last = background.submit([&order, i] {
      if (i % 7 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // a slow one now and then
      order.push_back(i);
    });
    EXPECT_EQ(last, uint64_t(i) + 1);
  }
  background.wait_for(5);
  EXPECT_GE(background.done(), 5u);
  background.wait_all();
  EXPECT_EQ(background.done(), last);
  ASSERT_EQ(order.size(), 3 * BackgroundWork::kMaxQueued);
  for (size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], int(i));
}

TEST(BackgroundWork, IsFullWhereASubmitWouldWaitForRoom) {
  BackgroundWork background;
  EXPECT_FALSE(background.full());
  std::atomic<bool> release{false};
  for (size_t i = 0; i < BackgroundWork::kMaxQueued; ++i) {
    EXPECT_FALSE(background.full()) << i;
    background.submit([&release] {
      while (!release.load()) std::this_thread::yield();
    });
  }
  EXPECT_TRUE(background.full());
  release = true;
  background.wait_all();
  EXPECT_FALSE(background.full());
}

TEST(BackgroundWork, AnItemsExceptionReachesTheNextWait) {
  BackgroundWork background;
  background.submit([] { throw std::runtime_error("out of host memory"); });
  const uint64_t after = background.submit([] {});
  EXPECT_THROW(
      {
        try {
          background.wait_for(after);
        } catch (const std::runtime_error& error) {
          EXPECT_STREQ(error.what(), "out of host memory");
          throw;
        }
      },
      std::runtime_error);
  background.submit([] {});
  EXPECT_NO_THROW(background.wait_all());  // (said once)
}

TEST(BackgroundWork, ItsDestructorFinishesWhatWasSubmitted) {
  int done = 0;
  {
    BackgroundWork background;
    for (int i = 0; i < 4; ++i)
      background.submit([&done] {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        ++done;
      });
  }
  EXPECT_EQ(done, 4);
}

// The operands of the programs below, A (8 x 4) and B (4 x 4) in bf16: small
// integers, so every product and sum is exact. Written to the first two buffers.
void write_operands(Simulator& simulator, const std::vector<uint64_t>& addresses) {
  uint16_t a[8][4], b[4][4];
  for (int i = 0; i < 8; ++i)
    for (int p = 0; p < 4; ++p) a[i][p] = isa::f32_to_bf16(float(i - p));
  for (int p = 0; p < 4; ++p)
    for (int j = 0; j < 4; ++j) b[p][j] = isa::f32_to_bf16(float(p * 4 + j + 1));
  simulator.write_dram(addresses[0], a, sizeof a);
  simulator.write_dram(addresses[1], b, sizeof b);
}

// (A B)[i][j] for those operands.
float product_at(int i, int j) {
  float product = 0;
  for (int p = 0; p < 4; ++p) product += float(i - p) * float(p * 4 + j + 1);
  return product;
}

// With the operands above the accumulator holds exactly 2AB, then 3AB. The first DMA reads
// the accumulator right after two products (which run in the background), and
// the third product must wait for that read; a conversion of the accumulator
// (which joins the products in the background) is stored after it. Returns
// what went wrong, or an empty string (it also runs in a forked child, where
// gtest's assertions cannot report).
std::string run_products(Simulator& simulator) {
  const isa::Program program = testing::assemble(R"(
.buffer a, bf16, 8, 4
.buffer b, bf16, 4, 4
.buffer twice, f32, 8, 4
.buffer thrice, f32, 8, 4
.buffer thrice_bf16, bf16, 8, 4
.code 0
    li r1, 0x40000000       # the accumulator
    li r2, 0                # A in the scratchpad
    li r3, 1024             # B
    li r4, 8
    li r5, 4
    li r13, 2048            # the conversion's output
    la r6, a
    la r7, b
    la r10, twice
    la r12, thrice
    la r14, thrice_bf16
    li r8, 64
    li r9, 32
    li r11, 128
    dma.ld ch0, r2, r6, r8, zero, zero, zero, zero, zero, zero
    dma.ld ch0, r3, r7, r9, zero, zero, zero, zero, zero, zero
    sync.signal dma0, s0
    sync.wait tc, s0
    tc.mm bf16, none, r1, r2, r3, r4, r5, r5
    tc.mm bf16, acc, r1, r2, r3, r4, r5, r5
    sync.signal tc, s1
    sync.wait dma0, s1
    dma.st ch0, r10, r1, r11, zero, zero, zero, zero, zero, zero
    sync.signal dma0, s2
    sync.wait tc, s2
    tc.mm bf16, acc, r1, r2, r3, r4, r5, r5
    sync.signal tc, s3
    sync.wait vec, s3
    v.cvt bf16, f32, r13, r1, r4, r5
    sync.signal vec, s4
    sync.wait dma0, s4
    dma.st ch0, r12, r1, r11, zero, zero, zero, zero, zero, zero
    dma.st ch0, r14, r13, r8, zero, zero, zero, zero, zero, zero
    sync.signal dma0, s5
    sync.wait ctl, s5
    halt
)");
  const std::vector<uint64_t> addresses = testing::bind_symbols(program);
  write_operands(simulator, addresses);
  simulator.launch(program, 1, addresses);
  const RunResult result = simulator.run(1'000'000);
  if (result.fault) return result.fault->to_string();
  float twice[8][4], thrice[8][4];
  uint16_t thrice_bf16[8][4];
  simulator.read_dram(addresses[2], twice, sizeof twice);
  simulator.read_dram(addresses[3], thrice, sizeof thrice);
  simulator.read_dram(addresses[4], thrice_bf16, sizeof thrice_bf16);
  std::string wrong;
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 4; ++j) {
      const float product = product_at(i, j);
      const std::string at = " at " + std::to_string(i) + "," + std::to_string(j) + "; ";
      if (twice[i][j] != 2 * product) wrong += "twice " + std::to_string(twice[i][j]) + at;
      if (thrice[i][j] != 3 * product) wrong += "thrice " + std::to_string(thrice[i][j]) + at;
      if (thrice_bf16[i][j] != isa::f32_to_bf16(3 * product)) wrong += "thrice in bf16" + at;
    }
  return wrong;
}

ChipConfig config_with(DmaTiming timing) {
  ChipConfig config = testing::test_config();
  config.core.dma.timing = timing;
  return config;
}

std::string timing_name(const ::testing::TestParamInfo<DmaTiming>& info) {
  switch (info.param) {
    case DmaTiming::PerStep: return "PerStep";
    case DmaTiming::PerWindow: return "PerWindow";
    default: return "PerRequest";
  }
}

// With DMA timed per step or per window, a store of bytes still being written
// in the background is deferred there, after them (DmaEngine::move_copy).
class BackgroundWorkWithDma : public ::testing::TestWithParam<DmaTiming> {};

TEST_P(BackgroundWorkWithDma, TheAcceleratorsMemoriesSeeProductsAsIfDoneAtOnce) {
  Simulator simulator(config_with(GetParam()));
  EXPECT_EQ(run_products(simulator), "");
  EXPECT_EQ(run_products(simulator), "");
}

// Stores of a product converted in the background: deferred there where DMA
// is timed per step or window, and slow (every item waits 20 ms first: the
// simulation reaches what follows each store while it is queued). Then:
// (a) `first` (a row at a time into its left half: a batch of eight copies)
//     read back and stored to `second`: the load waits for the store;
// (b) a store to `third`, then v.fill over its source, stored to `fourth`:
//     the fill waits for the store to have read its bytes;
// (c) a store to `fifth`, then a store of 7s over it: the second lands last.
TEST_P(BackgroundWorkWithDma, DeferredStoresKeepTheirPlaceAmongOtherAccesses) {
  const isa::Program program = testing::assemble(R"(
.buffer a, bf16, 8, 4
.buffer b, bf16, 4, 4
.buffer first, bf16, 8, 8    # the product in columns 0-3
.buffer second, bf16, 8, 4
.buffer third, bf16, 8, 4
.buffer fourth, bf16, 8, 4
.buffer fifth, bf16, 8, 4
.code 0
    li r1, 0x40000000       # accumulators for (a), (b), (c)
    li r18, 0x40000100
    li r19, 0x40000200
    li r2, 0                # A in the scratchpad
    li r3, 1024             # B
    li r4, 8
    li r5, 4
    li r13, 2048            # the conversions' outputs for (a), (b), (c)
    li r20, 2304
    li r21, 2560
    li r22, 2816            # 7s
    li r14, 4096            # `first` read back
    la r6, a
    la r7, b
    la r10, first
    la r11, second
    la r12, third
    la r23, fourth
    la r24, fifth
    li r8, 64
    li r9, 32
    li r15, 0x40e00000      # 7.0f
    li r16, 8               # a row of the product, in bytes
    li r17, 16              # a row of `first`
    v.fill bf16, r22, r15, r4, r5
    dma.ld ch0, r2, r6, r8, zero, zero, zero, zero, zero, zero
    dma.ld ch0, r3, r7, r9, zero, zero, zero, zero, zero, zero
    sync.signal dma0, s0
    # (a)
    sync.wait tc, s0
    tc.mm bf16, none, r1, r2, r3, r4, r5, r5
    sync.signal tc, s1
    sync.wait vec, s1
    v.cvt bf16, f32, r13, r1, r4, r5
    sync.signal vec, s2
    sync.wait dma0, s2
    dma.st ch0, r10, r13, r16, r4, zero, r17, r16, zero, zero
    dma.ld ch0, r14, r10, r16, r4, zero, r16, r17, zero, zero
    dma.st ch0, r11, r14, r8, zero, zero, zero, zero, zero, zero
    sync.signal dma0, s3
    # (b)
    sync.wait tc, s3
    tc.mm bf16, none, r18, r2, r3, r4, r5, r5
    sync.signal tc, s4
    sync.wait vec, s4
    v.cvt bf16, f32, r20, r18, r4, r5
    sync.signal vec, s5
    sync.wait dma0, s5
    dma.st ch0, r12, r20, r8, zero, zero, zero, zero, zero, zero
    sync.signal dma0, s6
    sync.wait vec, s6
    v.fill bf16, r20, r15, r4, r5
    sync.signal vec, s7
    sync.wait dma0, s7
    dma.st ch0, r23, r20, r8, zero, zero, zero, zero, zero, zero
    sync.signal dma0, s8
    # (c)
    sync.wait tc, s8
    tc.mm bf16, none, r19, r2, r3, r4, r5, r5
    sync.signal tc, s9
    sync.wait vec, s9
    v.cvt bf16, f32, r21, r19, r4, r5
    sync.signal vec, s10
    sync.wait dma0, s10
    dma.st ch0, r24, r21, r8, zero, zero, zero, zero, zero, zero
    dma.st ch0, r24, r22, r8, zero, zero, zero, zero, zero, zero
    sync.signal dma0, s11
    sync.wait ctl, s11
    halt
)");
  const std::vector<uint64_t> addresses = testing::bind_symbols(program);
  Simulator simulator(config_with(GetParam()));
  write_operands(simulator, addresses);
  simulator.launch(program, 1, addresses);
  BackgroundWork::set_item_delay_for_tests(std::chrono::milliseconds(20));
  const RunResult result = simulator.run(1'000'000);
  BackgroundWork::set_item_delay_for_tests(std::chrono::microseconds(0));
  ASSERT_FALSE(result.fault) << result.fault->to_string();
  uint16_t first[8][8], second[8][4], third[8][4], fourth[8][4], fifth[8][4];
  simulator.read_dram(addresses[2], first, sizeof first);
  simulator.read_dram(addresses[3], second, sizeof second);
  simulator.read_dram(addresses[4], third, sizeof third);
  simulator.read_dram(addresses[5], fourth, sizeof fourth);
  simulator.read_dram(addresses[6], fifth, sizeof fifth);
  const uint16_t seven = isa::f32_to_bf16(7.0f);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 4; ++j) {
      const float product = product_at(i, j);
      const uint16_t expected = isa::f32_to_bf16(product);
      EXPECT_EQ(first[i][j], expected) << "at " << i << "," << j;
      EXPECT_EQ(first[i][j + 4], 0) << "at " << i << "," << j + 4;
      EXPECT_EQ(second[i][j], expected) << "(a) at " << i << "," << j;
      EXPECT_EQ(third[i][j], expected) << "(b) at " << i << "," << j;
      EXPECT_EQ(fourth[i][j], seven) << "(b) at " << i << "," << j;
      EXPECT_EQ(fifth[i][j], seven) << "(c) at " << i << "," << j;
    }
}

INSTANTIATE_TEST_SUITE_P(AllDmaTimings, BackgroundWorkWithDma, ::testing::Values(DmaTiming::PerRequest, DmaTiming::PerStep, DmaTiming::PerWindow),
                         timing_name);

// A forked child has no copy of the background thread: its products run at
// once, with the same results, and neither process hangs (nor does the
// child's simulator when it goes away).
TEST(BackgroundWork, AForkedChildKeepsSimulating) {
  auto simulator = std::make_unique<Simulator>(testing::test_config());
  ASSERT_EQ(run_products(*simulator), "");  // (the thread exists now)
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const bool ok = run_products(*simulator).empty() && run_products(*simulator).empty();
    simulator.reset();
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(run_products(*simulator), "");  // the parent's thread still works
}

}  // namespace
}  // namespace npu::sim
