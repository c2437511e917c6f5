// Typed view of the command-packet table in firmware/packets.def, and the
// ring-buffer packet format derived from it (the wire format is described
// there and in docs/packets.md).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace npu::firmware {

inline constexpr uint32_t kPacketOpcodeMask = 0x000000ff;
inline constexpr uint32_t kPacketReservedMask = 0x0000ff00;
inline constexpr unsigned kPacketLengthShift = 16;
inline constexpr size_t kMaxPacketFields = 4;
// Header plus kMaxPacketFields u64 fields: no packet is longer.
inline constexpr size_t kMaxPacketWords = 1 + 2 * kMaxPacketFields;

enum class PacketOpcode : uint8_t {
#define NPU_PACKET(ID, OPCODE, FIELDS, SEMANTICS) ID = OPCODE,
#include "packets.def"
};

// What a queue's ERROR register reads after a packet was rejected.
enum class PacketError : uint32_t {
  None = 0,
#define NPU_PACKET_ERROR(ID, CODE, MESSAGE) ID = CODE,
#include "packets.def"
};

// Values of COPY's direction field, in the order packets.def names them.
enum class CopyDirection : uint32_t { D2D, H2D, D2H };

struct PacketFieldSpec {
  std::string name;
  unsigned words;  // 1 (u32) or 2 (u64)
  bool hex;        // describe() writes it in hex
  uint64_t min;    // the valid values are [min, max]
  uint64_t max;
  std::vector<std::string> value_names;  // an enumerated field's names, value i = i-th
};

struct PacketSpec {
  PacketOpcode opcode;
  std::string name;
  std::vector<PacketFieldSpec> fields;
  std::string semantics;
  size_t length_words;  // header included; the only length a header may give
};

struct PacketErrorSpec {
  PacketError code;
  std::string name;
  std::string message;
};

// All packets and all errors, in packets.def order.
const std::vector<PacketSpec>& packet_table();
const PacketSpec* find_packet(PacketOpcode opcode);
const PacketSpec* find_packet(uint8_t opcode);
const PacketSpec* find_packet(std::string_view name);
const std::vector<PacketErrorSpec>& packet_error_table();
// nullptr for PacketError::None and for codes the table does not define.
const PacketErrorSpec* find_packet_error(PacketError code);

// A packet's field values in table order; the fields it does not have are 0.
struct Packet {
  PacketOpcode opcode = PacketOpcode::NOP;
  std::array<uint64_t, kMaxPacketFields> fields{};

  bool operator==(const Packet& other) const { return opcode == other.opcode && fields == other.fields; }
  bool operator!=(const Packet& other) const { return !(*this == other); }
};

// The packet's words, header first. Throws std::invalid_argument for an
// unknown opcode, a field value outside its valid range (which includes a u32
// field above 0xffffffff), or a non-zero value in a field the packet lacks:
// whatever encodes, decodes.
std::vector<uint32_t> encode(const Packet& packet);

struct DecodeResult {
  PacketError error = PacketError::None;
  std::string message;  // the error's table message plus details; empty when ok
  Packet packet;        // valid when ok
  size_t length_words = 0;  // words the packet took from the ring, when ok

  bool ok() const { return error == PacketError::None; }
};

// Decodes the packet at ring_words[head_word], reading at most available_words
// words (those between HEAD and TAIL) and wrapping at ring_size_words. Never
// reads outside [0, ring_size_words) and never throws for any word values;
// a null ring, head_word >= ring_size_words or available_words >
// ring_size_words is the error BAD_RING_POSITION.
DecodeResult decode_packet(const uint32_t* ring_words, size_t ring_size_words, size_t head_word, size_t available_words);

// The trace flow from a packet's submission (driver) to its execution
// (firmware). Both sides number a queue's packets from 0 after each device
// reset and count the resets, so they agree without sending the id.
inline uint64_t packet_flow_id(uint64_t resets, unsigned queue, uint64_t packet_index) {
  return (resets + 1) << 48 | uint64_t{queue & 0xff} << 40 | (packet_index & ((uint64_t{1} << 40) - 1));
}

// One line for traces and messages, e.g. "COPY dst=0x1000 src=0x2000 bytes=4096 direction=h2d".
std::string describe(const Packet& packet);

// docs/packets.md, generated from the table.
std::string generate_packet_markdown();

}  // namespace npu::firmware
