#include "tensor_core.h"

#include <algorithm>

#include "background_work.h"
#include "chip_trace.h"
#include "functional/kernels.h"
#include "npusim/isa/dtype.h"
#include "npusim/sim/energy.h"

namespace npu::sim {

SystolicTiming systolic_timing(const TensorCoreConfig& config, uint64_t m, uint64_t n, uint64_t k) {
  if (m == 0 || n == 0 || k == 0) return {};
  const uint64_t rows = config.rows, cols = config.cols;
  const bool weight_stationary = config.dataflow == Dataflow::WeightStationary;
  // The extent that folds over the array's rows: k (weights pinned) or m (outputs pinned).
  uint64_t& row_extent = weight_stationary ? k : m;
  if (config.fold_timing == FoldTiming::FullArray) {
    // Every fold costs a whole array's: pad the extents that fold over the array's rows and columns.
    row_extent = ceil_div(row_extent, rows) * rows;
    n = ceil_div(n, cols) * cols;
  }
  // The arrays share the folds (each array pins other weights, or owns other output blocks, and the
  // rows of A reach all of them); the slowest array's share times the tile.
  const TensorCoreConfig::ArrayShare share = config.array_share(n, row_extent);
  n = share.n, row_extent = share.row_extent;
  if (weight_stationary) {
    // Each fold pins a (<= rows) x (<= cols) block of B; the m rows of A stream
    // through: 2*kr + nc + m - 2 cycles per fold (SCALE-Sim). Summed over folds:
    const uint64_t k_folds = ceil_div(k, rows), n_folds = ceil_div(n, cols), folds = k_folds * n_folds;
    if (!config.weight_double_buffering) return {0, 2 * k * n_folds + n * k_folds + (m - 2) * folds, 0, 0};
    // Double-buffered weights: the first block loads (kr cycles), then each fold
    // streams its m rows while the next fold's kr rows of weights load, so it
    // takes max(m, next kr); the last fold streams m and drains (kr + nc - 2).
    // Folds go k-inner: every column fold's last k fold holds the k % rows rest.
    const uint64_t rest = k % rows, full_k_folds = k / rows;
    const uint64_t first_kr = full_k_folds > 0 ? rows : rest;
    const uint64_t last_kr = rest > 0 ? rest : rows, last_nc = n - (n_folds - 1) * cols;
    // The kr of folds 1 .. folds-1 (each fold's successor): rows, or the rest.
    const uint64_t rest_folds = rest > 0 ? n_folds - (full_k_folds > 0 ? 0 : 1) : 0;
    const uint64_t full_folds = folds - 1 - rest_folds;
    return {first_kr, full_folds * std::max(m, rows) + rest_folds * std::max(m, rest) + m, last_kr + last_nc - 2, m};
  }
  // Output stationary: each fold owns a (<= rows) x (<= cols) block of C and
  // streams k: 2*mr + nc + k - 2 cycles per fold.
  const uint64_t m_folds = ceil_div(m, rows), n_folds = ceil_div(n, cols), folds = m_folds * n_folds;
  return {0, 2 * m * n_folds + n * m_folds + (k - 2) * folds, 0, 0};
}

uint64_t systolic_cycles(const TensorCoreConfig& config, uint64_t m, uint64_t n, uint64_t k) {
  const SystolicTiming timing = systolic_timing(config, m, n, k);
  return timing.preload_cycles + timing.stream_cycles + timing.drain_cycles;
}

TensorCore::TensorCore(sc_core::sc_module_name name, ChipContext& context, unsigned core, Semaphores& semaphores, EngineStats& stats,
                       unsigned engine_index, LocalMemory& local, CoreStats& core_stats)
    : Engine(name, context, core, "tensor core", semaphores, stats, engine_index), local_(local), core_stats_(core_stats) {}

TensorCore::Outcome TensorCore::execute(const Command& command, uint64_t start) {
  const auto dtype = static_cast<isa::DType>(operand(command, "dt"));
  const auto flags = static_cast<uint32_t>(operand(command, "fl"));
  const uint64_t dst = uoperand(command, "dst"), a = uoperand(command, "a"), b = uoperand(command, "b");
  const uint64_t m = uoperand(command, "m"), n = uoperand(command, "n"), k = uoperand(command, "k");
  const TensorCoreConfig& config = context_.config.core.tensor_core;
  if (std::find(config.input_dtypes.begin(), config.input_dtypes.end(), dtype) == config.input_dtypes.end())
    return {0, fault_for(command, FaultKind::InvalidInstruction,
                         "the tensor core of this chip does not take " + std::string(isa::dtype_name(dtype)) + " inputs"),
            {}};
  constexpr uint64_t kMaxExtent = uint64_t{1} << 20;
  if (m > kMaxExtent || n > kMaxExtent || k > kMaxExtent)
    return {0, fault_for(command, FaultKind::ExecutionError, "tc.mm extents must be at most 2^20"), {}};
  if (dst < isa::kAccumulatorBase) {
    FaultRecord fault = fault_for(command, FaultKind::AddressOutOfRange, "tc.mm writes the accumulator; dst is a scratchpad address");
    fault.has_address = true;
    fault.address = dst;
    return {0, fault, {}};
  }
  const unsigned size = isa::dtype_size_bytes(dtype);
  const struct {
    uint64_t address, bytes;
    unsigned align;
  } operands[] = {{a, m * k * size, size}, {b, k * n * size, size}, {dst, m * n * 4, 4}};
  for (const auto& op : operands) {
    if (auto problem = local_.check(op.address, op.bytes, op.align)) return {0, fault_from(command, *problem), {}};
  }
  for (const auto& op : operands) local_.note_use(op.address, op.bytes);

  // Operand traffic: in weight-stationary, B is read once and A once per
  // column fold; in output-stationary, A once per column fold and B once per row fold.
  const uint64_t n_folds = ceil_div(n, config.cols), m_folds = ceil_div(m, config.rows);
  const uint64_t a_traffic = m * k * size * n_folds;
  const uint64_t b_traffic = k * n * size * (config.dataflow == Dataflow::WeightStationary ? 1 : m_folds);
  const uint64_t c_bytes = m * n * 4;
  // Back to back with the previous tc.mm (no gap: its operands were ready), this one's first weights
  // loaded into the second weight buffer while the previous one's last fold streamed, and its rows enter
  // the array behind that fold's, while the previous results drain: the engine is free again when the
  // last row has entered, and the results are complete a drain later (a signal waits for them).
  const SystolicTiming timing = systolic_timing(config, m, n, k);
  const uint64_t hidden_preload = start == stream_free_cycle_ ? std::min(timing.preload_cycles, last_fold_rows_) : 0;
  const uint64_t duration = timing.preload_cycles - hidden_preload + timing.stream_cycles;
  // A, B and C stream through their banks over the tile's time, sharing them with DMA.
  uint64_t end = start + duration;
  end = std::max(end, local_.stream(a, a_traffic, false, start, duration));
  end = std::max(end, local_.stream(b, b_traffic, false, start, duration));
  if (flags & isa::kTcAcc) end = std::max(end, local_.stream(dst, c_bytes, false, start, duration));
  end = std::max(end, local_.stream(dst, c_bytes, true, start, duration));
  core_stats_.macs += m * n * k;
  last_macs_ = m * n * k;
  core_stats_.macs_by_dtype[static_cast<size_t>(dtype)] += m * n * k;
  if (context_.trace) context_.trace->actions(mac_action(dtype), start, end, m * n * k);
  stream_free_cycle_ = end;
  last_fold_rows_ = timing.last_fold_rows;
  results_ready_cycle_ = std::max(results_ready_cycle_, end + timing.drain_cycles);

  if (context_.functional) {
    // The operands are read now; the products land in the accumulator in the background, before anything touches it.
    std::shared_ptr<functional::PackedMatmul> packed;
    if (auto error = functional::pack_matmul(dtype, flags, local_.data(a, m * k * size), local_.data(b, k * n * size), m, n, k, &packed))
      return {0, fault_for(command, FaultKind::ExecutionError, *error), {}};
    uint8_t* acc = local_.data(dst);
    // Where the background thread is behind (its queue full), this thread does the products instead of
    // waiting for room, and hands over only their addition to the accumulator: the two share the work.
    if (context_.background && context_.background->full()) functional::sum_packed(*packed);
    local_.run_in_background({{dst, c_bytes}}, [packed, acc] { functional::multiply_packed(*packed, acc); });
  }
  // (The span's name only where there is a trace: building it took as long as timing the tile.)
  if (!context_.trace) return {end, std::nullopt, {}};
  return {end, std::nullopt, "tc.mm " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k)};
}

}  // namespace npu::sim
