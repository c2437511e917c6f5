// Protobuf text format to a ChipConfig message, with the position of every
// field kept for the validator's messages.
#pragma once

#include <string>

#include <google/protobuf/text_format.h>

#include "chip_config.pb.h"

namespace npu::sim::config_detail {

// Parses `text` into *config and records where each field was written into
// *locations. Throws ConfigError "SOURCE:LINE:COL: message" on a syntax
// error, an unknown field, or a value of the wrong type or range for its field.
void parse_text(const std::string& text, const std::string& source, pb::ChipConfig* config,
                google::protobuf::TextFormat::ParseInfoTree* locations);

}  // namespace npu::sim::config_detail
