// Driver overhead: the host time the driver spends per small submission
// (excluding simulated time: the device runs while the host is not
// submitting), and the command processor's modelled cost per launch.
//
// Target (issue: firmware and driver): at most 20 us of host time per small
// submission. Reference measured in the same run: one round trip to the
// simulator thread (a register read), the unit a synchronous driver would
// pay per call; the driver posts its writes instead.
//
// Usage: build/bin/npu-bench-driver [--config base] [--submissions 20000]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "npusim/driver/device.h"
#include "npusim/driver/program.h"
#include "npusim/isa/assembler.h"
#include "npusim/sim/registers.h"
#include "npusim/sim/systemc_main.h"
#include "simulator_link.h"

namespace {

using Clock = std::chrono::steady_clock;

double micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

}  // namespace

int sc_main(int argc, char* argv[]) {
  std::string config = "base";
  int submissions = 20000;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--config" && i + 1 < argc) config = argv[++i];
    else if (arg == "--submissions" && i + 1 < argc) submissions = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: npu-bench-driver [--config PRESET|FILE] [--submissions N]\n");
      return arg == "--help" || arg == "-h" ? 0 : 2;
    }
  }
  try {
    npu::DeviceOptions options;
    options.ring_bytes = 4 << 20;  // room for every submission: no backpressure in the timed loop
    const auto device = npu::Device::open(std::make_unique<npu::SimulatorLink>(config), options);
    npu::Queue queue = device->queue(0);
    npu::Buffer buffer = device->allocate(64);

    // Reference: synchronous round trips to the simulator thread.
    constexpr int kRoundTrips = 2000;
    auto start = Clock::now();
    for (int i = 0; i < kRoundTrips; ++i) device->link().read_register(static_cast<uint32_t>(npu::sim::Register::SCRATCH));
    const double round_trip_us = micros(Clock::now() - start) / kRoundTrips;

    // Small submissions: a 64-byte FILL each (packet + fence, written to the ring, TAIL, doorbell).
    start = Clock::now();
    for (int i = 0; i < submissions; ++i) queue.fill(buffer, 0, 64, static_cast<uint32_t>(i));
    const double fill_us = micros(Clock::now() - start) / submissions;
    queue.synchronize(std::chrono::seconds(60));

    // Launches of an empty program on one core: submission host time, and the
    // device time from one event to the next around it.
    npu::isa::AssembleResult assembled = npu::isa::assemble_source(".code all\n    halt\n", "empty.s");
    const npu::Program empty = npu::Program::load(device, *assembled.program);
    constexpr int kLaunches = 2000;
    start = Clock::now();
    for (int i = 0; i < kLaunches; ++i) queue.launch(empty, {}, 1);
    const double launch_us = micros(Clock::now() - start) / kLaunches;
    queue.synchronize(std::chrono::seconds(60));
    const npu::Event before = queue.record_event();
    queue.launch(empty, {}, 1);
    const npu::Event after = queue.record_event();
    const npu::Event idle_before = queue.record_event();
    const npu::Event idle_after = queue.record_event();
    const uint64_t launch_cycles = npu::Event::elapsed_cycles(before, after);
    const uint64_t event_cycles = npu::Event::elapsed_cycles(idle_before, idle_after);

    std::printf("config: %s\n", config.c_str());
    std::printf("reference: one synchronous round trip to the simulator thread: %.2f us\n", round_trip_us);
    std::printf("small submission (FILL 64 B + fence): %.2f us host time each (%d submissions); target <= 20 us: %.1fx under\n", fill_us,
                submissions, 20.0 / fill_us);
    std::printf("                                       = %.2f round trips\n", fill_us / round_trip_us);
    std::printf("launch submission (empty program, 1 core): %.2f us host time each (%d launches)\n", launch_us, kLaunches);
    std::printf("modelled command-processor cost per launch: %llu cycles from the event before to the event after\n",
                static_cast<unsigned long long>(launch_cycles));
    std::printf("  of which two events alone take %llu cycles; the launch submission %llu cycles\n"
                "  (its LAUNCH and FENCE_SIGNAL packets at packet_cycles each, launch_cycles, the code load, the core's run of one halt)\n",
                static_cast<unsigned long long>(event_cycles), static_cast<unsigned long long>(launch_cycles - event_cycles));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "npu-bench-driver: error: %s\n", e.what());
    return 1;
  }
  return 0;
}

NPUSIM_SYSTEMC_MAIN
