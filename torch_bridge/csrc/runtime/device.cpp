// The "npu" device for PyTorch (PrivateUse1): memory from the driver's
// allocator, a device guard for the one simulated chip, and the hooks.
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <algorithm>

#include "npusim/driver/errors.h"
#include "generator.h"
#include "runtime.h"

namespace npusim {
namespace {

constexpr c10::DeviceType kNpu = c10::DeviceType::PrivateUse1;

void delete_buffer(void* context) { delete static_cast<npu::Buffer*>(context); }

// Device memory as driver Buffers; the DataPtr's context owns the Buffer.
// Statistics are the driver allocator's, exactly.
class NpuAllocator final : public c10::DeviceAllocator {
 public:
  // A tensor in DRAM starts on 512 bytes, as PyTorch's CUDA caching allocator rounds its blocks, and on
  // a DRAM interleave block where that is larger: on 64 bytes a kernel's rows of a block's size straddled
  // two blocks, two requests each, and the same program's cycles moved with where its tensors fell
  // (ResNet-18 in bf16 on base: 385.8 k kernel cycles, 351.4 k aligned).
  static uint64_t dram_alignment() { return std::max<uint64_t>(512, Runtime::get().device_chip().dram.interleave_bytes); }

  c10::DataPtr allocate(size_t bytes) override {
    npu::Device& device = Runtime::get().device();
    npu::Buffer buffer;
    // Graph mode's memory plan asks for SRAM; a full pool means DRAM, never an error.
    if (Runtime::sram_placement()) buffer = device.allocate_sram(std::max<size_t>(bytes, 1), 64);
    if (!buffer) {
      try {
        buffer = device.allocate(std::max<size_t>(bytes, 1), dram_alignment());
      } catch (const npu::OutOfMemoryError& e) {
        TORCH_CHECK_WITH(OutOfMemoryError, false, "npu: ", e.what());
      }
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

c10::Stream stream_of_queue(unsigned queue) { return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNpu, 0), c10::StreamId(queue)); }
unsigned queue_of(const c10::Stream& stream) { return static_cast<unsigned>(stream.id()); }

// A torch Event: a driver Event (a TIMESTAMP on the queue) once recorded.
struct NpuEvent {
  npu::Event event;
  bool recorded = false;
};

template <typename F>
auto driver_call(F f) -> decltype(f()) {
  try {
    return f();
  } catch (const npu::Error& e) {
    raise_driver_error(e);
  }
}

// One device, index 0; its streams are the command queues (docs/torch.md).
struct NpuGuard final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kNpu; }
  c10::Device exchangeDevice(c10::Device device) const override {
    TORCH_CHECK(device.index() <= 0, "npu: there is one device (npu:0)");
    return c10::Device(kNpu, 0);
  }
  c10::Device getDevice() const override { return c10::Device(kNpu, 0); }
  void setDevice(c10::Device device) const override { TORCH_CHECK(device.index() <= 0, "npu: there is one device (npu:0)"); }
  void uncheckedSetDevice(c10::Device) const noexcept override {}
  c10::Stream getStream(c10::Device) const noexcept override { return stream_of_queue(Runtime::current_queue()); }
  c10::Stream getDefaultStream(c10::Device) const override { return stream_of_queue(0); }
  c10::Stream getNewStream(c10::Device, int) const override { return stream_of_queue(Runtime::get().new_stream_queue()); }
  c10::Stream getStreamFromGlobalPool(c10::Device, bool) const override { return stream_of_queue(Runtime::get().new_stream_queue()); }
  c10::Stream exchangeStream(c10::Stream stream) const noexcept override {
    const c10::Stream previous = stream_of_queue(Runtime::current_queue());
    Runtime::set_current_queue(queue_of(stream));
    return previous;
  }
  c10::DeviceIndex deviceCount() const noexcept override { return 1; }
  bool queryStream(const c10::Stream& stream) const override {
    return driver_call([&] { return Runtime::get().device().queue(queue_of(stream)).last_fence().query(); });
  }
  void synchronizeStream(const c10::Stream& stream) const override {
    driver_call([&] { Runtime::get().device().queue(queue_of(stream)).synchronize(std::chrono::seconds(600)); });
  }
  void synchronizeDevice(const c10::DeviceIndex) const override { Runtime::get().synchronize(); }

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex, const c10::EventFlag) const override {
    if (*event == nullptr) *event = new NpuEvent();
    auto* e = static_cast<NpuEvent*>(*event);
    e->event = driver_call([&] { return Runtime::get().device().queue(queue_of(stream)).record_event(); });
    e->recorded = true;
  }
  void block(void* event, const c10::Stream& stream) const override {
    const auto* e = static_cast<NpuEvent*>(event);
    if (e == nullptr || !e->recorded) return;
    driver_call([&] { Runtime::get().device().queue(queue_of(stream)).wait_for(e->event.fence()); });
  }
  bool queryEvent(void* event) const override {
    const auto* e = static_cast<NpuEvent*>(event);
    return e == nullptr || !e->recorded || driver_call([&] { return e->event.fence().query(); });
  }
  void synchronizeEvent(void* event) const override {
    const auto* e = static_cast<NpuEvent*>(event);
    if (e != nullptr && e->recorded) driver_call([&] { e->event.fence().wait(std::chrono::seconds(600)); });
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    const auto *a = static_cast<NpuEvent*>(start), *b = static_cast<NpuEvent*>(end);
    TORCH_CHECK(a && b && a->recorded && b->recorded, "npu: elapsed_time needs two recorded events");
    // Device time, in milliseconds.
    return driver_call([&] { return std::chrono::duration<double, std::milli>(npu::Event::elapsed(a->event, b->event)).count(); });
  }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override { delete static_cast<NpuEvent*>(event); }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, NpuGuard);

struct NpuHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  c10::DeviceIndex deviceCount() const override { return 1; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  void init() const override {}
  c10::Device getDeviceFromPtr(void*) const override { return c10::Device(kNpu, 0); }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex) const override { return default_npu_generator(); }
  at::Generator getNewGenerator(c10::DeviceIndex) const override { return new_npu_generator(); }
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
