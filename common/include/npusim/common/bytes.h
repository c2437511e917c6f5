// Little-endian integers in byte strings, and the CRC-32 of a byte string: the
// framing that program (.npubin) and package (.npupkg) files share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace npu {

// The `width`-byte little-endian integer at `offset` (the caller checks the bounds).
inline uint64_t read_le(std::string_view bytes, size_t offset, unsigned width) {
  uint64_t value = 0;
  for (unsigned b = 0; b < width; ++b) value |= uint64_t{static_cast<uint8_t>(bytes[offset + b])} << (8 * b);
  return value;
}

// Overwrites the `width` bytes at `offset` with `value`, little-endian.
inline void write_le(std::string& bytes, size_t offset, unsigned width, uint64_t value) {
  for (unsigned b = 0; b < width; ++b) bytes[offset + b] = static_cast<char>((value >> (8 * b)) & 0xff);
}

// zlib's CRC-32 of `bytes` (any size: zlib takes at most 4 GiB a call).
uint32_t crc32_of(std::string_view bytes);

}  // namespace npu
