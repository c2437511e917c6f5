// Loading, validating and printing chip configs (protobuf text format).
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
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
// `overrides` set fields by path before validation, each "PATH=VALUE"
// (core.tensor_core.rows=64, dram.type=HBM3, dram.ports[0].x=1, a list whole:
// core.tensor_core.input_dtypes=bf16,i8), as npu-sim --set does.
ChipConfig load_chip_config(const std::string& preset_or_path, const std::vector<std::string>& overrides = {});
// Same, from text (`source_name` is used in messages).
ChipConfig parse_chip_config(const std::string& text, const std::string& source_name,
                             const std::vector<std::string>& overrides = {});

// Every field of the config as (dotted path, value), in schema order; lists joined with commas. The
// paths are those `overrides` take.
std::vector<std::pair<std::string, std::string>> chip_config_fields(const ChipConfig& config);

// The DMA timing model named "request" (DmaTiming::PerRequest), "step"
// (DmaTiming::PerStep) or "window" (DmaTiming::PerWindow), as npu-sim
// --dma-timing and NPUSIM_DMA_TIMING name them; throws ConfigError for any
// other name.
DmaTiming dma_timing_from_name(const std::string& name);

// The effective config as protobuf text format, every field shown; parsing it
// gives the same config.
std::string dump_chip_config(const ChipConfig& config);

}  // namespace npu::sim
