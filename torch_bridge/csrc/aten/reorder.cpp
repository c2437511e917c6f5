// flip and roll on the npu: elements moved within their dims, exactly.
//   flip  each flipped dim (of more than one element) read backwards by the
//         gather kernel (index_select with the reversed positions)
//   roll  each rolled dim as the concatenation of its two slices (the cat
//         kernel, which copies each into its place); no dims: the flattened
//         tensor rolled, then viewed back
//   channel_shuffle   [N, g, C/g, ...] viewed [N, C/g, g, ...] and copied dense
//   linalg_cross      a x b as rolls along the dim: roll(a, -1) roll(b, 1) - roll(a, 1) roll(b, -1),
//                     each product and the difference rounded as the CPU's
// int64 and f64 tensors move as their 32-bit words where index_select and cat
// take them; empty tensors are returned as they are.
#include <ATen/ExpandUtils.h>
#include <ATen/Functions.h>
#include <torch/library.h>

#include "PrivateUse1NativeFunctions.h"
#include "kernel_launch.h"

namespace npusim {

at::Tensor NpuNativeFunctions::flip(const at::Tensor& x, c10::IntArrayRef dims) {
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

at::Tensor NpuNativeFunctions::roll(const at::Tensor& x, c10::IntArrayRef shifts, c10::IntArrayRef dims) {
  if (dims.empty()) {
    TORCH_CHECK(shifts.size() == 1, "roll: with no dims there is one shift, got ", shifts.size());
    return NpuNativeFunctions::roll(x.reshape({-1}), shifts, {0}).view(x.sizes());
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

at::Tensor NpuNativeFunctions::channel_shuffle_symint(const at::Tensor& x, c10::SymInt groups_sym) {
  const int64_t groups = groups_sym.expect_int();
  TORCH_CHECK(x.dim() > 2, "channel_shuffle expects input to have at least 3 dimensions, but got input with sizes ", x.sizes());
  TORCH_CHECK(groups > 0 && x.size(1) % groups == 0, "Number of channels must be divisible by groups. Got ", x.size(1), " channels and ",
              groups, " groups.");
  std::vector<int64_t> grouped = {x.size(0), groups, x.size(1) / groups};
  grouped.insert(grouped.end(), x.sizes().begin() + 2, x.sizes().end());
  return x.reshape(grouped).transpose(1, 2).contiguous().view(x.sizes());
}

at::Tensor NpuNativeFunctions::linalg_cross(const at::Tensor& a, const at::Tensor& b, int64_t dim) {
  TORCH_CHECK(a.dim() == b.dim(), "linalg.cross: inputs must have the same number of dimensions.");
  const int64_t d = at::maybe_wrap_dim(dim, a.dim());
  TORCH_CHECK(a.size(d) == 3 && b.size(d) == 3, "linalg.cross: inputs dimension ", dim, " must have length 3. Got ", a.size(d), " and ",
              b.size(d));
  const std::vector<int64_t> shape = at::infer_size(a.sizes(), b.sizes());
  const at::Tensor x = a.expand(shape), y = b.expand(shape);
  // component i: a[i+1] b[i+2] - a[i+2] b[i+1]
  return at::sub(at::mul(at::roll(x, {-1}, {d}), at::roll(y, {-2}, {d})), at::mul(at::roll(x, {-2}, {d}), at::roll(y, {-1}, {d})));
}

}  // namespace npusim
