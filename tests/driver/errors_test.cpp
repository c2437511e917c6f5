#include "npusim/driver/errors.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace npu {
namespace {

DeviceFault dma_fault() {
  DeviceFault fault;
  fault.kind = "address out of range";
  fault.core = 2;
  fault.engine = "dma ch1";
  fault.pc = 17;
  fault.instruction = "dma.ld s0, g[0x40000000], 256";
  fault.has_address = true;
  fault.address = 0x40000000;
  fault.cycle = 1234;
  fault.message = "no memory maps this address";
  return fault;
}

TEST(DeviceError, CarriesEveryFaultField) {
  const DeviceError error(dma_fault());
  EXPECT_EQ(error.kind(), "address out of range");
  EXPECT_EQ(error.core(), 2);
  EXPECT_EQ(error.engine(), "dma ch1");
  EXPECT_EQ(error.pc(), 17);
  EXPECT_EQ(error.instruction(), "dma.ld s0, g[0x40000000], 256");
  EXPECT_TRUE(error.has_address());
  EXPECT_EQ(error.address(), 0x40000000u);
  EXPECT_EQ(error.cycle(), 1234u);
  EXPECT_EQ(error.message(), "no memory maps this address");
  EXPECT_EQ(error.fault().core, 2);
}

TEST(DeviceError, MessageNamesWhereAndWhen) {
  const DeviceError error(dma_fault());
  EXPECT_STREQ(error.what(),
               "device fault: address out of range at cycle 1234, core 2, dma ch1, pc 17 "
               "`dma.ld s0, g[0x40000000], 256`, address 0x40000000: no memory maps this address");
}

TEST(DeviceError, MessageLeavesOutFieldsTheFaultLacks) {
  DeviceFault fault;
  fault.kind = "watchdog timeout";
  fault.cycle = 1000000;
  const DeviceError error(fault);
  EXPECT_STREQ(error.what(), "device fault: watchdog timeout at cycle 1000000");
  EXPECT_EQ(error.core(), -1);
  EXPECT_EQ(error.pc(), -1);
  EXPECT_FALSE(error.has_address());
}

TEST(DeviceError, IsCaughtAsNpuError) {
  try {
    throw DeviceError(dma_fault());
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("core 2"), std::string::npos);
    return;
  }
  FAIL() << "DeviceError is not an npu::Error";
}

TEST(TimeoutError, StatesWhatWasAwaitedAndForHowLong) {
  const TimeoutError error("fence 3 on queue 0", std::chrono::milliseconds(250));
  EXPECT_STREQ(error.what(), "timed out after 250 ms waiting for fence 3 on queue 0");
  EXPECT_EQ(error.waited(), std::chrono::milliseconds(250));
  EXPECT_EQ(error.awaited(), "fence 3 on queue 0");
  const Error& base = error;
  EXPECT_STREQ(base.what(), error.what());
}

TEST(TimeoutError, WritesTheDurationInItsLargestExactUnit) {
  EXPECT_STREQ(TimeoutError("x", std::chrono::seconds(2)).what(), "timed out after 2 s waiting for x");
  EXPECT_STREQ(TimeoutError("x", std::chrono::microseconds(1500)).what(), "timed out after 1500 us waiting for x");
  EXPECT_STREQ(TimeoutError("x", std::chrono::nanoseconds(7)).what(), "timed out after 7 ns waiting for x");
  EXPECT_STREQ(TimeoutError("x", std::chrono::nanoseconds(0)).what(), "timed out after 0 ns waiting for x");
}

TEST(OutOfMemoryError, StatesRequestedFreeAndLargest) {
  const OutOfMemoryError error(1000, 256, 2048, 256);
  EXPECT_STREQ(error.what(),
               "out of device memory: requested 1000 bytes (alignment 256); 2048 bytes free, "
               "largest free block 256 bytes");
  EXPECT_EQ(error.requested(), 1000u);
  EXPECT_EQ(error.alignment(), 256u);
  EXPECT_EQ(error.free_bytes(), 2048u);
  EXPECT_EQ(error.largest_free_bytes(), 256u);
}

}  // namespace
}  // namespace npu
