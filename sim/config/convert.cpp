#include "convert.h"

#include <string>

#include "npusim/isa/dtype.h"

namespace npu::sim::config_detail {
namespace {

MeshPosition to_typed(const pb::MeshPosition& m) { return {m.x(), m.y()}; }

void to_proto(const MeshPosition& position, pb::MeshPosition* m) {
  m->set_x(position.x);
  m->set_y(position.y);
}

SramConfig to_typed(const pb::SramConfig& m) { return {m.size_bytes(), m.banks(), m.bank_width_bytes()}; }

DmaTiming to_typed(pb::DmaTiming timing) {
  switch (timing) {
    case pb::PER_STEP: return DmaTiming::PerStep;
    case pb::PER_WINDOW: return DmaTiming::PerWindow;
    default: return DmaTiming::PerRequest;
  }
}

pb::DmaTiming to_proto(DmaTiming timing) {
  switch (timing) {
    case DmaTiming::PerStep: return pb::PER_STEP;
    case DmaTiming::PerWindow: return pb::PER_WINDOW;
    case DmaTiming::PerRequest: break;
  }
  return pb::PER_REQUEST;
}

void to_proto(const SramConfig& sram, pb::SramConfig* m) {
  m->set_size_bytes(sram.size_bytes);
  m->set_banks(sram.banks);
  m->set_bank_width_bytes(sram.bank_width_bytes);
}

VectorOpCost to_typed(const pb::VectorOpCost& m) { return {m.latency_cycles(), m.cycles_per_vector()}; }

void to_proto(const VectorOpCost& cost, pb::VectorOpCost* m) {
  m->set_latency_cycles(cost.latency_cycles);
  m->set_cycles_per_vector(cost.cycles_per_vector);
}

TensorCoreConfig to_typed(const pb::TensorCoreConfig& m) {
  TensorCoreConfig tensor_core;
  tensor_core.rows = m.rows();
  tensor_core.cols = m.cols();
  tensor_core.dataflow =
      m.dataflow() == pb::OUTPUT_STATIONARY ? Dataflow::OutputStationary : Dataflow::WeightStationary;
  for (const std::string& name : m.input_dtypes()) tensor_core.input_dtypes.push_back(*isa::dtype_from_name(name));
  tensor_core.weight_double_buffering = m.weight_double_buffering();
  tensor_core.arrays = m.arrays() ? m.arrays() : 1;
  tensor_core.fold_timing = m.fold_timing() == pb::FULL_ARRAY ? FoldTiming::FullArray : FoldTiming::UsedExtent;
  return tensor_core;
}

void to_proto(const TensorCoreConfig& tensor_core, pb::TensorCoreConfig* m) {
  m->set_rows(tensor_core.rows);
  m->set_cols(tensor_core.cols);
  m->set_dataflow(tensor_core.dataflow == Dataflow::OutputStationary ? pb::OUTPUT_STATIONARY : pb::WEIGHT_STATIONARY);
  for (isa::DType dtype : tensor_core.input_dtypes) m->add_input_dtypes(std::string(isa::dtype_name(dtype)));
  m->set_weight_double_buffering(tensor_core.weight_double_buffering);
  m->set_arrays(tensor_core.arrays);
  m->set_fold_timing(tensor_core.fold_timing == FoldTiming::FullArray ? pb::FULL_ARRAY : pb::USED_EXTENT);
}

VectorUnitConfig to_typed(const pb::VectorUnitConfig& m) {
  VectorUnitConfig vector_unit;
  vector_unit.lanes = m.lanes();
  vector_unit.default_cost = to_typed(m.default_cost());
  vector_unit.op_costs.assign(256, vector_unit.default_cost);
  bool expsum_listed = false;
  for (const pb::VectorOpCost& cost : m.op_costs()) {
    const isa::InstructionSpec* spec = isa::find_instruction(cost.op());
    vector_unit.op_costs[static_cast<uint8_t>(spec->opcode)] = to_typed(cost);
    expsum_listed |= spec->opcode == isa::Opcode::V_EXPSUM;
  }
  // v.expsum is v.exp's pass with the subtraction folded in and the sum from the reduction tree: unless
  // listed, v.exp's cycles per vector and the two latencies (chip_config.proto, VectorOpCost).
  if (!expsum_listed) {
    const VectorOpCost exp = vector_unit.cost(isa::Opcode::V_EXP), rsum = vector_unit.cost(isa::Opcode::V_RSUM);
    vector_unit.op_costs[static_cast<uint8_t>(isa::Opcode::V_EXPSUM)] = {exp.latency_cycles + rsum.latency_cycles, exp.cycles_per_vector};
  }
  return vector_unit;
}

// Lists every vector instruction, so the printed table is the effective one.
void to_proto(const VectorUnitConfig& vector_unit, pb::VectorUnitConfig* m) {
  m->set_lanes(vector_unit.lanes);
  to_proto(vector_unit.default_cost, m->mutable_default_cost());
  for (const isa::InstructionSpec& spec : isa::instruction_table()) {
    if (spec.engine != isa::Engine::Vector) continue;
    pb::VectorOpCost* cost = m->add_op_costs();
    cost->set_op(spec.mnemonic);
    to_proto(vector_unit.cost(spec.opcode), cost);
  }
}

CoreConfig to_typed(const pb::CoreConfig& m) {
  CoreConfig core;
  core.control = {m.control().issue_cycles(), m.control().branch_taken_cycles(), m.control().queue_depth()};
  core.tensor_core = to_typed(m.tensor_core());
  core.vector_unit = to_typed(m.vector_unit());
  core.scratchpad = to_typed(m.scratchpad());
  core.accumulator = to_typed(m.accumulator());
  const pb::DmaConfig& dma = m.dma();
  core.dma = {dma.channels(), dma.descriptor_cycles(), dma.request_bytes(), dma.max_outstanding_requests(),
              dma.step_bytes(), to_typed(dma.timing())};
  return core;
}

void to_proto(const CoreConfig& core, pb::CoreConfig* m) {
  pb::ControlUnitConfig* control = m->mutable_control();
  control->set_issue_cycles(core.control.issue_cycles);
  control->set_branch_taken_cycles(core.control.branch_taken_cycles);
  control->set_queue_depth(core.control.queue_depth);
  to_proto(core.tensor_core, m->mutable_tensor_core());
  to_proto(core.vector_unit, m->mutable_vector_unit());
  to_proto(core.scratchpad, m->mutable_scratchpad());
  to_proto(core.accumulator, m->mutable_accumulator());
  pb::DmaConfig* dma = m->mutable_dma();
  dma->set_channels(core.dma.channels);
  dma->set_descriptor_cycles(core.dma.descriptor_cycles);
  dma->set_request_bytes(core.dma.request_bytes);
  dma->set_max_outstanding_requests(core.dma.max_outstanding_requests);
  dma->set_step_bytes(core.dma.step_bytes);
  dma->set_timing(to_proto(core.dma.timing));
}

DramConfig to_typed(const pb::DramConfig& m) {
  DramConfig dram;
  dram.size_bytes = m.size_bytes();
  dram.channels = m.channels();
  dram.bytes_per_cycle_per_channel = m.bytes_per_cycle_per_channel();
  dram.banks_per_channel = m.banks_per_channel();
  dram.row_bytes = m.row_bytes();
  dram.interleave_bytes = m.interleave_bytes();
  dram.row_hit_cycles = m.row_hit_cycles();
  dram.row_closed_cycles = m.row_closed_cycles();
  dram.row_conflict_cycles = m.row_conflict_cycles();
  dram.refresh_interval_cycles = m.refresh_interval_cycles();
  dram.refresh_cycles = m.refresh_cycles();
  for (const pb::MeshPosition& port : m.ports()) dram.ports.push_back(to_typed(port));
  dram.address_map = m.address_map() == pb::HASHED ? DramAddressMap::Hashed : DramAddressMap::Interleaved;
  dram.bank_map = m.bank_map() == pb::XOR ? DramBankMap::Xor : DramBankMap::RowInterleaved;
  switch (m.type()) {
    case pb::HBM3: dram.type = DramType::Hbm3; break;
    case pb::LPDDR5X: dram.type = DramType::Lpddr5x; break;
    case pb::DDR5: dram.type = DramType::Ddr5; break;
    default: dram.type = DramType::Hbm2e; break;
  }
  return dram;
}

void to_proto(const DramConfig& dram, pb::DramConfig* m) {
  m->set_size_bytes(dram.size_bytes);
  m->set_channels(dram.channels);
  m->set_bytes_per_cycle_per_channel(dram.bytes_per_cycle_per_channel);
  m->set_banks_per_channel(dram.banks_per_channel);
  m->set_row_bytes(dram.row_bytes);
  m->set_interleave_bytes(dram.interleave_bytes);
  m->set_row_hit_cycles(dram.row_hit_cycles);
  m->set_row_closed_cycles(dram.row_closed_cycles);
  m->set_row_conflict_cycles(dram.row_conflict_cycles);
  m->set_refresh_interval_cycles(dram.refresh_interval_cycles);
  m->set_refresh_cycles(dram.refresh_cycles);
  for (const MeshPosition& port : dram.ports) to_proto(port, m->add_ports());
  m->set_address_map(dram.address_map == DramAddressMap::Hashed ? pb::HASHED : pb::INTERLEAVED);
  m->set_bank_map(dram.bank_map == DramBankMap::Xor ? pb::XOR : pb::ROW_INTERLEAVED);
  constexpr pb::DramType kTypes[] = {pb::HBM2E, pb::HBM3, pb::LPDDR5X, pb::DDR5};
  m->set_type(kTypes[static_cast<size_t>(dram.type)]);
}

}  // namespace

ChipConfig to_typed(const pb::ChipConfig& m) {
  ChipConfig config;
  config.name = m.name();
  config.clock_mhz = m.clock_mhz();
  config.num_cores = m.num_cores();
  config.core = to_typed(m.core());
  config.noc = {m.noc().mesh_cols(), m.noc().mesh_rows(), m.noc().link_bytes_per_cycle(),
                m.noc().router_latency_cycles()};
  config.dram = to_typed(m.dram());
  config.host_link = {m.host_link().bytes_per_cycle(), m.host_link().latency_cycles(), to_typed(m.host_link().port())};
  config.command_processor = {m.command_processor().packet_cycles(), m.command_processor().launch_cycles(),
                              m.command_processor().num_queues()};
  config.simulation = {m.simulation().watchdog_cycles(), m.simulation().counter_window_cycles(), m.simulation().quantum_cycles()};
  config.technology.process_nm = m.technology().process_nm();
  config.technology.voltage_mv = m.technology().voltage_mv();
  for (const pb::ActionEnergy& energy : m.technology().action_energy())
    config.technology.action_energy_fj.emplace_back(energy.action(), energy.femtojoules());
  return config;
}

pb::ChipConfig to_proto(const ChipConfig& config) {
  pb::ChipConfig m;
  m.set_name(config.name);
  m.set_clock_mhz(config.clock_mhz);
  m.set_num_cores(config.num_cores);
  to_proto(config.core, m.mutable_core());
  pb::NocConfig* noc = m.mutable_noc();
  noc->set_mesh_cols(config.noc.mesh_cols);
  noc->set_mesh_rows(config.noc.mesh_rows);
  noc->set_link_bytes_per_cycle(config.noc.link_bytes_per_cycle);
  noc->set_router_latency_cycles(config.noc.router_latency_cycles);
  to_proto(config.dram, m.mutable_dram());
  pb::HostLinkConfig* host_link = m.mutable_host_link();
  host_link->set_bytes_per_cycle(config.host_link.bytes_per_cycle);
  host_link->set_latency_cycles(config.host_link.latency_cycles);
  to_proto(config.host_link.port, host_link->mutable_port());
  pb::CommandProcessorConfig* command_processor = m.mutable_command_processor();
  command_processor->set_packet_cycles(config.command_processor.packet_cycles);
  command_processor->set_launch_cycles(config.command_processor.launch_cycles);
  command_processor->set_num_queues(config.command_processor.num_queues);
  pb::SimulationConfig* simulation = m.mutable_simulation();
  simulation->set_watchdog_cycles(config.simulation.watchdog_cycles);
  simulation->set_counter_window_cycles(config.simulation.counter_window_cycles);
  simulation->set_quantum_cycles(config.simulation.quantum_cycles);
  pb::TechnologyConfig* technology = m.mutable_technology();
  technology->set_process_nm(config.technology.process_nm);
  technology->set_voltage_mv(config.technology.voltage_mv);
  for (const auto& [action, femtojoules] : config.technology.action_energy_fj) {
    pb::ActionEnergy* energy = technology->add_action_energy();
    energy->set_action(action);
    energy->set_femtojoules(femtojoules);
  }
  return m;
}

}  // namespace npu::sim::config_detail
