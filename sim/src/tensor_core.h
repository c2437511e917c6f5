// The tensor core: a systolic array of rows x cols processing elements that
// runs tc.mm tiles. Timing per SCALE-Sim's closed forms for the configured
// dataflow; values from functional/kernels.h.
#pragma once

#include "engine.h"
#include "local_memory.h"

namespace npu::sim {

// Cycles the array needs for an m x n x k tile (fill, stream and drain of
// every fold), for the given array shape and dataflow.
uint64_t systolic_cycles(const TensorCoreConfig& config, uint64_t m, uint64_t n, uint64_t k);

class TensorCore : public Engine {
 public:
  TensorCore(sc_core::sc_module_name name, ChipContext& context, unsigned core, Semaphores& semaphores, EngineStats& stats,
             uint64_t trace_track, LocalMemory& local, CoreStats& core_stats);

 protected:
  Outcome execute(const Command& command, uint64_t start) override;

 private:
  LocalMemory& local_;
  CoreStats& core_stats_;
};

}  // namespace npu::sim
