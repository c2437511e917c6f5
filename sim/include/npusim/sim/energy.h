// Energy, power and area of a chip config and a run (docs/energy.md).
//
// A run's statistics (stats.h) become counts of actions (actions.def: a MAC of
// each dtype, an SRAM byte read, a byte crossing a NoC hop, a DRAM row opened,
// ...); each action has an energy, from published figures at a reference node
// scaled to the config's technology section (energy_table.cpp holds the
// figures and their sources). Energy is counts times energy per action, plus
// each component's leakage over the run's time. Dynamic energy is kept in
// whole femtojoules so that pricing is exact integer arithmetic.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "npusim/sim/chip_config.h"
#include "npusim/sim/stats.h"

namespace npu::sim {

enum class Action : uint8_t {
#define NPU_ACTION(name, component, action, what) name,
#include "npusim/sim/actions.def"
#undef NPU_ACTION
  Count
};
inline constexpr size_t kNumActions = static_cast<size_t>(Action::Count);

struct ActionInfo {
  const char* component;  // "tensor_core", "dram", ...
  const char* action;     // "mac_bf16", "read_byte", ...
  const char* what;       // one action, in words
};
const ActionInfo& action_info(Action action);
std::string action_name(Action action);  // "component.action"
std::optional<Action> action_from_name(std::string_view name);

// The components energy and area are reported by, in report order (every action's component is one).
const std::vector<std::string>& energy_components();

using ActionCounts = std::array<uint64_t, kNumActions>;
VectorOpClass vector_op_class(isa::Opcode op);
Action mac_action(isa::DType input_dtype);          // the tensor core's MAC of that input dtype
Action vector_action(VectorOpClass op_class);
ActionCounts action_counts(const ChipStats& stats);

struct ComponentModel {
  std::string name;
  double area_um2 = 0;   // on the NPU die; 0 for what is off it (DRAM devices) or not priced (docs/energy.md)
  double leakage_w = 0;  // static power while the chip is on
};

// A config's prices: energy per action (femtojoules, rounded to whole ones), and area and leakage per component.
struct EnergyModel {
  std::array<uint64_t, kNumActions> energy_fj{};
  std::vector<ComponentModel> components;  // in energy_components() order
  double peak_power_w = 0;                 // every unit at its full rate at once, plus leakage: an upper bound

  double area_mm2() const;
  double leakage_w() const;
};
EnergyModel energy_model(const ChipConfig& config);

struct ComponentEnergy {
  std::string name;
  uint64_t dynamic_fj = 0;  // sum of counts x energy per action
  double leakage_pj = 0;    // leakage power x the run's time
  double area_mm2 = 0;
  double total_pj() const { return static_cast<double>(dynamic_fj) / 1000.0 + leakage_pj; }
};

struct EnergyReport {
  std::vector<ComponentEnergy> components;
  double seconds = 0;       // the run's cycles at the config's clock
  double total_pj = 0;
  double average_power_w = 0;
  double peak_power_w = 0;  // EnergyModel::peak_power_w
  double area_mm2 = 0;
  uint64_t dynamic_fj() const;
  double leakage_pj() const;
};
EnergyReport price(const EnergyModel& model, const ActionCounts& counts, uint64_t cycles, uint32_t clock_mhz);

// The "energy" object of `npu-sim --stats` (the lines after the first start with `indent`).
void write_energy_json(std::ostream& out, const EnergyReport& report, const ActionCounts& counts, const EnergyModel& model,
                       const std::string& indent);
void write_energy_summary(std::ostream& out, const EnergyReport& report);

// Accelergy's formats (version 0.4), so that a user with Accelergy and its plug-ins (CACTI, Aladdin, tables)
// can price the same run with their own tables: the action counts, and this model's energy reference table.
void write_accelergy_action_counts(std::ostream& out, const ActionCounts& counts);
void write_accelergy_ert(std::ostream& out, const EnergyModel& model);

}  // namespace npu::sim
