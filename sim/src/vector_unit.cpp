#include "vector_unit.h"

#include <algorithm>
#include <vector>

#include "chip_trace.h"
#include "functional/kernels.h"
#include "npusim/isa/dtype.h"
#include "npusim/sim/energy.h"

namespace npu::sim {
namespace {

using isa::Opcode;

bool is_unary(Opcode op) { return op >= Opcode::V_MOV && op <= Opcode::V_ERF; }
bool is_binary(Opcode op) { return functional::is_vector_binary(op); }
bool is_comparison(Opcode op) { return functional::is_vector_comparison(op); }
bool is_reduction(Opcode op) { return op >= Opcode::V_RSUM && op <= Opcode::V_ARGMIN; }

struct Operand {
  uint64_t address;
  uint64_t bytes;
  unsigned align;
  bool is_write;
};

}  // namespace

VectorUnit::VectorUnit(sc_core::sc_module_name name, ChipContext& context, unsigned core, Semaphores& semaphores, EngineStats& stats,
                       unsigned engine_index, LocalMemory& local, CoreStats& core_stats)
    : Engine(name, context, core, "vector unit", semaphores, stats, engine_index), local_(local), core_stats_(core_stats) {}

VectorUnit::Outcome VectorUnit::execute(const Command& command, uint64_t start) {
  const Opcode op = command.opcode;
  const uint64_t rows = uoperand(command, "rows"), cols = uoperand(command, "cols");
  constexpr uint64_t kMaxElements = uint64_t{1} << 32;
  if (rows > kMaxElements || cols > kMaxElements || (rows && cols > kMaxElements / rows))
    return {0, fault_for(command, FaultKind::ExecutionError, "vector tile of more than 2^32 elements"), {}};
  const uint64_t elements = rows * cols;
  const auto dtype = op == Opcode::V_IOTA ? isa::DType::I32 : static_cast<isa::DType>(operand(command, "dt"));
  const unsigned size = isa::dtype_size_bytes(dtype);
  const uint64_t dst = uoperand(command, "dst");
  // (Checked here, not only by the kernel, so that a timing-only run faults as the functional one does.)
  if (functional::is_vector_bitwise(op) && isa::dtype_is_float(dtype))
    return {0, fault_for(command, FaultKind::InvalidInstruction, "needs an integer dtype, got " + std::string(isa::dtype_name(dtype))), {}};
  if (op == Opcode::V_EXPSUM && !isa::dtype_is_float(dtype))
    return {0, fault_for(command, FaultKind::InvalidInstruction, "needs a float dtype, got " + std::string(isa::dtype_name(dtype))), {}};

  std::vector<Operand> operands;
  if (is_unary(op) || op == Opcode::V_TRANS) {
    operands = std::vector<Operand>{{uoperand(command, "src"), elements * size, size, false}, {dst, elements * size, size, true}};
  } else if (is_binary(op)) {
    const auto bcast = static_cast<isa::Bcast>(operand(command, "bc"));
    const unsigned out_size = is_comparison(op) ? 1 : size;
    operands = std::vector<Operand>{{uoperand(command, "a"), elements * size, size, false},
                {uoperand(command, "b"), functional::bcast_operand_elements(bcast, rows, cols) * size, size, false},
                {dst, elements * out_size, out_size, true}};
  } else if (op == Opcode::V_FMA) {
    const auto bcast = static_cast<isa::Bcast>(operand(command, "bc"));
    operands = std::vector<Operand>{{uoperand(command, "a"), elements * size, size, false},
                {uoperand(command, "b"), functional::bcast_operand_elements(bcast, rows, cols) * size, size, false},
                {uoperand(command, "c"), elements * size, size, false},
                {dst, elements * size, size, true}};
  } else if (op == Opcode::V_EXPSUM) {
    operands = std::vector<Operand>{{uoperand(command, "src"), elements * 4, 4, false}, {uoperand(command, "m"), rows * 4, 4, false},
                {uoperand(command, "sum"), rows * 4, 4, true}, {dst, elements * size, size, true}};
  } else if (op == Opcode::V_SEL) {
    operands = std::vector<Operand>{{uoperand(command, "cond"), elements, 1, false},
                {uoperand(command, "a"), elements * size, size, false},
                {uoperand(command, "b"), elements * size, size, false},
                {dst, elements * size, size, true}};
  } else if (op == Opcode::V_FILL || op == Opcode::V_IOTA || op == Opcode::V_RAND) {
    operands = std::vector<Operand>{{dst, elements * size, size, true}};
  } else if (op == Opcode::V_CVT) {
    const unsigned src_size = isa::dtype_size_bytes(static_cast<isa::DType>(operand(command, "st")));
    operands = std::vector<Operand>{{uoperand(command, "src"), elements * src_size, src_size, false}, {dst, elements * size, size, true}};
  } else if (is_reduction(op)) {
    const auto axis = static_cast<isa::Axis>(operand(command, "ax"));
    const bool is_arg = op == Opcode::V_ARGMAX || op == Opcode::V_ARGMIN;
    const unsigned out_size = is_arg ? 4 : size;
    operands = std::vector<Operand>{{uoperand(command, "src"), elements * size, size, false},
                {dst, functional::reduce_output_elements(axis, rows, cols) * out_size, out_size, true}};
  } else if (op == Opcode::V_GATHER) {
    operands = std::vector<Operand>{{uoperand(command, "idx"), rows * 4, 4, false}, {dst, elements * size, size, true}};
  } else {
    return {0, fault_for(command, FaultKind::InvalidInstruction, "not a vector instruction"), {}};
  }
  for (const Operand& operand : operands) {
    if (auto problem = local_.check(operand.address, operand.bytes, operand.align)) return {0, fault_from(command, *problem), {}};
  }
  uint64_t gather_source_rows = 0;
  if (op == Opcode::V_GATHER) {
    const uint64_t src = uoperand(command, "src");
    if (auto problem = local_.check(src, 0, size)) return {0, fault_from(command, *problem), {}};
    // The source table runs to the end of its memory; indices are checked against that.
    gather_source_rows = cols == 0 ? 0 : local_.bytes_until_end(src) / (cols * size);
    operands.push_back({src, elements * size, size, false});
  }
  for (const Operand& operand : operands) local_.note_use(operand.address, operand.bytes);

  const VectorUnitConfig& config = context_.config.core.vector_unit;
  const VectorOpCost& cost = config.cost(op);
  const uint64_t streaming_cycles = ceil_div(elements, config.lanes) * cost.cycles_per_vector;
  uint64_t end = start + (elements == 0 ? 0 : cost.latency_cycles + streaming_cycles);
  // The operands stream through the banks a vector at a time, side by side, sharing them with DMA
  // (which they slow; they are not slowed by it: docs/chip.md).
  for (const Operand& operand : operands)
    end = std::max(end, local_.stream(operand.address, operand.bytes, operand.is_write, start, streaming_cycles));
  core_stats_.vector_elements += elements;
  last_elements_ = elements;
  core_stats_.vector_elements_by_class[static_cast<size_t>(vector_op_class(op))] += elements;
  if (context_.trace) context_.trace->actions(vector_action(vector_op_class(op)), start, end, elements);
  if (op == Opcode::V_FMA) {  // its add, priced as one
    core_stats_.vector_elements_by_class[static_cast<size_t>(VectorOpClass::Simple)] += elements;
    if (context_.trace) context_.trace->actions(vector_action(VectorOpClass::Simple), start, end, elements);
  }

  if (context_.functional && op == Opcode::V_CVT && local_.in_background(operands[0].address, operands[0].bytes)) {
    // Converting results still being computed in the background (the tensor core's): the conversion
    // joins them there instead of waiting for them (it cannot fault on the values).
    const auto src_dtype = static_cast<isa::DType>(operand(command, "st"));
    const uint8_t* in = local_.data(operands[0].address);
    uint8_t* out = local_.data(dst);
    local_.run_in_background({{operands[0].address, operands[0].bytes}, {dst, operands[1].bytes}},
                             [=] { functional::vector_convert(dtype, src_dtype, out, in, rows, cols); });
    return {end, std::nullopt, {}};
  }

  // Timing-only runs skip the float arithmetic (and so cannot check gather indices computed
  // from floats). Integer results are computed all the same: they are cheap and rare, and they
  // are what index arithmetic makes (i32 offsets, u8 masks of i32 comparisons), so that a
  // dma.gather whose indices the chip computed from integers reads the functional run's rows
  // (unless the run moves no data at all: no value can change an address, ChipContext::moves_data).
  if (context_.functional || (context_.moves_data && !isa::dtype_is_float(dtype))) {
    functional::KernelError error;
    for (const Operand& operand : operands) local_.settle(operand.address, operand.bytes);
    uint8_t* out = local_.data(dst);
    const auto in = [&](const char* name) { return local_.data(uoperand(command, name)); };
    if (is_unary(op)) {
      error = functional::vector_unary(op, dtype, out, in("src"), rows, cols);
    } else if (is_binary(op)) {
      error = functional::vector_binary(op, dtype, static_cast<isa::Bcast>(operand(command, "bc")), out, in("a"), in("b"), rows, cols);
    } else if (op == Opcode::V_FMA) {
      functional::vector_fma(dtype, static_cast<isa::Bcast>(operand(command, "bc")), out, in("a"), in("b"), in("c"), rows, cols);
    } else if (op == Opcode::V_EXPSUM) {
      error = functional::vector_expsum(dtype, out, in("src"), in("m"), local_.data(uoperand(command, "sum")), rows, cols);
    } else if (op == Opcode::V_SEL) {
      functional::vector_select(dtype, out, in("cond"), in("a"), in("b"), rows, cols);
    } else if (op == Opcode::V_FILL) {
      functional::vector_fill(dtype, out, uoperand(command, "val"), rows, cols);
    } else if (op == Opcode::V_CVT) {
      functional::vector_convert(dtype, static_cast<isa::DType>(operand(command, "st")), out, in("src"), rows, cols);
    } else if (op == Opcode::V_IOTA) {
      functional::vector_iota(out, operand(command, "start"), rows, cols);
    } else if (op == Opcode::V_RAND) {
      functional::vector_rand(dtype, out, uoperand(command, "seed"), uoperand(command, "ctr"), rows, cols);
    } else if (is_reduction(op)) {
      error = functional::vector_reduce(op, dtype, static_cast<isa::Axis>(operand(command, "ax")), out, in("src"), rows, cols);
    } else if (op == Opcode::V_TRANS) {
      functional::vector_transpose(dtype, out, in("src"), rows, cols);
    } else if (op == Opcode::V_GATHER) {
      error = functional::vector_gather(dtype, out, in("src"), gather_source_rows, in("idx"), rows, cols);
    }
    // A timing-only run computes integer results from whatever the skipped float work left in memory
    // (an index converted from a float, say): what that data makes it do is no fault of the program's.
    if (error && context_.functional) return {0, fault_for(command, FaultKind::ExecutionError, *error), {}};
  }
  return {end, std::nullopt, {}};
}

}  // namespace npu::sim
