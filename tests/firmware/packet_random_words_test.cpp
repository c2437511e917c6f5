// The decoder against words no driver would write: whatever the ring holds, it
// must answer, and what it accepts must be exactly what encode() writes.
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "npusim/firmware/packets.h"
#include "random_packet.h"

namespace npu::firmware {
namespace {

constexpr uint32_t header(PacketOpcode opcode, size_t length) {
  return static_cast<uint32_t>(opcode) | static_cast<uint32_t>(length) << 16;
}

// Often a header that is valid or nearly so.
uint32_t random_word(std::mt19937_64& rng) {
  switch (rng() % 4) {
    case 0: return static_cast<uint32_t>(rng());
    case 1: {
      const PacketSpec& spec = packet_table()[rng() % packet_table().size()];
      const int off_by = rng() % 8 == 0 ? static_cast<int>(rng() % 3) - 1 : 0;
      return header(spec.opcode, static_cast<size_t>(static_cast<int>(spec.length_words) + off_by));
    }
    case 2: return static_cast<uint32_t>(rng() % 4);
    default: return rng() % 2 == 0 ? 0 : 0xffffffff;
  }
}

struct Ring {
  std::vector<uint32_t> words;
  size_t head;
};

// Half the rings hold random words; the others are filled from HEAD on with a
// valid stream, a few of its words overwritten, so that decoding gets deep
// into the ring and around its end before it meets a bad word.
Ring random_ring(std::mt19937_64& rng) {
  const size_t size = 1 + rng() % 40;
  const size_t head = rng() % size;
  if (rng() % 2 == 0) {
    std::vector<uint32_t> words(size);
    for (uint32_t& word : words) word = random_word(rng);
    return {words, head};
  }
  std::vector<Packet> packets;
  for (size_t words = 0; words < size;) {
    packets.push_back(testing::random_packet(rng));
    words += find_packet(packets.back().opcode)->length_words;
  }
  std::vector<uint32_t> stream = testing::encode_all(packets);
  stream.resize(size);  // the last packet may be cut short
  Ring ring{testing::place_in_ring(stream, size, head, rng), head};
  for (int changes = static_cast<int>(rng() % 3); changes > 0; --changes) ring.words[rng() % size] = random_word(rng);
  return ring;
}

TEST(RandomWords, NeverCrashAndEveryAcceptedPacketReEncodesToItsWords) {
  std::mt19937_64 rng(3);
  size_t accepted = 0, wrapped = 0;
  std::set<PacketError> rejections;
  for (int i = 0; i < 20000; ++i) {
    // An exactly-sized vector, so that a sanitizer build flags any read past the ring.
    const auto [ring, start] = random_ring(rng);
    size_t head = start;
    size_t available = rng() % (ring.size() + 1);
    while (available > 0) {
      const DecodeResult result = decode_packet(ring.data(), ring.size(), head, available);
      if (!result.ok()) {
        ASSERT_NE(find_packet_error(result.error), nullptr);
        EXPECT_EQ(result.message.rfind(find_packet_error(result.error)->message + ": ", 0), 0u) << result.message;
        rejections.insert(result.error);
        break;
      }
      ASSERT_GE(result.length_words, 1u);
      ASSERT_LE(result.length_words, available);
      const std::vector<uint32_t> words = encode(result.packet);
      ASSERT_EQ(words.size(), result.length_words) << describe(result.packet);
      for (size_t w = 0; w < words.size(); ++w)
        ASSERT_EQ(words[w], ring[(head + w) % ring.size()]) << describe(result.packet) << " word " << w;
      EXPECT_FALSE(describe(result.packet).empty());
      if (head + result.length_words > ring.size()) ++wrapped;
      head = (head + result.length_words) % ring.size();
      available -= result.length_words;
      ++accepted;
    }
  }
  // The generator must reach deep enough for the property to mean something.
  EXPECT_GT(accepted, 10000u);
  EXPECT_GT(wrapped, 1000u);
  for (const PacketError error : {PacketError::UNKNOWN_OPCODE, PacketError::RESERVED_BITS, PacketError::LENGTH_TOO_SHORT,
                                  PacketError::LENGTH_TOO_LONG, PacketError::TRUNCATED, PacketError::INVALID_FIELD})
    EXPECT_EQ(rejections.count(error), 1u) << find_packet_error(error)->name << " never came up";
}

// Every opcode with every length up to past the longest packet, with and
// without reserved bits: each header is either accepted or rejected for the
// right reason.
TEST(RandomWords, EveryHeaderIsClassified) {
  // Field words of 1 are valid in every field (direction h2d, a core mask of cores 0 and 32).
  std::vector<uint32_t> ring(kMaxPacketWords + 8, 1);
  for (unsigned opcode = 0; opcode < 256; ++opcode) {
    for (const uint32_t reserved : {0u, 0x100u, 0x8000u}) {
      for (uint32_t length = 0; length <= kMaxPacketWords + 2; ++length) {
        ring[0] = opcode | reserved | length << 16;
        const DecodeResult result = decode_packet(ring.data(), ring.size(), 0, ring.size());
        const PacketSpec* spec = find_packet(static_cast<uint8_t>(opcode));
        PacketError expected = PacketError::None;
        if (spec == nullptr)
          expected = PacketError::UNKNOWN_OPCODE;
        else if (reserved != 0)
          expected = PacketError::RESERVED_BITS;
        else if (length < spec->length_words)
          expected = PacketError::LENGTH_TOO_SHORT;
        else if (length > spec->length_words)
          expected = PacketError::LENGTH_TOO_LONG;
        EXPECT_EQ(result.error, expected) << "header " << std::hex << ring[0] << ": " << result.message;
      }
    }
  }
}

}  // namespace
}  // namespace npu::firmware
