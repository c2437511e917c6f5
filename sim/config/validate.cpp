#include "validate.h"

#include <set>
#include <sstream>

#include "npusim/isa/dtype.h"
#include "npusim/isa/isa.h"
#include "npusim/sim/config_loader.h"
#include "npusim/sim/process_nodes.h"
#include "scope.h"

namespace npu::sim::config_detail {
namespace {

// The largest chip the simulator is meant to model.
constexpr uint64_t kMaxCores = 64;

bool is_power_of_two(uint64_t value) { return value != 0 && (value & (value - 1)) == 0; }

std::string quoted(const std::string& text) { return '"' + text + '"'; }

std::string hex(uint64_t value) {
  std::ostringstream text;
  text << "0x" << std::hex << value;
  return text.str();
}

void within(const Scope& s, FieldRef field, uint64_t value, uint64_t low, uint64_t high) {
  s.require(value >= low && value <= high, field, "must be in " + std::to_string(low) + ".." + std::to_string(high),
            value);
}

void at_least(const Scope& s, FieldRef field, uint64_t value, uint64_t low) {
  s.require(value >= low, field, "must be >= " + std::to_string(low), value);
}

void power_of_two(const Scope& s, FieldRef field, uint64_t value) {
  s.require(is_power_of_two(value), field, "must be a power of two", value);
}

// Mesh dimensions, when valid; positions are checked against them.
struct Mesh {
  uint32_t cols = 0;
  uint32_t rows = 0;
  bool valid() const { return cols >= 1 && rows >= 1; }
};

void check_control(const Scope& s) {
  const auto& m = s.as<pb::ControlUnitConfig>();
  at_least(s, "issue_cycles", m.issue_cycles(), 1);
  within(s, "queue_depth", m.queue_depth(), 1, 1024);
}

// The dtypes a systolic array can take as input: floats and i8 (i32 and u8
// are results and masks, not matmul operands).
bool is_tensor_input(isa::DType dtype) { return isa::dtype_is_float(dtype) || dtype == isa::DType::I8; }

std::string tensor_input_names() {
  std::string names;
  for (unsigned i = 0; i < isa::kNumDTypes; ++i) {
    const auto dtype = static_cast<isa::DType>(i);
    if (!is_tensor_input(dtype)) continue;
    if (!names.empty()) names += ", ";
    names += isa::dtype_name(dtype);
  }
  return names;
}

void check_tensor_core(const Scope& s) {
  const auto& m = s.as<pb::TensorCoreConfig>();
  within(s, "rows", m.rows(), 1, 1024);
  within(s, "cols", m.cols(), 1, 1024);
  s.require(m.dataflow() != pb::DATAFLOW_UNSPECIFIED, "dataflow", "must be WEIGHT_STATIONARY or OUTPUT_STATIONARY",
            pb::Dataflow_Name(m.dataflow()));
  s.require(!m.weight_double_buffering() || m.dataflow() == pb::WEIGHT_STATIONARY, "weight_double_buffering",
            "needs dataflow WEIGHT_STATIONARY (an output-stationary array holds no weights)", "true");
  if (m.arrays() != 0) within(s, "arrays", m.arrays(), 1, 16);
  s.require(m.input_dtypes_size() > 0, "input_dtypes", "must list at least one dtype", "");
  std::set<std::string> seen;
  for (int i = 0; i < m.input_dtypes_size(); ++i) {
    const std::string& name = m.input_dtypes(i);
    const auto dtype = isa::dtype_from_name(name);
    s.require(dtype && is_tensor_input(*dtype), {"input_dtypes", i}, "must be one of " + tensor_input_names(),
              quoted(name));
    s.require(seen.insert(name).second, {"input_dtypes", i}, "repeats a dtype listed earlier", quoted(name));
  }
}

void check_op_cost(const Scope& s) {
  const auto& m = s.as<pb::VectorOpCost>();
  at_least(s, "latency_cycles", m.latency_cycles(), 1);
  at_least(s, "cycles_per_vector", m.cycles_per_vector(), 1);
}

void check_vector_unit(const Scope& s) {
  const auto& m = s.as<pb::VectorUnitConfig>();
  within(s, "lanes", m.lanes(), 1, 4096);
  if (auto cost = s.section("default_cost")) {
    check_op_cost(*cost);
    // A name here would suggest the cost applies to that op only.
    cost->require(m.default_cost().op().empty(), "op", "must be empty: default_cost is for every op not in op_costs",
                  quoted(m.default_cost().op()));
  }
  std::set<std::string> seen;
  for (int i = 0; i < m.op_costs_size(); ++i) {
    const Scope entry = s.element("op_costs", i);
    const std::string& op = m.op_costs(i).op();
    const isa::InstructionSpec* spec = isa::find_instruction(op);
    entry.require(spec != nullptr && spec->engine == isa::Engine::Vector, "op",
                  "must be the mnemonic of a vector instruction, such as v.add or v.exp", quoted(op));
    entry.require(seen.insert(op).second, "op", "names an op listed earlier in op_costs", quoted(op));
    check_op_cost(entry);
  }
}

// `max_bytes` and `limit_rule` keep the memory inside its window of the local address space.
void check_sram(const Scope& s, uint64_t max_bytes, const std::string& limit_rule) {
  const auto& m = s.as<pb::SramConfig>();
  s.require(m.size_bytes() > 0, "size_bytes", "must be > 0", m.size_bytes());
  s.require(m.size_bytes() <= max_bytes, "size_bytes", limit_rule, m.size_bytes());
  power_of_two(s, "banks", m.banks());
  at_least(s, "bank_width_bytes", m.bank_width_bytes(), 1);
  const uint64_t bank_row = uint64_t{m.banks()} * m.bank_width_bytes();
  if (bank_row > 0 && m.size_bytes() > 0) {
    s.require(m.size_bytes() % bank_row == 0, "size_bytes",
              "must be a multiple of " + s.path("banks") + " * " + s.path("bank_width_bytes") + " = " +
                  std::to_string(bank_row),
              m.size_bytes());
  }
}

void check_dma(const Scope& s) {
  const auto& m = s.as<pb::DmaConfig>();
  s.require(m.channels() >= 1 && m.channels() <= 4, "channels", "must be in 1..4, the channels ch0..ch3 of the ISA",
            m.channels());
  s.require(is_power_of_two(m.request_bytes()) && m.request_bytes() >= 8, "request_bytes",
            "must be a power of two >= 8", m.request_bytes());
  at_least(s, "max_outstanding_requests", m.max_outstanding_requests(), 1);
  if (is_power_of_two(m.request_bytes())) {
    s.require(m.step_bytes() >= m.request_bytes() && m.step_bytes() % m.request_bytes() == 0, "step_bytes",
              "must be a positive multiple of " + s.path("request_bytes") + " = " + std::to_string(m.request_bytes()),
              m.step_bytes());
  }
}

void check_core(const Scope& s) {
  if (auto control = s.section("control")) check_control(*control);
  if (auto tensor_core = s.section("tensor_core")) check_tensor_core(*tensor_core);
  if (auto vector_unit = s.section("vector_unit")) check_vector_unit(*vector_unit);
  if (auto scratchpad = s.section("scratchpad")) {
    check_sram(*scratchpad, isa::kAccumulatorBase - 1,
               "must be < " + hex(isa::kAccumulatorBase) + ", where accumulator addresses start");
  }
  if (auto accumulator = s.section("accumulator")) {
    const uint64_t window = isa::kLocalAddressLimit - isa::kAccumulatorBase;
    check_sram(*accumulator, window,
               "must be <= " + hex(window) + ", the accumulator's window of the local address space");
  }
  if (auto dma = s.section("dma")) check_dma(*dma);
}

Mesh check_noc(const Scope& s) {
  const auto& m = s.as<pb::NocConfig>();
  within(s, "mesh_cols", m.mesh_cols(), 1, 64);
  within(s, "mesh_rows", m.mesh_rows(), 1, 64);
  at_least(s, "link_bytes_per_cycle", m.link_bytes_per_cycle(), 1);
  const bool valid = m.mesh_cols() >= 1 && m.mesh_cols() <= 64 && m.mesh_rows() >= 1 && m.mesh_rows() <= 64;
  return valid ? Mesh{m.mesh_cols(), m.mesh_rows()} : Mesh{};
}

void check_position(const Scope& s, const Mesh& mesh) {
  if (!mesh.valid()) return;
  const auto& m = s.as<pb::MeshPosition>();
  s.require(m.x() < mesh.cols, "x", "must be < noc.mesh_cols = " + std::to_string(mesh.cols), m.x());
  s.require(m.y() < mesh.rows, "y", "must be < noc.mesh_rows = " + std::to_string(mesh.rows), m.y());
}

void check_dram(const Scope& s, const Mesh& mesh) {
  const auto& m = s.as<pb::DramConfig>();
  s.require(m.size_bytes() > 0, "size_bytes", "must be > 0", m.size_bytes());
  at_least(s, "channels", m.channels(), 1);
  at_least(s, "bytes_per_cycle_per_channel", m.bytes_per_cycle_per_channel(), 1);
  power_of_two(s, "banks_per_channel", m.banks_per_channel());
  power_of_two(s, "row_bytes", m.row_bytes());
  power_of_two(s, "interleave_bytes", m.interleave_bytes());
  if (is_power_of_two(m.row_bytes())) {
    // A block that spans rows would need two activations for one request.
    s.require(m.interleave_bytes() <= m.row_bytes(), "interleave_bytes",
              "must be <= " + s.path("row_bytes") + " = " + std::to_string(m.row_bytes()),
              m.interleave_bytes());
  }
  const uint64_t stripe = uint64_t{m.channels()} * m.interleave_bytes();
  if (stripe > 0 && m.size_bytes() > 0) {
    s.require(m.size_bytes() % stripe == 0, "size_bytes",
              "must be a multiple of " + s.path("channels") + " * " + s.path("interleave_bytes") + " = " +
                  std::to_string(stripe),
              m.size_bytes());
  }
  at_least(s, "row_hit_cycles", m.row_hit_cycles(), 1);
  s.require(m.row_closed_cycles() >= m.row_hit_cycles(), "row_closed_cycles",
            "must be >= " + s.path("row_hit_cycles") + " = " + std::to_string(m.row_hit_cycles()),
            m.row_closed_cycles());
  s.require(m.row_conflict_cycles() >= m.row_closed_cycles(), "row_conflict_cycles",
            "must be >= " + s.path("row_closed_cycles") + " = " + std::to_string(m.row_closed_cycles()),
            m.row_conflict_cycles());
  if (m.refresh_interval_cycles() > 0) {
    s.require(m.refresh_cycles() >= 1 && m.refresh_cycles() < m.refresh_interval_cycles(), "refresh_cycles",
              "must be in 1.." + std::to_string(m.refresh_interval_cycles() - 1) + " (below " +
                  s.path("refresh_interval_cycles") + ") when refresh is enabled",
              m.refresh_cycles());
  }
  s.require(m.ports_size() > 0, "ports", "must list at least one DRAM controller position", "");
  if (m.channels() >= 1 && static_cast<uint64_t>(m.ports_size()) > m.channels()) {
    // Channel c uses port c % ports, so ports past the channel count would carry no traffic.
    s.require(false, {"ports", static_cast<int>(m.channels())},
              "is one port too many: " + s.path("channels") + " = " + std::to_string(m.channels()) +
                  " allows at most " + std::to_string(m.channels()) + " ports",
              "");
  }
  for (int i = 0; i < m.ports_size(); ++i) check_position(s.element("ports", i), mesh);
  s.require(m.type() != pb::DRAM_TYPE_UNSPECIFIED, "type", "must be HBM2E, HBM3, LPDDR5X or DDR5", pb::DramType_Name(m.type()));
}

// The names of the priced actions ("component.action"), from their one table.
const std::set<std::string>& action_names() {
  static const std::set<std::string> names = {
#define NPU_ACTION(name, component, action, what) std::string(component) + "." + action,
#include "npusim/sim/actions.def"
#undef NPU_ACTION
  };
  return names;
}

void check_technology(const Scope& s) {
  const auto& m = s.as<pb::TechnologyConfig>();
  s.require(process_node(m.process_nm()).has_value(), "process_nm", std::string("must be one of ") + kProcessNodeNames + " (nm)",
            m.process_nm());
  within(s, "voltage_mv", m.voltage_mv(), 500, 1200);
  std::set<std::string> seen;
  for (int i = 0; i < m.action_energy_size(); ++i) {
    const Scope entry = s.element("action_energy", i);
    const std::string& action = m.action_energy(i).action();
    entry.require(action_names().count(action) > 0, "action", "must name a priced action, such as dram.read_byte (docs/energy.md)",
                  quoted(action));
    entry.require(seen.insert(action).second, "action", "names an action listed earlier in action_energy", quoted(action));
  }
}

void check_host_link(const Scope& s, const Mesh& mesh) {
  const auto& m = s.as<pb::HostLinkConfig>();
  at_least(s, "bytes_per_cycle", m.bytes_per_cycle(), 1);
  if (auto port = s.section("port")) check_position(*port, mesh);
}

void check_command_processor(const Scope& s) {
  within(s, "num_queues", s.as<pb::CommandProcessorConfig>().num_queues(), 1, 16);
}

void check_simulation(const Scope& s) {
  const auto& m = s.as<pb::SimulationConfig>();
  at_least(s, "watchdog_cycles", m.watchdog_cycles(), 1);
  at_least(s, "counter_window_cycles", m.counter_window_cycles(), 1);
  at_least(s, "quantum_cycles", m.quantum_cycles(), 1);
}

void check_chip(const Scope& s) {
  const auto& m = s.as<pb::ChipConfig>();
  s.require(!m.name().empty(), "name", "must not be empty", quoted(m.name()));
  within(s, "clock_mhz", m.clock_mhz(), 1, 10000);
  Mesh mesh;
  if (auto noc = s.section("noc")) mesh = check_noc(*noc);
  within(s, "num_cores", m.num_cores(), 1, kMaxCores);
  if (mesh.valid()) {
    const uint64_t nodes = uint64_t{mesh.cols} * mesh.rows;
    s.require(m.num_cores() <= nodes, "num_cores",
              "must be <= noc.mesh_cols * noc.mesh_rows = " + std::to_string(nodes) + ", one core per node",
              m.num_cores());
  }
  if (auto core = s.section("core")) check_core(*core);
  if (auto dram = s.section("dram")) check_dram(*dram, mesh);
  if (auto host_link = s.section("host_link")) check_host_link(*host_link, mesh);
  if (auto command_processor = s.section("command_processor")) check_command_processor(*command_processor);
  if (auto simulation = s.section("simulation")) check_simulation(*simulation);
  if (auto technology = s.section("technology")) check_technology(*technology);
}

}  // namespace

void validate(const pb::ChipConfig& config, const google::protobuf::TextFormat::ParseInfoTree& locations,
              const std::string& source) {
  Diagnostics diagnostics(source);
  check_chip(Scope::root(config, locations, diagnostics));
  if (!diagnostics.empty()) throw ConfigError(diagnostics.text());
}

}  // namespace npu::sim::config_detail
