// The presets of configs/, compiled into the library (presets.cpp is
// generated at build time by embed_presets.cmake).
#pragma once

#include <vector>

namespace npu::sim::config_detail {

struct Preset {
  const char* name;    // "base"
  const char* source;  // "configs/base.pbtxt", for messages
  const char* text;    // the file's contents
};

// In preset_names() order.
const std::vector<Preset>& presets();

}  // namespace npu::sim::config_detail
