// The whole chip: cores on a mesh NoC with DRAM controllers.
#pragma once

#include <systemc>

#include <memory>
#include <vector>

#include "barrier.h"
#include "chip_context.h"
#include "core.h"
#include "core_directory.h"
#include "dram.h"
#include "noc.h"

namespace npu::sim {

class Chip : public sc_core::sc_module {
 public:
  Chip(sc_core::sc_module_name name, ChipContext& context);

  ChipContext& context;
  Dram dram;
  Noc noc;
  BarrierUnit barrier;
  CoreDirectory directory;
  std::vector<std::unique_ptr<Core>> cores;
};

}  // namespace npu::sim
