// Packages run through the driver on the simulated chip: results, repeat
// runs, weights, uploads, and inputs that do not fit the signature.
#include <gtest/gtest.h>

#include <cstring>

#include "test_package.h"
#include "npusim/compiler/compiler.h"
#include "npusim/deploy/package.h"
#include "npusim/driver/device.h"
#include "npusim/driver/errors.h"
#include "npusim/driver/program.h"
#include "npusim/driver/queue.h"
#include "npusim/isa/assembler.h"
#include "npusim/sim/config_loader.h"
#include "package.pb.h"
#include "simulator_link.h"

namespace npu::deploy {
namespace {

using testing::as_floats;
using testing::floats;
using testing::make_package;

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

// A fault is reported once, to the work that caused it: later packages on the same device run normally.
TEST_P(Runner, RunsNormallyAfterAnotherProgramFaulted) {
  auto device = Device::open(std::make_unique<SimulatorLink>(GetParam()));
  PackageRunner runner(device, make_package(GetParam()));
  const std::vector<float> x(32, 1.0f);
  const PackageRunner::Result before = runner.run({floats(x)});
  isa::AssembleResult bad = isa::assemble_source(".code 0\n    nop\n    .word 0xff\n    halt\n", "bad.s");
  ASSERT_TRUE(bad.program);
  const Program faulting = Program::load(device, *bad.program);
  EXPECT_THROW(device->queue(0).launch(faulting, {}, 0x1).wait(), DeviceError);
  for (int run = 0; run < 3; ++run) EXPECT_EQ(runner.run({floats(x)}).outputs, before.outputs) << "run " << run;
}

// A run that fails after its input copies were queued (here the driver refuses a launch that binds a symbol its
// program does not have) has drained them before it returns: the caller may free its inputs at once. (The package
// fuzzer found the copy engine reading freed inputs; under ASan this test fails that way without the drain.)
TEST_P(Runner, AFailedRunLeavesNoCopyReadingTheCallersInputs) {
  auto device = Device::open(std::make_unique<SimulatorLink>(GetParam()));
  proto::Package edited = make_package(GetParam()).raw();
  for (proto::Step& step : *edited.mutable_methods(0)->mutable_steps())
    if (step.has_launch() && step.launch().op() == "relu") step.mutable_launch()->mutable_bindings(0)->set_symbol("no_such_symbol");
  PackageRunner runner(device, Package::parse(Package(edited).serialize()));
  {
    std::vector<std::vector<uint8_t>> inputs = {floats(std::vector<float>(32, 1.0f))};
    EXPECT_THROW(runner.run(inputs), Error);
  }  // the inputs are freed here
  device->synchronize();
  const std::vector<float> x(32, 2.0f);
  EXPECT_EQ(PackageRunner(device, make_package(GetParam())).run({floats(x)}).outputs.size(), 2u);
}

// A package whose state is a running sum: its first method (named "add" where `read_method`, else the one
// method) adds its input x to the state (acc = acc + x, written back) and gives the sum; with
// `read_method`, a second method "read" takes nothing and copies the state out.
Package accumulator_package(const std::string& preset, bool read_method) {
  using compiler::OpDesc;
  using compiler::OpKind;
  using compiler::TensorDesc;
  const sim::ChipConfig config = sim::load_chip_config(preset);
  compiler::Compiler compiler(config);
  const TensorDesc t = TensorDesc::contiguous(isa::DType::F32, {4, 8});
  const auto add = compiler.compile(OpDesc(OpKind::ADD, {t, t}, t));
  const auto copy = compiler.compile(OpDesc(OpKind::COPY, {t}, t));
  PackageBuilder builder("accumulator", preset, sim::dump_chip_config(config));
  if (read_method) builder.method("add");
  const uint32_t in = builder.buffer(1, 128), acc = builder.buffer(2, 128), sum = builder.buffer(3, 128);
  builder.input(TensorSpec{"x", isa::DType::F32, {4, 8}, {8, 1}, 0, in});
  builder.state(acc);
  builder.constant(acc, floats(std::vector<float>(32, 0.0f)));
  builder.launch(builder.program(add.get(), add->program), {{"in0", in}, {"in1", acc}, {"out", sum}}, add->core_mask(), "add");
  builder.launch(builder.program(copy.get(), copy->program), {{"in0", sum}, {"out", acc}}, copy->core_mask(), "copy");
  builder.output(TensorSpec{"sum", isa::DType::F32, {4, 8}, {8, 1}, 0, sum});
  if (read_method) {
    builder.method("read");
    const uint32_t out = builder.buffer(3, 128);
    builder.launch(builder.program(copy.get(), copy->program), {{"in0", builder.buffer(2, 128)}, {"out", out}}, copy->core_mask(), "copy");
    builder.output(TensorSpec{"acc", isa::DType::F32, {4, 8}, {8, 1}, 0, out});
  }
  return builder.finish();
}

std::vector<float> accumulator_input() {
  std::vector<float> x(32);
  for (size_t i = 0; i < 32; ++i) x[i] = float(i) - 5.0f;
  return x;
}

// Run k gives k x; a second runner of the package starts from the package's state again.
TEST_P(Runner, StateCarriesFromOneRunToTheNext) {
  const Package package = accumulator_package(GetParam(), false);
  auto device = Device::open(std::make_unique<SimulatorLink>(GetParam()));
  const std::vector<float> x = accumulator_input();
  PackageRunner runner(device, package);
  for (int run = 1; run <= 3; ++run) {
    const std::vector<float> sums = as_floats(runner.run({floats(x)}).outputs[0]);
    for (size_t i = 0; i < 32; ++i) EXPECT_EQ(sums[i], float(run) * x[i]) << "run " << run << ", element " << i;
  }
  EXPECT_EQ(as_floats(PackageRunner(device, package).run({floats(x)}).outputs[0]), x);
}

// Two runs of "add" (by name, then as the first method), then "read": 2x.
TEST_P(Runner, MethodsShareTheirStateAndEachRunsItsOwnSteps) {
  const Package package = accumulator_package(GetParam(), true);
  auto device = Device::open(std::make_unique<SimulatorLink>(GetParam()));
  const std::vector<float> x = accumulator_input();
  PackageRunner runner(device, package);
  EXPECT_EQ(as_floats(runner.run(package.method("add"), {floats(x)}).outputs.at(0)), x);
  EXPECT_EQ(runner.run({floats(x)}).outputs.size(), 1u);  // the first method
  const std::vector<float> read = as_floats(runner.run(package.method("read"), {}).outputs.at(0));
  for (size_t i = 0; i < 32; ++i) EXPECT_EQ(read[i], 2.0f * x[i]) << "element " << i;
  try {
    runner.run(package.method("read"), {floats(x)});
    ADD_FAILURE() << "accepted an input that method read does not take";
  } catch (const PackageError& e) {
    EXPECT_NE(std::string(e.what()).find("package takes 0 inputs (method read), got 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(runner.run(2, {}), PackageError);
}

INSTANTIATE_TEST_SUITE_P(Presets, Runner, ::testing::Values("tiny", "base"), [](const auto& preset) { return preset.param; });

}  // namespace
}  // namespace npu::deploy
