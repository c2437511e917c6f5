#include "npusim/common/bytes.h"

#include <zlib.h>

#include <algorithm>

namespace npu {

uint32_t crc32_of(std::string_view bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  for (size_t done = 0; done < bytes.size();) {
    const auto chunk = static_cast<uInt>(std::min<size_t>(bytes.size() - done, size_t{1} << 30));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + done), chunk);
    done += chunk;
  }
  return static_cast<uint32_t>(crc);
}

}  // namespace npu
