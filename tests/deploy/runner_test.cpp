// Packages run through the driver on the simulated chip: results, repeat
// runs, weights, uploads, and inputs that do not fit the signature.
#include <gtest/gtest.h>

#include <cstring>

#include "npusim/compiler/compiler.h"
#include "npusim/deploy/package.h"
#include "npusim/driver/device.h"
#include "npusim/sim/config_loader.h"
#include "simulator_link.h"

namespace npu::deploy {
namespace {

using compiler::OpDesc;
using compiler::OpKind;
using compiler::TensorDesc;

std::vector<uint8_t> floats(const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * 4);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}
std::vector<float> as_floats(const std::vector<uint8_t>& bytes) {
  std::vector<float> values(bytes.size() / 4);
  std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

// y = relu(x + w) with w a weight, then z = y * s with s uploaded during the run;
// the outputs are y and the transposed view of z.
Package make_package(const std::string& preset) {
  const sim::ChipConfig config = sim::load_chip_config(preset);
  compiler::Compiler compiler(config);
  const TensorDesc t = TensorDesc::contiguous(isa::DType::F32, {4, 8});
  const auto add = compiler.compile(OpDesc(OpKind::ADD, {t, t}, t));
  const auto relu = compiler.compile(OpDesc(OpKind::RELU, {t}, t));
  const auto mul = compiler.compile(OpDesc(OpKind::MUL, {t, TensorDesc::contiguous(isa::DType::F32, {1})}, t));
  PackageBuilder builder("runner test", preset, sim::dump_chip_config(config));
  const uint32_t x = builder.buffer(1, 128), w = builder.buffer(2, 128), sum = builder.buffer(3, 128), y = builder.buffer(4, 128);
  const uint32_t s = builder.buffer(5, 4), z = builder.buffer(6, 128);
  TensorSpec in{"x", isa::DType::F32, {4, 8}, {8, 1}, 0, x};
  builder.input(in);
  std::vector<float> weight(32);
  for (size_t i = 0; i < 32; ++i) weight[i] = float(i) - 16.0f;
  builder.constant(w, floats(weight));
  builder.launch(builder.program(add.get(), add->program), {{"in0", x}, {"in1", w}, {"out", sum}}, add->core_mask(), "add");
  builder.launch(builder.program(relu.get(), relu->program), {{"in0", sum}, {"out", y}}, relu->core_mask(), "relu");
  builder.upload(s, 0, floats({0.5f}));
  builder.launch(builder.program(mul.get(), mul->program), {{"in0", y}, {"in1", s}, {"out", z}}, mul->core_mask(), "mul");
  builder.output(TensorSpec{"y", isa::DType::F32, {4, 8}, {8, 1}, 0, y});
  builder.output(TensorSpec{"z_t", isa::DType::F32, {8, 4}, {1, 8}, 0, z});
  return builder.finish();
}

class Runner : public ::testing::TestWithParam<std::string> {};

TEST_P(Runner, GivesTheResultsOnEveryRunAndEveryLoad) {
  const std::string path = ::testing::TempDir() + "runner-" + GetParam() + ".npupkg";
  make_package(GetParam()).write(path);
  const Package package = Package::read(path);
  auto device = Device::open(std::make_unique<SimulatorLink>(GetParam()));
  std::vector<float> x(32);
  for (size_t i = 0; i < 32; ++i) x[i] = float(i % 7) - 3.0f;
  PackageRunner runner(device, package);
  const PackageRunner::Result first = runner.run({floats(x)});
  ASSERT_EQ(first.outputs.size(), 2u);
  const std::vector<float> y = as_floats(first.outputs[0]), z_t = as_floats(first.outputs[1]);
  for (size_t i = 0; i < 32; ++i) {
    const float expected = std::max(0.0f, x[i] + (float(i) - 16.0f));
    EXPECT_EQ(y[i], expected) << i;
    EXPECT_EQ(z_t[(i % 8) * 4 + i / 8], expected * 0.5f) << i;  // element (i/8, i%8) of z, transposed
  }
  EXPECT_GT(first.cycles, 0u);
  const PackageRunner::Result again = runner.run({floats(x)});
  EXPECT_EQ(again.outputs, first.outputs);
  // A second runner on the same device: same results (its cycles depend on the device's state, e.g. open DRAM rows).
  EXPECT_EQ(PackageRunner(device, package).run({floats(x)}).outputs, first.outputs);
}

TEST_P(Runner, InputsThatDoNotFitTheSignatureAreRefused) {
  auto device = Device::open(std::make_unique<SimulatorLink>(GetParam()));
  PackageRunner runner(device, make_package(GetParam()));
  EXPECT_THROW(runner.run({}), PackageError);
  try {
    runner.run({std::vector<uint8_t>(12)});
    ADD_FAILURE() << "a 12-byte input was accepted";
  } catch (const PackageError& e) {
    EXPECT_NE(std::string(e.what()).find("x: f32[4,8] is 128 bytes, got 12"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, Runner, ::testing::Values("tiny", "base"), [](const auto& preset) { return preset.param; });

}  // namespace
}  // namespace npu::deploy
