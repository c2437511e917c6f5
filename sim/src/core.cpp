#include "core.h"

namespace npu::sim {
namespace {

// Engine stats in trace-track order: control, DMA channels, tensor core, vector unit.
CoreStats make_stats(const ChipConfig& config) {
  CoreStats stats;
  stats.engines.resize(3 + config.core.dma.channels);
  return stats;
}

}  // namespace

Core::Core(sc_core::sc_module_name name, ChipContext& context, unsigned index, const CoreDirectory& directory,
           Dram& dram)
    : sc_module(name),
      stats(make_stats(context.config)),
      semaphores(context),
      local("local", context, stats),
      control("control", context, index, semaphores, stats.engines[0], 0, local),
      tensor("tensor", context, index, semaphores, stats.engines[1 + context.config.core.dma.channels],
             1 + context.config.core.dma.channels, local, stats),
      vector("vector", context, index, semaphores, stats.engines[2 + context.config.core.dma.channels],
             2 + context.config.core.dma.channels, local, stats) {
  std::vector<Engine*> channels;
  for (unsigned ch = 0; ch < context.config.core.dma.channels; ++ch) {
    dma.push_back(std::make_unique<DmaEngine>(("dma" + std::to_string(ch)).c_str(), context, index, ch, semaphores, stats.engines[1 + ch],
                                              1 + ch, local, directory, dram));
    channels.push_back(dma.back().get());
  }
  control.attach_engines(channels, &tensor, &vector);
}

std::vector<Engine*> Core::engines() { return control.engines(); }

void Core::reset() {
  control.reset();
  for (Engine* engine : engines()) engine->reset();
  semaphores.reset();
}

}  // namespace npu::sim
