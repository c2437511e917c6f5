#include <random>
#include <stdexcept>

#include <gtest/gtest.h>

#include "npusim/firmware/packets.h"
#include "random_packet.h"

namespace npu::firmware {
namespace {

Packet make(PacketOpcode opcode, std::array<uint64_t, kMaxPacketFields> fields = {}) { return Packet{opcode, fields}; }

TEST(PacketCodec, KnownWordsArePinned) {
  EXPECT_EQ(encode(make(PacketOpcode::NOP)), (std::vector<uint32_t>{0x00010000}));
  EXPECT_EQ(encode(make(PacketOpcode::COPY, {0x1'0000'1000, 0x2000, 4096, 1})),
            (std::vector<uint32_t>{0x00080001, 0x1000, 0x1, 0x2000, 0, 4096, 0, 1}));
  EXPECT_EQ(encode(make(PacketOpcode::COUNTERS, {0xffff'ffff'ffff'fff8, 256})),
            (std::vector<uint32_t>{0x00040008, 0xfffffff8, 0xffffffff, 256}));
}

TEST(PacketCodec, EncodeDecodeIsIdentityForRandomPacketsOfEveryOpcodeAtEveryRingPosition) {
  std::mt19937_64 rng(1);
  for (const PacketSpec& spec : packet_table()) {
    for (int i = 0; i < 200; ++i) {
      const Packet packet = testing::random_packet(spec, rng);
      const std::vector<uint32_t> words = encode(packet);
      ASSERT_EQ(words.size(), spec.length_words) << spec.name;
      // Every head position, so the packet wraps at every word boundary, from a
      // ring it fills exactly to one with spare words.
      const size_t ring_size = words.size() + rng() % 4;
      for (size_t head = 0; head < ring_size; ++head) {
        const std::vector<uint32_t> ring = testing::place_in_ring(words, ring_size, head, rng);
        for (const size_t available : {words.size(), ring_size}) {
          const DecodeResult result = decode_packet(ring.data(), ring.size(), head, available);
          ASSERT_TRUE(result.ok()) << describe(packet) << " at " << head << ": " << result.message;
          EXPECT_EQ(result.packet, packet) << describe(packet) << " decoded as " << describe(result.packet);
          EXPECT_EQ(result.length_words, words.size());
          EXPECT_TRUE(result.message.empty());
        }
      }
    }
  }
}

TEST(PacketCodec, RangeEndsOfEveryFieldRoundTrip) {
  for (const PacketSpec& spec : packet_table()) {
    Packet low = make(spec.opcode), high = make(spec.opcode);
    for (size_t i = 0; i < spec.fields.size(); ++i) {
      low.fields[i] = spec.fields[i].min;
      high.fields[i] = spec.fields[i].max;
    }
    for (const Packet& packet : {low, high}) {
      const std::vector<uint32_t> words = encode(packet);
      const DecodeResult result = decode_packet(words.data(), words.size(), 0, words.size());
      ASSERT_TRUE(result.ok()) << result.message;
      EXPECT_EQ(result.packet, packet) << describe(packet);
    }
  }
}

// The driver writes at TAIL while the command processor reads from HEAD, in
// a ring small enough that packets wrap at every possible split.
TEST(PacketCodec, StreamOfManyPacketsDecodesInOrderThroughAWrappingRing) {
  std::mt19937_64 rng(2);
  std::vector<Packet> sent;
  for (int i = 0; i < 5000; ++i) sent.push_back(testing::random_packet(rng));
  std::vector<uint32_t> ring(61);
  size_t head = 0, tail = 0, next_to_send = 0, received = 0;
  while (received < sent.size()) {
    // HEAD == TAIL means empty, so one word always stays free.
    for (; next_to_send < sent.size(); ++next_to_send) {
      const std::vector<uint32_t> words = encode(sent[next_to_send]);
      const size_t used = (tail + ring.size() - head) % ring.size();
      if (used + words.size() >= ring.size()) break;
      for (const uint32_t word : words) {
        ring[tail] = word;
        tail = (tail + 1) % ring.size();
      }
    }
    // Read a random number of the packets waiting, so HEAD stops anywhere.
    for (int reads = 1 + static_cast<int>(rng() % 4); reads > 0 && head != tail; --reads) {
      const size_t available = (tail + ring.size() - head) % ring.size();
      const DecodeResult result = decode_packet(ring.data(), ring.size(), head, available);
      ASSERT_TRUE(result.ok()) << "packet " << received << ": " << result.message;
      ASSERT_EQ(result.packet, sent[received]) << "packet " << received << " decoded as " << describe(result.packet);
      head = (head + result.length_words) % ring.size();
      ++received;
    }
  }
  EXPECT_EQ(head, tail);
}

TEST(PacketCodec, EncodeRejectsValuesOutsideTheirField) {
  const auto rejects = [](const Packet& packet, const std::string& expected) {
    try {
      encode(packet);
      ADD_FAILURE() << "encoded " << describe(packet);
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  rejects(make(PacketOpcode::COUNTERS, {0x1000, uint64_t{1} << 32}), "COUNTERS bytes = 4294967296 is outside 0..4294967295");
  rejects(make(PacketOpcode::FENCE_SIGNAL, {0x1000, 1, uint64_t{1} << 32}), "FENCE_SIGNAL interrupt");
  rejects(make(PacketOpcode::COPY, {0, 0, 0, 3}), "COPY direction = 3 is outside 0..2");
  rejects(make(PacketOpcode::LAUNCH, {0x1000, 0}), "LAUNCH core_mask = 0 is outside 1..");
  rejects(make(PacketOpcode::NOP, {1}), "NOP has no field 0");
  rejects(make(PacketOpcode::TIMESTAMP, {0x1000, 0, 0, 7}), "TIMESTAMP has no field 3");
  rejects(make(static_cast<PacketOpcode>(0x7f)), "unknown packet opcode 0x7f");
}

}  // namespace
}  // namespace npu::firmware
