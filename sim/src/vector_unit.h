// The vector unit: 2-D elementwise, broadcast, reduction, conversion and
// layout instructions. Time = pipeline latency + one issue interval per group
// of `lanes` elements (per-op costs from the config), or the SRAM traffic
// time if that is longer. Values from functional/kernels.h.
#pragma once

#include "engine.h"
#include "local_memory.h"

namespace npu::sim {

class VectorUnit : public Engine {
 public:
  VectorUnit(sc_core::sc_module_name name, ChipContext& context, unsigned core, Semaphores& semaphores, EngineStats& stats,
             unsigned engine_index, LocalMemory& local, CoreStats& core_stats);

 protected:
  Outcome execute(const Command& command, uint64_t start) override;
  void describe_work(std::vector<trace::Arg>& args) const override { args.push_back({"elements", std::to_string(last_elements_)}); }

 private:
  LocalMemory& local_;
  CoreStats& core_stats_;
  uint64_t last_elements_ = 0;  // of the last instruction, for its trace span
};

}  // namespace npu::sim
