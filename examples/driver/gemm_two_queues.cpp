// Two GEMMs at once through the driver: examples/gemm.s, assembled and loaded
// once, launched from queue 0 on cores 0-1 and from queue 1 on cores 2-3 of
// the `base` chip, with inputs copied in and results copied out as queued
// work, events around each launch, and a check against a CPU reference.
// Writes a trace with the chip and the driver's host activity.
//
// Usage: npu-example-gemm-queues GEMM.npubin [--trace FILE.pftrace|FILE.json]
//        (GEMM.npubin: examples/gemm.s assembled with its default M, N, K)
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "npusim/driver/device.h"
#include "npusim/driver/errors.h"
#include "npusim/driver/program.h"
#include "npusim/isa/dtype.h"
#include "npusim/sim/systemc_main.h"
#include "simulator_link.h"

namespace {

std::vector<uint16_t> random_bf16(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<uint16_t> values(count);
  for (uint16_t& v : values) v = npu::isa::f32_to_bf16(dist(rng));
  return values;
}

// The largest difference from a double-precision reference, in units of the
// bf16 spacing at the reference value (the kernel accumulates in f32 and
// rounds once to bf16, so this stays at most about one).
double worst_bf16_ulps(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b, const std::vector<uint16_t>& c, uint64_t m,
                       uint64_t n, uint64_t k) {
  double worst = 0;
  for (uint64_t i = 0; i < m; ++i)
    for (uint64_t j = 0; j < n; ++j) {
      double exact = 0;
      for (uint64_t p = 0; p < k; ++p) exact += double(npu::isa::bf16_to_f32(a[i * k + p])) * npu::isa::bf16_to_f32(b[p * n + j]);
      const double ulp = std::ldexp(1.0, std::ilogb(std::max(std::fabs(exact), 1e-30)) - 7);
      worst = std::max(worst, std::fabs(npu::isa::bf16_to_f32(c[i * n + j]) - exact) / ulp);
    }
  return worst;
}

}  // namespace

int sc_main(int argc, char* argv[]) {
  if (argc < 2 || std::string(argv[1]) == "--help") {
    std::fprintf(stderr, "usage: npu-example-gemm-queues GEMM.npubin [--trace FILE.pftrace|FILE.json]\n");
    return argc < 2 ? 2 : 0;
  }
  npu::SimulatorLinkOptions link;
  link.config = "base";
  if (argc == 4 && std::string(argv[2]) == "--trace") link.trace_path = argv[3];
  try {
    const auto device = npu::Device::open(std::make_unique<npu::SimulatorLink>(link));
    const npu::Program gemm = npu::Program::load(device, argv[1]);
    const npu::isa::Symbol* a_symbol = gemm.image().find_symbol("A");
    const npu::isa::Symbol* b_symbol = gemm.image().find_symbol("B");
    if (!a_symbol || !b_symbol || a_symbol->shape.size() != 2 || b_symbol->shape.size() != 2) throw npu::Error("not examples/gemm.s");
    const uint64_t m = a_symbol->shape[0], k = a_symbol->shape[1], n = b_symbol->shape[1];
    std::printf("C = A x B with M=%llu N=%llu K=%llu (bf16), twice: queue 0 on cores 0-1, queue 1 on cores 2-3\n",
                (unsigned long long)m, (unsigned long long)n, (unsigned long long)k);

    struct Job {
      std::vector<uint16_t> a, b, c;
      npu::Buffer A, B, C;
      npu::Event start, end;
      npu::Fence done;
    } jobs[2];
    for (unsigned q = 0; q < 2; ++q) {
      Job& job = jobs[q];
      job.a = random_bf16(m * k, 10 + q);
      job.b = random_bf16(k * n, 20 + q);
      job.c.assign(m * n, 0);
      job.A = device->allocate(m * k * 2);
      job.B = device->allocate(k * n * 2);
      job.C = device->allocate(m * n * 2);
      npu::Queue queue = device->queue(q);
      queue.copy_to_device(job.A, 0, job.a.data(), m * k * 2);
      queue.copy_to_device(job.B, 0, job.b.data(), k * n * 2);
      job.start = queue.record_event();
      queue.launch(gemm, {{"A", &job.A}, {"B", &job.B}, {"C", &job.C}}, q == 0 ? 0x3 : 0xc);
      job.end = queue.record_event();
      job.done = queue.copy_from_device(job.c.data(), job.C, 0, m * n * 2);
    }
    bool ok = true;
    for (unsigned q = 0; q < 2; ++q) {
      Job& job = jobs[q];
      job.done.wait();
      const uint64_t cycles = npu::Event::elapsed_cycles(job.start, job.end);
      const double worst = worst_bf16_ulps(job.a, job.b, job.c, m, n, k);
      std::printf("queue %u: %llu cycles (%.1f us of device time), %.0f MACs/cycle; worst error %.2f bf16 ulp\n", q,
                  (unsigned long long)cycles, std::chrono::duration<double, std::micro>(npu::Event::elapsed(job.start, job.end)).count(),
                  double(m * n * k) / double(cycles), worst);
      ok = ok && worst <= 1.0;
    }
    const uint64_t together = std::max(jobs[0].end.cycle(), jobs[1].end.cycle()) - std::min(jobs[0].start.cycle(), jobs[1].start.cycle());
    std::printf("both launches together: %llu cycles\n", (unsigned long long)together);
    std::printf("%s", device->report().c_str());
    if (!link.trace_path.empty()) std::printf("trace: %s (written when the device closes)\n", link.trace_path.c_str());
    std::printf(ok ? "results match the CPU reference\n" : "RESULTS DIFFER from the CPU reference\n");
    return ok ? 0 : 1;
  } catch (const npu::Error& e) {
    std::fprintf(stderr, "npu-example-gemm-queues: error: %s\n", e.what());
    return 1;
  }
}

NPUSIM_SYSTEMC_MAIN
