#include <sstream>

#include "hex.h"
#include "npusim/firmware/packets.h"

namespace npu::firmware {
namespace {

std::string word_range(size_t first, unsigned words) {
  return words == 1 ? std::to_string(first) : std::to_string(first) + "-" + std::to_string(first + words - 1);
}

std::string valid_values(const PacketFieldSpec& field) {
  if (!field.value_names.empty()) {
    std::string text;
    for (size_t i = 0; i < field.value_names.size(); ++i)
      text += (i == 0 ? "" : ", ") + std::to_string(i) + " `" + field.value_names[i] + "`";
    return text;
  }
  if (field.min != 0) return ">= " + std::to_string(field.min);
  return "any";
}

// Markdown table cells cannot hold a bare '|'.
std::string cell(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string generate_packet_markdown() {
  std::ostringstream out;
  out << "# npusim command packets\n\n"
      << "<!-- Generated from firmware/packets.def by `npu-packets-doc`; do not edit. A test fails when this file is stale:\n"
      << "     regenerate with `build/bin/npu-packets-doc > docs/packets.md`. -->\n\n"
      << "The driver gives work to a command queue by writing packets into the queue's ring buffer in device memory and\n"
      << "then moving the queue's TAIL register and writing its DOORBELL; the command processor (the firmware) reads the\n"
      << "packets from HEAD up to TAIL and runs them in order. RING_BASE_LO/HI and RING_SIZE place the ring; HEAD and TAIL\n"
      << "are byte offsets into it; ERROR holds the code of the packet that stopped the queue (docs/registers.md).\n\n"
      << "## Format\n\n"
      << "A packet is a sequence of 32-bit little-endian words. Word 0 is the header; the packet's fields follow in the\n"
      << "order listed below, a `u32` field in one word and a `u64` field in two, low word first.\n\n"
      << "| header bits | content |\n|---|---|\n"
      << "| 7:0 | opcode |\n"
      << "| 15:8 | reserved, must be 0 |\n"
      << "| 31:16 | the packet's total length in words, header included |\n\n"
      << "The length must be exactly the packet's length below: a reader that finds any other length stops the queue\n"
      << "rather than guess where the next packet starts. A packet may wrap around the end of the ring: the word after\n"
      << "the ring's last word is its first. The command processor reads only the words between HEAD and TAIL, so the\n"
      << "driver moves TAIL past a packet only once it has written all of it.\n\n"
      << "## Packets\n";
  for (const PacketSpec& spec : packet_table()) {
    out << "\n### " << hex2(static_cast<uint8_t>(spec.opcode)) << " `" << spec.name << "` (" << spec.length_words
        << (spec.length_words == 1 ? " word" : " words") << ")\n\n"
        << spec.semantics << "\n";
    if (spec.fields.empty()) continue;
    out << "\n| words | field | type | valid values |\n|---|---|---|---|\n";
    size_t next = 1;
    for (const PacketFieldSpec& field : spec.fields) {
      out << "| " << word_range(next, field.words) << " | `" << field.name << "` | " << (field.words == 1 ? "u32" : "u64") << " | "
          << cell(valid_values(field)) << " |\n";
      next += field.words;
    }
  }
  out << "\n## Errors\n\n"
      << "A packet that fails a check is not run: its queue stops with HEAD at the packet, and the queue's ERROR register\n"
      << "reads the code. The first failing check gives the code, in this order: the ring position, the opcode, the\n"
      << "reserved bits, the length, the words available, the field values.\n\n"
      << "| code | name | message |\n|---|---|---|\n";
  for (const PacketErrorSpec& error : packet_error_table())
    out << "| " << static_cast<uint32_t>(error.code) << " | `" << error.name << "` | " << cell(error.message) << " |\n";
  return out.str();
}

}  // namespace npu::firmware
