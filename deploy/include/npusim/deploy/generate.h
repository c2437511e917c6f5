// Greedy generation with a language model's package: the package keeps its KV
// cache between runs (a buffer the model reads and writes back is state,
// npusim.export), so the loop is one run per token, or per prompt chunk.
//
// The package's methods: "decode" (or its only method), which takes the token
// ids i32[1,1] and the position i32[1] (any names; told apart by shape) and
// gives a float first output, the logits [1,1,V]; and optionally "prefill",
// which takes P tokens i32[1,P] and their positions i32[P] and gives the logits
// [1,P,V]. The prompt runs through prefill a chunk of P tokens at a time at
// positions 0, P, 2P, ..., and what is left of it (fewer than P tokens, or all
// of it without a prefill) through decode a token at a time; then each run's
// most likely next token is fed back through decode, until the new tokens are
// made. A position the cache does not hold faults the run on the chip (its
// index check), and the error says so.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "npusim/deploy/package.h"

namespace npu::deploy {

struct GenerateResult {
  std::vector<int32_t> tokens;             // the new tokens, in order
  std::vector<uint64_t> cycles_per_run;    // device cycles of each run, in order: the prompt's, then the new tokens'
  size_t prompt_runs = 0;                  // the first runs, the prompt's (the last of them makes the first new token)
  size_t prefill_runs = 0;                 // of the prompt's runs, those of the prefill method
};

// Checks that `package` has the methods above; PackageError says what differs.
void check_decode_step(const Package& package);

// The most likely token of float logits (`dtype` f32, bf16 or f16): the first largest, NaN above all, as
// torch.argmax.
int32_t argmax_token(const std::vector<uint8_t>& logits, isa::DType dtype);

// Runs the loop on `runner` (a fresh one: its cache empty). With no new tokens to make, nothing runs.
// `on_run(index, cycles)` is called after each run, if given. PackageError for an empty prompt or a token
// outside int32's range.
GenerateResult generate(PackageRunner& runner, const Package& package, const std::vector<int64_t>& prompt, int64_t new_tokens,
                        const std::function<void(size_t, uint64_t)>& on_run = {});

}  // namespace npu::deploy
