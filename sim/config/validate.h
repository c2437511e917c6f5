// The rules a parsed config must satisfy beyond the schema's types: ranges,
// powers of two, and consistency between sections (topology, address space).
#pragma once

#include <string>

#include <google/protobuf/text_format.h>

#include "chip_config.pb.h"

namespace npu::sim::config_detail {

// Throws ConfigError listing every violation, each as
// "SOURCE:LINE:COL: core.scratchpad.banks must be a power of two (got 3)".
void validate(const pb::ChipConfig& config, const google::protobuf::TextFormat::ParseInfoTree& locations,
              const std::string& source);

}  // namespace npu::sim::config_detail
