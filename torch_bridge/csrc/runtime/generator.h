// The npu's random number generators (generator.cpp): each a seed and a counter offset, 16 bytes of state
// (torch.npu.get_rng_state), as PyTorch's CUDA generator holds. A launch of a random kernel reserves the
// counters it uses, so a seed gives the same numbers on every run and chip config.
#pragma once

#include <ATen/core/Generator.h>

#include <cstdint>
#include <optional>
#include <utility>

namespace npusim {

const at::Generator& default_npu_generator();
at::Generator new_npu_generator();
// Reserves `counters` of `generator`'s stream (the default generator's if none): its seed and the first of them.
std::pair<uint64_t, uint64_t> reserve_random_counters(const std::optional<at::Generator>& generator, uint64_t counters);

}  // namespace npusim
