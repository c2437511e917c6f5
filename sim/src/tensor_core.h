// The tensor core: a systolic array of rows x cols processing elements that
// runs tc.mm tiles. Timing per SCALE-Sim's closed forms for the configured
// dataflow; values from functional/kernels.h.
#pragma once

#include "engine.h"
#include "local_memory.h"

namespace npu::sim {

// The array's time for an m x n x k tile alone, in three parts: loading the
// first fold's weights, streaming the rows of A through every fold, and
// draining the last fold's results. With double-buffered weights (weight
// stationary) consecutive tiles overlap the preload and the drain (the
// tensor core below); otherwise all of it is in stream_cycles.
struct SystolicTiming {
  uint64_t preload_cycles = 0, stream_cycles = 0, drain_cycles = 0;
  uint64_t last_fold_rows = 0;  // cycles the last fold streams, during which the next tile's first weights can load
};
SystolicTiming systolic_timing(const TensorCoreConfig& config, uint64_t m, uint64_t n, uint64_t k);

// Cycles the array needs for an m x n x k tile alone (fill, stream and drain of
// every fold), for the given array shape and dataflow.
uint64_t systolic_cycles(const TensorCoreConfig& config, uint64_t m, uint64_t n, uint64_t k);

class TensorCore : public Engine {
 public:
  TensorCore(sc_core::sc_module_name name, ChipContext& context, unsigned core, Semaphores& semaphores, EngineStats& stats,
             unsigned engine_index, LocalMemory& local, CoreStats& core_stats);

 protected:
  Outcome execute(const Command& command, uint64_t start) override;
  uint64_t results_ready_cycle() const override { return results_ready_cycle_; }
  void forget_pending_results() override { stream_free_cycle_ = UINT64_MAX, last_fold_rows_ = 0, results_ready_cycle_ = 0; }
  void describe_work(std::vector<trace::Arg>& args) const override { args.push_back({"macs", std::to_string(last_macs_)}); }

 private:
  LocalMemory& local_;
  CoreStats& core_stats_;
  // The previous tc.mm: when its last row entered the array (the engine's end of it), how long its
  // last fold streamed, and when the results of every tc.mm so far are complete.
  uint64_t stream_free_cycle_ = UINT64_MAX, last_fold_rows_ = 0, results_ready_cycle_ = 0;
  uint64_t last_macs_ = 0;  // of the last tc.mm, for its trace span
};

}  // namespace npu::sim
