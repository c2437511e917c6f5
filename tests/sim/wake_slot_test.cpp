// Wake slots (ChipContext::new_slot): threads that wake in the same cycle run
// in the order of their slots, whatever waits each made before, so that a
// wait after which a thread does nothing can be dropped without changing
// what the others do. Each case runs a few threads on a bare ChipContext and
// logs who ran at which cycle, in order.
#include <gtest/gtest.h>

#include <systemc>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NPUSIM_TEST_HAS_ASAN 1
#include <sanitizer/common_interface_defs.h>
#endif
#endif

#include <algorithm>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "chip_context.h"
#include "kernel_start.h"
#include "test_chip.h"

namespace npu::sim {
namespace {

struct LogEntry {
  std::string who;
  uint64_t cycle;
  bool operator==(const LogEntry& other) const { return who == other.who && cycle == other.cycle; }
};
using Log = std::vector<LogEntry>;

std::ostream& operator<<(std::ostream& out, const LogEntry& entry) { return out << entry.who << "@" << entry.cycle; }

// A thread with a timer of its own (its slot: the order in which the threads are made) that runs `body`.
class Sleeper : public sc_core::sc_module {
 public:
  Sleeper(sc_core::sc_module_name name, ChipContext& chip_context, std::function<void(Sleeper&)> body)
      : sc_module(name), context(chip_context), timer(chip_context.new_timer()), body_(std::move(body)) {
    SC_HAS_PROCESS(Sleeper);
    SC_THREAD(run);
  }
  bool wait_until(uint64_t cycle) { return context.wait_until(cycle, timer); }

  ChipContext& context;
  ChipContext::Timer& timer;

 private:
  void run() { body_(*this); }
  std::function<void(Sleeper&)> body_;
};

class WakeSlots : public ::testing::Test {
 protected:
  WakeSlots() {
    sc_core::sc_set_time_resolution(1, sc_core::SC_FS);  // as the Simulator sets it
    config_ = testing::test_config();
    context_ = std::make_unique<ChipContext>(config_, false, false, nullptr);
  }
  // A thread that makes its timed waits to `cycles` in turn and logs its name at each of `logged`.
  void add(const std::string& name, std::vector<uint64_t> cycles, std::vector<uint64_t> logged) {
    sleepers_.push_back(std::make_unique<Sleeper>(name.c_str(), *context_, [this, name, cycles, logged](Sleeper& self) {
      for (const uint64_t cycle : cycles) {
        ASSERT_TRUE(self.wait_until(cycle));
        for (const uint64_t at : logged)
          if (at == cycle) log_.push_back({name, self.context.now_cycle()});
      }
    }));
  }
  Log run() {
    start_kernel();
    return log_;
  }

  ChipConfig config_;
  std::unique_ptr<ChipContext> context_;
  std::vector<std::unique_ptr<Sleeper>> sleepers_;
  Log log_;
};

TEST_F(WakeSlots, SameCycleWakesRunInSlotOrderWhateverWaitsCameBefore) {
  // c waits most often, a least, so SystemC's event heap saw their waits in every order; and b's and c's
  // last waits were queued before a's.
  add("a", {3, 10, 20}, {10, 20});
  add("b", {1, 2, 10, 11, 20}, {10, 20});
  add("c", {1, 2, 4, 5, 6, 7, 8, 9, 10, 12, 14, 16, 18, 20}, {10, 20});
  EXPECT_EQ(run(), (Log{{"a", 10}, {"b", 10}, {"c", 10}, {"a", 20}, {"b", 20}, {"c", 20}}));
}

TEST_F(WakeSlots, ReversedCreationReversesTheOrder) {
  add("c", {1, 2, 4, 5, 6, 7, 8, 9, 10, 12, 14, 16, 18, 20}, {10, 20});
  add("b", {1, 2, 10, 11, 20}, {10, 20});
  add("a", {3, 10, 20}, {10, 20});
  EXPECT_EQ(run(), (Log{{"c", 10}, {"b", 10}, {"a", 10}, {"c", 20}, {"b", 20}, {"a", 20}}));
}

// The same three threads, with waits that lead to nothing added to b's: in each cycle they run a, b, c.
TEST_F(WakeSlots, ExtraWaitsDoNotMoveAThreadInItsCycle) {
  const std::vector<std::vector<uint64_t>> extra_waits = {{}, {5}, {1, 2, 3, 4, 5, 6, 7, 8, 9}, {9}, {2, 9, 19}};
  for (const auto& extra : extra_waits) {
    std::vector<uint64_t> b_cycles = extra;
    b_cycles.push_back(10);
    b_cycles.push_back(20);
    std::sort(b_cycles.begin(), b_cycles.end());
    // (One elaboration per process: the variants run side by side in one simulation, each with threads of
    // its own.)
    const size_t first = sleepers_.size();
    add("a" + std::to_string(first), {10, 20}, {10, 20});
    add("b" + std::to_string(first), b_cycles, {10, 20});
    add("c" + std::to_string(first), {7, 10, 20}, {10, 20});
  }
  const Log log = run();
  // Every variant's threads hold consecutive slots; in each cycle they run variant by variant, a, b, c.
  Log expected;
  for (const uint64_t cycle : {10, 20})
    for (size_t variant = 0; variant < extra_waits.size(); ++variant)
      for (const char* who : {"a", "b", "c"}) expected.push_back({who + std::to_string(3 * variant), cycle});
  EXPECT_EQ(log, expected);
}

TEST_F(WakeSlots, AWaitForTheCurrentCycleReturnsAtOnce) {
  sleepers_.push_back(std::make_unique<Sleeper>("a", *context_, [this](Sleeper& self) {
    ASSERT_TRUE(self.wait_until(5));
    const sc_core::sc_time before = sc_core::sc_time_stamp();
    ASSERT_TRUE(self.wait_until(5));
    ASSERT_TRUE(self.wait_until(4));
    EXPECT_EQ(sc_core::sc_time_stamp(), before);
    log_.push_back({"a", self.context.now_cycle()});
  }));
  EXPECT_EQ(run(), (Log{{"a", 5}}));
}

// ChipContext::arm: a thread that waits for another event with its timer armed wakes once, at the event, and
// then waits for the armed time only if it is still ahead, in its slot.
class ArmedTimer : public WakeSlots {
 protected:
  // Thread "x" arms its timer for cycle 10 at cycle 2 and waits for an event that thread "e" notifies at
  // `event_cycle`; thread "y", made last, logs at cycle 10. x logs when it wakes and after wait_armed, and
  // checks that it runs in its slot when it waited for it. e is made before x where `event_first`.
  Log run_with_event_at(uint64_t event_cycle, bool event_first = false) {
    auto event = std::make_shared<sc_core::sc_event>();
    const auto make_e = [&] {
      sleepers_.push_back(std::make_unique<Sleeper>("e", *context_, [event, event_cycle](Sleeper& self) {
        ASSERT_TRUE(self.wait_until(event_cycle));
        event->notify(sc_core::SC_ZERO_TIME);
      }));
    };
    if (event_first) make_e();
    sleepers_.push_back(std::make_unique<Sleeper>("x", *context_, [this, event](Sleeper& self) {
      ASSERT_TRUE(self.wait_until(2));
      self.context.arm(10, self.timer);
      sc_core::wait(*event);
      log_.push_back({"x woke", self.context.now_cycle()});
      const bool before_slot = sc_core::sc_time_stamp() < self.context.cycles(10) + sc_core::sc_time::from_value(self.timer.slot);
      ASSERT_TRUE(self.context.wait_armed(10, self.timer));
      if (before_slot) {
        EXPECT_EQ(sc_core::sc_time_stamp(), self.context.cycles(10) + sc_core::sc_time::from_value(self.timer.slot));
      }
      log_.push_back({"x", self.context.now_cycle()});
    }));
    if (!event_first) make_e();
    add("y", {10}, {10});
    return run();
  }
};

TEST_F(ArmedTimer, AnEventBeforeTheArmedCycleWaitsForIt) {
  EXPECT_EQ(run_with_event_at(4), (Log{{"x woke", 4}, {"x", 10}, {"y", 10}}));
}

TEST_F(ArmedTimer, AnEventInTheArmedCycleBeforeTheSlotWaitsForTheSlot) {
  // e's slot comes before x's: x wakes in cycle 10 before its armed time, and waits for it.
  EXPECT_EQ(run_with_event_at(10, true), (Log{{"x woke", 10}, {"x", 10}, {"y", 10}}));
}

TEST_F(ArmedTimer, AnEventInTheArmedCycleAfterTheSlotGoesOn) {
  // e's slot comes after x's: x's armed time has passed when it wakes.
  EXPECT_EQ(run_with_event_at(10), (Log{{"x woke", 10}, {"x", 10}, {"y", 10}}));
}

TEST_F(ArmedTimer, AnEventAfterTheArmedCycleGoesOn) {
  EXPECT_EQ(run_with_event_at(12), (Log{{"y", 10}, {"x woke", 12}, {"x", 12}}));
}

// AddressSanitizer's idea of the calling thread's stack (its bounds, read by a switch that changes nothing).
std::pair<const char*, size_t> sanitizer_stack() {
#ifdef NPUSIM_TEST_HAS_ASAN
  void* fake_stack = nullptr;
  const void* bottom = nullptr;
  size_t size = 0;
  __sanitizer_start_switch_fiber(&fake_stack, nullptr, 0);
  __sanitizer_finish_switch_fiber(fake_stack, &bottom, &size);
  __sanitizer_start_switch_fiber(&fake_stack, bottom, size);
  __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
  return {static_cast<const char*>(bottom), size};
#else
  return {nullptr, 0};
#endif
}

// libsystemc does not tell the sanitizer about the switch out of a thread that ends (kernel_start.h): after a
// run whose threads all end, the sanitizer must know the caller's stack again, or LeakSanitizer's scan at exit
// reads the ended threads' unmapped stacks and crashes.
TEST_F(WakeSlots, AfterThreadsEndTheSanitizerKnowsTheCallersStack) {
#ifndef NPUSIM_TEST_HAS_ASAN
  GTEST_SKIP() << "only under AddressSanitizer";
#endif
  add("a", {3, 10}, {10});
  add("b", {1, 20}, {20});
  EXPECT_EQ(run(), (Log{{"a", 10}, {"b", 20}}));
  const char here = 0;
  const auto [bottom, size] = sanitizer_stack();
  EXPECT_TRUE(bottom <= &here && &here < bottom + size)
      << "the sanitizer's stack is [" << static_cast<const void*>(bottom) << ", +" << size << "), this frame is at "
      << static_cast<const void*>(&here);
}

}  // namespace
}  // namespace npu::sim
