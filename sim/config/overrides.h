// Setting config fields by dotted path, and listing every field by path (overrides.cpp).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "chip_config.pb.h"

namespace npu::sim::config_detail {

// Each setting is "PATH=VALUE": core.tensor_core.rows=64, dram.type=HBM3, dram.ports[1].x=0,
// core.tensor_core.input_dtypes=bf16,i8 (a list is set whole). Throws ConfigError naming the setting.
void apply_overrides(pb::ChipConfig* message, const std::vector<std::string>& settings);

// Every field as (path, value text), in schema order; lists joined with commas.
std::vector<std::pair<std::string, std::string>> flatten_config(const pb::ChipConfig& message);

}  // namespace npu::sim::config_detail
