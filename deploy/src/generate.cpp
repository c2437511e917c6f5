// The greedy generation loop over a language model's package (generate.h).
#include "npusim/deploy/generate.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

namespace npu::deploy {
namespace {

// A method that takes T tokens and their positions and gives the logits [1, T, V] first.
struct TokenMethod {
  size_t method = 0;
  int64_t tokens = 1;  // T
  size_t token_input = 0, position_input = 1;
  isa::DType logits_dtype = isa::DType::F32;
  int64_t vocabulary = 0;
};

// `tokens` 0: any T (the prefill's), checked to be the same in its inputs and its logits.
TokenMethod token_method(const Package& package, size_t method, int64_t tokens) {
  const std::vector<TensorSpec> inputs = package.inputs(method), outputs = package.outputs(method);
  const std::string expected = tokens == 1 ? "a decode step takes the token ids i32[1,1] and the position i32[1] and gives the logits [1,1,V] first"
                                           : "a prefill takes P token ids i32[1,P] and their positions i32[P] and gives the logits [1,P,V] first";
  const std::string what = tokens == 1 ? "not a decode step" : "method prefill is not a prefill";
  if (inputs.size() != 2 || outputs.empty()) throw PackageError(what + " (" + std::to_string(inputs.size()) + " inputs): " + expected);
  TokenMethod m;
  m.method = method;
  const auto is_i32 = [](const TensorSpec& s, size_t dims) { return s.dtype == isa::DType::I32 && s.shape.size() == dims; };
  if (is_i32(inputs[1], 2) && is_i32(inputs[0], 1)) m.token_input = 1, m.position_input = 0;
  const TensorSpec &ids = inputs[m.token_input], &positions = inputs[m.position_input];
  m.tokens = is_i32(ids, 2) ? ids.shape[1] : -1;
  if (!is_i32(ids, 2) || !is_i32(positions, 1) || ids.shape[0] != 1 || m.tokens < 1 || positions.shape[0] != m.tokens ||
      (tokens != 0 && m.tokens != tokens))
    throw PackageError(what + " (inputs " + inputs[0].to_string() + ", " + inputs[1].to_string() + "): " + expected);
  const TensorSpec& logits = outputs[0];
  m.logits_dtype = logits.dtype;
  if (!isa::dtype_is_float(logits.dtype) || logits.shape.size() != 3 || logits.shape[0] != 1 || logits.shape[1] != m.tokens || logits.shape[2] < 1)
    throw PackageError(what + " (first output " + logits.to_string() + "): " + expected);
  m.vocabulary = logits.shape[2];
  return m;
}

struct LanguageModel {
  TokenMethod decode;
  std::optional<TokenMethod> prefill;
};

LanguageModel language_model(const Package& package) {
  const std::vector<std::string> methods = package.methods();
  const auto has = [&](const std::string& name) { return std::find(methods.begin(), methods.end(), name) != methods.end(); };
  LanguageModel lm;
  if (has("decode")) {
    lm.decode = token_method(package, package.method("decode"), 1);
  } else if (methods.size() == 1) {
    lm.decode = token_method(package, 0, 1);
  } else {
    throw PackageError("not a decode step: a package of several methods generates with one named decode");
  }
  if (has("prefill")) {
    lm.prefill = token_method(package, package.method("prefill"), 0);
    if (lm.prefill->vocabulary != lm.decode.vocabulary || lm.prefill->logits_dtype != lm.decode.logits_dtype)
      throw PackageError("method prefill gives logits of " + std::to_string(lm.prefill->vocabulary) + " tokens of " +
                         std::string(isa::dtype_name(lm.prefill->logits_dtype)) + ", decode of " + std::to_string(lm.decode.vocabulary) +
                         " of " + std::string(isa::dtype_name(lm.decode.logits_dtype)));
  }
  return lm;
}

}  // namespace

void check_decode_step(const Package& package) { (void)language_model(package); }

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
  const LanguageModel lm = language_model(package);
  if (prompt.empty()) throw PackageError("the prompt has no tokens");
  if (new_tokens < 0) throw PackageError("a negative number of new tokens");
  for (const int64_t token : prompt)
    if (token < std::numeric_limits<int32_t>::min() || token > std::numeric_limits<int32_t>::max())
      throw PackageError("prompt token " + std::to_string(token) + " is outside int32's range (the package takes i32)");
  GenerateResult result;
  if (new_tokens == 0) return result;
  // One run of `m` over its T tokens from `tokens` on, at positions position, position + 1, ...; returns the most likely next token.
  int64_t position = 0;
  const auto run = [&](const TokenMethod& m, const int64_t* tokens) {
    std::vector<std::vector<uint8_t>> inputs(2);
    inputs[m.token_input].resize(size_t(m.tokens) * 4);
    inputs[m.position_input].resize(size_t(m.tokens) * 4);
    for (int64_t t = 0; t < m.tokens; ++t) {
      const auto token = int32_t(tokens[t]), at = int32_t(position + t);
      std::memcpy(&inputs[m.token_input][size_t(t) * 4], &token, 4);
      std::memcpy(&inputs[m.position_input][size_t(t) * 4], &at, 4);
    }
    const PackageRunner::Result out = runner.run(m.method, inputs);
    if (on_run) on_run(result.cycles_per_run.size(), out.cycles);
    result.cycles_per_run.push_back(out.cycles);
    position += m.tokens;
    // The last position's logits: the next token's.
    const size_t row_bytes = size_t(m.vocabulary) * isa::dtype_size_bytes(m.logits_dtype);
    const std::vector<uint8_t>& logits = out.outputs[0];
    return argmax_token(std::vector<uint8_t>(logits.end() - std::ptrdiff_t(row_bytes), logits.end()), m.logits_dtype);
  };
  int32_t next = 0;
  while (position < int64_t(prompt.size())) {
    if (lm.prefill && int64_t(prompt.size()) - position >= lm.prefill->tokens) {
      next = run(*lm.prefill, &prompt[size_t(position)]);
      ++result.prefill_runs;
    } else {
      next = run(lm.decode, &prompt[size_t(position)]);
    }
  }
  result.prompt_runs = result.cycles_per_run.size();
  result.tokens.push_back(next);
  while (int64_t(result.tokens.size()) < new_tokens) {
    const int64_t token = next;
    next = run(lm.decode, &token);
    result.tokens.push_back(next);
  }
  return result;
}

}  // namespace npu::deploy
