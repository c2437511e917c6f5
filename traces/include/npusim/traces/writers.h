// Trace writers and validators.
#pragma once

#include <string>
#include <vector>

#include "npusim/traces/trace.h"

namespace npu::trace {

// Writes a Perfetto protobuf trace (one TracePacket per descriptor and event,
// track descriptors first). Throws std::runtime_error if the file cannot be written.
void write_perfetto(const Trace& trace, const std::string& path);
std::string to_perfetto(const Trace& trace);

// Writes Chrome Trace Event JSON ({"traceEvents": [...]}, ts in microseconds).
void write_chrome_json(const Trace& trace, const std::string& path);
std::string to_chrome_json(const Trace& trace);

// Picks the writer from the extension: ".pftrace" (or ".perfetto-trace") or
// ".json". Throws std::invalid_argument for any other extension.
void write_trace(const Trace& trace, const std::string& path);
// About how many bytes write_trace would write to `path` (its format from the extension), without encoding:
// cheap enough to check while the trace grows.
uint64_t estimated_written_bytes(const Trace& trace, const std::string& path);

// Decodes a Perfetto trace and checks its invariants: every track described
// before use, unique track uuids, parents described, slices balanced and
// nested per track, timestamps monotonic per track, counter events only on
// counter tracks. Returns the problems found (empty: valid).
std::vector<std::string> validate_perfetto(const std::string& bytes);
// The same invariants for a Chrome JSON trace.
std::vector<std::string> validate_chrome_json(const std::string& text);

// Summary of a decoded trace, for tests and tools.
struct TraceSummary {
  size_t tracks = 0;
  size_t slices = 0;
  size_t counter_samples = 0;
  std::vector<std::string> track_names;
  std::vector<std::string> slice_names;  // distinct, sorted
};
TraceSummary summarize_perfetto(const std::string& bytes);

}  // namespace npu::trace
