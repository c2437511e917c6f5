#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace npu::trace {

// Length of the well-formed UTF-8 sequence starting at text[pos] (1 to 4),
// or 0 if the bytes there are not one (overlong forms, surrogates and code
// points past U+10FFFF included). JSON text must be UTF-8, so the writer
// repairs and the parser rejects whatever this refuses.
inline size_t utf8_sequence_length(std::string_view text, size_t pos) {
  const auto byte = [&](size_t offset) -> uint8_t {
    return pos + offset < text.size() ? static_cast<uint8_t>(text[pos + offset]) : 0;
  };
  const uint8_t lead = byte(0);
  if (lead < 0x80) return 1;
  size_t length = 0;
  uint8_t second_low = 0x80;
  uint8_t second_high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) second_low = 0xA0;   // overlong
    if (lead == 0xED) second_high = 0x9F;  // surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) second_low = 0x90;   // overlong
    if (lead == 0xF4) second_high = 0x8F;  // past U+10FFFF
  } else {
    return 0;
  }
  for (size_t offset = 1; offset < length; ++offset) {
    const uint8_t low = offset == 1 ? second_low : 0x80;
    const uint8_t high = offset == 1 ? second_high : 0xBF;
    if (byte(offset) < low || byte(offset) > high) return 0;
  }
  return length;
}

}  // namespace npu::trace
