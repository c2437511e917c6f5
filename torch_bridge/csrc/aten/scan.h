// Inclusive scans on the npu, which has no scan instruction: Hillis-Steele steps of elementwise
// kernels (cumprod, logcumsumexp).
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>

namespace npusim {

// The inclusive scan of x along its last dim under an associative `combine(earlier, later)` (both
// of one shape): for s = 1, 2, 4, ... below the length, element i takes combine(x[i - s], x[i]).
// log2 L steps of one combine and one cat each; results differ from a sequential scan's only in
// the order the combines round in.
at::Tensor inclusive_scan(const at::Tensor& x, const std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>& combine);

}  // namespace npusim
