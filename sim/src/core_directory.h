// What an engine may reach on other cores: their local memories (for bounds
// checks of core-to-core transfers) and semaphores (raised by dma.send); and
// the NoC, which DMA timed per step (DmaTiming::PerStep) reserves directly.
#pragma once

#include <vector>

namespace npu::sim {

class LocalMemory;
class Noc;
struct Semaphores;

struct CoreDirectory {
  std::vector<LocalMemory*> local_memories;
  std::vector<Semaphores*> semaphores;
  Noc* noc = nullptr;
};

}  // namespace npu::sim
