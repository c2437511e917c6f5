#include "npusim/sim/registers.h"

#include <cstdio>
#include <sstream>

#include "npusim/isa/isa.h"

namespace npu::sim {

const std::vector<RegisterSpec>& register_table() {
  static const std::vector<RegisterSpec> table = {
#define NPU_REGISTER(NAME, OFFSET, ACCESS, DESCRIPTION) {#NAME, OFFSET, RegisterAccess::ACCESS, DESCRIPTION, false},
#define NPU_QUEUE_REGISTER(NAME, OFFSET, ACCESS, DESCRIPTION) {#NAME, OFFSET, RegisterAccess::ACCESS, DESCRIPTION, true},
#include "registers.def"
  };
  return table;
}

std::string generate_register_markdown() {
  const char* access_names[] = {"RO", "RW", "WO", "W1C"};
  std::ostringstream out;
  out << "# npusim MMIO registers (map version " << kRegisterMapVersion << ")\n\n"
      << "<!-- Generated from sim/registers.def by `npu-sim --register-map`; do not edit. A test fails when this file is\n"
      << "     stale: regenerate with `build/bin/npu-sim --register-map > docs/registers.md`. -->\n\n"
      << "The host reaches the chip through the host link: 32-bit registers in this block, and device memory.\n"
      << "Access: RO read only (writes ignored), RW read/write, WO write only (reads 0), W1C write 1 to clear.\n\n"
      << "## Chip registers\n\n| offset | name | access | description |\n|---|---|---|---|\n";
  char offset[16];
  for (const RegisterSpec& spec : register_table()) {
    if (spec.per_queue) continue;
    std::snprintf(offset, sizeof offset, "0x%03x", spec.offset);
    out << "| " << offset << " | `" << spec.name << "` | " << access_names[static_cast<int>(spec.access)] << " | " << spec.description
        << " |\n";
  }
  std::snprintf(offset, sizeof offset, "0x%03x", kQueueRegisterBase);
  std::string base = offset;
  std::snprintf(offset, sizeof offset, "0x%02x", kQueueRegisterStride);
  out << "\n## Command queue registers\n\nQueue q (0 .. NUM_QUEUES - 1) has its registers at " << base << " + q * " << offset
      << " + offset.\n\n| offset | name | access | description |\n|---|---|---|---|\n";
  for (const RegisterSpec& spec : register_table()) {
    if (!spec.per_queue) continue;
    std::snprintf(offset, sizeof offset, "0x%02x", spec.offset);
    out << "| " << offset << " | `" << spec.name << "` | " << access_names[static_cast<int>(spec.access)] << " | " << spec.description
        << " |\n";
  }
  return out.str();
}

}  // namespace npu::sim
