// Device and Buffer over the simulated chip: identity, memory, copies, threads.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <random>
#include <string>
#include <thread>
#include <vector>

#include "npusim/driver/device.h"
#include "npusim/driver/errors.h"
#include "npusim/isa/assembler.h"
#include "npusim/sim/simulator.h"
#include "scratch_directory.h"
#include "npusim/sim/systemc_main.h"
#include "simulator_link.h"

namespace npu {
namespace {

std::shared_ptr<Device> open_tiny() { return Device::open(std::make_unique<SimulatorLink>("tiny")); }

TEST(Device, OpenReadsTheChipThroughItsRegisters) {
  const auto device = open_tiny();
  EXPECT_EQ(device->info().num_cores, 1u);  // tiny: configs/tiny.pbtxt
  EXPECT_EQ(device->info().isa_version, 2u);
  EXPECT_EQ(device->info().register_map_version, 1u);
  EXPECT_GE(device->info().num_queues, 1u);
  EXPECT_EQ(device->info().memory_bytes, uint64_t{256} << 20);
  EXPECT_GT(device->info().reserved_bytes, 0u);  // the command queues' rings
  EXPECT_EQ(device->memory_stats().free_bytes, (uint64_t{256} << 20) - device->info().reserved_bytes);
}

TEST(Device, ABadConfigIsAnErrorNamingIt) {
  try {
    SimulatorLink link("no_such_preset");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no_such_preset"), std::string::npos) << e.what();
  }
}

TEST(Device, BuffersRoundTripDataAndFreeThemselves) {
  const auto device = open_tiny();
  std::vector<uint8_t> data(1 << 20);
  std::mt19937 rng(1);
  for (uint8_t& byte : data) byte = static_cast<uint8_t>(rng());
  {
    Buffer buffer = device->allocate(data.size());
    EXPECT_EQ(buffer.size(), data.size());
    EXPECT_EQ(device->memory_stats().in_use_bytes, data.size());
    device->copy_to_device(buffer, 0, data.data(), data.size());
    std::vector<uint8_t> back(data.size());
    device->copy_from_device(buffer, 0, back.data(), back.size());
    EXPECT_EQ(back, data);
    std::vector<uint8_t> part(100);
    device->copy_from_device(buffer, 12345, part.data(), part.size());
    EXPECT_TRUE(std::equal(part.begin(), part.end(), data.begin() + 12345));
    EXPECT_THROW(device->copy_to_device(buffer, data.size() - 10, data.data(), 11), std::out_of_range);
  }
  EXPECT_EQ(device->memory_stats().in_use_bytes, 0u);
  EXPECT_EQ(device->memory_stats().total_frees, 1u);
}

TEST(Device, OutOfMemoryStatesTheSizes) {
  const auto device = open_tiny();
  try {
    device->allocate(uint64_t{300} << 20);
    FAIL();
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.requested(), uint64_t{300} << 20);
    EXPECT_EQ(e.free_bytes(), (uint64_t{256} << 20) - device->info().reserved_bytes);
    EXPECT_NE(std::string(e.what()).find("out of device memory"), std::string::npos);
  }
}

TEST(Device, CallsFromManyThreadsAreServedCorrectly) {
  const auto device = open_tiny();
  constexpr int kThreads = 4, kRounds = 20;
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        Buffer buffer = device->allocate(4096 + static_cast<uint64_t>(t) * 64);
        std::vector<uint8_t> data(buffer.size(), static_cast<uint8_t>(t * 31 + round));
        device->copy_to_device(buffer, 0, data.data(), data.size());
        std::vector<uint8_t> back(data.size());
        device->copy_from_device(buffer, 0, back.data(), back.size());
        if (back != data) ++failures[static_cast<size_t>(t)];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[static_cast<size_t>(t)], 0) << "thread " << t;
  EXPECT_EQ(device->memory_stats().allocations, 0u);
  EXPECT_EQ(device->memory_stats().total_allocations, uint64_t{kThreads} * kRounds);
}

TEST(Device, ReportShowsMemoryInUseAndALatchedFault) {
  auto link = std::make_unique<SimulatorLink>("tiny");
  SimulatorLink* raw_link = link.get();
  const auto device = Device::open(std::move(link));
  const Buffer buffer = device->allocate(1 << 20);
  std::string report = device->report();
  EXPECT_NE(report.find("1.00 MiB in use (peak 1.00 MiB) in 1 allocations"), std::string::npos) << report;
  EXPECT_NE(report.find("status: ok"), std::string::npos) << report;
  EXPECT_NE(report.find("counters at cycle"), std::string::npos) << report;
  EXPECT_NE(report.find("core 0: 0 instructions, 0 MACs"), std::string::npos) << report;
  // Fault the chip from the simulator side, behind the driver's back.
  raw_link->call([](sim::Simulator& simulator) {
    isa::AssembleOptions options;
    options.read_include = [](const std::string&) { return std::nullopt; };
    const auto assembled = isa::assemble_source(
        ".code 0\n    li r1, 1\n    shli r1, r1, 40\n    li r2, 64\n    dma.ld ch0, r0, r1, r2, r0, r0, r0, r0, r0, r0\n    halt\n", "bad.s",
        options);
    simulator.launch(*assembled.program, 1, {});
    simulator.run(100000);
  });
  report = device->report();
  EXPECT_NE(report.find("status: FAULT latched: address out of range, core 0, pc 3, address 0x10000000000"), std::string::npos) << report;
  EXPECT_NE(report.find("interrupts: status 0x8"), std::string::npos) << report;  // bit 31: the fault
  EXPECT_NE(report.find("counters: not read while a fault is latched"), std::string::npos) << report;
}

TEST(NpuSmi, PrintsTheDeviceForAConfig) {
  npu::testing::ScratchDirectory scratch("npusim_smi");
  const npu::testing::ToolRun run = scratch.run(std::string(NPU_SMI_PATH) + " --config tiny --dump-config");
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.out.find("1 cores, 2 command queues"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("256.00 MiB total, 0 B in use"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("num_cores: 1"), std::string::npos) << run.out;
  const npu::testing::ToolRun bad_config = scratch.run(std::string(NPU_SMI_PATH) + " --config nope");
  EXPECT_EQ(bad_config.status, 1);
  EXPECT_EQ(bad_config.out, "");  // not SystemC's report of an uncaught exception, on stdout
  EXPECT_EQ(bad_config.err.rfind("npu-smi: error: ", 0), 0u) << bad_config.err;
  EXPECT_EQ(scratch.run("sh -c '" + std::string(NPU_SMI_PATH) + " --config tiny >/dev/full'").status, 1);  // a failed write
  EXPECT_EQ(scratch.run(std::string(NPU_SMI_PATH) + " --bogus").status, 2);
  EXPECT_EQ(scratch.run(std::string(NPU_SMI_PATH) + " --help").status, 0);
}

TEST(Device, NoInterruptWithoutWork) {
  const auto device = open_tiny();
  EXPECT_FALSE(device->link().wait_for_interrupt(10000));
}

}  // namespace
}  // namespace npu

int sc_main(int argc, char* argv[]) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

NPUSIM_SYSTEMC_MAIN

namespace npu {
namespace {

// fork() copies only the calling thread, not the link's simulation thread: in
// the child every call is an npu::Error saying so (it had waited forever), and
// closing the link there neither hangs nor touches the parent's chip.
TEST(SimulatorLink, AForkedChildIsToldItCannotUseTheParentsDevice) {
  auto link = std::make_unique<SimulatorLink>("tiny");
  const uint32_t id = link->read_register(0);
  EXPECT_FALSE(link->in_forked_child());
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int code = link->in_forked_child() ? 0 : 10;
    try {
      link->read_register(0);
      code = 11;
    } catch (const Error& error) {
      if (std::string(error.what()).find("fork()") == std::string::npos) code = 12;
    }
    link.reset();
    _exit(code);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(link->read_register(0), id);  // the parent's link still answers
}

}  // namespace
}  // namespace npu
