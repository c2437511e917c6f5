#include <stdexcept>

#include "hex.h"
#include "npusim/firmware/packets.h"

namespace npu::firmware {
namespace {

std::string range_text(const PacketFieldSpec& field) { return std::to_string(field.min) + ".." + std::to_string(field.max); }

DecodeResult failure(PacketError code, const std::string& detail) {
  DecodeResult result;
  result.error = code;
  result.message = find_packet_error(code)->message + ": " + detail;
  return result;
}

// The words from HEAD on, wrapping at the ring's end. Callers keep the offset
// below the words available, which decode_packet checked to be within the ring.
class RingWords {
 public:
  RingWords(const uint32_t* words, size_t size, size_t head) : words_(words), size_(size), head_(head) {}

  // Written so that head_ + offset cannot overflow however large the ring is.
  uint32_t operator[](size_t offset) const {
    const size_t before_end = size_ - head_;
    return words_[offset < before_end ? head_ + offset : offset - before_end];
  }

 private:
  const uint32_t* words_;
  size_t size_;
  size_t head_;
};

}  // namespace

std::vector<uint32_t> encode(const Packet& packet) {
  const PacketSpec* spec = find_packet(packet.opcode);
  if (spec == nullptr)
    throw std::invalid_argument("encode: unknown packet opcode " + hex2(static_cast<uint8_t>(packet.opcode)));
  std::vector<uint32_t> words;
  words.reserve(spec->length_words);
  words.push_back(static_cast<uint32_t>(packet.opcode) | static_cast<uint32_t>(spec->length_words) << kPacketLengthShift);
  for (size_t i = 0; i < kMaxPacketFields; ++i) {
    const uint64_t value = packet.fields[i];
    if (i >= spec->fields.size()) {
      if (value != 0)
        throw std::invalid_argument("encode: " + spec->name + " has no field " + std::to_string(i) + ", yet it holds " +
                                    std::to_string(value));
      continue;
    }
    const PacketFieldSpec& field = spec->fields[i];
    if (value < field.min || value > field.max)
      throw std::invalid_argument("encode: " + spec->name + " " + field.name + " = " + std::to_string(value) + " is outside " +
                                  range_text(field));
    words.push_back(static_cast<uint32_t>(value));
    if (field.words == 2) words.push_back(static_cast<uint32_t>(value >> 32));
  }
  return words;
}

DecodeResult decode_packet(const uint32_t* ring_words, size_t ring_size_words, size_t head_word, size_t available_words) {
  if (ring_words == nullptr || head_word >= ring_size_words || available_words > ring_size_words)
    return failure(PacketError::BAD_RING_POSITION, "head word " + std::to_string(head_word) + ", " + std::to_string(available_words) +
                                                       " words available, ring of " + std::to_string(ring_size_words) + " words");
  if (available_words == 0) return failure(PacketError::TRUNCATED, "no words available for the header");
  const RingWords words(ring_words, ring_size_words, head_word);

  const uint32_t header = words[0];
  const auto opcode = static_cast<uint8_t>(header & kPacketOpcodeMask);
  const PacketSpec* spec = find_packet(opcode);
  if (spec == nullptr) return failure(PacketError::UNKNOWN_OPCODE, hex2(opcode) + " in header " + hex(header));
  if ((header & kPacketReservedMask) != 0) return failure(PacketError::RESERVED_BITS, spec->name + " header " + hex(header));
  const size_t length = header >> kPacketLengthShift;
  if (length != spec->length_words)
    return failure(length < spec->length_words ? PacketError::LENGTH_TOO_SHORT : PacketError::LENGTH_TOO_LONG,
                   spec->name + " header gives " + std::to_string(length) + " words, its fields need " +
                       std::to_string(spec->length_words));
  if (length > available_words)
    return failure(PacketError::TRUNCATED,
                   spec->name + " needs " + std::to_string(length) + " words, " + std::to_string(available_words) + " available");

  DecodeResult result;
  result.packet.opcode = spec->opcode;
  result.length_words = length;
  size_t next = 1;
  for (size_t i = 0; i < spec->fields.size(); ++i) {
    const PacketFieldSpec& field = spec->fields[i];
    uint64_t value = words[next];
    if (field.words == 2) value |= uint64_t{words[next + 1]} << 32;
    next += field.words;
    if (value < field.min || value > field.max)
      return failure(PacketError::INVALID_FIELD,
                     spec->name + " " + field.name + " = " + std::to_string(value) + ", valid " + range_text(field));
    result.packet.fields[i] = value;
  }
  return result;
}

}  // namespace npu::firmware
