#include "random_packet.h"

namespace npu::firmware::testing {
namespace {

uint64_t random_value(const PacketFieldSpec& field, std::mt19937_64& rng) {
  if (rng() % 2 == 0) return std::uniform_int_distribution<uint64_t>(field.min, field.max)(rng);
  const uint64_t edges[] = {field.min,  field.min + 1, field.max - 1, field.max, uint64_t{0xffffffff}, uint64_t{1} << 32,
                            uint64_t{1} << 31, uint64_t{1} << 63};
  for (;;) {
    const uint64_t value = edges[rng() % std::size(edges)];
    // min + 1 and max - 1 wrap when the range is a single value.
    if (value >= field.min && value <= field.max) return value;
  }
}

}  // namespace

Packet random_packet(const PacketSpec& spec, std::mt19937_64& rng) {
  Packet packet;
  packet.opcode = spec.opcode;
  for (size_t i = 0; i < spec.fields.size(); ++i) packet.fields[i] = random_value(spec.fields[i], rng);
  return packet;
}

Packet random_packet(std::mt19937_64& rng) { return random_packet(packet_table()[rng() % packet_table().size()], rng); }

std::vector<uint32_t> encode_all(const std::vector<Packet>& packets) {
  std::vector<uint32_t> words;
  for (const Packet& packet : packets) {
    const std::vector<uint32_t> encoded = encode(packet);
    words.insert(words.end(), encoded.begin(), encoded.end());
  }
  return words;
}

std::vector<uint32_t> place_in_ring(const std::vector<uint32_t>& words, size_t ring_size, size_t head, std::mt19937_64& rng) {
  std::vector<uint32_t> ring(ring_size);
  for (uint32_t& word : ring) word = static_cast<uint32_t>(rng());
  for (size_t i = 0; i < words.size(); ++i) ring[(head + i) % ring_size] = words[i];
  return ring;
}

}  // namespace npu::firmware::testing
