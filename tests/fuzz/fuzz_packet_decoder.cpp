// Fuzzes the command-packet decoder the way the command processor drives it.
// Input: a control word, then the ring's words, all little-endian. The control
// word's bits 15:0 pick HEAD and bits 31:16 how many words before HEAD (going
// around the ring) are not yet written, i.e. where TAIL is; the decoder reads
// packet after packet until the words run out or a packet is rejected.
// Beyond "no crash" (ASan checks every read stays in the exactly-sized ring):
// every accepted packet must re-encode to the very words it was read from,
// and every rejection must carry a known error code.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "npusim/firmware/packets.h"

namespace {

uint32_t little_endian_word(const uint8_t* bytes) {
  return uint32_t{bytes[0]} | uint32_t{bytes[1]} << 8 | uint32_t{bytes[2]} << 16 | uint32_t{bytes[3]} << 24;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8 || size > 64 * 1024) return 0;
  const uint32_t control = little_endian_word(data);
  std::vector<uint32_t> ring((size - 4) / 4);
  for (size_t i = 0; i < ring.size(); ++i) ring[i] = little_endian_word(data + 4 + 4 * i);

  size_t head = (control & 0xffff) % ring.size();
  size_t available = ring.size() - (control >> 16) % (ring.size() + 1);
  while (available > 0) {
    const npu::firmware::DecodeResult result = npu::firmware::decode_packet(ring.data(), ring.size(), head, available);
    if (!result.ok()) {
      if (npu::firmware::find_packet_error(result.error) == nullptr || result.message.empty()) std::abort();
      break;
    }
    if (result.length_words == 0 || result.length_words > available) std::abort();
    const std::vector<uint32_t> words = npu::firmware::encode(result.packet);
    if (words.size() != result.length_words) std::abort();
    for (size_t i = 0; i < words.size(); ++i)
      if (words[i] != ring[(head + i) % ring.size()]) std::abort();
    if (npu::firmware::describe(result.packet).empty()) std::abort();
    head = (head + result.length_words) % ring.size();
    available -= result.length_words;
  }
  return 0;
}
