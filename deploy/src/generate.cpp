// The greedy generation loop over a decode-step package (generate.h).
#include "npusim/deploy/generate.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace npu::deploy {
namespace {

struct DecodeStep {
  size_t token_input = 0, position_input = 1;
  isa::DType logits_dtype = isa::DType::F32;
};

DecodeStep decode_step(const Package& package) {
  const std::vector<TensorSpec> inputs = package.inputs(), outputs = package.outputs();
  const std::string expected = "a decode step takes the token ids i32[1,1] and the position i32[1] and gives the logits [1,1,V] first";
  if (inputs.size() != 2 || outputs.empty()) throw PackageError("not a decode step (" + std::to_string(inputs.size()) + " inputs): " + expected);
  DecodeStep step;
  const auto is = [](const TensorSpec& s, std::vector<int64_t> shape) { return s.dtype == isa::DType::I32 && s.shape == shape; };
  if (is(inputs[1], {1, 1}) && is(inputs[0], {1})) step.token_input = 1, step.position_input = 0;
  if (!is(inputs[step.token_input], {1, 1}) || !is(inputs[step.position_input], {1}))
    throw PackageError("not a decode step (inputs " + inputs[0].to_string() + ", " + inputs[1].to_string() + "): " + expected);
  const TensorSpec& logits = outputs[0];
  step.logits_dtype = logits.dtype;
  if (!isa::dtype_is_float(logits.dtype) || logits.shape.size() != 3 || logits.shape[0] != 1 || logits.shape[1] != 1 || logits.shape[2] < 1)
    throw PackageError("not a decode step (first output " + logits.to_string() + "): " + expected);
  return step;
}

std::vector<uint8_t> i32_bytes(int64_t value) {
  const auto v = static_cast<int32_t>(value);
  std::vector<uint8_t> bytes(sizeof v);
  std::memcpy(bytes.data(), &v, sizeof v);
  return bytes;
}

}  // namespace

void check_decode_step(const Package& package) { (void)decode_step(package); }

int32_t argmax_token(const std::vector<uint8_t>& logits, isa::DType dtype) {
  const size_t esize = isa::dtype_size_bytes(dtype), n = logits.size() / esize;
  int32_t best = 0;
  float best_value = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < n; ++i) {
    float value;
    if (dtype == isa::DType::F32) {
      std::memcpy(&value, &logits[i * esize], sizeof value);
    } else {
      uint16_t bits;
      std::memcpy(&bits, &logits[i * esize], sizeof bits);
      value = dtype == isa::DType::BF16 ? isa::bf16_to_f32(bits) : isa::f16_to_f32(bits);
    }
    if (std::isnan(value)) return static_cast<int32_t>(i);  // torch.argmax: NaN is the largest
    if (i == 0 || value > best_value) best = static_cast<int32_t>(i), best_value = value;
  }
  return best;
}

GenerateResult generate(PackageRunner& runner, const Package& package, const std::vector<int64_t>& prompt, int64_t new_tokens,
                        const std::function<void(size_t, uint64_t)>& on_run) {
  const DecodeStep step = decode_step(package);
  if (prompt.empty()) throw PackageError("the prompt has no tokens");
  if (new_tokens < 0) throw PackageError("a negative number of new tokens");
  for (const int64_t token : prompt)
    if (token < std::numeric_limits<int32_t>::min() || token > std::numeric_limits<int32_t>::max())
      throw PackageError("prompt token " + std::to_string(token) + " is outside int32's range (the package takes i32)");
  GenerateResult result;
  std::vector<std::vector<uint8_t>> inputs(2);
  int64_t position = 0, token = prompt[0];
  const int64_t runs = int64_t(prompt.size()) + new_tokens - 1;
  for (int64_t run = 0; run < runs; ++run) {
    inputs[step.token_input] = i32_bytes(token);
    inputs[step.position_input] = i32_bytes(position);
    const PackageRunner::Result out = runner.run(inputs);
    result.cycles_per_run.push_back(out.cycles);
    if (on_run) on_run(size_t(run), out.cycles);
    ++position;
    if (position < int64_t(prompt.size())) {
      token = prompt[size_t(position)];
    } else {
      token = argmax_token(out.outputs[0], step.logits_dtype);
      result.tokens.push_back(int32_t(token));
    }
  }
  return result;
}

}  // namespace npu::deploy
