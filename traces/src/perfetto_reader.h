// Walks a serialized Perfetto Trace packet by packet, so large traces are
// never decoded into one message.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "perfetto_trace.pb.h"

namespace npu::trace {

// Calls visit(packet_number, packet) for each packet, in order, numbering
// from 0. Returns an empty string when all bytes decoded, else what went
// wrong (packets before the fault have been visited).
std::string for_each_packet(std::string_view bytes,
                            const std::function<void(size_t, const pb::TracePacket&)>& visit);

}  // namespace npu::trace
