#include "npusim/sim/fault.h"

#include "format.h"

namespace npu::sim {

std::string FaultRecord::to_string() const {
  std::string text = std::string("device fault: ") + fault_kind_name(kind) + " at cycle " + std::to_string(cycle);
  if (core >= 0) text += ", core " + std::to_string(core);
  if (!engine.empty()) text += ", " + engine;
  if (pc >= 0) text += ", pc " + std::to_string(pc);
  if (!instruction.empty()) text += " `" + instruction + "`";
  if (has_address) text += ", address " + hex(address);
  if (!message.empty()) text += ": " + message;
  return text;
}

}  // namespace npu::sim
