// The runner tests' package, also the seed of the package fuzzer (tests/fuzz):
// y = relu(x + w) with w a weight, then z = y * s with s uploaded during the
// run; the outputs are y and the transposed view of z.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "npusim/compiler/compiler.h"
#include "npusim/deploy/package.h"
#include "npusim/sim/config_loader.h"

namespace npu::deploy::testing {

inline std::vector<uint8_t> floats(const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * 4);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}
inline std::vector<float> as_floats(const std::vector<uint8_t>& bytes) {
  std::vector<float> values(bytes.size() / 4);
  std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

inline Package make_package(const std::string& preset) {
  using compiler::OpDesc;
  using compiler::OpKind;
  using compiler::TensorDesc;
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

}  // namespace npu::deploy::testing
