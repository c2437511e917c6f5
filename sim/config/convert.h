// Between the validated protobuf message and the typed ChipConfig the models use.
#pragma once

#include "chip_config.pb.h"
#include "npusim/sim/chip_config.h"

namespace npu::sim::config_detail {

// `config` must have passed validate().
ChipConfig to_typed(const pb::ChipConfig& config);
// Every field set, including the cost of every vector instruction.
pb::ChipConfig to_proto(const ChipConfig& config);

}  // namespace npu::sim::config_detail
