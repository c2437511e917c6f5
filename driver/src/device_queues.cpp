// The device side of the command queues: setting them up, waiting on their
// fences with interrupts, and turning faults, queue errors and timeouts into
// exceptions after a reset that reports what it abandoned.
#include <algorithm>
#include <cstring>

#include "npusim/driver/device.h"
#include "npusim/firmware/packets.h"
#include "npusim/isa/printer.h"
#include "npusim/isa/program.h"
#include "npusim/sim/fault.h"
#include "npusim/sim/registers.h"
#include "queue_state.h"

namespace npu {
namespace {

uint32_t reg(sim::Register r) { return static_cast<uint32_t>(r); }
uint32_t queue_reg(unsigned q, sim::QueueRegister r) { return sim::queue_register(q, r); }
constexpr uint64_t kFenceStrideBytes = 64;

}  // namespace

Device::~Device() {
  for (const auto& queue : queues_) {
    const std::lock_guard<std::mutex> lock(queue->mutex);
    for (auto& pending : queue->pending)
      for (const uint64_t registration : pending.host_registrations) link_->unregister_host_memory(registration);
  }
}

void Device::setup_queues(const DeviceOptions& options) {
  const uint32_t ring_bytes = options.ring_bytes;
  // The reserved top of memory: fence counters, then the rings.
  fences_address_ = info_.memory_bytes - info_.reserved_bytes;
  const std::vector<uint8_t> zeros(kFenceStrideBytes * info_.num_queues, 0);
  link_->write_memory(fences_address_, zeros.data(), zeros.size());
  for (unsigned q = 0; q < info_.num_queues; ++q) {
    auto state = std::make_shared<QueueState>();
    state->device = weak_from_this();
    state->index = q;
    state->track = "queue " + std::to_string(q) + " submissions";
    state->ring_bytes = ring_bytes;
    state->ring_address = fences_address_ + kFenceStrideBytes * info_.num_queues + uint64_t{ring_bytes} * q;
    program_queue_registers(*state);
    queues_.push_back(std::move(state));
  }
  core_launches_.resize(info_.num_cores);
  link_->write_register(reg(sim::Register::IRQ_ENABLE), (1u << sim::kIrqFaultBit) | ((1u << info_.num_queues) - 1));
}

void Device::program_queue_registers(QueueState& queue) {
  const unsigned q = queue.index;
  link_->write_register(queue_reg(q, sim::QueueRegister::RING_BASE_LO), static_cast<uint32_t>(queue.ring_address));
  link_->write_register(queue_reg(q, sim::QueueRegister::RING_BASE_HI), static_cast<uint32_t>(queue.ring_address >> 32));
  link_->write_register(queue_reg(q, sim::QueueRegister::RING_SIZE), queue.ring_bytes);
  link_->write_register(queue_reg(q, sim::QueueRegister::TAIL), 0);
  queue.tail = 0;
  queue.head = 0;
  queue.packets = 0;
}

Queue Device::queue(unsigned index) {
  if (index >= queues_.size())
    throw std::out_of_range("queue " + std::to_string(index) + " does not exist (the device has " + std::to_string(queues_.size()) + ")");
  return Queue(queues_[index]);
}

void Device::synchronize(std::chrono::nanoseconds timeout) {
  for (unsigned q = 0; q < queues_.size(); ++q) queue(q).synchronize(timeout);
  const std::lock_guard<std::recursive_mutex> driving(wait_mutex_);
  service_interrupts();  // a fault or a stopped queue surfaces even when nothing was pending
}

void Device::drain(std::chrono::nanoseconds timeout) {
  for (unsigned q = 0; q < queues_.size(); ++q) {
    try {
      queue(q).synchronize(timeout);
    } catch (const AbandonedError&) {
      // Dropped by a reset whose cause was raised when it happened: nothing left to wait for.
    }
  }
  const std::lock_guard<std::recursive_mutex> driving(wait_mutex_);
  service_interrupts();
}

uint64_t Device::now_cycle() {
  const uint64_t low = link_->read_register(reg(sim::Register::CYCLE_LO));  // latches CYCLE_HI
  return low | uint64_t{link_->read_register(reg(sim::Register::CYCLE_HI))} << 32;
}

std::chrono::nanoseconds Device::cycles_to_time(uint64_t cycles) const {
  return std::chrono::nanoseconds(static_cast<int64_t>(cycles * 1000 / info_.clock_mhz));
}

uint64_t Device::time_to_cycles(std::chrono::nanoseconds time) const {
  const int64_t ns = std::max<int64_t>(0, time.count());
  return static_cast<uint64_t>(ns) / 1000 * info_.clock_mhz + static_cast<uint64_t>(ns) % 1000 * info_.clock_mhz / 1000;
}

uint64_t Device::resets() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return resets_;
}

std::string Device::last_reset_report() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return last_reset_report_;
}

uint64_t Device::completed(QueueState& queue) {
  uint64_t value = 0;
  link_->read_memory(fences_address_ + kFenceStrideBytes * queue.index, &value, sizeof value);
  const std::lock_guard<std::mutex> lock(queue.mutex);
  queue.completed = std::max(queue.completed.load(), value);
  while (!queue.pending.empty() && queue.pending.front().value <= queue.completed) {
    for (const uint64_t registration : queue.pending.front().host_registrations) link_->unregister_host_memory(registration);
    queue.pending.pop_front();
  }
  return queue.completed;
}

void Device::note_launch(uint64_t core_mask, const CoreLaunch& launch) {
  const std::lock_guard<std::mutex> lock(mutex_);
  for (unsigned c = 0; c < info_.num_cores && c < 64; ++c) {
    if (!(core_mask & (uint64_t{1} << c))) continue;
    auto& launches = core_launches_[c];
    // Forget launches that have completed.
    while (!launches.empty() && launches.front().fence_value <= queues_[launches.front().queue]->completed) launches.pop_front();
    launches.push_back(launch);
  }
}

DeviceFault Device::read_fault() {
  const auto r = [&](sim::Register which) { return link_->read_register(reg(which)); };
  DeviceFault fault;
  const uint32_t kind = r(sim::Register::FAULT_KIND);
  fault.kind = kind >= 1 && kind <= 7 ? sim::fault_kind_name(static_cast<sim::FaultKind>(kind - 1)) : "unknown fault";
  const uint32_t core = r(sim::Register::FAULT_CORE);
  fault.core = core == 0xffffffffu ? -1 : static_cast<int>(core);
  fault.engine = sim::fault_engine_name(r(sim::Register::FAULT_ENGINE));
  const uint32_t pc = r(sim::Register::FAULT_PC);
  fault.pc = pc == 0xffffffffu ? -1 : static_cast<int64_t>(pc);
  fault.has_address = (r(sim::Register::STATUS) & 2) != 0;
  fault.address = r(sim::Register::FAULT_ADDR_LO) | uint64_t{r(sim::Register::FAULT_ADDR_HI)} << 32;
  fault.cycle = r(sim::Register::FAULT_CYCLE_LO) | uint64_t{r(sim::Register::FAULT_CYCLE_HI)} << 32;
  // The chip's detail (which check failed), a word at a time through the message window.
  for (uint32_t word = 0; word < sim::kFaultMessageWords; ++word) {
    link_->write_register(reg(sim::Register::FAULT_MESSAGE_INDEX), word);
    const uint32_t bytes = r(sim::Register::FAULT_MESSAGE);
    for (uint32_t b = 0; b < 4; ++b)
      if (const char c = static_cast<char>((bytes >> (8 * b)) & 0xff); c != 0) fault.message += c;
    if ((bytes >> 24) == 0) break;  // the message ended in this word
  }
  // The instruction, from the code of the launch that was on the core: the
  // oldest one not known to have completed.
  if (fault.core >= 0 && static_cast<unsigned>(fault.core) < core_launches_.size() && fault.pc >= 0) {
    const std::lock_guard<std::mutex> lock(mutex_);
    for (const CoreLaunch& launch : core_launches_[static_cast<size_t>(fault.core)]) {
      if (launch.fence_value <= queues_[launch.queue]->completed) continue;
      const isa::CodeSection* section = launch.program->code_for_core(launch.core_id);
      if (section && static_cast<uint64_t>(fault.pc) < section->words.size()) {
        // With the program's own names for its buffers and labels.
        const isa::ProgramOperandNamer namer(*launch.program, static_cast<uint32_t>(section - launch.program->code.data()));
        fault.instruction = isa::describe_word(section->words[static_cast<size_t>(fault.pc)], static_cast<uint64_t>(fault.pc), &namer);
      }
      break;
    }
  }
  return fault;
}

std::string Device::reset_device(const std::string& reason) {
  link_->write_register(reg(sim::Register::RESET), 1);
  // What completed before the reset is in the fence counters (memories survive it).
  std::vector<uint64_t> done(queues_.size(), 0);
  for (size_t q = 0; q < queues_.size(); ++q) done[q] = completed(*queues_[q]);
  std::string report;
  for (size_t q = 0; q < queues_.size(); ++q) {
    QueueState& queue = *queues_[q];
    const std::lock_guard<std::mutex> lock(queue.mutex);
    if (queue.submitted > done[q]) {
      report += (report.empty() ? "" : "; ") + std::string("queue ") + std::to_string(q) + ": submissions " + std::to_string(done[q] + 1) +
                ".." + std::to_string(queue.submitted) + " abandoned";
      queue.completed_at_reset = done[q];
      queue.abandoned_up_to = queue.submitted;
      queue.abandon_reason = reason;
    }
    for (auto& pending : queue.pending)
      for (const uint64_t registration : pending.host_registrations) link_->unregister_host_memory(registration);
    queue.pending.clear();
    program_queue_registers(queue);
  }
  if (report.empty()) report = "no queued work was abandoned";
  link_->write_register(reg(sim::Register::IRQ_ENABLE), (1u << sim::kIrqFaultBit) | ((1u << info_.num_queues) - 1));
  const std::lock_guard<std::mutex> lock(mutex_);
  ++resets_;
  for (auto& launches : core_launches_) launches.clear();
  last_reset_report_ = report;
  return report;
}

bool Device::service_interrupts() {
  const uint32_t pending = link_->read_register(reg(sim::Register::IRQ_STATUS));
  if (pending == 0) return false;
  if (pending & (1u << sim::kIrqFaultBit)) {
    DeviceFault fault = read_fault();
    const std::string report = reset_device(describe(fault));
    fault.message += (fault.message.empty() ? "" : "; ") + std::string("device reset: ") + report;
    throw DeviceError(std::move(fault));
  }
  for (unsigned q = 0; q < queues_.size(); ++q) {
    if (!(pending & (1u << q))) continue;
    const uint32_t code = link_->read_register(queue_reg(q, sim::QueueRegister::ERROR));
    if (code == 0) continue;
    const firmware::PacketErrorSpec* spec = firmware::find_packet_error(static_cast<firmware::PacketError>(code));
    const std::string what = spec ? spec->name + ": " + spec->message : "unknown error";
    const std::string report = reset_device("command queue " + std::to_string(q) + " error " + std::to_string(code) + " (" + what + ")");
    throw QueueError(q, code, what + "; device reset: " + report);
  }
  link_->write_register(reg(sim::Register::IRQ_STATUS), pending);  // write 1 to clear
  return true;
}

void Device::wait_for_fence(QueueState& queue, uint64_t value, std::chrono::nanoseconds timeout, const std::string& what) {
  const auto check_abandoned = [&] {
    const std::lock_guard<std::mutex> lock(queue.mutex);
    if (value > queue.completed_at_reset && value <= queue.abandoned_up_to) throw AbandonedError(queue.index, value, queue.abandon_reason);
    return queue.completed >= value;
  };
  if (check_abandoned()) return;
  const std::lock_guard<std::recursive_mutex> driving(wait_mutex_);
  link_->trace_begin("waits", "wait " + what, {}, {});
  struct EndSpan {
    DeviceLink& link;
    ~EndSpan() { link.trace_end("waits"); }
  } end_span{*link_};
  const uint64_t deadline = now_cycle() + time_to_cycles(timeout);
  std::function<bool()> cancel_check;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    cancel_check = cancel_check_;
  }
  bool cancelled = false;
  const std::function<bool()> cancelled_now = [&] { return cancelled = cancelled || cancel_check(); };
  for (;;) {
    if (check_abandoned() || completed(queue) >= value) return;
    if (service_interrupts()) continue;  // cleared: look at the counter again
    const uint64_t now = now_cycle();
    if (now >= deadline) {
      const std::string report = reset_device("a wait for " + what + " timed out");
      throw TimeoutError(what + " (device reset: " + report + ")", timeout);
    }
    link_->wait_for_interrupt(deadline - now, cancel_check ? cancelled_now : std::function<bool()>());
    if (cancelled) {
      const std::string report = reset_device("the host cancelled a wait for " + what);
      throw CancelledError("the host cancelled a wait for " + what + " (device reset: " + report + ")");
    }
  }
}

void Device::set_cancel_check(std::function<bool()> check) {
  const std::lock_guard<std::mutex> lock(mutex_);
  cancel_check_ = std::move(check);
}

}  // namespace npu
