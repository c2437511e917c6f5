// The whole chip: cores on a mesh NoC with DRAM controllers.
#pragma once

#include <systemc>

#include <memory>
#include <vector>

#include "background_work.h"
#include "chip_context.h"
#include "command_processor.h"
#include "core.h"
#include "core_directory.h"
#include "dram.h"
#include "host_link.h"
#include "noc.h"
#include "register_block.h"

namespace npu::sim {

class Chip : public sc_core::sc_module {
 public:
  Chip(sc_core::sc_module_name name, ChipContext& context);
  ~Chip() override;

  ChipContext& context;
  // The tensor core's products in functional mode (ChipContext::background).
  // Declared before the memories, but finished first (~Chip): its work writes them.
  BackgroundWork background;
  Dram dram;
  Noc noc;
  CoreDirectory directory;
  std::vector<std::unique_ptr<Core>> cores;
  CommandProcessor command_processor;
  RegisterBlock registers;
  HostLink host_link;

  // Abandons all work in flight: engines idle, queues and semaphores empty;
  // memories and the latched fault registers are kept.
  void reset();

  // The bytes at a device address: DRAM, or a core's scratchpad through its
  // window (the driver's SRAM buffers); nullptr unless [address, +bytes) is
  // all one of them. For the host link and the command processor, which
  // reach memory without timing it here.
  uint8_t* device_bytes(uint64_t address, uint64_t bytes);

  // A deadlock or watchdog fault naming the first stuck thing among
  // `stuck_cores` (the unfinished cores of a launch) and listing all of them.
  ChipStats stats() const;
  FaultRecord stuck_fault(FaultKind kind, const std::vector<unsigned>& stuck_cores) const;
};

}  // namespace npu::sim
