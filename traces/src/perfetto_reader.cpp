#include "perfetto_reader.h"

#include <cstdint>
#include <limits>

namespace npu::trace {
namespace {

bool read_varint(std::string_view bytes, size_t& pos, uint64_t& value) {
  value = 0;
  for (unsigned shift = 0; shift < 64 && pos < bytes.size(); shift += 7) {
    const auto byte = static_cast<uint8_t>(bytes[pos++]);
    value |= static_cast<uint64_t>(byte & 0x7F) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

}  // namespace

std::string for_each_packet(std::string_view bytes,
                            const std::function<void(size_t, const pb::TracePacket&)>& visit) {
  constexpr uint64_t kPacketTag = (1 << 3) | 2;  // field 1, length-delimited
  pb::TracePacket packet;
  size_t number = 0;
  for (size_t pos = 0; pos < bytes.size(); ++number) {
    const auto where = [&, start = pos] {
      return "packet " + std::to_string(number) + " (byte " + std::to_string(start) + ")";
    };
    uint64_t tag = 0;
    uint64_t size = 0;
    if (!read_varint(bytes, pos, tag)) return where() + ": truncated field tag";
    if (tag != kPacketTag)
      return where() + ": expected a Trace.packet field, found field " + std::to_string(tag >> 3) + " wire type " +
             std::to_string(tag & 7);
    if (!read_varint(bytes, pos, size)) return where() + ": truncated length";
    if (size > bytes.size() - pos)
      return where() + ": length " + std::to_string(size) + " runs past the end of the trace";
    if (size > static_cast<uint64_t>(std::numeric_limits<int>::max())) return where() + ": packet too large";
    if (!packet.ParseFromArray(bytes.data() + pos, static_cast<int>(size)))
      return where() + ": does not decode as a TracePacket";
    pos += size;
    visit(number, packet);
  }
  return {};
}

}  // namespace npu::trace
