// The published figures the energy model prices with (energy_table.cpp, each with its source).
#pragma once

#include <cstdint>
#include "npusim/sim/chip_config.h"
#include "npusim/sim/energy.h"

namespace npu::sim::energy_table {

// Logic and SRAM figures are given at 45 nm and its nominal 0.9 V, and scaled from there
// (npusim/sim/process_nodes.h).


// Energy of one action at the reference node and voltage (on-die actions), or as the device spends it
// (DRAM, host link: off the die, not scaled), in picojoules.
struct ActionFigure {
  double picojoules;
  bool on_die;  // scales with the node and the core voltage
};
ActionFigure action_figure(Action action, const ChipConfig& config);

// Wire energy for one byte crossing one mm at kWireVolts (wires do not shrink with the node: only the
// swing's voltage changes it).
inline constexpr double kWireVolts = 0.9;
double wire_pj_per_byte_mm();

// Areas at the reference node, in square micrometres.
double tensor_pe_area_um2(const TensorCoreConfig& config);
double vector_lane_area_um2();
double sram_area_um2(uint64_t bytes);

// Leakage at the reference node and voltage: logic per square micrometre, SRAM per byte, in watts.
double logic_leakage_w_per_um2();
double sram_leakage_w_per_byte();

}  // namespace npu::sim::energy_table
