// What an engine may reach on other cores: their local memories (for bounds
// checks of core-to-core transfers) and semaphores (raised by dma.send).
#pragma once

#include <vector>

namespace npu::sim {

class LocalMemory;
struct Semaphores;

struct CoreDirectory {
  std::vector<LocalMemory*> local_memories;
  std::vector<Semaphores*> semaphores;
};

}  // namespace npu::sim
