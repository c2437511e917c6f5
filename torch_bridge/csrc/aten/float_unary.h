// A unary float function computed on the chip in f32 and rounded once to its input's dtype (as ATen
// computes bf16 and f16 functions in f32); for other operands, the op itself on the CPU fallback.
#pragma once

#include "cpu_fallback.h"
#include "kernel_launch.h"

namespace npusim {

inline constexpr const char* kNotChipFloats = "operands not all non-empty f32, bf16 or f16 on the npu";

// `compute` takes x in f32 and returns f32; `Op` is the overload (at::_ops::NAME), `args` its arguments
// after x.
template <typename Op, typename Compute, typename... Args>
at::Tensor float_unary(const at::Tensor& x, Compute compute, const Args&... args) {
  if (!chip_float(x) || x.numel() == 0) return fall_back<Op>(kNotChipFloats, args..., x);
  const at::Tensor result = compute(as_f32(x));
  return result.scalar_type() == x.scalar_type() ? result : result.to(x.scalar_type());
}

}  // namespace npusim
