// The example kernels compute the right values for any shape and any core
// count. Each case rewrites the `.equ` size constants of an examples/*.s
// program, assembles it with npu-as, runs it with npu-sim on a preset with
// random inputs (fixed seeds) and compares the output with a reference
// computed here:
//
//   gemm.s        bf16 x bf16 -> bf16. Every product of two bf16 values
//                       is exact in f32 and the tensor core adds in f32, so the
//                       device's f32 sum s satisfies |s - exact| <= gamma with
//                       gamma = K * 2^-24 * sum_k |a_ik * b_kj| (recursive
//                       summation bound, K additions of unit roundoff 2^-24),
//                       whatever order the kernel sums the K steps in. Rounding
//                       to bf16 is monotonic, so the output must lie in
//                       [bf16(exact - gamma), bf16(exact + gamma)]: the
//                       correctly rounded bf16 value or (when the exact sum is
//                       within gamma of a rounding boundary) its neighbour.
//   softmax_rows.s      f32, reference in double: abs error <= 1e-6 and relative
//                       error <= 1e-5 (exp of an f32 difference, an f32 row sum,
//                       one f32 division; outputs <= 1; seen: 3.5e-8 abs,
//                       1.6e-6 relative).
//   layernorm_rows.s    f32, reference in double: abs error <= 1e-5 * (1 + |y|)
//                       (two f32 row sums of rows with a mean up to 3, rsqrt in
//                       f32; |y| up to ~8; seen: 3e-6).
//   transpose_dma.s,    bit-exact, on random 32-bit patterns (NaNs included):
//   transpose_vtrans.s  the DMA and v.trans move elements without converting.
//
// Shapes include 1, primes and sizes that are not multiples of the kernels'
// tile sizes; presets tiny (1 core), base (4 cores) and large (16 cores, so
// some cores get no work for the small shapes).

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "example_source.h"
#include "scratch_directory.h"

#include "npusim/isa/dtype.h"

namespace {

namespace fs = std::filesystem;
using npu::isa::bf16_to_f32;
using npu::isa::f32_to_bf16;

using npu::testing::read_file;
using npu::testing::ToolRun;
using npu::testing::with_sizes;

template <typename T>
void write_values(const std::string& file, const std::vector<T>& values) {
  std::ofstream(file, std::ios::binary).write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(T)));
}

template <typename T>
std::vector<T> read_values(const std::string& file, size_t count) {
  const std::string bytes = read_file(file);
  EXPECT_EQ(bytes.size(), count * sizeof(T)) << file;
  std::vector<T> values(count);
  std::memcpy(values.data(), bytes.data(), std::min(bytes.size(), count * sizeof(T)));
  return values;
}

class ExampleKernel : public ::testing::TestWithParam<std::string> {
 protected:
  std::string path(const std::string& name) const { return scratch_.path(name); }
  const std::string& preset() const { return GetParam(); }

  ToolRun run(const std::string& command) const { return scratch_.run(command); }

  // Assembles examples/NAME.s with the given sizes; returns the program path.
  std::string assemble(const std::string& example, const std::vector<std::pair<std::string, long>>& sizes) {
    const std::string source = read_file(std::string(NPUSIM_SOURCE_DIR) + "/examples/" + example + ".s");
    EXPECT_FALSE(source.empty()) << example;
    std::ofstream(path(example + ".s")) << with_sizes(source, sizes);
    const ToolRun result = run(std::string(NPU_AS_PATH) + " " + path(example + ".s") + " -o " + path(example + ".npubin"));
    EXPECT_EQ(result.status, 0) << result.err;
    return path(example + ".npubin");
  }

  // Runs the program on preset() with the given input and output files
  // (SYMBOL=FILE pairs); true if it exits with 0.
  bool simulate(const std::string& program, const std::vector<std::string>& inputs, const std::vector<std::string>& outputs) {
    std::string command = std::string(NPU_SIM_PATH) + " --max-cycles 100000000 --config " + preset() + " " + program;  // a broken kernel fails fast
    for (const auto& input : inputs) command += " --input " + input;
    for (const auto& output : outputs) command += " --output " + output;
    const ToolRun result = run(command);
    EXPECT_EQ(result.status, 0) << command << "\n" << result.out << result.err;
    return result.status == 0;
  }

  npu::testing::ScratchDirectory scratch_{"npusim_examples"};
};

std::string preset_name(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

// ---------------------------------------------------------------------------
// GEMM: C[M x N] = A[M x K] * B[K x N], bf16 in and out.

class GemmExample : public ExampleKernel {
 protected:
  void check(long m, long n, long k) {
    SCOPED_TRACE("M=" + std::to_string(m) + " N=" + std::to_string(n) + " K=" + std::to_string(k) + " on " + preset());
    const std::string program = assemble("gemm", {{"M", m}, {"N", n}, {"K", k}});
    std::mt19937 rng(static_cast<uint32_t>(1000003 * m + 1009 * n + k));
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<uint16_t> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n));
    for (auto& v : a) v = f32_to_bf16(dist(rng));
    for (auto& v : b) v = f32_to_bf16(dist(rng));
    write_values(path("a.bin"), a);
    write_values(path("b.bin"), b);
    if (!simulate(program, {"A=" + path("a.bin"), "B=" + path("b.bin")}, {"C=" + path("c.bin")})) return;
    const std::vector<uint16_t> c = read_values<uint16_t>(path("c.bin"), static_cast<size_t>(m * n));
    if (c.size() != static_cast<size_t>(m * n)) return;

    std::vector<float> af(a.size()), bf(b.size());
    for (size_t i = 0; i < a.size(); ++i) af[i] = bf16_to_f32(a[i]);
    for (size_t i = 0; i < b.size(); ++i) bf[i] = bf16_to_f32(b[i]);
    // Rounds a double to bf16 through f32; the f32 step moves it by at most
    // 2^-24 relative, covered by the slack added to gamma below.
    const auto to_bf16 = [](double x) { return bf16_to_f32(f32_to_bf16(static_cast<float>(x))); };
    int failures = 0;
    long exact = 0;
    for (long i = 0; i < m; ++i) {
      for (long j = 0; j < n; ++j) {
        double sum = 0.0, magnitude = 0.0;
        for (long p = 0; p < k; ++p) {
          const double product = static_cast<double>(af[static_cast<size_t>(i * k + p)]) * bf[static_cast<size_t>(p * n + j)];
          sum += product;
          magnitude += std::fabs(product);
        }
        const double gamma = static_cast<double>(k) * std::ldexp(magnitude, -24) + std::ldexp(std::fabs(sum), -22);
        const float lo = to_bf16(sum - gamma), hi = to_bf16(sum + gamma);
        const float got = bf16_to_f32(c[static_cast<size_t>(i * n + j)]);
        exact += got == to_bf16(sum);
        if (!(got >= lo && got <= hi) && ++failures <= 10)
          ADD_FAILURE() << "C[" << i << "][" << j << "] = " << got << ", want " << to_bf16(sum) << " (exact sum " << sum
                        << ", allowed [" << lo << ", " << hi << "])";
      }
    }
    EXPECT_EQ(failures, 0);
    // Nearly every element is the correctly rounded sum; the rest are its
    // neighbour (checked above).
    EXPECT_GE(static_cast<double>(exact), 0.95 * static_cast<double>(m * n));
  }
};

TEST_P(GemmExample, Shape1x1x1) { check(1, 1, 1); }
TEST_P(GemmExample, Shape7x13x5) { check(7, 13, 5); }
TEST_P(GemmExample, Shape64x64x64) { check(64, 64, 64); }
TEST_P(GemmExample, Shape100x70x130) { check(100, 70, 130); }
TEST_P(GemmExample, Shape256x256x256) { check(256, 256, 256); }
TEST_P(GemmExample, Shape129x1x257) { check(129, 1, 257); }
TEST_P(GemmExample, Shape3x200x2) { check(3, 200, 2); }
TEST_P(GemmExample, Shape33x65x700) { check(33, 65, 700); }  // three K steps, the last one short
TEST_P(GemmExample, Shape300x130x40) { check(300, 130, 40); }

INSTANTIATE_TEST_SUITE_P(Presets, GemmExample, ::testing::Values("tiny", "base", "large"), preset_name);

// ---------------------------------------------------------------------------
// Row softmax, f32.

class SoftmaxExample : public ExampleKernel {
 protected:
  void check(long rows, long cols) {
    SCOPED_TRACE("ROWS=" + std::to_string(rows) + " COLS=" + std::to_string(cols) + " on " + preset());
    const std::string program = assemble("softmax_rows", {{"ROWS", rows}, {"COLS", cols}});
    std::mt19937 rng(static_cast<uint32_t>(7919 * rows + cols));
    std::uniform_real_distribution<float> dist(-6.0f, 6.0f);
    std::vector<float> x(static_cast<size_t>(rows * cols));
    for (auto& v : x) v = dist(rng);
    write_values(path("x.bin"), x);
    if (!simulate(program, {"x=" + path("x.bin")}, {"y=" + path("y.bin")})) return;
    const std::vector<float> y = read_values<float>(path("y.bin"), x.size());
    if (y.size() != x.size()) return;
    int failures = 0;
    double worst = 0.0;
    for (long i = 0; i < rows; ++i) {
      const float* row = &x[static_cast<size_t>(i * cols)];
      double peak = row[0], sum = 0.0;
      for (long j = 0; j < cols; ++j) peak = std::max(peak, static_cast<double>(row[j]));
      for (long j = 0; j < cols; ++j) sum += std::exp(row[j] - peak);
      for (long j = 0; j < cols; ++j) {
        const double want = std::exp(row[j] - peak) / sum, got = y[static_cast<size_t>(i * cols + j)];
        const double error = std::fabs(got - want);
        worst = std::max(worst, std::isnan(error) ? 1e9 : error);
        if (!(error <= 1e-6 && error <= 1e-5 * want) && ++failures <= 10)
          ADD_FAILURE() << "y[" << i << "][" << j << "] = " << got << ", want " << want;
      }
    }
    EXPECT_EQ(failures, 0) << "max abs error " << worst;
  }
};

TEST_P(SoftmaxExample, Shape1x1) { check(1, 1); }
TEST_P(SoftmaxExample, Shape3x7) { check(3, 7); }
TEST_P(SoftmaxExample, Shape17x100) { check(17, 100); }
TEST_P(SoftmaxExample, Shape64x512) { check(64, 512); }
TEST_P(SoftmaxExample, Shape257x33) { check(257, 33); }
TEST_P(SoftmaxExample, Shape5x3001) { check(5, 3001); }

INSTANTIATE_TEST_SUITE_P(Presets, SoftmaxExample, ::testing::Values("tiny", "base", "large"), preset_name);

// ---------------------------------------------------------------------------
// Row layer norm with gamma and beta, f32.

class LayernormExample : public ExampleKernel {
 protected:
  void check(long rows, long cols) {
    SCOPED_TRACE("ROWS=" + std::to_string(rows) + " COLS=" + std::to_string(cols) + " on " + preset());
    const std::string program = assemble("layernorm_rows", {{"ROWS", rows}, {"COLS", cols}});
    std::mt19937 rng(static_cast<uint32_t>(104729 * rows + cols));
    std::uniform_real_distribution<float> dist(-2.0f, 2.0f), offset(-3.0f, 3.0f);
    std::vector<float> x(static_cast<size_t>(rows * cols)), gamma(static_cast<size_t>(cols)), beta(static_cast<size_t>(cols));
    for (long i = 0; i < rows; ++i) {
      const float shift = offset(rng);  // rows with a nonzero mean
      for (long j = 0; j < cols; ++j) x[static_cast<size_t>(i * cols + j)] = shift + dist(rng);
    }
    for (auto& v : gamma) v = dist(rng);
    for (auto& v : beta) v = dist(rng);
    write_values(path("x.bin"), x);
    write_values(path("gamma.bin"), gamma);
    write_values(path("beta.bin"), beta);
    if (!simulate(program, {"x=" + path("x.bin"), "gamma=" + path("gamma.bin"), "beta=" + path("beta.bin")}, {"y=" + path("y.bin")}))
      return;
    const std::vector<float> y = read_values<float>(path("y.bin"), x.size());
    if (y.size() != x.size()) return;
    constexpr double kEps = 1e-5;  // the kernel's EPS
    int failures = 0;
    for (long i = 0; i < rows; ++i) {
      const float* row = &x[static_cast<size_t>(i * cols)];
      double mean = 0.0, var = 0.0;
      for (long j = 0; j < cols; ++j) mean += row[j];
      mean /= static_cast<double>(cols);
      for (long j = 0; j < cols; ++j) var += (row[j] - mean) * (row[j] - mean);
      var /= static_cast<double>(cols);
      const double rstd = 1.0 / std::sqrt(var + kEps);
      for (long j = 0; j < cols; ++j) {
        const double want = (row[j] - mean) * rstd * gamma[static_cast<size_t>(j)] + beta[static_cast<size_t>(j)];
        const double got = y[static_cast<size_t>(i * cols + j)];
        if (!(std::fabs(got - want) <= 1e-5 * (1.0 + std::fabs(want))) && ++failures <= 10)
          ADD_FAILURE() << "y[" << i << "][" << j << "] = " << got << ", want " << want;
      }
    }
    EXPECT_EQ(failures, 0);
  }
};

TEST_P(LayernormExample, Shape1x1) { check(1, 1); }
TEST_P(LayernormExample, Shape3x7) { check(3, 7); }
TEST_P(LayernormExample, Shape17x100) { check(17, 100); }
TEST_P(LayernormExample, Shape64x512) { check(64, 512); }

INSTANTIATE_TEST_SUITE_P(Presets, LayernormExample, ::testing::Values("tiny", "base", "large"), preset_name);

// ---------------------------------------------------------------------------
// Transposes: y[C x R] = transpose(x[R x C]), f32, bit-exact.

class TransposeExample : public ExampleKernel {
 protected:
  void check(const std::string& example, long r, long c) {
    SCOPED_TRACE(example + " R=" + std::to_string(r) + " C=" + std::to_string(c) + " on " + preset());
    const std::string program = assemble(example, {{"R", r}, {"C", c}});
    std::mt19937 rng(static_cast<uint32_t>(31337 * r + c));
    std::vector<uint32_t> x(static_cast<size_t>(r * c));
    for (auto& v : x) v = static_cast<uint32_t>(rng());  // any bit pattern, NaNs included
    write_values(path("x.bin"), x);
    if (!simulate(program, {"x=" + path("x.bin")}, {"y=" + path("y.bin")})) return;
    const std::vector<uint32_t> y = read_values<uint32_t>(path("y.bin"), x.size());
    if (y.size() != x.size()) return;
    int failures = 0;
    for (long i = 0; i < r; ++i)
      for (long j = 0; j < c; ++j) {
        const uint32_t want = x[static_cast<size_t>(i * c + j)], got = y[static_cast<size_t>(j * r + i)];
        if (got != want && ++failures <= 10)
          ADD_FAILURE() << "y[" << j << "][" << i << "] = 0x" << std::hex << got << ", want 0x" << want << std::dec;
      }
    EXPECT_EQ(failures, 0);
  }
};

TEST_P(TransposeExample, Dma1x1) { check("transpose_dma", 1, 1); }
TEST_P(TransposeExample, Dma5x3) { check("transpose_dma", 5, 3); }
TEST_P(TransposeExample, Dma65x130) { check("transpose_dma", 65, 130); }
TEST_P(TransposeExample, Dma128x64) { check("transpose_dma", 128, 64); }
TEST_P(TransposeExample, Dma3x257) { check("transpose_dma", 3, 257); }
TEST_P(TransposeExample, Vtrans1x1) { check("transpose_vtrans", 1, 1); }
TEST_P(TransposeExample, Vtrans5x3) { check("transpose_vtrans", 5, 3); }
TEST_P(TransposeExample, Vtrans65x130) { check("transpose_vtrans", 65, 130); }
TEST_P(TransposeExample, Vtrans128x64) { check("transpose_vtrans", 128, 64); }
TEST_P(TransposeExample, Vtrans3x257) { check("transpose_vtrans", 3, 257); }

INSTANTIATE_TEST_SUITE_P(Presets, TransposeExample, ::testing::Values("tiny", "base", "large"), preset_name);

}  // namespace
