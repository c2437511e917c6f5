// The MMIO register block (sim/registers.def): what the host sees of the
// chip's control state. Reads and writes arrive through the host link.
#pragma once

#include <systemc>
#include <tlm>
#include <tlm_utils/simple_target_socket.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "chip_context.h"
#include "command_processor.h"
#include "npusim/sim/registers.h"

namespace npu::sim {

class RegisterBlock : public sc_core::sc_module {
 public:
  tlm_utils::simple_target_socket<RegisterBlock> socket;

  // `reset_chip` is called for a write of 1 to RESET.
  RegisterBlock(sc_core::sc_module_name name, ChipContext& context, CommandProcessor& command_processor, std::function<void()> reset_chip);

  uint32_t read(uint32_t offset);
  void write(uint32_t offset, uint32_t value);

  void raise_interrupt(unsigned bit);
  bool interrupt_pending() const { return (irq_status_ & irq_enable_) != 0; }
  void latch_fault(const FaultRecord& fault) { fault_ = fault; }

  // Queue registers, for the command processor's firmware.
  uint32_t queue_value(unsigned queue, QueueRegister reg) const;
  void set_queue_value(unsigned queue, QueueRegister reg, uint32_t value);

 private:
  void signal_if_pending();
  void b_transport(tlm::tlm_generic_payload& payload, sc_core::sc_time& delay);

  ChipContext& context_;
  CommandProcessor& command_processor_;
  std::function<void()> reset_chip_;
  uint32_t irq_status_ = 0, irq_enable_ = 0, scratch_ = 0, cycle_hi_latch_ = 0, fault_message_index_ = 0;
  std::optional<FaultRecord> fault_;
  std::vector<uint32_t> queue_registers_;  // num_queues * (stride / 4)
};

}  // namespace npu::sim
