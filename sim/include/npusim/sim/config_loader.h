// Loading, validating and printing chip configs (protobuf text format).
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "npusim/sim/chip_config.h"

namespace npu::sim {

// A config that cannot be used. The message names the file, line and column
// and the field: "configs/x.pbtxt:12:5: core.scratchpad.banks must be a power of two (got 3)".
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Names of the presets in configs/ ("tiny", "base", "large").
std::vector<std::string> preset_names();

// Loads a preset by name or a file by path; throws ConfigError. Unknown
// fields, out-of-range values and inconsistent topology are all errors.
ChipConfig load_chip_config(const std::string& preset_or_path);
// Same, from text (`source_name` is used in messages).
ChipConfig parse_chip_config(const std::string& text, const std::string& source_name);

// The DMA timing model named "request" (DmaTiming::PerRequest), "step"
// (DmaTiming::PerStep) or "window" (DmaTiming::PerWindow), as npu-sim
// --dma-timing and NPUSIM_DMA_TIMING name them; throws ConfigError for any
// other name.
DmaTiming dma_timing_from_name(const std::string& name);

// The effective config as protobuf text format, every field shown; parsing it
// gives the same config.
std::string dump_chip_config(const ChipConfig& config);

}  // namespace npu::sim
