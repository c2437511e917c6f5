// Compiled kernels on the simulated chip, in timing-only mode: GEMM
// utilization (achieved MACs per cycle over the chip's peak) and elementwise
// bandwidth (bytes moved per cycle over the DRAM peak), from the cycles
// between two events around each launch.
//
// Targets (issue: compiler): GEMM on base, bf16, 512^3, 1024^3 and
// 4096 x 4096 x 1024: at least 85% for the largest. The roofline each
// shape is held to is printed with it: on `base` (65,536 MACs/cycle, DRAM
// 128 B/cycle) a GEMM needs 512 MACs per DRAM byte to be compute-bound.
// The largest also runs in each of the matmul's two schedules (every core
// loading its own tiles; B shared over the NoC). A shape whose MACs alone
// would take more than a quarter of the watchdog's limit is skipped (the
// largest on tiny).
//
// Softmax and layer norm, 4096 x 4096 in bf16 and f32: cycles against the
// DRAM-bandwidth bound (x read and y written once at the DRAM peak); target
// (issue: compiler) at least 80%. And softmax over rows longer than the
// scratchpad (16 x 1 Mi f32), walked in chunks. Last, the backward kernels of
// softmax and layer norm (4096 x 4096 f32) against their bound (two reads, one write).
//
// Attention (issue: fused attention): the fused flash-attention kernel at
// sequence length 2048 (4 heads of 64, bf16, and last f32) against the same attention as
// matmul (q k^T), softmax, matmul (p v) through DRAM: cycles and DRAM bytes
// (the chip's own counters) of each.
//
// Usage: build/bin/npu-bench-compiler [--config base] [--gemm MxNxK[:f32][:bt]]... [--trace FILE]
// With --gemm, only the GEMMs given, each as the compiler chooses and in each
// schedule, with the plans: for tuning the matmul's choice on other shapes.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "npusim/compiler/compiler.h"
#include "npusim/driver/device.h"
#include "npusim/driver/program.h"
#include "npusim/sim/config_loader.h"
#include "npusim/sim/simulator.h"
#include "npusim/sim/systemc_main.h"
#include "simulator_link.h"

namespace {

using npu::compiler::OpDesc;
using npu::compiler::OpKind;
using npu::compiler::TensorDesc;

// Every buffer starts at a multiple of 1 MiB, a whole period of the DRAM address map on the presets
// (channels x banks x row bytes: 128 KiB on base, 1 MiB on large), so each row of a tensor falls in
// the same channel and bank whatever was measured before it. Where buffers lie matters: as the
// allocator's history moved them, 4096 x 4096 layer norm in f32 took from 1.26 M to 1.36 M cycles
// (84% to 77% of its bound), softmax 1.16 M to 1.19 M (the kernels of that time).
constexpr uint64_t kBufferAlignment = 1 << 20;

struct Run {
  uint64_t cycles;
  double host_seconds;
  std::string plan;
};

Run run(npu::Device& device, const std::shared_ptr<npu::Device>& shared, npu::compiler::Compiler& compiler, const OpDesc& op) {
  const auto kernel = compiler.compile(op);
  const npu::Program program = npu::Program::load(shared, kernel->program);
  std::vector<npu::Buffer> buffers;
  std::vector<npu::Binding> bindings;
  for (size_t i = 0; i < op.inputs.size(); ++i)
    buffers.push_back(device.allocate(uint64_t(op.inputs[i].storage_extent()) * npu::isa::dtype_size_bytes(op.inputs[i].dtype), kBufferAlignment));
  buffers.push_back(device.allocate(uint64_t(op.output.storage_extent()) * npu::isa::dtype_size_bytes(op.output.dtype), kBufferAlignment));
  for (size_t i = 0; i < op.inputs.size(); ++i) bindings.push_back({"in" + std::to_string(i), &buffers[i]});
  bindings.push_back({"out", &buffers.back()});
  npu::Queue queue = device.queue(0);
  const auto start = std::chrono::steady_clock::now();
  const npu::Event before = queue.record_event();
  queue.launch(program, bindings, kernel->core_mask());
  const npu::Event after = queue.record_event();
  after.fence().wait(std::chrono::seconds(100));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {npu::Event::elapsed_cycles(before, after), seconds, kernel->plan};
}

// The chip's counters (cumulative since it started).
npu::sim::ChipStats chip_stats(npu::Device& device) {
  npu::sim::ChipStats stats;
  static_cast<npu::SimulatorLink&>(device.link()).call([&](npu::sim::Simulator& chip) { stats = chip.stats(); });
  return stats;
}

// DRAM bytes read and written so far.
uint64_t dram_bytes(npu::Device& device) {
  uint64_t bytes = 0;
  for (const npu::sim::DramChannelStats& channel : chip_stats(device).dram_channels) bytes += channel.read_bytes + channel.write_bytes;
  return bytes;
}

// Between two snapshots: each DRAM channel's data bus busy, its row hits, and the tensor cores and vector
// units busy, as shares of the cycles between them.
void print_utilization(const npu::sim::ChipStats& before, const npu::sim::ChipStats& after, uint64_t cycles) {
  std::printf("  DRAM buses busy");
  uint64_t hits = 0, accesses = 0;
  for (size_t c = 0; c < after.dram_channels.size(); ++c) {
    const npu::sim::DramChannelStats &a = after.dram_channels[c], &b = before.dram_channels[c];
    std::printf(" %.0f%%", 100.0 * double(a.busy_cycles - b.busy_cycles) / double(cycles));
    hits += a.row_hits - b.row_hits;
    accesses += a.row_hits + a.row_closed + a.row_conflicts - b.row_hits - b.row_closed - b.row_conflicts;
  }
  std::printf(" (row hits %.0f%%); busy per core, tensor core / vector unit:", accesses ? 100.0 * double(hits) / double(accesses) : 0.0);
  for (size_t core = 0; core < after.cores.size(); ++core) {
    const auto& engines = after.cores[core].engines;
    const auto busy = [&](size_t from_end) {
      return 100.0 * double(engines[engines.size() - from_end].busy_cycles - before.cores[core].engines[engines.size() - from_end].busy_cycles) / double(cycles);
    };
    std::printf(" %.0f/%.0f%%", busy(2), busy(1));
  }
  std::printf("\n");
}

// A GEMM asked for with --gemm MxNxK[:f32][:bt].
struct GemmRequest {
  int64_t m = 0, n = 0, k = 0;
  npu::isa::DType dtype = npu::isa::DType::BF16;
  bool b_transposed = false;
};

std::optional<GemmRequest> parse_gemm(const std::string& text) {
  GemmRequest g;
  std::string rest;
  {
    std::istringstream in(text);
    char x1 = 0, x2 = 0;
    if (!(in >> g.m >> x1 >> g.n >> x2 >> g.k) || x1 != 'x' || x2 != 'x' || g.m <= 0 || g.n <= 0 || g.k <= 0) return std::nullopt;
    std::getline(in, rest);
  }
  for (size_t at = 0; at < rest.size();) {
    if (rest[at] != ':') return std::nullopt;
    const size_t next = rest.find(':', at + 1);
    const std::string flag = rest.substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1);
    if (flag == "f32") g.dtype = npu::isa::DType::F32;
    else if (flag == "bt") g.b_transposed = true;
    else return std::nullopt;
    at = next == std::string::npos ? rest.size() : next;
  }
  return g;
}

// Ops run back to back on one queue; each names its buffers (inputs, then the output) by index.
struct Step {
  OpDesc op;
  std::vector<size_t> buffers;
};

struct Measured {
  uint64_t cycles;
  uint64_t dram_bytes;
};

Measured run_steps(npu::Device& device, const std::shared_ptr<npu::Device>& shared, npu::compiler::Compiler& compiler,
                   const std::vector<uint64_t>& buffer_bytes, const std::vector<Step>& steps) {
  std::vector<npu::Buffer> buffers;
  for (const uint64_t bytes : buffer_bytes) buffers.push_back(device.allocate(bytes, kBufferAlignment));
  std::vector<npu::Program> programs;  // loaded before counting
  std::vector<uint64_t> masks;
  for (const Step& step : steps) {
    const auto kernel = compiler.compile(step.op);
    programs.push_back(npu::Program::load(shared, kernel->program));
    masks.push_back(kernel->core_mask());
  }
  npu::Queue queue = device.queue(0);
  queue.synchronize();
  const uint64_t bytes_before = dram_bytes(device);
  const npu::Event before = queue.record_event();
  for (size_t n = 0; n < steps.size(); ++n) {
    std::vector<npu::Binding> bindings;
    for (size_t i = 0; i + 1 < steps[n].buffers.size(); ++i) bindings.push_back({"in" + std::to_string(i), &buffers[steps[n].buffers[i]]});
    bindings.push_back({"out", &buffers[steps[n].buffers.back()]});
    queue.launch(programs[n], bindings, masks[n]);
  }
  const npu::Event after = queue.record_event();
  after.fence().wait(std::chrono::seconds(100));
  return {npu::Event::elapsed_cycles(before, after), dram_bytes(device) - bytes_before};
}

}  // namespace

int sc_main(int argc, char* argv[]) {
  namespace po = boost::program_options;
  std::string config, trace_path;
  std::vector<std::string> gemm_texts;
  po::options_description options("usage: npu-bench-compiler [options]");
  options.add_options()("help,h", "this text")(
      "config", po::value(&config)->default_value("base"), "chip preset (tiny, base, large, tpu_v4, tpu_v5e, tpu_v6e) or .pbtxt file")(
      "gemm", po::value(&gemm_texts)->composing(),
      "MxNxK[:f32][:bt]: instead of the benchmark, this GEMM (repeatable), bf16 unless :f32, B stored transposed with :bt; "
      "the compiler's choice and each schedule, with their plans")(
      "trace", po::value(&trace_path), "write the chip's trace of everything run (.pftrace or .json)");
  std::vector<GemmRequest> gemms;
  try {
    po::variables_map given;
    po::store(po::parse_command_line(argc, argv, options), given);
    if (given.count("help")) {
      std::cout << options;
      return 0;
    }
    po::notify(given);
    for (const std::string& text : gemm_texts) {
      const auto gemm = parse_gemm(text);
      if (!gemm) throw po::error("--gemm takes MxNxK[:f32][:bt] with positive sizes, got '" + text + "'");
      gemms.push_back(*gemm);
    }
  } catch (const po::error& e) {
    std::cerr << "npu-bench-compiler: " << e.what() << "\n" << options;
    return 2;
  }
  try {
    const npu::sim::ChipConfig chip = npu::sim::load_chip_config(config);
    npu::SimulatorLinkOptions link;
    link.config = config;
    link.functional = false;  // timing only: the same cycles, no arithmetic
    link.trace_path = trace_path;
    const auto device = npu::Device::open(std::make_unique<npu::SimulatorLink>(link));
    npu::compiler::Compiler compiler(chip);
    const double peak_macs = double(chip.num_cores) * double(chip.core.tensor_core.macs_per_cycle());
    const double dram_bytes_per_cycle = double(chip.dram.channels) * chip.dram.bytes_per_cycle_per_channel;
    std::printf("config %s: %u cores, peak %.0f MACs/cycle, DRAM %.0f B/cycle\n\n", config.c_str(), chip.num_cores, peak_macs,
                dram_bytes_per_cycle);
    // A GEMM whose MACs alone take more than a quarter of the watchdog's limit on this chip (the 4096
    // one on tiny) would not finish within it: skipped, and said so.
    const auto mac_cycles = [&](int64_t m, int64_t n, int64_t k) { return double(m) * n * k / peak_macs; };
    const auto fits_watchdog = [&](int64_t m, int64_t n, int64_t k) { return mac_cycles(m, n, k) <= double(chip.simulation.watchdog_cycles) / 4; };
    const auto too_long = [&](int64_t m, int64_t n, int64_t k) {
      if (fits_watchdog(m, n, k)) return false;
      const double cycles = mac_cycles(m, n, k);
      std::printf("GEMM %lldx%lldx%lld bf16: skipped, its MACs alone take %.0f cycles on this chip (watchdog: %llu)\n", (long long)m,
                  (long long)n, (long long)k, cycles, (unsigned long long)chip.simulation.watchdog_cycles);
      return true;
    };
    if (!gemms.empty()) {
      // Only the GEMMs asked for: the compiler's choice, then each schedule, with the plans.
      for (const GemmRequest& g : gemms) {
        std::printf("GEMM %lldx%lldx%lld %s%s:\n", (long long)g.m, (long long)g.n, (long long)g.k, std::string(npu::isa::dtype_name(g.dtype)).c_str(),
                    g.b_transposed ? ", B stored transposed" : "");
        for (const npu::compiler::MatmulSchedule schedule :
             {npu::compiler::MatmulSchedule::Auto, npu::compiler::MatmulSchedule::OwnTiles, npu::compiler::MatmulSchedule::SharedB}) {
          if (too_long(g.m, g.n, g.k)) break;
          TensorDesc b = TensorDesc::contiguous(g.dtype, {g.k, g.n});
          if (g.b_transposed) b.strides = {1, g.k};
          OpDesc op(OpKind::MATMUL, {TensorDesc::contiguous(g.dtype, {g.m, g.k}), b}, TensorDesc::contiguous(g.dtype, {g.m, g.n}));
          op.schedule = schedule;
          const Run r = run(*device, device, compiler, op);
          const char* name = schedule == npu::compiler::MatmulSchedule::Auto ? "compiler's choice" : schedule == npu::compiler::MatmulSchedule::OwnTiles ? "own tiles" : "B shared";
          std::printf("  %-17s %9llu cycles, %5.1f%% of peak MACs/cycle\n    %s", name, (unsigned long long)r.cycles,
                      100.0 * double(g.m) * double(g.n) * double(g.k) / (double(r.cycles) * peak_macs), r.plan.c_str());
        }
      }
      return 0;
    }
    const int64_t shapes[][3] = {{512, 512, 512}, {1024, 1024, 1024}, {4096, 4096, 1024}};
    for (const auto& s : shapes) {
      const int64_t m = s[0], n = s[1], k = s[2];
      if (too_long(m, n, k)) continue;
      const OpDesc op(OpKind::MATMUL,
                      {TensorDesc::contiguous(npu::isa::DType::BF16, {m, k}), TensorDesc::contiguous(npu::isa::DType::BF16, {k, n})},
                      TensorDesc::contiguous(npu::isa::DType::BF16, {m, n}));
      const npu::sim::ChipStats stats_before = chip_stats(*device);
      const uint64_t bytes_before = dram_bytes(*device);
      const Run r = run(*device, device, compiler, op);
      const double moved = double(dram_bytes(*device) - bytes_before);
      const npu::sim::ChipStats stats_after = chip_stats(*device);
      const double macs = double(m) * n * k;
      // The DRAM bound: every byte of A, B and C moved once at the DRAM peak.
      const double min_bytes = double(m * k + k * n + m * n) * 2;
      const double roofline = std::min(1.0, (macs / peak_macs > 0 ? (macs / peak_macs) / std::max(macs / peak_macs, min_bytes / dram_bytes_per_cycle) : 1));
      std::printf("GEMM %lldx%lldx%lld bf16: %llu cycles, %.1f%% of peak MACs/cycle (roofline with A, B, C read/written once: %.1f%%); host %.2f s\n  %s",
                  (long long)m, (long long)n, (long long)k, (unsigned long long)r.cycles, 100.0 * macs / (double(r.cycles) * peak_macs),
                  100.0 * roofline, r.host_seconds, r.plan.c_str());
      std::printf("  DRAM traffic %.1f MiB = %.2fx the minimum; at the DRAM peak it alone takes %.0f cycles (%.0f%% of the run)\n",
                  moved / 1048576.0, moved / min_bytes, moved / dram_bytes_per_cycle, 100.0 * moved / dram_bytes_per_cycle / double(r.cycles));
      print_utilization(stats_before, stats_after, r.cycles);
    }
    if (const int64_t m = 4096, n = 4096, k = 1024; fits_watchdog(m, n, k)) {  // (else skipped above)
      // The largest GEMM in each of the matmul's two schedules, whichever the compiler picked above.
      std::printf("GEMM %lldx%lldx%lld bf16 by schedule:", (long long)m, (long long)n, (long long)k);
      for (const npu::compiler::MatmulSchedule schedule : {npu::compiler::MatmulSchedule::OwnTiles, npu::compiler::MatmulSchedule::SharedB}) {
        OpDesc op(OpKind::MATMUL, {TensorDesc::contiguous(npu::isa::DType::BF16, {m, k}), TensorDesc::contiguous(npu::isa::DType::BF16, {k, n})},
                  TensorDesc::contiguous(npu::isa::DType::BF16, {m, n}));
        op.schedule = schedule;
        const Run r = run(*device, device, compiler, op);
        const bool shared = r.plan.find("B shared over the NoC") != std::string::npos;
        std::printf("  %s %llu cycles (%.1f%% of peak)", shared ? "B shared over the NoC" : "own tiles", (unsigned long long)r.cycles,
                    100.0 * double(m) * n * k / (double(r.cycles) * peak_macs));
        if (schedule == npu::compiler::MatmulSchedule::SharedB && !shared) std::printf(" (B sharing does not apply on this chip)");
      }
      std::printf("\n");
    }
    {
      const int64_t rows = 4096, cols = 4096;
      const OpDesc op(OpKind::ADD,
                      {TensorDesc::contiguous(npu::isa::DType::BF16, {rows, cols}), TensorDesc::contiguous(npu::isa::DType::BF16, {rows, cols})},
                      TensorDesc::contiguous(npu::isa::DType::BF16, {rows, cols}));
      const Run r = run(*device, device, compiler, op);
      const double bytes = double(rows) * cols * 2 * 3;
      std::printf("add %lldx%lld bf16: %llu cycles, %.1f B/cycle = %.1f%% of the DRAM peak; host %.2f s\n  %s", (long long)rows, (long long)cols,
                  (unsigned long long)r.cycles, bytes / double(r.cycles), 100.0 * bytes / double(r.cycles) / dram_bytes_per_cycle, r.host_seconds,
                  r.plan.c_str());
    }
    // Softmax and layer norm (target: at least 80% of the DRAM-bandwidth bound): the bound is reading x
    // and writing y once at the DRAM peak (the layer norm's weight and bias are one row each).
    for (const npu::isa::DType dtype : {npu::isa::DType::BF16, npu::isa::DType::F32}) {
      const int64_t rows = 4096, cols = 4096;
      const auto tensor = [&](std::vector<int64_t> shape) { return TensorDesc::contiguous(dtype, std::move(shape)); };
      const OpDesc softmax(OpKind::SOFTMAX, {tensor({rows, cols})}, tensor({rows, cols}));
      const OpDesc layer_norm(OpKind::LAYER_NORM, {tensor({rows, cols}), tensor({cols}), tensor({cols})}, tensor({rows, cols}));
      for (const OpDesc* op : {&softmax, &layer_norm}) {
        const Run r = run(*device, device, compiler, *op);
        const double bytes = double(rows) * cols * npu::isa::dtype_size_bytes(dtype) * 2;
        const double bound_cycles = bytes / dram_bytes_per_cycle;
        std::printf("%s %lldx%lld %s: %llu cycles against %.0f at the DRAM peak = %.1f%% of the DRAM-bandwidth bound; host %.2f s\n  %s",
                    op == &softmax ? "softmax" : "layer_norm", (long long)rows, (long long)cols, std::string(npu::isa::dtype_name(dtype)).c_str(),
                    (unsigned long long)r.cycles, bound_cycles, 100.0 * bound_cycles / double(r.cycles), r.host_seconds, r.plan.c_str());
      }
    }
    {
      // Rows longer than the scratchpad (4 MiB each): the chunked kernel reads x three times (max, sum of
      // exponentials, output), so 50% of the one-read bound is its ceiling.
      const int64_t rows = 16, cols = int64_t{1} << 20;
      const auto tensor = [&](std::vector<int64_t> shape) { return TensorDesc::contiguous(npu::isa::DType::F32, std::move(shape)); };
      const Run r = run(*device, device, compiler, OpDesc(OpKind::SOFTMAX, {tensor({rows, cols})}, tensor({rows, cols})));
      const double bound_cycles = double(rows) * cols * 4 * 2 / dram_bytes_per_cycle;
      std::printf("softmax %lldx%lld f32 (long rows): %llu cycles against %.0f at the DRAM peak = %.1f%% of the DRAM-bandwidth bound "
                  "(at most 50%%: x is read three times); host %.2f s\n  %s",
                  (long long)rows, (long long)cols, (unsigned long long)r.cycles, bound_cycles, 100.0 * bound_cycles / double(r.cycles),
                  r.host_seconds, r.plan.c_str());
    }
    // Attention, [heads, seq, d]: buffers 0 q, 1 k, 2 v, 3 out, 4 scores, 5 probabilities.
    const auto attention = [&](npu::isa::DType dtype) {
      const int64_t heads = 4, seq = 2048, d = 64, e = npu::isa::dtype_size_bytes(dtype);
      const auto tensor = [&](std::vector<int64_t> shape) { return TensorDesc::contiguous(dtype, std::move(shape)); };
      OpDesc fused(OpKind::ATTENTION, {tensor({heads, seq, d}), tensor({heads, seq, d}), tensor({heads, seq, d})}, tensor({heads, seq, d}));
      fused.scale = 1.0 / std::sqrt(double(d));
      OpDesc causal = fused;
      causal.is_causal = true;
      TensorDesc k_transposed = tensor({heads, d, seq});
      k_transposed.strides = {seq * d, 1, d};
      OpDesc scores(OpKind::MATMUL, {fused.inputs[0], k_transposed}, tensor({heads, seq, seq}));
      scores.alpha = fused.scale;
      const OpDesc softmax(OpKind::SOFTMAX, {tensor({heads, seq, seq})}, tensor({heads, seq, seq}));
      const OpDesc weighted(OpKind::MATMUL, {tensor({heads, seq, seq}), fused.inputs[2]}, tensor({heads, seq, d}));
      const uint64_t qkv_bytes = uint64_t(heads * seq * d * e), score_bytes = uint64_t(heads * seq * seq * e);
      const std::vector<uint64_t> buffer_bytes = {qkv_bytes, qkv_bytes, qkv_bytes, qkv_bytes, score_bytes, score_bytes};
      const auto start = std::chrono::steady_clock::now();
      const Measured one = run_steps(*device, device, compiler, buffer_bytes, {{fused, {0, 1, 2, 3}}});
      const Measured masked = run_steps(*device, device, compiler, buffer_bytes, {{causal, {0, 1, 2, 3}}});
      const Measured three = run_steps(*device, device, compiler, buffer_bytes, {{scores, {0, 1, 4}}, {softmax, {4, 5}}, {weighted, {5, 2, 3}}});
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("attention %lld heads x [%lld x %lld] %s (q, k, v, out: %.1f MiB):\n", (long long)heads, (long long)seq, (long long)d,
                  std::string(npu::isa::dtype_name(dtype)).c_str(), 4.0 * double(qkv_bytes) / (1 << 20));
      std::printf("  fused:                    %9llu cycles, %6.1f MiB of DRAM traffic\n", (unsigned long long)one.cycles,
                  double(one.dram_bytes) / (1 << 20));
      std::printf("  matmul, softmax, matmul:  %9llu cycles, %6.1f MiB of DRAM traffic (fused: %.2fx faster, %.1fx fewer bytes)\n",
                  (unsigned long long)three.cycles, double(three.dram_bytes) / (1 << 20), double(three.cycles) / double(one.cycles),
                  double(three.dram_bytes) / double(one.dram_bytes));
      std::printf("  fused, causal:            %9llu cycles, %6.1f MiB of DRAM traffic; host %.2f s in all\n  %s  %s",
                  (unsigned long long)masked.cycles, double(masked.dram_bytes) / (1 << 20), seconds, compiler.compile(fused)->plan.c_str(),
                  compiler.compile(causal)->plan.c_str());
    };
    attention(npu::isa::DType::BF16);
    {
      // The gradients of softmax and layer norm (row kernels of their own; last, so that the figures above
      // start from the chip state they always did): the bound reads g and y (or x) and writes the result once.
      const int64_t rows = 4096, cols = 4096;
      const auto tensor = [&](std::vector<int64_t> shape) { return TensorDesc::contiguous(npu::isa::DType::F32, std::move(shape)); };
      const OpDesc softmax_backward(OpKind::SOFTMAX_BACKWARD, {tensor({rows, cols}), tensor({rows, cols})}, tensor({rows, cols}));
      const OpDesc layer_norm_backward(OpKind::LAYER_NORM_BACKWARD,
                                       {tensor({rows, cols}), tensor({rows, cols}), tensor({rows, 1}), tensor({rows, 1}), tensor({cols})},
                                       tensor({rows, cols}));
      for (const OpDesc* op : {&softmax_backward, &layer_norm_backward}) {
        const Run r = run(*device, device, compiler, *op);
        const double bound_cycles = double(rows) * cols * 4 * 3 / dram_bytes_per_cycle;
        std::printf("%s %lldx%lld f32: %llu cycles against %.0f at the DRAM peak = %.1f%% of the DRAM-bandwidth bound; host %.2f s\n  %s",
                    op == &softmax_backward ? "softmax_backward" : "layer_norm_backward", (long long)rows, (long long)cols,
                    (unsigned long long)r.cycles, bound_cycles, 100.0 * bound_cycles / double(r.cycles), r.host_seconds, r.plan.c_str());
      }
    }
    // And in f32 (last, so that the figures above start from the chip state they always did): on a tensor
    // core without f32 (base), q, k, v and P as bf16 parts, the unfused matmuls likewise.
    attention(npu::isa::DType::F32);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "npu-bench-compiler: error: %s\n", e.what());
    return 1;
  }
  return 0;
}

NPUSIM_SYSTEMC_MAIN
