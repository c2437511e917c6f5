#include "npusim/driver/device.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "npusim/driver/errors.h"
#include "npusim/sim/address_map.h"  // header only: the driver links no simulator
#include "npusim/sim/registers.h"

namespace npu {
namespace {

uint32_t offset(sim::Register reg) { return static_cast<uint32_t>(reg); }

}  // namespace

Buffer::State::~State() { device->free(address); }

std::shared_ptr<Device> Device::open(std::unique_ptr<DeviceLink> link, const DeviceOptions& options) {
  if (!link) throw std::invalid_argument("Device::open without a link");
  const uint32_t id = link->read_register(offset(sim::Register::DEVICE_ID));
  if (id != sim::kDeviceId) throw Error("no npusim device behind the link (DEVICE_ID reads " + std::to_string(id) + ")");
  DeviceInfo info;
  const uint32_t version = link->read_register(offset(sim::Register::VERSION));
  info.isa_version = version >> 16;
  info.register_map_version = version & 0xffff;
  if (info.register_map_version != sim::kRegisterMapVersion)
    throw Error("device speaks register map version " + std::to_string(info.register_map_version) + "; this driver speaks " +
                std::to_string(sim::kRegisterMapVersion));
  info.num_cores = link->read_register(offset(sim::Register::NUM_CORES));
  info.num_queues = link->read_register(offset(sim::Register::NUM_QUEUES));
  info.memory_bytes = link->read_register(offset(sim::Register::MEMORY_SIZE_LO)) |
                      uint64_t{link->read_register(offset(sim::Register::MEMORY_SIZE_HI))} << 32;
  info.clock_mhz = link->read_register(offset(sim::Register::CLOCK_MHZ));
  info.scratchpad_bytes = link->read_register(offset(sim::Register::SCRATCHPAD_SIZE));
  if (options.sram_pool_bytes_per_core % DeviceAllocator::kGranule != 0 ||
      (options.sram_pool_bytes_per_core > 0 && options.sram_pool_bytes_per_core >= info.scratchpad_bytes))
    throw std::invalid_argument("an SRAM pool of " + std::to_string(options.sram_pool_bytes_per_core) +
                                " bytes per core: it must be a multiple of 64 and less than the scratchpad (" +
                                std::to_string(info.scratchpad_bytes) + " bytes)");
  info.sram_pool_bytes_per_core = options.sram_pool_bytes_per_core;
  if (info.clock_mhz == 0) throw Error("device reports a clock of 0 MHz");
  if (options.ring_bytes < 64 || options.ring_bytes % 4 != 0) throw std::invalid_argument("a ring buffer has a multiple of 4 bytes, at least 64");
  info.reserved_bytes = (uint64_t{64} * info.num_queues + uint64_t{options.ring_bytes} * info.num_queues + 4095) / 4096 * 4096;
  if (info.reserved_bytes >= info.memory_bytes) throw Error("the command queues' rings do not fit in device memory");
  auto device = std::make_shared<Device>(std::move(link), info, options);
  device->setup_queues(options);
  return device;
}

Device::Device(std::unique_ptr<DeviceLink> link, const DeviceInfo& info, const DeviceOptions&)
    : link_(std::move(link)),
      info_(info),
      allocator_(0, (info.memory_bytes - info.reserved_bytes) / DeviceAllocator::kGranule * DeviceAllocator::kGranule) {
  if (info.sram_pool_bytes_per_core == 0) return;
  for (unsigned core = 0; core < info.num_cores; ++core)
    sram_pools_.emplace_back(sim::core_window_address(core, info.kernel_scratchpad_bytes()), info.sram_pool_bytes_per_core);
}

Buffer Device::allocate_sram(uint64_t bytes, uint64_t alignment) {
  uint64_t address = 0;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    DeviceAllocator* roomiest = nullptr;
    for (DeviceAllocator& pool : sram_pools_)
      if (!roomiest || pool.stats().free_bytes > roomiest->stats().free_bytes) roomiest = &pool;
    // Most free bytes first, then the others: a fragmented roomiest pool may still refuse.
    std::vector<DeviceAllocator*> order;
    if (roomiest) order.push_back(roomiest);
    for (DeviceAllocator& pool : sram_pools_)
      if (&pool != roomiest) order.push_back(&pool);
    for (DeviceAllocator* pool : order) {
      if (pool->stats().largest_free_bytes < bytes) continue;
      try {
        address = pool->allocate(bytes, alignment);
        break;
      } catch (const OutOfMemoryError&) {
        // alignment padding left too little room here; try the next core
      }
    }
  }
  Buffer buffer;
  if (address != 0) buffer.state_.reset(new Buffer::State{shared_from_this(), address, bytes});
  return buffer;
}

AllocatorStats Device::sram_stats() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  AllocatorStats total;
  for (const DeviceAllocator& pool : sram_pools_) {
    const AllocatorStats one = pool.stats();
    total.in_use_bytes += one.in_use_bytes;
    total.peak_in_use_bytes += one.peak_in_use_bytes;
    total.free_bytes += one.free_bytes;
    total.largest_free_bytes = std::max(total.largest_free_bytes, one.largest_free_bytes);
    total.allocations += one.allocations;
    total.total_allocations += one.total_allocations;
    total.total_frees += one.total_frees;
  }
  return total;
}

bool Device::is_sram_address(uint64_t address) { return sim::in_core_window(address); }

Buffer Device::allocate(uint64_t bytes, uint64_t alignment) {
  uint64_t address;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    address = allocator_.allocate(bytes, alignment);
  }
  Buffer buffer;
  // Built in place: a temporary State would free the block when it died.
  buffer.state_.reset(new Buffer::State{shared_from_this(), address, bytes});
  return buffer;
}

void Device::free(uint64_t address) {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (sim::in_core_window(address)) {
    sram_pools_.at(sim::window_core(address)).free(address);
  } else {
    allocator_.free(address);
  }
}

AllocatorStats Device::memory_stats() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return allocator_.stats();
}

void Device::reset_peak_memory_stats() {
  const std::lock_guard<std::mutex> lock(mutex_);
  allocator_.reset_peak();
}

void Device::check_range(const Buffer& buffer, uint64_t offset, uint64_t bytes) {
  if (!buffer) throw std::invalid_argument("copy with an empty Buffer");
  if (offset > buffer.size() || bytes > buffer.size() - offset)
    throw std::out_of_range("copy of " + std::to_string(bytes) + " bytes at offset " + std::to_string(offset) + " runs past a buffer of " +
                            std::to_string(buffer.size()) + " bytes");
}

void Device::copy_to_device(const Buffer& buffer, uint64_t offset, const void* data, uint64_t bytes) {
  check_range(buffer, offset, bytes);
  link_->write_memory(buffer.address() + offset, data, bytes);
}

void Device::copy_from_device(const Buffer& buffer, uint64_t offset, void* data, uint64_t bytes) {
  check_range(buffer, offset, bytes);
  link_->read_memory(buffer.address() + offset, data, bytes);
}

}  // namespace npu
