// SRAM buffers: the top of each core's scratchpad as driver buffers, reached
// through the cores' windows by the host link and by kernels' DMA.
#include <gtest/gtest.h>

#include <numeric>
#include <set>

#include "driver_fixture.h"
#include "npusim/driver/errors.h"
#include "npusim/driver/queue.h"
#include "npusim/sim/address_map.h"

namespace npu {
namespace {

using testing::open_device;

DeviceOptions with_pool(uint64_t bytes_per_core) {
  DeviceOptions options;
  options.sram_pool_bytes_per_core = bytes_per_core;
  return options;
}

TEST(SramBuffers, ComeFromTheTopOfEachCoresScratchpadSpreadOverTheCores) {
  const auto device = open_device("base", with_pool(256 << 10));
  EXPECT_EQ(device->info().scratchpad_bytes, 2u << 20);  // configs/base.pbtxt
  EXPECT_EQ(device->info().kernel_scratchpad_bytes(), (2u << 20) - (256u << 10));
  std::vector<Buffer> buffers;
  std::set<unsigned> cores;
  for (int i = 0; i < 4; ++i) {
    buffers.push_back(device->allocate_sram(100 << 10));
    ASSERT_TRUE(buffers.back());
    const uint64_t address = buffers.back().address();
    EXPECT_TRUE(Device::is_sram_address(address));
    EXPECT_GE(sim::window_offset(address), device->info().kernel_scratchpad_bytes());
    cores.insert(sim::window_core(address));
  }
  EXPECT_EQ(cores.size(), 4u);  // the roomiest pool first: one buffer per core
  EXPECT_FALSE(device->allocate_sram(300 << 10));  // larger than a pool: none, no throw
  EXPECT_EQ(device->sram_stats().in_use_bytes, 4u * (100 << 10));
  EXPECT_EQ(device->memory_stats().in_use_bytes, 0u);  // DRAM untouched
  buffers.clear();
  EXPECT_EQ(device->sram_stats().in_use_bytes, 0u);
  EXPECT_EQ(device->sram_stats().total_frees, 4u);
}

TEST(SramBuffers, WithoutAPoolThereAreNone) {
  const auto device = open_device("tiny");
  EXPECT_EQ(device->info().sram_pool_bytes_per_core, 0u);
  EXPECT_FALSE(device->allocate_sram(64));
}

TEST(SramBuffers, APoolAsLargeAsTheScratchpadIsRefused) {  // one device per process: one case
  EXPECT_THROW(open_device("tiny", with_pool(uint64_t{1} << 40)), std::invalid_argument);
}

// The host link writes an SRAM buffer, a kernel on another core copies it to
// a DRAM buffer and back into a second SRAM buffer; the host reads both.
TEST(SramBuffers, KernelsAndTheHostReadAndWriteThem) {
  const auto device = open_device("base", with_pool(64 << 10));
  std::vector<uint8_t> data(4096);
  std::iota(data.begin(), data.end(), uint8_t{7});
  Buffer in = device->allocate_sram(data.size());
  Buffer back = device->allocate_sram(data.size());
  ASSERT_TRUE(in && back);
  ASSERT_NE(sim::window_core(in.address()), sim::window_core(back.address()));
  Buffer dram = device->allocate(data.size());
  device->copy_to_device(in, 0, data.data(), data.size());

  const Program program = Program::load(device, testing::assemble(R"(
.input x, u8, 4096
.output y, u8, 4096
.output z, u8, 4096
.code 0
    la r1, x
    li r2, 4096
    dma.ld ch0, r0, r1, r2, r0, r0, r0, r0, r0, r0
    fence
    la r3, y
    dma.st ch1, r3, r0, r2, r0, r0, r0, r0, r0, r0
    la r4, z
    dma.st ch2, r4, r0, r2, r0, r0, r0, r0, r0, r0
    halt
)"));
  device->queue(0).launch(program, {{"x", &in}, {"y", &dram}, {"z", &back}}, 0b0010).wait();
  std::vector<uint8_t> from_dram(data.size()), from_sram(data.size());
  device->copy_from_device(dram, 0, from_dram.data(), from_dram.size());
  device->copy_from_device(back, 0, from_sram.data(), from_sram.size());
  EXPECT_EQ(from_dram, data);
  EXPECT_EQ(from_sram, data);
  // The command processor's copy engine serves them too: fill, device-to-device and host copies.
  Queue queue = device->queue(1);
  queue.fill(back, 0, 64, 0x01020304u);
  queue.copy(dram, 64, back, 0, 64);
  std::vector<uint8_t> through_queue(data.size());
  queue.copy_from_device(through_queue.data(), dram, 0, through_queue.size()).wait();
  EXPECT_EQ(through_queue[0], 7);  // dram's first 64 bytes: the kernel's copy
  EXPECT_EQ(through_queue[64], 4);  // then the fill's pattern, little-endian, copied from SRAM
  EXPECT_EQ(through_queue[65], 3);
  queue.copy_to_device(in, 0, through_queue.data() + 64, 4);
  queue.copy_from_device(through_queue.data(), in, 0, 4).wait();
  EXPECT_EQ(through_queue[0], 4);
  const std::string report = device->report();
  EXPECT_NE(report.find("SRAM buffers: 64.00 KiB of each core's 2.00 MiB scratchpad, 8.00 KiB in use in 2 allocations"), std::string::npos)
      << report;
}

}  // namespace
}  // namespace npu
