// One core: control unit, DMA channels, tensor core, vector unit, local
// memories and semaphores, wired together.
#pragma once

#include <systemc>

#include <memory>
#include <vector>

#include "barrier.h"
#include "chip_context.h"
#include "control_unit.h"
#include "core_directory.h"
#include "dma_engine.h"
#include "local_memory.h"
#include "semaphores.h"
#include "tensor_core.h"
#include "vector_unit.h"

namespace npu::sim {

class Dram;

class Core : public sc_core::sc_module {
 public:
  Core(sc_core::sc_module_name name, ChipContext& context, unsigned index, const CoreDirectory& directory, Dram& dram);

  CoreStats stats;  // first: the engines below keep references into it
  Semaphores semaphores;
  LocalMemory local;
  ControlUnit control;
  std::vector<std::unique_ptr<DmaEngine>> dma;
  TensorCore tensor;
  VectorUnit vector;

  std::vector<Engine*> engines();  // DMA channels, tensor core, vector unit
  void reset();
};

}  // namespace npu::sim
