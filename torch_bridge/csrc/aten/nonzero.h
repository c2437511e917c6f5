// Where a mask holds, on the npu (data-dependent shapes).
#pragma once

#include <ATen/core/Tensor.h>

namespace npusim {

// The flat positions (int64 [count], increasing) at which `self` is nonzero: the count read back (as
// CUDA reads back nonzero's), then the topk kernel over the 0/1 mask in f32, which lists equal values in
// order of position. Undefined where the chip cannot (more than 2^24 element-rounds, count x numel).
at::Tensor nonzero_positions(const at::Tensor& self);

}  // namespace npusim
