#include "register_block.h"

#include <cstring>

#include "npusim/isa/isa.h"

namespace npu::sim {

RegisterBlock::RegisterBlock(sc_core::sc_module_name name, ChipContext& context, CommandProcessor& command_processor,
                             std::function<void()> reset_chip)
    : sc_module(name),
      socket("socket"),
      context_(context),
      command_processor_(command_processor),
      reset_chip_(std::move(reset_chip)),
      queue_registers_(static_cast<size_t>(context.config.command_processor.num_queues) * kQueueRegisterStride / 4, 0) {
  socket.register_b_transport(this, &RegisterBlock::b_transport);
}

uint32_t RegisterBlock::queue_value(unsigned queue, QueueRegister reg) const {
  return queue_registers_.at(queue * kQueueRegisterStride / 4 + static_cast<uint32_t>(reg) / 4);
}

void RegisterBlock::set_queue_value(unsigned queue, QueueRegister reg, uint32_t value) {
  queue_registers_.at(queue * kQueueRegisterStride / 4 + static_cast<uint32_t>(reg) / 4) = value;
}

void RegisterBlock::raise_interrupt(unsigned bit) {
  irq_status_ |= 1u << bit;
  signal_if_pending();
}

// An interrupt reaching the host pauses the kernel, so that a host waiting
// for it (Simulator::wait_for_interrupt) regains control at once.
void RegisterBlock::signal_if_pending() {
  if (interrupt_pending() && sc_core::sc_get_status() == sc_core::SC_RUNNING) sc_core::sc_pause();
}

uint32_t RegisterBlock::read(uint32_t offset) {
  const uint32_t queues = context_.config.command_processor.num_queues;
  if (offset >= kQueueRegisterBase && offset < kQueueRegisterBase + queues * kQueueRegisterStride) {
    const unsigned queue = (offset - kQueueRegisterBase) / kQueueRegisterStride;
    const auto reg = static_cast<QueueRegister>((offset - kQueueRegisterBase) % kQueueRegisterStride);
    if (reg == QueueRegister::DOORBELL) return 0;
    return queue_value(queue, reg);
  }
  const uint64_t cycle = context_.now_cycle();
  switch (static_cast<Register>(offset)) {
    case Register::DEVICE_ID: return kDeviceId;
    case Register::VERSION: return isa::kIsaVersion << 16 | kRegisterMapVersion;
    case Register::NUM_CORES: return context_.config.num_cores;
    case Register::NUM_QUEUES: return queues;
    case Register::STATUS: return fault_ ? (fault_->has_address ? 3u : 1u) : 0u;
    case Register::IRQ_STATUS: return irq_status_;
    case Register::IRQ_ENABLE: return irq_enable_;
    case Register::CYCLE_LO: cycle_hi_latch_ = static_cast<uint32_t>(cycle >> 32); return static_cast<uint32_t>(cycle);
    case Register::CYCLE_HI: return cycle_hi_latch_;
    case Register::FAULT_KIND: return fault_ ? static_cast<uint32_t>(fault_->kind) + 1 : 0;
    case Register::FAULT_CORE: return fault_ && fault_->core >= 0 ? static_cast<uint32_t>(fault_->core) : 0xffffffffu;
    case Register::FAULT_PC: return fault_ && fault_->pc >= 0 ? static_cast<uint32_t>(fault_->pc) : 0xffffffffu;
    case Register::FAULT_ADDR_LO: return fault_ ? static_cast<uint32_t>(fault_->address) : 0;
    case Register::FAULT_ADDR_HI: return fault_ ? static_cast<uint32_t>(fault_->address >> 32) : 0;
    case Register::FAULT_CYCLE_LO: return fault_ ? static_cast<uint32_t>(fault_->cycle) : 0;
    case Register::FAULT_CYCLE_HI: return fault_ ? static_cast<uint32_t>(fault_->cycle >> 32) : 0;
    case Register::SCRATCH: return scratch_;
    case Register::MEMORY_SIZE_LO: return static_cast<uint32_t>(context_.config.dram.size_bytes);
    case Register::MEMORY_SIZE_HI: return static_cast<uint32_t>(context_.config.dram.size_bytes >> 32);
    case Register::CLOCK_MHZ: return static_cast<uint32_t>(context_.config.clock_mhz);
    case Register::FAULT_ENGINE: return fault_ ? fault_engine_code(fault_->engine) : 0;
    case Register::SCRATCHPAD_SIZE: return static_cast<uint32_t>(context_.config.core.scratchpad.size_bytes);
    case Register::FAULT_MESSAGE_INDEX: return fault_message_index_;
    case Register::FAULT_MESSAGE: {
      if (!fault_ || fault_message_index_ >= kFaultMessageWords) return 0;
      uint32_t word = 0;
      for (uint32_t b = 0; b < 4; ++b) {
        const size_t at = size_t(fault_message_index_) * 4 + b;
        if (at < fault_->message.size()) word |= uint32_t(static_cast<uint8_t>(fault_->message[at])) << (8 * b);
      }
      return word;
    }
    default: return 0;  // RESET is write-only; unmapped offsets read as zero
  }
}

void RegisterBlock::write(uint32_t offset, uint32_t value) {
  const uint32_t queues = context_.config.command_processor.num_queues;
  if (offset >= kQueueRegisterBase && offset < kQueueRegisterBase + queues * kQueueRegisterStride) {
    const unsigned queue = (offset - kQueueRegisterBase) / kQueueRegisterStride;
    const auto reg = static_cast<QueueRegister>((offset - kQueueRegisterBase) % kQueueRegisterStride);
    switch (reg) {
      case QueueRegister::DOORBELL: command_processor_.ring(queue); break;
      case QueueRegister::HEAD:
      case QueueRegister::ERROR: break;  // read only for the host
      default: set_queue_value(queue, reg, value); break;
    }
    return;
  }
  switch (static_cast<Register>(offset)) {
    case Register::IRQ_STATUS: irq_status_ &= ~value; break;
    case Register::IRQ_ENABLE:
      irq_enable_ = value;
      signal_if_pending();
      break;
    case Register::RESET:
      if (value & 1) {
        fault_.reset();
        irq_status_ = 0;
        fault_message_index_ = 0;
        std::fill(queue_registers_.begin(), queue_registers_.end(), 0);
        reset_chip_();
      }
      break;
    case Register::SCRATCH: scratch_ = value; break;
    case Register::FAULT_MESSAGE_INDEX: fault_message_index_ = value; break;
    default: break;  // read-only and unmapped registers ignore writes
  }
}

void RegisterBlock::b_transport(tlm::tlm_generic_payload& payload, sc_core::sc_time&) {
  const uint64_t offset = payload.get_address();
  if (payload.get_data_length() != 4 || offset % 4 != 0 || offset >= kQueueRegisterBase + 16 * kQueueRegisterStride) {
    payload.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
    return;
  }
  uint32_t value = 0;
  if (payload.is_read()) {
    value = read(static_cast<uint32_t>(offset));
    std::memcpy(payload.get_data_ptr(), &value, 4);
  } else {
    std::memcpy(&value, payload.get_data_ptr(), 4);
    write(static_cast<uint32_t>(offset), value);
  }
  payload.set_response_status(tlm::TLM_OK_RESPONSE);
}

}  // namespace npu::sim
