#include "hex.h"
#include "npusim/firmware/packets.h"

namespace npu::firmware {

std::string describe(const Packet& packet) {
  const PacketSpec* spec = find_packet(packet.opcode);
  if (spec == nullptr) return "UNKNOWN opcode=" + hex2(static_cast<uint8_t>(packet.opcode));
  std::string text = spec->name;
  for (size_t i = 0; i < spec->fields.size(); ++i) {
    const PacketFieldSpec& field = spec->fields[i];
    const uint64_t value = packet.fields[i];
    text += " " + field.name + "=";
    if (value < field.value_names.size())
      text += field.value_names[value];
    else
      text += field.hex ? hex(value) : std::to_string(value);
  }
  return text;
}

}  // namespace npu::firmware
