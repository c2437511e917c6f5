#include <set>

#include <gtest/gtest.h>

#include "npusim/firmware/packets.h"

namespace npu::firmware {
namespace {

constexpr uint32_t header(PacketOpcode opcode, uint32_t length) { return static_cast<uint32_t>(opcode) | length << 16; }

// A COPY of 0x40 bytes from host 0x2000 to device 0x1000, words 1..7 after the header.
const std::vector<uint32_t> kCopy = {header(PacketOpcode::COPY, 8), 0x1000, 0, 0x2000, 0, 0x40, 0, 1};

struct ErrorCase {
  const char* what;
  std::vector<uint32_t> ring;
  size_t head;
  size_t available;
  PacketError error;
  const char* detail;  // expected after the table's message and ": "
};

std::vector<uint32_t> with(std::vector<uint32_t> words, size_t index, uint32_t value) {
  words[index] = value;
  return words;
}

// The words in a ring of their own size, starting at word `head`.
std::vector<uint32_t> rotated(const std::vector<uint32_t>& words, size_t head) {
  std::vector<uint32_t> ring(words.size());
  for (size_t i = 0; i < words.size(); ++i) ring[(head + i) % ring.size()] = words[i];
  return ring;
}

TEST(PacketErrors, EachErrorHasItsCodeAndMessage) {
  const ErrorCase cases[] = {
      {"opcode 0x2a", {0x0001002a}, 0, 1, PacketError::UNKNOWN_OPCODE, "0x2a in header 0x1002a"},
      {"opcode 0xff", {0x000100ff}, 0, 1, PacketError::UNKNOWN_OPCODE, "0xff in header 0x100ff"},
      {"NOP with bit 8", {header(PacketOpcode::NOP, 1) | 0x100}, 0, 1, PacketError::RESERVED_BITS, "NOP header 0x10100"},
      {"BARRIER with bit 15", {header(PacketOpcode::BARRIER, 1) | 0x8000}, 0, 1, PacketError::RESERVED_BITS, "BARRIER header 0x18006"},
      {"length 0", {header(PacketOpcode::NOP, 0)}, 0, 1, PacketError::LENGTH_TOO_SHORT, "NOP header gives 0 words, its fields need 1"},
      {"COPY of 7 words", with(kCopy, 0, header(PacketOpcode::COPY, 7)), 0, 8, PacketError::LENGTH_TOO_SHORT,
       "COPY header gives 7 words, its fields need 8"},
      {"NOP of 2 words", {header(PacketOpcode::NOP, 2), 0}, 0, 2, PacketError::LENGTH_TOO_LONG,
       "NOP header gives 2 words, its fields need 1"},
      {"COPY of 65535 words", with(kCopy, 0, header(PacketOpcode::COPY, 0xffff)), 0, 8, PacketError::LENGTH_TOO_LONG,
       "COPY header gives 65535 words, its fields need 8"},
      {"nothing available", {header(PacketOpcode::NOP, 1)}, 0, 0, PacketError::TRUNCATED, "no words available for the header"},
      {"COPY cut by TAIL", kCopy, 0, 5, PacketError::TRUNCATED, "COPY needs 8 words, 5 available"},
      {"COPY cut by TAIL after wrapping", rotated(kCopy, 6), 6, 7, PacketError::TRUNCATED, "COPY needs 8 words, 7 available"},
      {"COPY direction 3", with(kCopy, 7, 3), 0, 8, PacketError::INVALID_FIELD, "COPY direction = 3, valid 0..2"},
      {"COPY direction 2^32-1", with(kCopy, 7, 0xffffffff), 0, 8, PacketError::INVALID_FIELD, "COPY direction = 4294967295, valid 0..2"},
      {"LAUNCH on no core", {header(PacketOpcode::LAUNCH, 5), 0x1000, 0, 0, 0}, 0, 5, PacketError::INVALID_FIELD,
       "LAUNCH core_mask = 0, valid 1..18446744073709551615"},
      {"head at the end", kCopy, 8, 1, PacketError::BAD_RING_POSITION, "head word 8, 1 words available, ring of 8 words"},
      {"more available than the ring", kCopy, 0, 9, PacketError::BAD_RING_POSITION, "head word 0, 9 words available, ring of 8 words"},
      {"empty ring", {}, 0, 0, PacketError::BAD_RING_POSITION, "head word 0, 0 words available, ring of 0 words"},
  };
  std::set<PacketError> seen;
  for (const ErrorCase& c : cases) {
    // An empty vector's data() may be null, which is its own bad position; a
    // non-null pointer with size 0 must be rejected too.
    const uint32_t* words = c.ring.empty() ? kCopy.data() : c.ring.data();
    const DecodeResult result = decode_packet(words, c.ring.size(), c.head, c.available);
    EXPECT_EQ(result.error, c.error) << c.what << ": " << result.message;
    EXPECT_FALSE(result.ok()) << c.what;
    EXPECT_EQ(result.message, find_packet_error(c.error)->message + ": " + c.detail) << c.what;
    seen.insert(result.error);
  }
  // The others are found when the firmware executes a well-formed packet
  // (tests/driver_sim/firmware_queue_test.cpp raises each but INTERNAL, which
  // no packet within the firmware's limits reaches, on the chip).
  const std::set<PacketError> execution_errors = {PacketError::BAD_ADDRESS, PacketError::BAD_DESCRIPTOR, PacketError::BAD_CORE_MASK,
                                                  PacketError::INTERNAL};
  for (const PacketErrorSpec& error : packet_error_table()) {
    if (!execution_errors.count(error.code)) {
      EXPECT_EQ(seen.count(error.code), 1u) << error.name << " is not tested";
    }
  }
}

TEST(PacketErrors, NullRingIsABadPosition) {
  EXPECT_EQ(decode_packet(nullptr, 8, 0, 1).error, PacketError::BAD_RING_POSITION);
}

// A packet with several faults reports the first check it fails, in the order
// docs/packets.md gives.
TEST(PacketErrors, ChecksComeInTheDocumentedOrder) {
  const auto error_of = [](const std::vector<uint32_t>& words, size_t available) {
    return decode_packet(words.data(), words.size(), 0, available).error;
  };
  EXPECT_EQ(error_of({0x0000ff2a}, 1), PacketError::UNKNOWN_OPCODE);                  // + reserved bits, length 0
  EXPECT_EQ(error_of({header(PacketOpcode::COPY, 3) | 0x100}, 1), PacketError::RESERVED_BITS);  // + length, truncated
  EXPECT_EQ(error_of({header(PacketOpcode::COPY, 9)}, 1), PacketError::LENGTH_TOO_LONG);        // + truncated
  EXPECT_EQ(error_of(with(kCopy, 7, 3), 7), PacketError::TRUNCATED);  // the bad direction is past TAIL
}

TEST(PacketErrors, EmptyTransfersAreValid) {
  const std::vector<uint32_t> copy = with(with(kCopy, 5, 0), 7, 0);  // 0 bytes, device to device
  DecodeResult result = decode_packet(copy.data(), copy.size(), 0, copy.size());
  ASSERT_TRUE(result.ok()) << result.message;
  EXPECT_EQ(result.packet.fields[2], 0u);
  const std::vector<uint32_t> fill = {header(PacketOpcode::FILL, 6), 0x1000, 0, 0, 0, 0xdeadbeef};
  result = decode_packet(fill.data(), fill.size(), 0, fill.size());
  ASSERT_TRUE(result.ok()) << result.message;
  EXPECT_EQ(result.packet.fields[2], 0xdeadbeefu);
}

}  // namespace
}  // namespace npu::firmware
