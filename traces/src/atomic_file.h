#pragma once

#include <string>

namespace npu::trace {

// Writes a file through a temporary sibling and a rename, so readers (and a
// crash) see either the old file or the complete new one, never a prefix.
// Throws std::runtime_error on failure, leaving no temporary behind.
void write_file_atomically(const std::string& path, const std::string& contents);

}  // namespace npu::trace
