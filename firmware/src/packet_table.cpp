#include <map>
#include <sstream>
#include <stdexcept>

#include "npusim/firmware/packets.h"

namespace npu::firmware {
namespace {

std::vector<std::string> split_words(std::string_view text) {
  std::vector<std::string> words;
  std::istringstream in{std::string(text)};
  std::string word;
  while (in >> word) words.push_back(word);
  return words;
}

// Parses "name:type ..." from packets.def. A malformed table is a programming
// error caught by the first test that touches the table.
std::vector<PacketFieldSpec> parse_fields(std::string_view packet, std::string_view text) {
  std::vector<PacketFieldSpec> fields;
  for (const std::string& word : split_words(text)) {
    const auto colon = word.find(':');
    const std::string name = word.substr(0, colon);
    const std::string type = colon == std::string::npos ? "" : word.substr(colon + 1);
    PacketFieldSpec field{name, 0, false, 0, 0, {}};
    if (type == "u32" || type == "x32") field.words = 1;
    if (type == "u64" || type == "x64") field.words = 2;
    if (field.words == 0 || name.empty())
      throw std::logic_error("packets.def: bad field '" + word + "' in " + std::string(packet));
    field.hex = type[0] == 'x';
    field.max = field.words == 1 ? UINT32_MAX : UINT64_MAX;
    for (const PacketFieldSpec& other : fields)
      if (other.name == name) throw std::logic_error("packets.def: duplicate field " + name + " in " + std::string(packet));
    fields.push_back(field);
  }
  if (fields.size() > kMaxPacketFields)
    throw std::logic_error("packets.def: " + std::string(packet) + " has more than kMaxPacketFields fields");
  return fields;
}

PacketSpec make_packet(PacketOpcode opcode, const char* name, const char* fields, const char* semantics) {
  PacketSpec spec{opcode, name, parse_fields(name, fields), semantics, 1};
  for (const PacketFieldSpec& field : spec.fields) spec.length_words += field.words;
  return spec;
}

struct Tables {
  std::vector<PacketSpec> packets;
  std::vector<PacketErrorSpec> errors;
  std::array<const PacketSpec*, 256> by_opcode{};
  std::map<std::string, const PacketSpec*, std::less<>> by_name;

  Tables() {
#define NPU_PACKET(ID, OPCODE, FIELDS, SEMANTICS) packets.push_back(make_packet(PacketOpcode::ID, #ID, FIELDS, SEMANTICS));
#define NPU_PACKET_ERROR(ID, CODE, MESSAGE) errors.push_back({PacketError::ID, #ID, MESSAGE});
#include "packets.def"
    // The constraints name packets, so they are applied once every packet is in.
#define NPU_PACKET_FIELD_VALUES(ID, FIELD, NAMES) set_value_names(field(PacketOpcode::ID, #FIELD), NAMES);
#define NPU_PACKET_FIELD_MIN(ID, FIELD, MIN) set_min(field(PacketOpcode::ID, #FIELD), MIN);
#include "packets.def"
    for (const PacketSpec& spec : packets) {
      if (by_opcode[static_cast<uint8_t>(spec.opcode)] != nullptr || by_name.count(spec.name) != 0)
        throw std::logic_error("packets.def: duplicate opcode or name " + spec.name);
      by_opcode[static_cast<uint8_t>(spec.opcode)] = &spec;
      by_name[spec.name] = &spec;
    }
    // ERROR register values must be dense so that readers can index messages by code.
    for (size_t i = 0; i < errors.size(); ++i)
      if (static_cast<size_t>(errors[i].code) != i + 1)
        throw std::logic_error("packets.def: error codes must be 1, 2, 3, ... in order; " + errors[i].name + " is not");
  }

  PacketFieldSpec& field(PacketOpcode opcode, std::string_view name) {
    for (PacketSpec& spec : packets)
      if (spec.opcode == opcode)
        for (PacketFieldSpec& field : spec.fields)
          if (field.name == name) return field;
    throw std::logic_error("packets.def: a constraint names a missing field " + std::string(name));
  }

  static void set_value_names(PacketFieldSpec& field, std::string_view names) {
    field.value_names = split_words(names);
    if (field.value_names.empty() || field.value_names.size() - 1 > field.max)
      throw std::logic_error("packets.def: bad value names for field " + field.name);
    field.max = field.value_names.size() - 1;
  }

  static void set_min(PacketFieldSpec& field, uint64_t min) {
    if (min > field.max) throw std::logic_error("packets.def: minimum above the maximum for field " + field.name);
    field.min = min;
  }
};

const Tables& tables() {
  static const Tables instance;
  return instance;
}

}  // namespace

const std::vector<PacketSpec>& packet_table() { return tables().packets; }

const PacketSpec* find_packet(PacketOpcode opcode) { return find_packet(static_cast<uint8_t>(opcode)); }

const PacketSpec* find_packet(uint8_t opcode) { return tables().by_opcode[opcode]; }

const PacketSpec* find_packet(std::string_view name) {
  const auto& map = tables().by_name;
  const auto it = map.find(name);
  return it == map.end() ? nullptr : it->second;
}

const std::vector<PacketErrorSpec>& packet_error_table() { return tables().errors; }

const PacketErrorSpec* find_packet_error(PacketError code) {
  const auto& errors = tables().errors;
  const auto index = static_cast<size_t>(code);
  return index >= 1 && index <= errors.size() ? &errors[index - 1] : nullptr;
}

}  // namespace npu::firmware
