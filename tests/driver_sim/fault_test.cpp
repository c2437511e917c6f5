// Device faults, queue errors and timeouts surface through the driver as the
// right exception with the right fields; the device is reset, reports the
// work it abandoned, and runs new work afterwards.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "driver_fixture.h"
#include "npusim/driver/errors.h"
#include "npusim/sim/registers.h"

namespace npu {
namespace {

using testing::open_device;

// The device still computes: a fill, read back.
void expect_device_works(Device& device) {
  Buffer buffer = device.allocate(256);
  device.queue(0).fill(buffer, 0, 256, 0x5a5a5a5a).wait();
  std::vector<uint32_t> words(64);
  device.copy_from_device(buffer, 0, words.data(), 256);
  for (const uint32_t w : words) ASSERT_EQ(w, 0x5a5a5a5au);
}

struct FaultCase {
  const char* name;
  const char* source;
  const char* kind;
  const char* engine;
  int64_t pc;
  const char* instruction;  // a substring of the disassembly; "" for none
  bool has_address;
  uint64_t address;
};

void PrintTo(const FaultCase& c, std::ostream* out) { *out << c.name; }

class DeviceFaults : public ::testing::TestWithParam<FaultCase> {};

TEST_P(DeviceFaults, SurfaceAsDeviceErrorWithTheirFields) {
  const FaultCase& c = GetParam();
  const auto device = open_device("tiny");
  const Program program = Program::load(device, testing::assemble(c.source));
  Queue queue = device->queue(0);
  const Fence fence = queue.launch(program, {});
  try {
    fence.wait();
    FAIL() << "no fault";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.kind(), c.kind) << e.what();
    EXPECT_EQ(e.core(), 0) << e.what();
    EXPECT_EQ(e.engine(), c.engine) << e.what();
    EXPECT_EQ(e.pc(), c.pc) << e.what();
    EXPECT_NE(e.instruction().find(c.instruction), std::string::npos) << e.what();
    EXPECT_EQ(e.has_address(), c.has_address) << e.what();
    if (c.has_address) {
      EXPECT_EQ(e.address(), c.address) << e.what();
    }
    EXPECT_GT(e.cycle(), 0u);
    EXPECT_FALSE(e.message().empty()) << e.what();  // every fault carries the chip's detail
    // The message names the fault and what the reset did to queued work.
    EXPECT_NE(std::string(e.what()).find(c.kind), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("device reset"), std::string::npos) << e.what();
  }
  EXPECT_EQ(device->resets(), 1u);
  // The faulting submission itself was abandoned, and says so.
  EXPECT_THROW(fence.wait(), AbandonedError);
  expect_device_works(*device);
  EXPECT_TRUE(queue.last_fence().query());
}

const FaultCase kFaultCases[] = {
    {"InvalidInstruction", ".code 0\n    nop\n    .word 0xff\n    halt\n", "invalid instruction", "control", 1, "", false, 0},
    {"GlobalAddressOutOfRange", ".code 0\n    li r1, 1\n    shli r1, r1, 40\n    li r2, 64\n    dma.ld ch1, r0, r1, r2, r0, r0, r0, r0, r0, r0\n    halt\n",
     "address out of range", "dma ch1", 3, "dma.ld", true, uint64_t{1} << 40},
    {"LocalAddressOutOfRange", ".code 0\n    li r1, 0x30000000\n    li r2, 4\n    v.exp f32, r1, r1, r2, r2\n    halt\n", "address out of range",
     "vector unit", 2, "v.exp", true, 0x30000000},
    {"Misaligned", ".code 0\n    li r1, 2\n    li r2, 4\n    v.exp f32, r1, r1, r2, r2\n    halt\n", "misaligned access", "vector unit", 2,
     "v.exp", true, 2},
    {"SramOverflow", ".code 0\n    li r2, 64\n    li r3, 65536\n    v.relu f32, r0, r0, r2, r3\n    halt\n", "SRAM overflow", "vector unit", 2,
     "v.relu", true, 0},
    {"ExecutionError", ".code 0\n    li r1, 5\n    divu r2, r1, r0\n    halt\n", "execution error", "control", 1, "divu", false, 0},
    {"Deadlock", ".code 0\n    nop\n    sync.wait tc, s3\n    halt\n", "deadlock", "control", 2, "halt", false, 0},
};

std::string fault_case_name(const ::testing::TestParamInfo<FaultCase>& param) { return param.param.name; }
INSTANTIATE_TEST_SUITE_P(Each, DeviceFaults, ::testing::ValuesIn(kFaultCases), fault_case_name);

TEST(DeviceFaultsOnAnyCore, NameThePhysicalCoreAndTheInstructionOfItsCode) {
  const auto device = open_device("base");
  // Core id 1 of a launch on cores 2 and 3 is core 3; its code faults at pc 2.
  const Program program = Program::load(device, testing::assemble(
                                                    ".code 0\n    halt\n.code 1\n    li r1, 5\n    nop\n    divu r2, r1, r0\n    halt\n"));
  try {
    device->queue(2).launch(program, {}, 0xc).wait();
    FAIL();
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.core(), 3) << e.what();
    EXPECT_EQ(e.pc(), 2) << e.what();
    EXPECT_NE(e.instruction().find("divu r2, r1"), std::string::npos) << e.what();
    // The chip's detail, read through the FAULT_MESSAGE window, ends the error's text.
    EXPECT_EQ(e.message().rfind("scalar division by zero", 0), 0u) << e.what();  // (then what the reset did)
    EXPECT_NE(std::string(e.what()).find(": scalar division by zero"), std::string::npos) << e.what();
  }
  expect_device_works(*device);
}

TEST(DeviceFaultsWatchdog, StopsAnEndlessLoop) {
  ::npu::testing::ScratchDirectory scratch("npusim_driver_watchdog");
  const std::string config = testing::edited_preset("tiny", {{"watchdog_cycles", "200000"}}, scratch.path("tiny_watchdog.pbtxt"));
  const auto device = open_device(config);
  const Program program = Program::load(device, testing::assemble(".code 0\n    nop\nspin:\n    jmp spin\n"));
  const Fence fence = device->queue(0).launch(program, {});
  try {
    fence.wait(std::chrono::milliseconds(10));  // 10 ms of device time is far past the watchdog
    FAIL();
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.kind(), "watchdog timeout") << e.what();
    EXPECT_EQ(e.core(), 0);
    EXPECT_EQ(e.engine(), "control");
    EXPECT_EQ(e.pc(), 1);
    EXPECT_NE(e.instruction().find("jmp"), std::string::npos) << e.what();
    EXPECT_GE(e.cycle(), 200000u);
  }
  expect_device_works(*device);
}

TEST(DeviceTimeouts, AWaitPastItsTimeoutResetsTheDevice) {
  const auto device = open_device("tiny");
  const Program program = Program::load(device, testing::assemble(".code 0\n    li r1, 1000000\nloop:\n    dbnz r1, loop\n    halt\n"));
  const Fence fence = device->queue(0).launch(program, {});
  const uint64_t before = device->now_cycle();
  try {
    fence.wait(std::chrono::microseconds(20));
    FAIL();
  } catch (const TimeoutError& e) {
    EXPECT_EQ(e.waited(), std::chrono::microseconds(20));
    EXPECT_NE(std::string(e.what()).find("timed out after 20 us waiting for fence 1 on queue 0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("queue 0: submissions 1..1 abandoned"), std::string::npos) << e.what();
  }
  // The wait lasted its timeout in device time (20 us at the preset's clock), give or take a few register reads.
  const uint64_t waited = device->now_cycle() - before;
  EXPECT_GE(waited, device->time_to_cycles(std::chrono::microseconds(20)));
  EXPECT_EQ(device->resets(), 1u);
  EXPECT_THROW(fence.wait(), AbandonedError);
  expect_device_works(*device);
}

// The host gives up on a wait (Ctrl-C, in the PyTorch bridge): the cancel check stops it, the device is reset
// with the queued work abandoned and reported, and new work runs.
TEST(DeviceCancel, ACancelledWaitResetsTheDeviceAndItWorksAfterwards) {
  const auto device = open_device("tiny");
  const Program spin = Program::load(device, testing::assemble(".code 0\n    nop\nspin:\n    jmp spin\n"));
  int checks = 0;
  device->set_cancel_check([&] { return ++checks >= 3; });
  const Fence spinning = device->queue(0).launch(spin, {});
  const Fence behind = device->queue(0).launch(spin, {});
  try {
    behind.wait(std::chrono::seconds(100));  // far more device time than the test will give it
    FAIL() << "not cancelled";
  } catch (const CancelledError& e) {
    EXPECT_NE(std::string(e.what()).find("the host cancelled a wait"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("queue 0: submissions 1..2 abandoned"), std::string::npos) << e.what();
  }
  EXPECT_GE(checks, 3);
  EXPECT_EQ(device->resets(), 1u);
  EXPECT_THROW(spinning.wait(), AbandonedError);
  device->set_cancel_check(nullptr);
  expect_device_works(*device);
}

// A cancel check that never fires changes no cycle. The run without the check is made in a child forked before
// this process builds its chip (one chip per process).
TEST(DeviceCancel, ACheckThatNeverFiresChangesNoCycle) {
  const auto cycles_of_gemm = [](bool with_check) {
    SimulatorLinkOptions link;
    link.config = "base";
    link.functional = false;  // the same cycles, without the arithmetic
    const auto device = Device::open(std::make_unique<SimulatorLink>(link));
    int checks = 0;
    if (with_check) device->set_cancel_check([&] { return ++checks < 0; });
    const Program gemm = Program::load(device, testing::gemm_program(1024, 1024, 2048));
    Buffer a = device->allocate(1024 * 2048 * 2), b = device->allocate(2048 * 1024 * 2), c = device->allocate(1024 * 1024 * 4);
    Queue queue = device->queue(0);
    const Event start = queue.record_event();
    queue.launch(gemm, {{"A", &a}, {"B", &b}, {"C", &c}}, 0xf);
    const Event end = queue.record_event();
    end.fence().wait(std::chrono::seconds(10));
    return Event::elapsed_cycles(start, end);
  };
  int channel[2];
  ASSERT_EQ(::pipe(channel), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const uint64_t cycles = cycles_of_gemm(false);
    const bool sent = ::write(channel[1], &cycles, sizeof cycles) == sizeof cycles;
    ::_exit(sent ? 0 : 1);
  }
  const uint64_t with_check = cycles_of_gemm(true);
  uint64_t without_check = 0;
  ASSERT_EQ(::read(channel[0], &without_check, sizeof without_check), ssize_t(sizeof without_check));
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_GT(with_check, 300000u);
  EXPECT_EQ(with_check, without_check);
}

// A reset while a GEMM's DMA transfers and products are in flight (here a wait's timeout, in device time; a
// cancelled wait resets the same way) leaves a chip that runs the next launches to the end.
TEST(DeviceTimeouts, AResetInTheMiddleOfAGemmLeavesAChipThatRunsTheNext) {
  SimulatorLinkOptions link;
  link.config = "base";
  link.functional = false;
  const auto device = Device::open(std::make_unique<SimulatorLink>(link));
  const Program gemm = Program::load(device, testing::gemm_program(1024, 1024, 1024));
  Buffer a = device->allocate(1024 * 1024 * 2), b = device->allocate(1024 * 1024 * 2), c = device->allocate(1024 * 1024 * 4);
  Queue queue = device->queue(0);
  for (const int microseconds : {20, 57, 101, 149}) {
    Fence fence;
    for (int i = 0; i < 3; ++i) fence = queue.launch(gemm, {{"A", &a}, {"B", &b}, {"C", &c}}, 0xf);
    EXPECT_THROW(fence.wait(std::chrono::microseconds(microseconds)), TimeoutError) << microseconds;
  }
  const Event start = queue.record_event();
  queue.launch(gemm, {{"A", &a}, {"B", &b}, {"C", &c}}, 0xf);
  const Event end = queue.record_event();
  EXPECT_NO_THROW(end.fence().wait(std::chrono::seconds(1)));
  EXPECT_GT(Event::elapsed_cycles(start, end), 100000u);
}

// A fault on queue 0 while queue 1 waits on it: queue 1's work is abandoned
// and reported, not dropped.
TEST(DeviceFaultsAbandon, WorkQueuedOnOtherQueues) {
  const auto device = open_device("base");
  const Program bad = Program::load(device, testing::assemble(".code 0\n    li r1, 5\n    divu r2, r1, r0\n    halt\n"));
  Buffer buffer = device->allocate(64);
  const Fence faulting = device->queue(0).launch(bad, {}, 0x1);
  Queue other = device->queue(1);
  other.wait_for(faulting);
  const Fence behind = other.fill(buffer, 0, 64, 1);
  EXPECT_THROW(faulting.wait(), DeviceError);
  EXPECT_NE(device->last_reset_report().find("queue 1: submissions 1..2 abandoned"), std::string::npos) << device->last_reset_report();
  try {
    behind.wait();
    FAIL();
  } catch (const AbandonedError& e) {
    EXPECT_EQ(e.queue(), 1u);
    EXPECT_EQ(e.fence_value(), 2u);
    EXPECT_NE(std::string(e.what()).find("execution error"), std::string::npos) << e.what();
  }
  expect_device_works(*device);
}

// After a fault has been thrown, synchronize still reports the abandoned work
// (each queue's last submission), and drain treats it as done.
TEST(DeviceFaultsAbandon, DrainCountsAbandonedWorkAsDone) {
  const auto device = open_device("base");
  const Program bad = Program::load(device, testing::assemble(".code 0\n    li r1, 5\n    divu r2, r1, r0\n    halt\n"));
  Buffer buffer = device->allocate(64);
  device->queue(0).launch(bad, {}, 0x1);
  device->queue(0).fill(buffer, 0, 64, 1);  // queued behind the fault
  EXPECT_THROW(device->drain(), DeviceError);  // the fault itself, once
  EXPECT_THROW(device->synchronize(), AbandonedError);
  EXPECT_NO_THROW(device->drain());
  expect_device_works(*device);
  EXPECT_NO_THROW(device->synchronize());  // new work replaced the abandoned as each queue's last
}

// A malformed packet (written behind the driver's back) stops its queue:
// QueueError with the code, and the device comes back after the reset.
TEST(QueueErrors, AMalformedPacketStopsTheQueueWithItsCode) {
  const auto device = open_device("tiny");
  DeviceLink& link = device->link();
  const unsigned q = 1;
  const uint64_t ring = link.read_register(sim::queue_register(q, sim::QueueRegister::RING_BASE_LO)) |
                        uint64_t{link.read_register(sim::queue_register(q, sim::QueueRegister::RING_BASE_HI))} << 32;
  const uint32_t garbage = 0x0001002a;  // opcode 0x2a does not exist
  link.write_memory(ring, &garbage, 4);
  link.write_register(sim::queue_register(q, sim::QueueRegister::TAIL), 4);
  link.write_register(sim::queue_register(q, sim::QueueRegister::DOORBELL), 1);
  // The driver learns of it on its next wait.
  Buffer buffer = device->allocate(64);
  try {
    device->queue(0).fill(buffer, 0, 64, 7).wait();
    device->synchronize();  // looks at the interrupts even when every queue is done
    FAIL() << "no queue error";
  } catch (const QueueError& e) {
    EXPECT_EQ(e.queue(), q);
    EXPECT_EQ(e.code(), 1u);
    EXPECT_NE(std::string(e.what()).find("UNKNOWN_OPCODE"), std::string::npos) << e.what();
  }
  EXPECT_EQ(link.read_register(sim::queue_register(q, sim::QueueRegister::ERROR)), 0u);  // cleared by the reset
  expect_device_works(*device);
}

}  // namespace
}  // namespace npu

namespace npu {
namespace {

// A launch that leaves a semaphore raised must not let the next launch's
// wait through: every launch starts with its semaphores at 0.
TEST(DeviceFaultsSemaphores, EveryLaunchStartsWithItsSemaphoresAtZero) {
  const auto device = testing::open_device("tiny");
  const Program leaves = Program::load(device, testing::assemble(".code 0\n    sync.signal ctl, s5\n    halt\n"));
  const Program waits = Program::load(device, testing::assemble(".code 0\n    sync.wait ctl, s5\n    halt\n"));
  device->queue(0).launch(leaves, {}).wait();
  try {
    device->queue(0).launch(waits, {}).wait();
    FAIL() << "the wait used a token of the previous launch";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.kind(), "deadlock") << e.what();
  }
}

}  // namespace
}  // namespace npu
