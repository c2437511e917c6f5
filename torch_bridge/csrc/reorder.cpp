// flip and roll on the npu: elements moved within their dims, exactly.
//   flip  each flipped dim (of more than one element) read backwards by the
//         gather kernel (index_select with the reversed positions)
//   roll  each rolled dim as the concatenation of its two slices (the cat
//         kernel, which copies each into its place); no dims: the flattened
//         tensor rolled, then viewed back
// int64 and f64 tensors move as their 32-bit words where index_select and cat
// take them; empty tensors are returned as they are.
#include <ATen/Functions.h>
#include <torch/library.h>

#include "kernel_launch.h"

namespace npusim {
namespace {

at::Tensor npu_flip(const at::Tensor& x, c10::IntArrayRef dims) {
  at::Tensor result = x;
  std::vector<bool> seen(size_t(std::max<int64_t>(x.dim(), 1)), false);
  for (const int64_t d : dims) {
    const int64_t dim = at::maybe_wrap_dim(d, x.dim());
    TORCH_CHECK(!seen[size_t(dim)], "dim ", dim, " appears multiple times in the list of dims");
    seen[size_t(dim)] = true;
    const int64_t n = x.size(dim);
    if (n <= 1) continue;
    result = at::index_select(result, dim, at::arange(n - 1, -1, -1, at::TensorOptions().dtype(at::kInt).device(x.device())));
  }
  return result.is_same(x) ? x.clone() : result;
}

at::Tensor npu_roll(const at::Tensor& x, c10::IntArrayRef shifts, c10::IntArrayRef dims) {
  if (dims.empty()) {
    TORCH_CHECK(shifts.size() == 1, "roll: with no dims there is one shift, got ", shifts.size());
    return npu_roll(x.reshape({-1}), shifts, {0}).view(x.sizes());
  }
  TORCH_CHECK(shifts.size() == dims.size(), "shifts and dimensions must align. shifts: ", shifts.size(), ", dims:", dims.size());
  at::Tensor result = x;
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t dim = at::maybe_wrap_dim(dims[i], x.dim());
    const int64_t n = x.size(dim);
    if (n == 0) continue;
    const int64_t shift = ((shifts[i] % n) + n) % n;
    if (shift == 0) continue;
    result = at::cat({result.narrow(dim, n - shift, shift), result.narrow(dim, 0, n - shift)}, dim);
  }
  return result.is_same(x) ? x.clone() : result;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("flip", npu_flip);
  m.impl("roll", npu_roll);
}

}  // namespace npusim
