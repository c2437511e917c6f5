// Submissions to a command queue: packets encoded from firmware/packets.def,
// written into the ring at TAIL (waiting while it is full), then TAIL and
// the doorbell. Every submission ends with a FENCE_SIGNAL of the queue's
// completion counter, which is what its Fence waits for.
#include "npusim/driver/queue.h"

#include <algorithm>
#include <cstring>

#include "npusim/driver/device.h"
#include "npusim/driver/program.h"
#include "npusim/firmware/counters.h"
#include "npusim/firmware/launch_descriptor.h"
#include "npusim/firmware/packets.h"
#include "npusim/sim/registers.h"
#include "queue_state.h"

namespace npu {
namespace {

using firmware::Packet;
using firmware::PacketOpcode;

Packet packet(PacketOpcode opcode, std::initializer_list<uint64_t> fields) {
  Packet p;
  p.opcode = opcode;
  size_t i = 0;
  for (const uint64_t field : fields) p.fields[i++] = field;
  return p;
}

constexpr uint64_t kFenceStrideBytes = 64;

}  // namespace

uint64_t submit(QueueState& queue, QueueSubmission submission) {
  const std::shared_ptr<Device> device = queue.lock_device();
  DeviceLink& link = device->link();
  std::vector<uint32_t> words;
  for (const Packet& p : submission.packets) {
    const std::vector<uint32_t> encoded = firmware::encode(p);
    words.insert(words.end(), encoded.begin(), encoded.end());
  }
  const size_t fence_words = firmware::find_packet(PacketOpcode::FENCE_SIGNAL)->length_words;
  const auto bytes = static_cast<uint32_t>((words.size() + fence_words) * 4);
  std::unique_lock<std::mutex> lock(queue.mutex);
  // One word stays free so that a full ring never looks empty.
  if (bytes > queue.ring_bytes - 4)
    throw std::invalid_argument("a submission of " + std::to_string(bytes) + " bytes does not fit the queue's ring of " +
                                std::to_string(queue.ring_bytes) + " bytes");
  const auto free_bytes = [&] { return queue.ring_bytes - 4 - (queue.tail + queue.ring_bytes - queue.head) % queue.ring_bytes; };
  // Backpressure: wait for the firmware to consume packets.
  while (free_bytes() < bytes) {
    queue.head = link.read_register(sim::queue_register(queue.index, sim::QueueRegister::HEAD));
    if (free_bytes() >= bytes) break;
    // The oldest incomplete submission frees its packets when it completes.
    const uint64_t oldest = std::min(queue.completed.load() + 1, queue.submitted);
    lock.unlock();
    device->wait_for_fence(queue, oldest, kDefaultWaitTimeout, "ring space on queue " + std::to_string(queue.index));
    lock.lock();
  }
  const uint64_t value = queue.submitted + 1;
  const uint64_t fence_address = device->fences_address_ + kFenceStrideBytes * queue.index;
  const std::vector<uint32_t> fence = firmware::encode(packet(PacketOpcode::FENCE_SIGNAL, {fence_address, value, 1}));
  words.insert(words.end(), fence.begin(), fence.end());
  // A flow from the submission to each of its packets on the device.
  std::vector<uint64_t> flows;
  for (size_t i = 0; i <= submission.packets.size(); ++i) flows.push_back(firmware::packet_flow_id(device->resets(), queue.index, queue.packets + i));
  link.trace_begin(queue.track, submission.name, flows, submission.trace_args);
  // Write at TAIL, wrapping at the ring's end.
  const uint32_t first = std::min(bytes, queue.ring_bytes - queue.tail);
  link.write_memory(queue.ring_address + queue.tail, words.data(), first);
  if (first < bytes) link.write_memory(queue.ring_address, reinterpret_cast<const uint8_t*>(words.data()) + first, bytes - first);
  queue.tail = (queue.tail + bytes) % queue.ring_bytes;
  link.write_register(sim::queue_register(queue.index, sim::QueueRegister::TAIL), queue.tail);
  link.write_register(sim::queue_register(queue.index, sim::QueueRegister::DOORBELL), 1);
  link.trace_end(queue.track);
  queue.packets += submission.packets.size() + 1;
  queue.submitted = value;
  submission.keep.value = value;
  if (!submission.keep.buffers.empty() || !submission.keep.host_registrations.empty()) queue.pending.push_back(std::move(submission.keep));
  return value;
}

unsigned Queue::index() const { return state_->index; }

Fence Queue::copy_to_device(const Buffer& dst, uint64_t dst_offset, const void* src, uint64_t bytes) {
  Device::check_range(dst, dst_offset, bytes);
  if (bytes == 0) return last_fence();
  const auto device = state_->lock_device();
  QueueSubmission s;
  const uint64_t host = device->link().register_host_memory(const_cast<void*>(src), bytes);
  s.keep.host_registrations.push_back(host);
  s.keep.buffers.push_back(dst);
  s.packets.push_back(packet(PacketOpcode::COPY, {dst.address() + dst_offset, host, bytes, uint64_t(firmware::CopyDirection::H2D)}));
  s.name = "copy to device " + std::to_string(bytes) + " B";
  return Fence(state_, submit(*state_, std::move(s)));
}

Fence Queue::copy_from_device(void* dst, const Buffer& src, uint64_t src_offset, uint64_t bytes) {
  Device::check_range(src, src_offset, bytes);
  if (bytes == 0) return last_fence();
  const auto device = state_->lock_device();
  QueueSubmission s;
  const uint64_t host = device->link().register_host_memory(dst, bytes);
  s.keep.host_registrations.push_back(host);
  s.keep.buffers.push_back(src);
  s.packets.push_back(packet(PacketOpcode::COPY, {host, src.address() + src_offset, bytes, uint64_t(firmware::CopyDirection::D2H)}));
  s.name = "copy from device " + std::to_string(bytes) + " B";
  return Fence(state_, submit(*state_, std::move(s)));
}

Fence Queue::copy(const Buffer& dst, uint64_t dst_offset, const Buffer& src, uint64_t src_offset, uint64_t bytes) {
  Device::check_range(dst, dst_offset, bytes);
  Device::check_range(src, src_offset, bytes);
  if (bytes == 0) return last_fence();
  QueueSubmission s;
  s.keep.buffers = {dst, src};
  s.packets.push_back(
      packet(PacketOpcode::COPY, {dst.address() + dst_offset, src.address() + src_offset, bytes, uint64_t(firmware::CopyDirection::D2D)}));
  s.name = "copy " + std::to_string(bytes) + " B";
  return Fence(state_, submit(*state_, std::move(s)));
}

Fence Queue::fill(const Buffer& dst, uint64_t offset, uint64_t bytes, uint32_t pattern) {
  Device::check_range(dst, offset, bytes);
  if (bytes == 0) return last_fence();
  QueueSubmission s;
  s.keep.buffers = {dst};
  s.packets.push_back(packet(PacketOpcode::FILL, {dst.address() + offset, bytes, pattern}));
  s.name = "fill " + std::to_string(bytes) + " B";
  return Fence(state_, submit(*state_, std::move(s)));
}

Fence Queue::launch(const Program& program, const std::vector<Binding>& bindings, uint64_t core_mask, const std::array<uint64_t, 8>& args,
                    const TraceArgs& annotations) {
  const auto device = state_->lock_device();
  if (program.device_ != device) throw Error("launch of a program loaded on another device");
  const isa::Program& image = *program.image_;
  if (core_mask == 0) core_mask = program.default_core_mask();
  const unsigned cores = device->info().num_cores;
  if (cores < 64 && (core_mask >> cores) != 0)
    throw Error("core mask 0x" + [&] {
      char buf[20];
      std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(core_mask));
      return std::string(buf);
    }() + " names cores the device does not have (it has " + std::to_string(cores) + ")");
  const auto count = static_cast<unsigned>(__builtin_popcountll(core_mask));
  for (unsigned id = 0; id < count; ++id)
    if (image.code_for_core(id) == nullptr)
      throw Error(program.name() + " has no code for core id " + std::to_string(id) + " (a launch on " + std::to_string(count) + " cores)");

  QueueSubmission s;
  // The launch's symbol table: bound buffers first, then the program's own.
  firmware::LaunchDescriptor descriptor;
  descriptor.args = args;
  for (size_t i = 0; i < image.code.size(); ++i) {
    const isa::CodeSection& section = image.code[i];
    descriptor.sections.push_back({section.core_mask, program.code_[i].address(), section.words.size()});
  }
  descriptor.symbol_addresses.assign(image.symbols.size(), UINT64_MAX);
  for (const Binding& binding : bindings) {
    const isa::Symbol* symbol = image.find_symbol(binding.symbol);
    if (symbol == nullptr || !symbol->is_global_buffer()) throw Error(program.name() + " has no global buffer named '" + binding.symbol + "'");
    if (binding.buffer == nullptr || !*binding.buffer) throw Error("symbol '" + binding.symbol + "' is bound to an empty Buffer");
    if (binding.buffer->size() < symbol->size_bytes())
      throw Error("symbol '" + binding.symbol + "' needs " + std::to_string(symbol->size_bytes()) + " bytes; its buffer has " +
                  std::to_string(binding.buffer->size()));
    const auto index = static_cast<size_t>(symbol - image.symbols.data());
    descriptor.symbol_addresses[index] = binding.buffer->address();
    s.keep.buffers.push_back(*binding.buffer);
  }
  for (size_t i = 0; i < image.symbols.size(); ++i) {
    const isa::Symbol& symbol = image.symbols[i];
    if (!symbol.is_global_buffer() || descriptor.symbol_addresses[i] != UINT64_MAX) continue;
    if (!program.own_buffers_[i])
      throw Error(program.name() + ": " + isa::symbol_kind_name(symbol.kind) + " '" + symbol.name + "' is not bound to a buffer");
    descriptor.symbol_addresses[i] = program.own_buffers_[i].address();
  }
  const std::vector<uint64_t> words = firmware::encode_launch_descriptor(descriptor);
  Buffer descriptor_buffer = device->allocate(words.size() * 8, 64);
  device->link().write_memory(descriptor_buffer.address(), words.data(), words.size() * 8);
  s.keep.buffers.push_back(descriptor_buffer);
  for (const Buffer& code : program.code_) s.keep.buffers.push_back(code);
  for (const Buffer& own : program.own_buffers_)
    if (own) s.keep.buffers.push_back(own);
  s.packets.push_back(packet(PacketOpcode::LAUNCH, {descriptor_buffer.address(), core_mask}));
  s.name = "launch " + program.name();
  s.trace_args = annotations;
  const uint64_t value = submit(*state_, std::move(s));
  unsigned id = 0;
  for (unsigned c = 0; c < cores && c < 64; ++c)
    if (core_mask & (uint64_t{1} << c)) device->note_launch(uint64_t{1} << c, {state_->index, value, program.image_, id++});
  return Fence(state_, value);
}

void Queue::wait_for(const Fence& fence) {
  if (!fence || fence.state_ == state_) return;  // a queue runs in order anyway
  const auto device = state_->lock_device();
  const uint64_t address = device->fences_address_ + kFenceStrideBytes * fence.state_->index;
  QueueSubmission s;
  s.packets.push_back(packet(PacketOpcode::FENCE_WAIT, {address, fence.value_}));
  s.name = "wait for queue " + std::to_string(fence.state_->index) + " fence " + std::to_string(fence.value_);
  submit(*state_, std::move(s));
}

Event Queue::record_event() {
  const auto device = state_->lock_device();
  Event event;
  event.timestamp_ = std::make_shared<const Buffer>(device->allocate(8, 64));
  QueueSubmission s;
  s.keep.buffers.push_back(*event.timestamp_);
  s.packets.push_back(packet(PacketOpcode::TIMESTAMP, {event.timestamp_->address()}));
  s.name = "event";
  event.fence_ = Fence(state_, submit(*state_, std::move(s)));
  event.device_ = device;
  return event;
}

Fence Queue::snapshot_counters(std::vector<uint64_t>* words) {
  const auto device = state_->lock_device();
  const uint64_t bytes = firmware::counter_snapshot_words(device->info().num_cores) * 8;
  Buffer buffer = device->allocate(bytes, 64);
  QueueSubmission s;
  s.keep.buffers.push_back(buffer);
  s.packets.push_back(packet(PacketOpcode::COUNTERS, {buffer.address(), bytes}));
  s.name = "counters";
  Fence fence(state_, submit(*state_, std::move(s)));
  fence.wait();
  words->assign(bytes / 8, 0);
  device->link().read_memory(buffer.address(), words->data(), bytes);
  return fence;
}

Fence Queue::last_fence() const {
  const std::lock_guard<std::mutex> lock(state_->mutex);
  return Fence(state_, state_->submitted);
}

bool Fence::query() const {
  if (!state_ || value_ == 0) return true;
  const auto device = state_->lock_device();
  {
    const std::lock_guard<std::mutex> lock(state_->mutex);
    if (value_ > state_->completed_at_reset && value_ <= state_->abandoned_up_to)
      throw AbandonedError(state_->index, value_, state_->abandon_reason);
  }
  if (device->completed(*state_) >= value_) return true;
  const std::lock_guard<std::recursive_mutex> driving(device->wait_mutex_);
  device->service_interrupts();  // a fault or queue error surfaces here too
  return device->completed(*state_) >= value_;
}

void Fence::wait(std::chrono::nanoseconds timeout) const {
  if (!state_ || value_ == 0) return;
  state_->lock_device()->wait_for_fence(*state_, value_, timeout,
                                        "fence " + std::to_string(value_) + " on queue " + std::to_string(state_->index));
}

unsigned Fence::queue() const { return state_ ? state_->index : 0; }

uint64_t Event::cycle(std::chrono::nanoseconds timeout) const {
  if (!timestamp_) throw std::logic_error("an empty Event has no time");
  fence_.wait(timeout);
  uint64_t cycle = 0;
  device_->link().read_memory(timestamp_->address(), &cycle, sizeof cycle);
  return cycle;
}

uint64_t Event::elapsed_cycles(const Event& start, const Event& end) {
  const uint64_t a = start.cycle(), b = end.cycle();
  return b >= a ? b - a : 0;
}

std::chrono::nanoseconds Event::elapsed(const Event& start, const Event& end) {
  return start.device_->cycles_to_time(elapsed_cycles(start, end));
}

}  // namespace npu
