// A unary float function computed on the chip in f32 and rounded once to its input's dtype (as ATen
// computes bf16 and f16 functions in f32); the CPU's, counted as a fallback, for other operands.
#pragma once

#include "kernel_launch.h"

namespace npusim {

inline constexpr const char* kNotChipFloats = "operands not all non-empty f32, bf16 or f16 on the npu";

// `compute` takes x in f32 and returns f32; `reference` is the CPU op.
template <typename Compute, typename Reference>
at::Tensor float_unary(const char* name, const at::Tensor& x, Compute compute, Reference reference) {
  if (!chip_float(x) || x.numel() == 0) {
    note_cpu_fallback(name, kNotChipFloats);
    return to_npu(reference(x.cpu()));
  }
  const at::Tensor result = compute(as_f32(x));
  return result.scalar_type() == x.scalar_type() ? result : result.to(x.scalar_type());
}

}  // namespace npusim
