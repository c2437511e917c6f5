// The generation loop's pieces that need no language model: the token choice and the signature checks.
// (A transformers Llama generating through the loop: tests/python/test_export.py.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "npusim/deploy/generate.h"
#include "npusim/sim/config_loader.h"
#include "test_package.h"

namespace npu::deploy {
namespace {

using testing::floats;

TEST(Generate, TheTokenIsTheFirstLargestLogitWithNaNAboveAll) {
  EXPECT_EQ(argmax_token(floats({0.5f, 2.0f, -1.0f, 2.0f}), isa::DType::F32), 1);  // the first of two equal
  EXPECT_EQ(argmax_token(floats({-std::numeric_limits<float>::infinity(), -3.0f}), isa::DType::F32), 1);
  EXPECT_EQ(argmax_token(floats({1.0f, std::nanf(""), 9.0f}), isa::DType::F32), 1);  // as torch.argmax
  std::vector<uint8_t> bf16(6);
  const uint16_t values[3] = {isa::f32_to_bf16(1.0f), isa::f32_to_bf16(3.0f), isa::f32_to_bf16(2.0f)};
  std::memcpy(bf16.data(), values, sizeof values);
  EXPECT_EQ(argmax_token(bf16, isa::DType::BF16), 1);
  const uint16_t halves[3] = {isa::f32_to_f16(1.0f), isa::f32_to_f16(-3.0f), isa::f32_to_f16(4.0f)};
  std::memcpy(bf16.data(), halves, sizeof halves);
  EXPECT_EQ(argmax_token(bf16, isa::DType::F16), 2);
}

TEST(Generate, APackageThatIsNotADecodeStepIsRefusedWithWhatADecodeStepTakes) {
  const Package package = testing::make_package("tiny");  // one f32 input
  try {
    check_decode_step(package);
    FAIL() << "accepted";
  } catch (const PackageError& e) {
    EXPECT_NE(std::string(e.what()).find("token ids i32[1,1] and the position i32[1]"), std::string::npos) << e.what();
  }
}

TEST(Generate, APackageOfSeveralMethodsGeneratesWithTheOneNamedDecode) {
  PackageBuilder builder("two methods", "tiny", sim::dump_chip_config(sim::load_chip_config("tiny")));
  for (const std::string name : {"prefill", "step"}) {
    builder.method(name);
    const uint32_t ids = builder.buffer(1, 4), positions = builder.buffer(2, 4);
    builder.input(TensorSpec{"ids", isa::DType::I32, {1, 1}, {1, 1}, 0, ids});
    builder.input(TensorSpec{"positions", isa::DType::I32, {1}, {1}, 0, positions});
    builder.output(TensorSpec{"logits", isa::DType::F32, {1, 1, 1}, {1, 1, 1}, 0, ids});
  }
  try {
    check_decode_step(builder.finish());
    FAIL() << "accepted";
  } catch (const PackageError& e) {
    EXPECT_NE(std::string(e.what()).find("a package of several methods generates with one named decode"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace npu::deploy
