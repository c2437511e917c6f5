// The firmware's main loop. Written like embedded firmware: one explicit state
// machine per queue in a fixed array, no allocation per packet beyond the
// launch it builds, no exceptions across the port, every input from memory
// checked. Queues are served round-robin, one packet at a time each, so that
// a queue waiting (on cores, a fence, the copy engine) never holds up another.
#include "npusim/firmware/command_processor_firmware.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "npusim/firmware/counters.h"
#include "npusim/firmware/launch_descriptor.h"
#include "npusim/firmware/packets.h"

namespace npu::firmware {
namespace {

constexpr unsigned kMaxQueues = 16;

enum class QueueState : uint8_t {
  Idle,        // no packet in progress
  Busy,        // the packet completes at busy_until
  WaitCores,   // LAUNCH: waiting for its cores to be idle
  Loading,     // LAUNCH: loading code until busy_until, then the cores start
  Running,     // LAUNCH: the cores run
  FenceWait,   // FENCE_WAIT: polling the fence every poll period
  Stopped,     // a malformed packet stopped the queue (ERROR is set)
};

struct QueueContext {
  QueueState state = QueueState::Idle;
  Packet packet;
  uint32_t next_head = 0;       // HEAD once the packet completes
  uint64_t begin_cycle = 0;     // when the packet was read
  uint64_t busy_until = 0;
  uint64_t packets_done = 0;    // since the last reset: the packet's flow id
  sim::CommandProcessorPort::LaunchRequest launch;
};

class Firmware final : public sim::CommandProcessorFirmware {
 public:
  void run(sim::CommandProcessorPort& port) override;

 private:
  void reset_state();
  bool step(unsigned q);  // true when the queue's state changed
  bool start_packet(unsigned q);
  bool finish_packet(unsigned q);
  bool prepare_launch(unsigned q);
  void stop(unsigned q, PacketError error);
  void complete(unsigned q);
  uint64_t packet_cycles() const { return port_->config().command_processor.packet_cycles; }
  uint64_t poll_cycles() const { return std::max<uint64_t>(1, packet_cycles()); }

  sim::CommandProcessorPort* port_ = nullptr;
  unsigned queues_ = 0;
  uint64_t resets_ = 0;
  std::array<QueueContext, kMaxQueues> queue_{};
};

void Firmware::reset_state() {
  for (QueueContext& queue : queue_) queue = QueueContext{};
}

void Firmware::run(sim::CommandProcessorPort& port) {
  port_ = &port;
  queues_ = std::min<unsigned>(port.config().command_processor.num_queues, kMaxQueues);
  reset_state();
  for (;;) {
    bool progressed = false;
    for (unsigned q = 0; q < queues_; ++q) {
      // Nothing may escape the firmware: a packet it cannot execute (say,
      // memory for a launch it cannot have) stops its queue instead.
      try {
        progressed |= step(q);
      } catch (...) {
        stop(q, PacketError::INTERNAL);
        progressed = true;
      }
    }
    if (progressed) continue;
    // Sleep until the earliest thing a queue waits for in time; doorbells,
    // halting cores and resets wake it sooner.
    uint64_t until = UINT64_MAX;
    for (unsigned q = 0; q < queues_; ++q) {
      const QueueContext& queue = queue_[q];
      if (queue.state == QueueState::Busy || queue.state == QueueState::Loading || queue.state == QueueState::FenceWait)
        until = std::min(until, queue.busy_until);
    }
    if (!port.wait(until)) {
      ++resets_;
      reset_state();
    }
  }
}

void Firmware::stop(unsigned q, PacketError error) {
  queue_[q].state = QueueState::Stopped;
  port_->set_queue_error(q, static_cast<uint32_t>(error));
  port_->raise_queue_interrupt(q);
  port_->trace_packet(q, "error: " + std::string(find_packet_error(error) ? find_packet_error(error)->name : "?"), port_->now_cycle(),
                      port_->now_cycle(), packet_flow_id(resets_, q, queue_[q].packets_done));
}

void Firmware::complete(unsigned q) {
  QueueContext& queue = queue_[q];
  port_->set_queue_head(q, queue.next_head);
  port_->trace_packet(q, describe(queue.packet), queue.begin_cycle, port_->now_cycle(), packet_flow_id(resets_, q, queue.packets_done));
  ++queue.packets_done;
  queue.state = QueueState::Idle;
}

bool Firmware::step(unsigned q) {
  QueueContext& queue = queue_[q];
  const uint64_t now = port_->now_cycle();
  switch (queue.state) {
    case QueueState::Idle: return start_packet(q);
    case QueueState::Stopped: return false;
    case QueueState::Busy:
      if (now < queue.busy_until) return false;
      return finish_packet(q);
    case QueueState::WaitCores:
      for (const unsigned core : queue.launch.physical_cores)
        if (!port_->core_idle(core)) return false;
      // Loading the code: the launch cost plus the code read from device
      // memory, after the packet itself has been parsed (busy_until).
      {
        uint64_t code_bytes = 0;
        for (const auto& code : queue.launch.code) code_bytes += code.size() * 8;
        const auto& dram = port_->config().dram;
        const uint64_t bandwidth = std::max<uint64_t>(1, uint64_t{dram.channels} * dram.bytes_per_cycle_per_channel);
        queue.busy_until = std::max(now, queue.busy_until) + port_->config().command_processor.launch_cycles + (code_bytes + bandwidth - 1) / bandwidth;
      }
      queue.state = QueueState::Loading;
      return true;
    case QueueState::Loading:
      if (now < queue.busy_until) return false;
      // Another queue may have taken a core while this one loaded.
      for (const unsigned core : queue.launch.physical_cores)
        if (!port_->core_idle(core)) {
          queue.state = QueueState::WaitCores;
          return true;
        }
      port_->start_cores(queue.launch);
      queue.state = QueueState::Running;
      queue.launch.code.clear();
      queue.launch.code.shrink_to_fit();
      return true;
    case QueueState::Running: {
      bool done = true;
      for (const unsigned core : queue.launch.physical_cores) done = done && port_->core_idle(core);
      if (done) {
        complete(q);
        return true;
      }
      return false;  // (the chip's launch watchdog bounds this)
    }
    case QueueState::FenceWait: {
      if (now < queue.busy_until) return false;
      uint64_t value = 0;
      if (!port_->read_memory(queue.packet.fields[0], &value, 8)) {
        stop(q, PacketError::BAD_ADDRESS);
        return true;
      }
      if (value >= queue.packet.fields[1]) {
        complete(q);
        return true;
      }
      queue.busy_until = now + poll_cycles();
      return false;
    }
  }
  return false;
}

// Reads the next packet, if any, and starts it.
bool Firmware::start_packet(unsigned q) {
  QueueContext& queue = queue_[q];
  const sim::CommandProcessorPort::QueueRegisters regs = port_->queue_registers(q);
  if (regs.head == regs.tail) return false;
  const uint64_t now = port_->now_cycle();
  const uint32_t ring_bytes = regs.ring_size_bytes;
  uint32_t probe = 0;
  if (ring_bytes < 8 || ring_bytes % 4 != 0 || regs.head >= ring_bytes || regs.tail >= ring_bytes || regs.head % 4 != 0 ||
      regs.tail % 4 != 0 || !port_->read_memory(regs.ring_base, &probe, 4) || !port_->read_memory(regs.ring_base + ring_bytes - 4, &probe, 4)) {
    stop(q, PacketError::BAD_RING_POSITION);
    return true;
  }
  // The words between HEAD and TAIL (at most one packet's worth), unwrapped.
  const size_t ring_words = ring_bytes / 4;
  const size_t head_word = regs.head / 4;
  const size_t available = (regs.tail / 4 + ring_words - head_word) % ring_words;
  const size_t count = std::min(available, kMaxPacketWords);
  std::array<uint32_t, kMaxPacketWords> words{};
  for (size_t i = 0; i < count; ++i) port_->read_memory(regs.ring_base + 4 * ((head_word + i) % ring_words), &words[i], 4);
  const DecodeResult decoded = decode_packet(words.data(), count, 0, count);
  if (!decoded.ok()) {
    stop(q, decoded.error);
    return true;
  }
  queue.packet = decoded.packet;
  queue.next_head = static_cast<uint32_t>(4 * ((head_word + decoded.length_words) % ring_words));
  queue.begin_cycle = now;
  queue.busy_until = now + packet_cycles();
  queue.state = QueueState::Busy;
  const Packet& p = queue.packet;
  uint64_t done = 0;
  switch (p.opcode) {
    case PacketOpcode::COPY: {
      const auto direction = static_cast<CopyDirection>(p.fields[3]);
      const auto kind = direction == CopyDirection::D2D   ? sim::CommandProcessorPort::CopyKind::DeviceToDevice
                        : direction == CopyDirection::H2D ? sim::CommandProcessorPort::CopyKind::HostToDevice
                                                          : sim::CommandProcessorPort::CopyKind::DeviceToHost;
      if (!port_->copy(kind, p.fields[0], p.fields[1], p.fields[2], &done)) {
        stop(q, PacketError::BAD_ADDRESS);
        return true;
      }
      queue.busy_until = std::max(queue.busy_until, done);
      break;
    }
    case PacketOpcode::FILL:
      if (!port_->fill(p.fields[0], p.fields[1], static_cast<uint32_t>(p.fields[2]), &done)) {
        stop(q, PacketError::BAD_ADDRESS);
        return true;
      }
      queue.busy_until = std::max(queue.busy_until, done);
      break;
    case PacketOpcode::LAUNCH:
      if (!prepare_launch(q)) return true;  // stopped
      queue.state = QueueState::WaitCores;
      break;
    case PacketOpcode::FENCE_WAIT: queue.state = QueueState::FenceWait; break;
    default: break;  // NOP, BARRIER (the queue runs one packet at a time), and the packets that act on completion
  }
  return true;
}

// Acts at the end of a packet's time, then completes it.
bool Firmware::finish_packet(unsigned q) {
  QueueContext& queue = queue_[q];
  const Packet& p = queue.packet;
  const uint64_t now = port_->now_cycle();
  switch (p.opcode) {
    case PacketOpcode::FENCE_SIGNAL:
      if (!port_->write_memory(p.fields[0], &p.fields[1], 8)) {
        stop(q, PacketError::BAD_ADDRESS);
        return true;
      }
      if (p.fields[2] != 0) port_->raise_queue_interrupt(q);
      break;
    case PacketOpcode::TIMESTAMP:
      if (!port_->write_memory(p.fields[0], &now, 8)) {
        stop(q, PacketError::BAD_ADDRESS);
        return true;
      }
      break;
    case PacketOpcode::COUNTERS: {
      const sim::ChipStats stats = port_->stats();
      CounterSnapshot snapshot;
      snapshot.cycle = now;
      snapshot.actions = sim::action_counts(stats);
      for (const auto& channel : stats.dram_channels) {
        snapshot.dram_read_bytes += channel.read_bytes;
        snapshot.dram_write_bytes += channel.write_bytes;
        snapshot.dram_row_hits += channel.row_hits;
        snapshot.dram_accesses += channel.row_hits + channel.row_closed + channel.row_conflicts;
      }
      for (const auto& core : stats.cores) {
        CoreCounters counters;
        counters.macs = core.macs;
        for (size_t e = 0; e < core.engines.size(); ++e) {
          const auto& engine = core.engines[e];
          counters.instructions += engine.instructions;
          for (const uint64_t stall : engine.stall_cycles) counters.stall_cycles += stall;
          if (engine.name == "tensor core") counters.tensor_busy_cycles += engine.busy_cycles;
          else if (engine.name == "vector unit") counters.vector_busy_cycles += engine.busy_cycles;
          else if (engine.name.rfind("dma", 0) == 0) counters.dma_busy_cycles += engine.busy_cycles;
        }
        snapshot.cores.push_back(counters);
      }
      const std::vector<uint64_t> words = encode_counter_snapshot(snapshot);
      const uint64_t bytes = std::min<uint64_t>(p.fields[1], words.size() * 8);
      if (!port_->write_memory(p.fields[0], words.data(), bytes)) {
        stop(q, PacketError::BAD_ADDRESS);
        return true;
      }
      break;
    }
    default: break;
  }
  complete(q);
  return true;
}

// Reads LAUNCH's descriptor and the code into queue.launch; false (queue
// stopped) if anything about it is wrong.
bool Firmware::prepare_launch(unsigned q) {
  QueueContext& queue = queue_[q];
  const uint64_t descriptor_address = queue.packet.fields[0];
  const uint64_t core_mask = queue.packet.fields[1];
  const unsigned cores = port_->config().num_cores;
  if (cores < 64 && (core_mask >> cores) != 0) {
    stop(q, PacketError::BAD_CORE_MASK);
    return false;
  }
  std::array<uint64_t, kLaunchDescriptorHeaderWords> header{};
  uint32_t sections = 0, symbols = 0;
  std::string error;
  if (!port_->read_memory(descriptor_address, header.data(), sizeof header) ||
      !decode_launch_descriptor_counts(header.data(), &sections, &symbols, &error)) {
    stop(q, PacketError::BAD_DESCRIPTOR);
    return false;
  }
  std::vector<uint64_t> words(kLaunchDescriptorHeaderWords + kLaunchDescriptorSectionWords * sections + symbols);
  LaunchDescriptor descriptor;
  if (!port_->read_memory(descriptor_address, words.data(), words.size() * 8) ||
      !decode_launch_descriptor(words.data(), words.size(), &descriptor, &error)) {
    stop(q, PacketError::BAD_DESCRIPTOR);
    return false;
  }
  sim::CommandProcessorPort::LaunchRequest& launch = queue.launch;
  launch = {};
  for (unsigned c = 0; c < cores && c < 64; ++c)
    if (core_mask & (uint64_t{1} << c)) launch.physical_cores.push_back(c);
  for (size_t id = 0; id < launch.physical_cores.size(); ++id) {
    const LaunchSection* section = nullptr;
    for (const LaunchSection& s : descriptor.sections)
      if (s.core_mask & (uint64_t{1} << id)) {
        section = &s;
        break;
      }
    std::vector<uint64_t> code(section ? section->code_words : 0);
    if (section == nullptr || !port_->read_memory(section->code_address, code.data(), code.size() * 8)) {
      stop(q, PacketError::BAD_DESCRIPTOR);
      return false;
    }
    launch.code.push_back(std::move(code));
  }
  launch.symbol_addresses = std::move(descriptor.symbol_addresses);
  launch.args = descriptor.args;
  launch.name = "queue " + std::to_string(q) + " launch " + std::to_string(queue.packets_done);
  return true;
}

}  // namespace

std::shared_ptr<sim::CommandProcessorFirmware> make_command_processor_firmware() { return std::make_shared<Firmware>(); }

}  // namespace npu::firmware
