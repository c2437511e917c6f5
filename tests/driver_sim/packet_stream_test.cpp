// The firmware on a simulated chip takes any packet stream: random valid
// packets (random fields: mostly addresses outside memory, descriptors that
// are not descriptors) and random words. It never crashes or hangs, stops a
// queue only with a known error code, and the chip works after each RESET.
// (tests/fuzz/fuzz_queue_packets.cpp fuzzes the same path under ASan.)
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "queue_packet_stream.h"
#include "random_packet.h"

namespace npu {
namespace {

TEST(PacketStreams, RandomStreamsNeverBreakTheSimulator) {
  SimulatorLink link("tiny");
  std::mt19937_64 rng(2026);
  std::map<uint32_t, int> errors;
  for (int run = 0; run < 400; ++run) {
    std::vector<uint32_t> words;
    if (run % 2 == 0) {
      std::vector<firmware::Packet> packets;
      for (int i = 0, n = 1 + int(rng() % 6); i < n; ++i) packets.push_back(firmware::testing::random_packet(rng));
      words = firmware::testing::encode_all(packets);
    } else {
      words.resize(1 + rng() % 40);
      for (uint32_t& w : words) w = static_cast<uint32_t>(rng());
    }
    ++errors[testing::run_packet_stream(link, unsigned(run % 2), words, 100000)];
  }
  for (const auto& [code, count] : errors) std::printf("error %u: %d streams\n", code, count);
  // Both kinds of outcome happen: streams that run and streams that stop.
  EXPECT_GT(errors[0], 0);
  EXPECT_GT(errors.size(), 3u);
  // And the chip still works: a FILL and a fence through a fresh stream.
  const firmware::Packet fill{firmware::PacketOpcode::FILL, {0x800000, 64, 0xabcdabcd, 0}};
  const firmware::Packet fence{firmware::PacketOpcode::FENCE_SIGNAL, {0x800100, 42, 1, 0}};
  EXPECT_EQ(testing::run_packet_stream(link, 0, firmware::testing::encode_all({fill, fence}), 100000), 0u);
  uint64_t value = 0;
  uint32_t word = 0;
  link.read_memory(0x800100, &value, 8);
  link.read_memory(0x800000 + 60, &word, 4);
  EXPECT_EQ(value, 42u);
  EXPECT_EQ(word, 0xabcdabcdu);
}

}  // namespace
}  // namespace npu
