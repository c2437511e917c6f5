// write_packet_seeds DIR: writes seed inputs for the fuzz_packet_decoder fuzz
// target, valid packet streams in its input format (see that file): a control
// word, then the ring's words, all little-endian.
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <random>
#include <string>

#include "random_packet.h"

namespace {

using npu::firmware::Packet;
using npu::firmware::PacketSpec;

// head: the ring word where the stream starts; the words after the stream are
// held back, as if TAIL stopped there.
void write_seed(const std::string& path, const std::vector<uint32_t>& ring, size_t head, size_t held_back) {
  std::vector<uint32_t> words = {static_cast<uint32_t>(head | held_back << 16)};
  words.insert(words.end(), ring.begin(), ring.end());
  std::ofstream out(path, std::ios::binary);
  for (const uint32_t word : words)
    for (unsigned byte = 0; byte < 4; ++byte) out.put(static_cast<char>(word >> (8 * byte)));
  if (!out) {
    std::cerr << "write_packet_seeds: error: cannot write " << path << "\n";
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "Usage: write_packet_seeds DIR\n";
    return 2;
  }
  const std::string dir = argv[1];
  std::mt19937_64 rng(1);

  std::vector<Packet> every_kind;
  for (const PacketSpec& spec : npu::firmware::packet_table()) every_kind.push_back(npu::firmware::testing::random_packet(spec, rng));
  write_seed(dir + "/every_packet.bin", npu::firmware::testing::encode_all(every_kind), 0, 0);

  std::vector<Packet> many;
  for (int i = 0; i < 200; ++i) many.push_back(npu::firmware::testing::random_packet(rng));
  write_seed(dir + "/many_packets.bin", npu::firmware::testing::encode_all(many), 0, 0);

  // A stream that starts near the ring's end and wraps, with free words after it.
  const std::vector<uint32_t> stream = npu::firmware::testing::encode_all({many.begin(), many.begin() + 16});
  const size_t ring_size = stream.size() + 5;
  write_seed(dir + "/wrapped.bin", npu::firmware::testing::place_in_ring(stream, ring_size, ring_size - 3, rng), ring_size - 3, 5);
  return 0;
}
