// Helpers for driver tests over the in-process simulated device: open a
// device on a preset (or an edited preset), assemble programs from source,
// run the GEMM example.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "example_source.h"
#include "npusim/driver/device.h"
#include "npusim/driver/program.h"
#include "npusim/isa/assembler.h"
#include "npusim/isa/dtype.h"
#include "npusim/sim/config_loader.h"
#include "scratch_directory.h"
#include "simulator_link.h"

namespace npu::testing {

inline std::shared_ptr<Device> open_device(const std::string& config, const DeviceOptions& options = {}, const std::string& trace = "") {
  SimulatorLinkOptions link;
  link.config = config;
  link.trace_path = trace;
  return Device::open(std::make_unique<SimulatorLink>(link), options);
}

// A preset with the values of some fields changed, written to `path`.
inline std::string edited_preset(const std::string& preset, const std::vector<std::pair<std::string, std::string>>& fields,
                                 const std::string& path) {
  std::string text = sim::dump_chip_config(sim::load_chip_config(preset));
  for (const auto& [field, value] : fields) {
    const size_t at = text.find(field + ": ");
    EXPECT_NE(at, std::string::npos) << field;
    if (at == std::string::npos) continue;
    const size_t start = at + field.size() + 2;
    text.replace(start, text.find_first_of(" \n}", start) - start, value);
  }
  std::ofstream(path) << text;
  return path;
}

inline isa::Program assemble(const std::string& source) {
  isa::AssembleResult result = isa::assemble_source(source, "test.s");
  for (const auto& error : result.errors) ADD_FAILURE() << error.format();
  if (!result.program) throw std::runtime_error("assembly failed");
  return *result.program;
}

inline isa::Program gemm_program(long m, long n, long k) {
  const std::string source = read_file(std::string(NPUSIM_SOURCE_DIR) + "/examples/gemm.s");
  return assemble(with_sizes(source, {{"M", m}, {"N", n}, {"K", k}}));
}

inline std::vector<uint16_t> random_bf16(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<uint16_t> values(count);
  for (uint16_t& v : values) v = isa::f32_to_bf16(dist(rng));
  return values;
}

// Checks C = A * B (bf16 in and out, f32 accumulation) with the bound the
// example tests state (tests/sim/examples_test.cpp): the output lies between
// the bf16 roundings of exact -/+ K * 2^-24 * sum |a*b|.
inline ::testing::AssertionResult gemm_matches(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b, const std::vector<uint16_t>& c,
                                               long m, long n, long k) {
  for (long i = 0; i < m; ++i)
    for (long j = 0; j < n; ++j) {
      double exact = 0, magnitude = 0;
      for (long p = 0; p < k; ++p) {
        const double product = double(isa::bf16_to_f32(a[size_t(i * k + p)])) * isa::bf16_to_f32(b[size_t(p * n + j)]);
        exact += product;
        magnitude += std::fabs(product);
      }
      const double gamma = double(k) * std::ldexp(1.0, -24) * magnitude;
      const float lo = isa::bf16_to_f32(isa::f32_to_bf16(float(exact - gamma)));
      const float hi = isa::bf16_to_f32(isa::f32_to_bf16(float(exact + gamma)));
      const float got = isa::bf16_to_f32(c[size_t(i * n + j)]);
      if (!(got >= lo && got <= hi))
        return ::testing::AssertionFailure() << "C[" << i << "][" << j << "] = " << got << ", expected " << exact << " (bf16 in [" << lo << ", "
                                             << hi << "])";
    }
  return ::testing::AssertionSuccess();
}

}  // namespace npu::testing
