// embedding's backward on the npu: grad_weight[v] is the sum of the gradient
// rows n whose index is v (the padding index's row stays zero). There is no
// scatter-add on the chip, so it is one matmul on the tensor core:
//   grad_weight [V, D] = onehot^T [V, N] @ grad [N, D],  onehot[n, v] = (indices[n] == v)
// with the one-hot built on the chip (the indices, int64 as their low words,
// compared with 0 .. V-1). Ones and zeros are exact in every dtype, so each
// row is its gradients' sum in f32, rounded once: exactly the gradient where
// an index appears once; where one repeats, summed in the matmul's order
// rather than the CPU's running sum (within f32 rounding). It costs V x N x D
// MACs, cheap next to the model's own matmuls for a vocabulary-sized table.
// Kept whole in graphs (the backend keeps what has an npu kernel), so the
// decomposition's int64 bounds checks, clamp and index_put never run.
#include <ATen/Functions.h>
#include <torch/library.h>

#include "PrivateUse1NativeFunctions.h"
#include "cpu_fallback.h"
#include "kernel_launch.h"

namespace npusim {

at::Tensor NpuNativeFunctions::embedding_dense_backward(const at::Tensor& grad_output, const at::Tensor& indices, int64_t num_weights,
                                                        int64_t padding_idx, bool scale_grad_by_freq) {
  const int64_t n = indices.numel();
  const bool supported = !scale_grad_by_freq && chip_float(grad_output) && on_npu(indices) &&
                         (indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt) && num_weights > 0 &&
                         num_weights < (int64_t{1} << 31) && n > 0 && grad_output.dim() >= 1 && grad_output.numel() == n * grad_output.size(-1);
  if (supported) {
    const int64_t d = grad_output.size(-1);
    const at::Tensor flat = indices.reshape({n, 1});
    const at::Tensor i32 = flat.scalar_type() == at::kInt ? flat : int64_words(flat).select(-1, 0);
    const at::Tensor ids = to_npu(at::arange(num_weights, at::TensorOptions().dtype(at::kInt)).reshape({1, num_weights}));
    const at::Tensor onehot = at::eq(i32, ids).to(grad_output.scalar_type());  // [N, V]
    at::Tensor out = new_npu({num_weights, d}, grad_output.scalar_type());
    if (gemm_into(onehot.t(), grad_output.reshape({n, d}), nullptr, out)) {
      if (padding_idx >= 0 && padding_idx < num_weights) out.select(0, padding_idx).zero_();
      return out;
    }
  }
  return fall_back<at::_ops::embedding_dense_backward>("", grad_output, indices, num_weights, padding_idx, scale_grad_by_freq);
}


}  // namespace npusim
