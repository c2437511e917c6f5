// The "npu" device for PyTorch (PrivateUse1): memory from the driver's
// allocator, a device guard for the one simulated chip, and the hooks.
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include "npusim/driver/errors.h"
#include "runtime.h"

namespace npusim {
namespace {

constexpr c10::DeviceType kNpu = c10::DeviceType::PrivateUse1;

void delete_buffer(void* context) { delete static_cast<npu::Buffer*>(context); }

// Device memory as driver Buffers; the DataPtr's context owns the Buffer.
// Statistics are the driver allocator's, exactly.
class NpuAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t bytes) override {
    npu::Device& device = Runtime::get().device();
    npu::Buffer buffer;
    try {
      buffer = device.allocate(std::max<size_t>(bytes, 1), 64);
    } catch (const npu::OutOfMemoryError& e) {
      TORCH_CHECK_WITH(OutOfMemoryError, false, "npu: ", e.what());
    }
    auto* owned = new npu::Buffer(std::move(buffer));
    void* pointer = reinterpret_cast<void*>(kPointerBase + owned->address());
    return {pointer, owned, &delete_buffer, c10::Device(kNpu, 0)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    // Device to device, through the copy engine (used when a storage grows).
    npu::Device& device = Runtime::get().device();
    Runtime::get().synchronize();
    std::vector<uint8_t> staging(count);
    device.link().read_memory(reinterpret_cast<uintptr_t>(src) - kPointerBase, staging.data(), count);
    device.link().write_memory(reinterpret_cast<uintptr_t>(dest) - kPointerBase, staging.data(), count);
  }
  bool initialized() override { return Runtime::started(); }
  void emptyCache(c10::MempoolId_t) override {}  // nothing cached: every free returns to the driver
  void recordStream(const c10::DataPtr&, c10::Stream) override {}  // one stream, in order
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex) override {
    c10::CachingDeviceAllocator::DeviceStats stats;
    if (!Runtime::started()) return stats;
    const npu::AllocatorStats s = Runtime::get().device().memory_stats();
    const auto set = [](c10::CachingDeviceAllocator::StatArray& array, int64_t current, int64_t peak, int64_t allocated, int64_t freed) {
      for (auto& stat : array) stat.current = current, stat.peak = peak, stat.allocated = allocated, stat.freed = freed;
    };
    set(stats.allocated_bytes, int64_t(s.in_use_bytes), int64_t(s.peak_in_use_bytes), 0, 0);
    set(stats.reserved_bytes, int64_t(s.in_use_bytes), int64_t(s.peak_in_use_bytes), 0, 0);
    set(stats.active_bytes, int64_t(s.in_use_bytes), int64_t(s.peak_in_use_bytes), 0, 0);
    set(stats.allocation, int64_t(s.allocations), int64_t(s.allocations), int64_t(s.total_allocations), int64_t(s.total_frees));
    return stats;
  }
  void resetAccumulatedStats(c10::DeviceIndex) override {}
  void resetPeakStats(c10::DeviceIndex) override {}
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex) override {
    npu::Device& device = Runtime::get().device();
    return {device.memory_stats().free_bytes, device.info().memory_bytes - device.info().reserved_bytes};
  }
};

NpuAllocator g_allocator;
REGISTER_ALLOCATOR(kNpu, &g_allocator);

// One device, index 0, with its default stream (queue 0).
struct NpuGuard final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kNpu; }
  c10::Device exchangeDevice(c10::Device device) const override {
    TORCH_CHECK(device.index() <= 0, "npu: there is one device (npu:0)");
    return c10::Device(kNpu, 0);
  }
  c10::Device getDevice() const override { return c10::Device(kNpu, 0); }
  void setDevice(c10::Device device) const override { TORCH_CHECK(device.index() <= 0, "npu: there is one device (npu:0)"); }
  void uncheckedSetDevice(c10::Device) const noexcept override {}
  c10::Stream getStream(c10::Device) const noexcept override { return c10::Stream(c10::Stream::DEFAULT, c10::Device(kNpu, 0)); }
  c10::Stream getDefaultStream(c10::Device) const override { return c10::Stream(c10::Stream::DEFAULT, c10::Device(kNpu, 0)); }
  c10::Stream exchangeStream(c10::Stream) const noexcept override { return c10::Stream(c10::Stream::DEFAULT, c10::Device(kNpu, 0)); }
  c10::DeviceIndex deviceCount() const noexcept override { return 1; }
  bool queryStream(const c10::Stream&) const override { return false; }
  void synchronizeStream(const c10::Stream&) const override { Runtime::get().synchronize(); }
  void synchronizeDevice(const c10::DeviceIndex) const override { Runtime::get().synchronize(); }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, NpuGuard);

struct NpuHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  c10::DeviceIndex deviceCount() const override { return 1; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  void init() const override {}
  c10::Device getDeviceFromPtr(void*) const override { return c10::Device(kNpu, 0); }
  // A storage that grows (resize_): new memory, the old bytes copied over.
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t bytes) const override {
    c10::DataPtr grown = g_allocator.allocate(bytes);
    const size_t keep = std::min<size_t>(storage.nbytes(), bytes);
    if (keep) g_allocator.copy_data(grown.get(), storage.data_ptr().get(), keep);
    storage.unsafeGetStorageImpl()->set_data_ptr_noswap(std::move(grown));
    storage.unsafeGetStorageImpl()->set_nbytes(bytes);
  }
};

struct RegisterHooks {
  RegisterHooks() { at::RegisterPrivateUse1HooksInterface(new NpuHooks()); }
} g_register_hooks;

}  // namespace
}  // namespace npusim
