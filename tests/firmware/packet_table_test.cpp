#include <cstdio>
#include <set>

#include <gtest/gtest.h>

#include "npusim/firmware/packets.h"

namespace npu::firmware {
namespace {

TEST(PacketTable, OpcodesNamesAndFieldsAreConsistent) {
  std::set<uint8_t> opcodes;
  std::set<std::string> names;
  for (const PacketSpec& spec : packet_table()) {
    EXPECT_TRUE(opcodes.insert(static_cast<uint8_t>(spec.opcode)).second) << spec.name;
    EXPECT_TRUE(names.insert(spec.name).second) << spec.name;
    EXPECT_FALSE(spec.semantics.empty()) << spec.name;
    EXPECT_LE(spec.fields.size(), kMaxPacketFields) << spec.name;
    size_t length = 1;
    std::set<std::string> field_names;
    for (const PacketFieldSpec& field : spec.fields) {
      EXPECT_TRUE(field_names.insert(field.name).second) << spec.name << " " << field.name;
      EXPECT_TRUE(field.words == 1 || field.words == 2) << spec.name << " " << field.name;
      EXPECT_LE(field.min, field.max) << spec.name << " " << field.name;
      EXPECT_LE(field.max, field.words == 1 ? uint64_t{UINT32_MAX} : UINT64_MAX) << spec.name << " " << field.name;
      length += field.words;
    }
    EXPECT_EQ(spec.length_words, length) << spec.name;
    EXPECT_LE(spec.length_words, kMaxPacketWords) << spec.name;
    EXPECT_EQ(find_packet(spec.opcode), &spec);
    EXPECT_EQ(find_packet(static_cast<uint8_t>(spec.opcode)), &spec);
    EXPECT_EQ(find_packet(spec.name), &spec);
  }
  EXPECT_EQ(find_packet(uint8_t{0xff}), nullptr);
  EXPECT_EQ(find_packet("COPYY"), nullptr);
  EXPECT_EQ(find_packet(""), nullptr);
}

// The driver and the firmware both depend on these values; changing one is a
// protocol change, not a table edit.
TEST(PacketTable, WireLayoutIsPinned) {
  const std::pair<const char*, const char*> expected[] = {
      {"NOP", "0x00"},
      {"COPY", "0x01 dst:u64 src:u64 bytes:u64 direction:u32"},
      {"FILL", "0x02 dst:u64 bytes:u64 pattern:u32"},
      {"LAUNCH", "0x03 descriptor:u64 core_mask:u64"},
      {"FENCE_SIGNAL", "0x04 address:u64 value:u64 interrupt:u32"},
      {"FENCE_WAIT", "0x05 address:u64 value:u64"},
      {"BARRIER", "0x06"},
      {"TIMESTAMP", "0x07 address:u64"},
      {"COUNTERS", "0x08 address:u64 bytes:u32"},
  };
  ASSERT_EQ(packet_table().size(), std::size(expected));
  for (const auto& [name, layout] : expected) {
    const PacketSpec* spec = find_packet(name);
    ASSERT_NE(spec, nullptr) << name;
    char opcode[8];
    std::snprintf(opcode, sizeof opcode, "0x%02x", static_cast<unsigned>(spec->opcode));
    std::string text = opcode;
    for (const PacketFieldSpec& field : spec->fields) text += " " + field.name + (field.words == 1 ? ":u32" : ":u64");
    EXPECT_EQ(text, layout) << name;
  }
}

TEST(PacketTable, FieldConstraints) {
  const PacketFieldSpec& direction = find_packet(PacketOpcode::COPY)->fields[3];
  EXPECT_EQ(direction.name, "direction");
  EXPECT_EQ(direction.value_names, (std::vector<std::string>{"d2d", "h2d", "d2h"}));
  EXPECT_EQ(direction.max, static_cast<uint64_t>(CopyDirection::D2H));
  EXPECT_EQ(static_cast<uint32_t>(CopyDirection::H2D), 1u);
  const PacketFieldSpec& core_mask = find_packet(PacketOpcode::LAUNCH)->fields[1];
  EXPECT_EQ(core_mask.name, "core_mask");
  EXPECT_EQ(core_mask.min, 1u);
  EXPECT_EQ(core_mask.max, UINT64_MAX);
  // bytes == 0 is a valid (empty) copy or fill.
  EXPECT_EQ(find_packet(PacketOpcode::COPY)->fields[2].min, 0u);
  EXPECT_EQ(find_packet(PacketOpcode::FILL)->fields[1].min, 0u);
}

TEST(PacketErrors, CodesAreNumberedFromOneWithNamesAndMessages) {
  std::set<std::string> names;
  const auto& errors = packet_error_table();
  ASSERT_FALSE(errors.empty());
  for (size_t i = 0; i < errors.size(); ++i) {
    EXPECT_EQ(static_cast<uint32_t>(errors[i].code), i + 1) << errors[i].name;
    EXPECT_TRUE(names.insert(errors[i].name).second) << errors[i].name;
    EXPECT_FALSE(errors[i].message.empty()) << errors[i].name;
    EXPECT_EQ(find_packet_error(errors[i].code), &errors[i]);
  }
  EXPECT_EQ(find_packet_error(PacketError::None), nullptr);
  EXPECT_EQ(find_packet_error(static_cast<PacketError>(errors.size() + 1)), nullptr);
}

}  // namespace
}  // namespace npu::firmware
