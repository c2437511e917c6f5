// Member functions of the typed config (npusim/sim/chip_config.h).
#include "npusim/sim/chip_config.h"

namespace npu::sim {

// A config built in code may leave op_costs empty; then every op costs default_cost.
const VectorOpCost& VectorUnitConfig::cost(isa::Opcode opcode) const {
  const auto index = static_cast<size_t>(opcode);
  return index < op_costs.size() ? op_costs[index] : default_cost;
}

}  // namespace npu::sim
