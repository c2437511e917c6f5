#include "npusim/sim/energy.h"

#include <cmath>
#include <cstdio>

#include "energy_table.h"
#include "npusim/sim/chip_peaks.h"
#include "npusim/sim/process_nodes.h"

namespace npu::sim {
namespace {

constexpr ActionInfo kActions[] = {
#define NPU_ACTION(name, component, action, what) {component, action, what},
#include "npusim/sim/actions.def"
#undef NPU_ACTION
};

size_t index_of(const std::string& component) {
  const std::vector<std::string>& names = energy_components();
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == component) return i;
  return names.size();
}

size_t dtype_index(isa::DType dtype) { return static_cast<size_t>(dtype); }

// The hop of a mesh link: a core's tile is square, its side the link's length.
double hop_mm(const std::vector<ComponentModel>& components, uint32_t num_cores) {
  double core_area_um2 = 0;
  for (const ComponentModel& c : components) core_area_um2 += c.area_um2;
  return std::sqrt(core_area_um2 / num_cores) / 1000.0;
}

std::string format(const char* pattern, double value) {
  char text[64];
  std::snprintf(text, sizeof text, pattern, value);
  return text;
}

}  // namespace

const ActionInfo& action_info(Action action) { return kActions[static_cast<size_t>(action)]; }

std::string action_name(Action action) {
  const ActionInfo& info = action_info(action);
  return std::string(info.component) + "." + info.action;
}

std::optional<Action> action_from_name(std::string_view name) {
  for (size_t i = 0; i < kNumActions; ++i)
    if (action_name(static_cast<Action>(i)) == name) return static_cast<Action>(i);
  return std::nullopt;
}

const std::vector<std::string>& energy_components() {
  static const std::vector<std::string> names = {"tensor_core", "accumulator", "scratchpad", "vector_unit", "dma",
                                                 "noc",         "dram",        "host_link",  "control"};
  return names;
}

ActionCounts action_counts(const ChipStats& stats) {
  ActionCounts counts{};
  const auto add = [&](Action action, uint64_t n) { counts[static_cast<size_t>(action)] += n; };
  for (const CoreStats& core : stats.cores) {
    for (isa::DType dtype : {isa::DType::I8, isa::DType::F16, isa::DType::BF16, isa::DType::F32})
      add(mac_action(dtype), core.macs_by_dtype[dtype_index(dtype)]);
    add(Action::AccumulatorReadByte, core.accumulator_read_bytes);
    add(Action::AccumulatorWriteByte, core.accumulator_write_bytes);
    add(Action::ScratchpadReadByte, core.scratchpad_read_bytes);
    add(Action::ScratchpadWriteByte, core.scratchpad_write_bytes);
    for (size_t c = 0; c < core.vector_elements_by_class.size(); ++c)
      add(vector_action(static_cast<VectorOpClass>(c)), core.vector_elements_by_class[c]);
    for (const EngineStats& engine : core.engines) {
      // The control unit fetches and issues every instruction, whichever engine runs it.
      if (engine.name == "control") add(Action::ControlInstruction, engine.instructions);
      if (engine.name.rfind("dma", 0) == 0) add(Action::DmaDescriptor, engine.instructions);
    }
  }
  for (const NocLinkStats& link : stats.noc_links) add(Action::NocByteHop, link.bytes);
  for (const DramChannelStats& channel : stats.dram_channels) {
    add(Action::DramReadByte, channel.read_bytes);
    add(Action::DramWriteByte, channel.write_bytes);
    add(Action::DramActivation, channel.row_closed + channel.row_conflicts);
  }
  add(Action::HostLinkByte, stats.host_link_bytes);
  return counts;
}

double EnergyModel::area_mm2() const {
  double um2 = 0;
  for (const ComponentModel& c : components) um2 += c.area_um2;
  return um2 / 1e6;
}

double EnergyModel::leakage_w() const {
  double watts = 0;
  for (const ComponentModel& c : components) watts += c.leakage_w;
  return watts;
}

EnergyModel energy_model(const ChipConfig& config) {
  namespace table = energy_table;
  // The loader accepts only the table's nodes (sim/config/validate.cpp).
  const NodeScaling node = process_node(config.technology.process_nm).value_or(NodeScaling{45, 900, 1, 1});
  const double v_ratio = static_cast<double>(config.technology.voltage_mv) / node.nominal_mv;
  const double dynamic_scale = node.energy * v_ratio * v_ratio, leakage_scale = node.energy * v_ratio;
  const CoreConfig& core = config.core;
  const double cores = config.num_cores;

  EnergyModel model;
  for (const std::string& name : energy_components()) model.components.push_back({name, 0, 0});
  const auto component = [&](const char* name) -> ComponentModel& { return model.components[index_of(name)]; };
  // Areas at the reference node; leakage from them, then the areas scaled to the node.
  component("tensor_core").area_um2 = cores * static_cast<double>(core.tensor_core.macs_per_cycle()) * table::tensor_pe_area_um2(core.tensor_core);
  component("vector_unit").area_um2 = cores * core.vector_unit.lanes * table::vector_lane_area_um2();
  for (const char* logic : {"tensor_core", "vector_unit"})
    component(logic).leakage_w = component(logic).area_um2 * table::logic_leakage_w_per_um2() * leakage_scale;
  component("scratchpad").area_um2 = cores * table::sram_area_um2(core.scratchpad.size_bytes);
  component("accumulator").area_um2 = cores * table::sram_area_um2(core.accumulator.size_bytes);
  component("scratchpad").leakage_w = cores * static_cast<double>(core.scratchpad.size_bytes) * table::sram_leakage_w_per_byte() * leakage_scale;
  component("accumulator").leakage_w = cores * static_cast<double>(core.accumulator.size_bytes) * table::sram_leakage_w_per_byte() * leakage_scale;
  for (ComponentModel& c : model.components) c.area_um2 *= node.area;

  std::array<double, kNumActions> pj{};
  for (size_t i = 0; i < kNumActions; ++i) {
    const table::ActionFigure figure = table::action_figure(static_cast<Action>(i), config);
    pj[i] = figure.on_die ? figure.picojoules * dynamic_scale : figure.picojoules;
  }
  // A byte crossing a link of a core tile's side, and its router: taken as half the wire's energy again
  // (an assumption: Dally puts a router at "a fraction" of its wires). Wires scale with voltage only.
  const double wire_v_ratio = config.technology.voltage_mv / (1000.0 * table::kWireVolts);
  pj[static_cast<size_t>(Action::NocByteHop)] =
      table::wire_pj_per_byte_mm() * hop_mm(model.components, config.num_cores) * 1.5 * wire_v_ratio * wire_v_ratio;
  for (size_t i = 0; i < kNumActions; ++i) model.energy_fj[i] = static_cast<uint64_t>(std::llround(pj[i] * 1000.0));
  for (const auto& [name, femtojoules] : config.technology.action_energy_fj)
    if (const auto action = action_from_name(name)) model.energy_fj[static_cast<size_t>(*action)] = femtojoules;

  // Peak: every unit at its full rate at once.
  const auto e = [&](Action action) { return static_cast<double>(model.energy_fj[static_cast<size_t>(action)]) / 1000.0; };
  double mac_pj = 0;
  for (isa::DType dtype : core.tensor_core.input_dtypes) mac_pj = std::max(mac_pj, e(mac_action(dtype)));
  double vector_pj_per_cycle = 0;
  for (const isa::InstructionSpec& spec : isa::instruction_table()) {
    if (spec.engine != isa::Engine::Vector) continue;
    const Action action = vector_action(vector_op_class(spec.opcode));
    vector_pj_per_cycle = std::max(vector_pj_per_cycle, core.vector_unit.lanes * e(action) / core.vector_unit.cost(spec.opcode).cycles_per_vector);
  }
  const NocConfig& noc = config.noc;
  const double links = 2.0 * ((noc.mesh_cols - 1.0) * noc.mesh_rows + (noc.mesh_rows - 1.0) * noc.mesh_cols);
  const double dram_bytes = static_cast<double>(peak_dram_bytes_per_cycle(config));
  double pj_per_cycle = cores * (static_cast<double>(core.tensor_core.macs_per_cycle()) * mac_pj +
                                 static_cast<double>(core.accumulator.bytes_per_cycle()) * e(Action::AccumulatorReadByte) +
                                 static_cast<double>(core.scratchpad.bytes_per_cycle()) * e(Action::ScratchpadReadByte) +
                                 vector_pj_per_cycle + e(Action::ControlInstruction) / core.control.issue_cycles +
                                 core.dma.channels * e(Action::DmaDescriptor) / std::max<uint32_t>(1, core.dma.descriptor_cycles));
  pj_per_cycle += links * noc.link_bytes_per_cycle * e(Action::NocByteHop);
  pj_per_cycle += dram_bytes * (e(Action::DramReadByte) + e(Action::DramActivation) / config.dram.row_bytes);
  pj_per_cycle += 2.0 * config.host_link.bytes_per_cycle * e(Action::HostLinkByte);
  model.peak_power_w = pj_per_cycle * 1e-12 * config.clock_mhz * 1e6 + model.leakage_w();
  return model;
}

Action mac_action(isa::DType input_dtype) {
  switch (input_dtype) {
    case isa::DType::I8: return Action::MacI8;
    case isa::DType::F16: return Action::MacF16;
    case isa::DType::BF16: return Action::MacBf16;
    default: return Action::MacF32;
  }
}

Action vector_action(VectorOpClass op_class) {
  return op_class == VectorOpClass::Multiply ? Action::VectorMultiply : op_class == VectorOpClass::Special ? Action::VectorSpecial : Action::VectorSimple;
}

VectorOpClass vector_op_class(isa::Opcode op) {
  using isa::Opcode;
  switch (op) {
    case Opcode::V_MUL: case Opcode::V_FMA: return VectorOpClass::Multiply;  // (v.fma's add: a simple op besides, VectorUnit)
    case Opcode::V_EXP: case Opcode::V_EXPSUM: case Opcode::V_LOG: case Opcode::V_SQRT: case Opcode::V_RSQRT: case Opcode::V_RECIP:
    case Opcode::V_TANH: case Opcode::V_SIGMOID: case Opcode::V_GELU: case Opcode::V_GELUT: case Opcode::V_SILU:
    case Opcode::V_SIN: case Opcode::V_COS: case Opcode::V_ERF: case Opcode::V_DIV: case Opcode::V_POW:
    case Opcode::V_RAND:
      return VectorOpClass::Special;
    default: return VectorOpClass::Simple;
  }
}

uint64_t EnergyReport::dynamic_fj() const {
  uint64_t total = 0;
  for (const ComponentEnergy& c : components) total += c.dynamic_fj;
  return total;
}

double EnergyReport::leakage_pj() const {
  double total = 0;
  for (const ComponentEnergy& c : components) total += c.leakage_pj;
  return total;
}

EnergyReport price(const EnergyModel& model, const ActionCounts& counts, uint64_t cycles, uint32_t clock_mhz) {
  EnergyReport report;
  report.seconds = static_cast<double>(cycles) / (clock_mhz * 1e6);
  for (const ComponentModel& c : model.components) report.components.push_back({c.name, 0, c.leakage_w * report.seconds * 1e12, c.area_um2 / 1e6});
  for (size_t i = 0; i < kNumActions; ++i)
    report.components[index_of(kActions[i].component)].dynamic_fj += counts[i] * model.energy_fj[i];
  for (const ComponentEnergy& c : report.components) report.total_pj += c.total_pj();
  report.average_power_w = report.seconds > 0 ? report.total_pj * 1e-12 / report.seconds : 0;
  report.peak_power_w = model.peak_power_w;
  report.area_mm2 = model.area_mm2();
  return report;
}

void write_energy_json(std::ostream& out, const EnergyReport& report, const ActionCounts& counts, const EnergyModel& model,
                       const std::string& indent) {
  out << "{\n" << indent << "  \"total_pj\": " << format("%.6g", report.total_pj) << ", \"dynamic_pj\": "
      << format("%.6g", static_cast<double>(report.dynamic_fj()) / 1000.0) << ", \"leakage_pj\": " << format("%.6g", report.leakage_pj())
      << ",\n" << indent << "  \"seconds\": " << format("%.6g", report.seconds) << ", \"average_power_w\": "
      << format("%.6g", report.average_power_w) << ", \"peak_power_w\": " << format("%.6g", report.peak_power_w)
      << ", \"area_mm2\": " << format("%.6g", report.area_mm2) << ",\n" << indent << "  \"components\": [";
  for (size_t i = 0; i < report.components.size(); ++i) {
    const ComponentEnergy& c = report.components[i];
    out << (i ? "," : "") << "\n" << indent << "    {\"name\": \"" << c.name << "\", \"dynamic_pj\": "
        << format("%.6g", static_cast<double>(c.dynamic_fj) / 1000.0) << ", \"leakage_pj\": " << format("%.6g", c.leakage_pj)
        << ", \"total_pj\": " << format("%.6g", c.total_pj()) << ", \"area_mm2\": " << format("%.6g", c.area_mm2) << "}";
  }
  out << "\n" << indent << "  ],\n" << indent << "  \"actions\": [";
  for (size_t i = 0; i < kNumActions; ++i) {
    out << (i ? "," : "") << "\n" << indent << "    {\"name\": \"" << action_name(static_cast<Action>(i)) << "\", \"count\": " << counts[i]
        << ", \"energy_fj\": " << model.energy_fj[i] << "}";
  }
  out << "\n" << indent << "  ]\n" << indent << "}";
}

void write_energy_summary(std::ostream& out, const EnergyReport& report) {
  char line[256];
  std::snprintf(line, sizeof line, "energy: %.4g uJ, average %.3g W (peak %.3g W), area %.4g mm^2\n", report.total_pj / 1e6,
                report.average_power_w, report.peak_power_w, report.area_mm2);
  out << line << " ";
  for (const ComponentEnergy& c : report.components) {
    if (c.total_pj() <= 0) continue;
    std::snprintf(line, sizeof line, " %s %.1f%%", c.name.c_str(), report.total_pj > 0 ? 100.0 * c.total_pj() / report.total_pj : 0.0);
    out << line;
  }
  out << "\n";
}

void write_accelergy_action_counts(std::ostream& out, const ActionCounts& counts) {
  out << "action_counts:\n  version: '0.4'\n  local:\n";
  for (const std::string& component : energy_components()) {
    out << "  - name: npu." << component << "\n    action_counts:\n";
    for (size_t i = 0; i < kNumActions; ++i)
      if (component == kActions[i].component) out << "    - name: " << kActions[i].action << "\n      counts: " << counts[i] << "\n";
  }
}

void write_accelergy_ert(std::ostream& out, const EnergyModel& model) {
  out << "ERT:\n  version: '0.4'\n  tables:\n";
  for (const std::string& component : energy_components()) {
    out << "  - name: npu." << component << "\n    actions:\n";
    for (size_t i = 0; i < kNumActions; ++i) {
      if (component != kActions[i].component) continue;
      out << "    - name: " << kActions[i].action << "\n      energy: " << format("%.3f", static_cast<double>(model.energy_fj[i]) / 1000.0)
          << "  # pJ\n";
    }
  }
}

}  // namespace npu::sim
