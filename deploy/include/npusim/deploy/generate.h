// Greedy generation with a language model's decode-step package: the package
// keeps its KV cache between runs (a buffer the step reads and writes back is
// state, npusim.export), so the loop is one run per token: the prompt's tokens
// first, one at a time at positions 0, 1, ..., then each run's most likely
// next token fed back, until the new tokens are made.
//
// The package's signature: two inputs, the token ids i32 [1, 1] and the
// position i32 [1] (any names; told apart by shape), and a float first output,
// the logits [1, 1, V]. A position the cache does not hold faults the run on
// the chip (its index check), and the error says so.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "npusim/deploy/package.h"

namespace npu::deploy {

struct GenerateResult {
  std::vector<int32_t> tokens;             // the new tokens, in order
  std::vector<uint64_t> cycles_per_run;    // device cycles of each run: one per prompt token, then per new token
};

// Checks that `package` has the decode-step signature above; PackageError says what differs.
void check_decode_step(const Package& package);

// The most likely token of float logits (`dtype` f32, bf16 or f16): the first largest, NaN above all, as
// torch.argmax.
int32_t argmax_token(const std::vector<uint8_t>& logits, isa::DType dtype);

// Runs the loop on `runner` (a fresh one: its cache empty). `on_run(index, cycles)` is called after
// each run, if given. PackageError for an empty prompt or a token outside int32's range.
GenerateResult generate(PackageRunner& runner, const Package& package, const std::vector<int64_t>& prompt, int64_t new_tokens,
                        const std::function<void(size_t, uint64_t)>& on_run = {});

}  // namespace npu::deploy
