// Embedding bags on the npu (F.embedding_bag, nn.EmbeddingBag: recommendation models' sparse
// features), sum and mean modes, from the gather kernel and index_add (no atomic add on the chip:
// index_add is a one-hot matmul on the tensor core):
//   forward    each index's bag by searchsorted of its position among the offsets (right side,
//              minus one); the rows gathered, times the per-sample weights (sum mode), zero at
//              padding_idx; summed per bag by index_add (f32, rounded once: the CPU adds in order,
//              within rounding); mean divides by the bag's count of non-padding indices (an empty
//              bag gives zeros, as on the CPU)
//   backward   grad's row of each index's bag (divided by the bag size for mean, times its
//              per-sample weight for sum), zero at padding_idx, added into the table's rows by
//              index_add; the per-sample weights' gradient as each index's row dotted with its
//              bag's gradient
// The auxiliary outputs hold each index's bag (offset2bag) and the bag sizes in both modes (the CPU
// leaves offset2bag empty in sum mode; only the backward reads them). Max mode, scale_grad_by_freq,
// non-float tables and beyond 2^24 one-hot terms: the CPU, counted.
#include <ATen/Functions.h>
#include <torch/library.h>

#include <optional>
#include <tuple>

#include "PrivateUse1NativeFunctions.h"
#include "cpu_fallback.h"
#include "kernel_launch.h"

namespace npusim {
namespace {

constexpr int64_t kMaxOneHot = int64_t{1} << 24;
constexpr int64_t kSum = 0, kMean = 1;

using Bag = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

bool bag_on_chip(const at::Tensor& weight, const at::Tensor& indices, const at::Tensor& offsets, int64_t mode,
                 const std::optional<at::Tensor>& per_sample_weights) {
  const auto index_dtype = [](const at::Tensor& t) { return on_npu(t) && (t.scalar_type() == at::kLong || t.scalar_type() == at::kInt); };
  return chip_float(weight) && weight.dim() == 2 && index_dtype(indices) && indices.dim() == 1 && index_dtype(offsets) && offsets.dim() == 1 &&
         (mode == kSum || mode == kMean) && (!defined(per_sample_weights) || chip_float(*per_sample_weights)) &&
         indices.numel() * offsets.numel() <= kMaxOneHot;
}

// Zero where the index is padding_idx (none when it is negative).
at::Tensor without_padding(const at::Tensor& rows, const at::Tensor& indices, int64_t padding_idx) {
  if (padding_idx < 0) return rows;
  return at::where(at::ne(indices, padding_idx).unsqueeze(-1), rows, at::zeros({}, at::TensorOptions().dtype(rows.scalar_type())));
}

Bag embedding_bag(const at::Tensor& weight, const at::Tensor& indices, const at::Tensor& offsets, bool scale_grad_by_freq,
                  int64_t mode, bool sparse, const std::optional<at::Tensor>& per_sample_weights, bool include_last_offset, int64_t padding_idx,
                  bool forward_only) {
  if (!bag_on_chip(weight, indices, offsets, mode, per_sample_weights)) {
    const char* reason = "max mode, not a float table with 1-D indices and offsets, or beyond 2^24 one-hot terms";
    if (forward_only)
      return fall_back<at::_ops::_embedding_bag_forward_only>(reason, weight, indices, offsets, scale_grad_by_freq, mode, sparse,
                                                              per_sample_weights, include_last_offset, padding_idx);
    return fall_back<at::_ops::_embedding_bag>(reason, weight, indices, offsets, scale_grad_by_freq, mode, sparse, per_sample_weights,
                                               include_last_offset, padding_idx);
  }
  const int64_t bags = include_last_offset ? offsets.numel() - 1 : offsets.numel(), n = indices.numel(), d = weight.size(1);
  TORCH_CHECK(bags >= 0, "embedding_bag: offsets has to be a 1D Tensor with at least one element when include_last_offset is set");
  const at::TensorOptions f32 = at::TensorOptions().dtype(at::kFloat).device(kNpu);
  if (bags == 0 || n == 0) {
    const at::Tensor sizes = at::zeros({bags}, f32.dtype(at::kLong));
    return {at::zeros({bags, d}, weight.options()), at::zeros({n}, f32.dtype(at::kLong)), sizes, sizes.clone()};
  }
  // Each index's bag: the number of bag starts at or before its position, minus one.
  const at::Tensor starts = index_words(offsets.narrow(0, 0, bags));
  const at::Tensor positions = to_npu(at::arange(n, at::TensorOptions().dtype(at::kInt)));
  const at::Tensor offset2bag = at::sub(at::searchsorted(starts, positions, /*out_int32=*/false, /*right=*/true), 1);
  at::Tensor rows = as_f32(at::index_select(weight, 0, indices));
  if (mode == kSum && defined(per_sample_weights)) rows = at::mul(rows, as_f32(*per_sample_weights).unsqueeze(-1));
  rows = without_padding(rows, indices, padding_idx);
  const at::Tensor counted = padding_idx < 0 ? at::ones({n}, f32) : at::ne(indices, padding_idx).to(at::kFloat);
  const at::Tensor bag_size = at::index_add(at::zeros({bags}, f32), 0, offset2bag, counted);
  at::Tensor out = at::index_add(at::zeros({bags, d}, f32), 0, offset2bag, rows);
  if (mode == kMean) out = at::div(out, at::clamp_min(bag_size, 1).unsqueeze(-1));
  const at::Tensor sizes = bag_size.to(at::kInt).to(at::kLong);
  return {out.to(weight.scalar_type()), offset2bag, sizes, sizes.clone()};
}

}  // namespace

Bag NpuNativeFunctions::_embedding_bag(const at::Tensor& weight, const at::Tensor& indices, const at::Tensor& offsets,
                                       bool scale_grad_by_freq, int64_t mode, bool sparse,
                                       const std::optional<at::Tensor>& per_sample_weights, bool include_last_offset, int64_t padding_idx) {
  return embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse, per_sample_weights, include_last_offset,
                       padding_idx, false);
}
Bag NpuNativeFunctions::_embedding_bag_forward_only(const at::Tensor& weight, const at::Tensor& indices, const at::Tensor& offsets,
                                                    bool scale_grad_by_freq, int64_t mode, bool sparse,
                                                    const std::optional<at::Tensor>& per_sample_weights, bool include_last_offset,
                                                    int64_t padding_idx) {
  return embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse, per_sample_weights,
                       include_last_offset, padding_idx, true);
}

at::Tensor NpuNativeFunctions::_embedding_bag_dense_backward_symint(const at::Tensor& grad, const at::Tensor& indices,
                                                                    const at::Tensor& offset2bag, const at::Tensor& bag_size,
                                                                    const at::Tensor& maximum_indices, c10::SymInt num_weights_sym,
                                                                    bool scale_grad_by_freq, int64_t mode,
                                                                    const std::optional<at::Tensor>& per_sample_weights, int64_t padding_idx) {
  const int64_t num_weights = num_weights_sym.expect_int(), n = indices.numel();
  const bool supported = chip_float(grad) && grad.dim() == 2 && on_npu(indices) && offset2bag.numel() == n && (mode == kSum || mode == kMean) &&
                         !scale_grad_by_freq && (!defined(per_sample_weights) || chip_float(*per_sample_weights)) && n * num_weights <= kMaxOneHot;
  if (!supported) {
    return fall_back<at::_ops::_embedding_bag_dense_backward>("max mode, scale_grad_by_freq, or beyond 2^24 one-hot terms", grad, indices,
                                                              offset2bag, bag_size, maximum_indices, num_weights, scale_grad_by_freq, mode,
                                                              per_sample_weights, padding_idx);
  }
  const at::TensorOptions f32 = at::TensorOptions().dtype(at::kFloat).device(kNpu);
  if (n == 0) return at::zeros({num_weights, grad.size(1)}, grad.options());
  at::Tensor rows = at::index_select(as_f32(grad), 0, offset2bag);
  if (mode == kMean) rows = at::div(rows, at::clamp_min(at::index_select(bag_size, 0, offset2bag).to(at::kFloat), 1).unsqueeze(-1));
  if (mode == kSum && defined(per_sample_weights)) rows = at::mul(rows, as_f32(*per_sample_weights).unsqueeze(-1));
  rows = without_padding(rows, indices, padding_idx);
  return at::index_add(at::zeros({num_weights, grad.size(1)}, f32), 0, indices, rows).to(grad.scalar_type());
}

// What autograd calls: the dense backward above (sparse gradients: the CPU, counted).
at::Tensor NpuNativeFunctions::_embedding_bag_backward_symint(const at::Tensor& grad, const at::Tensor& indices, const at::Tensor& offsets,
                                                              const at::Tensor& offset2bag, const at::Tensor& bag_size,
                                                              const at::Tensor& maximum_indices, c10::SymInt num_weights,
                                                              bool scale_grad_by_freq, int64_t mode, bool sparse,
                                                              const std::optional<at::Tensor>& per_sample_weights, int64_t padding_idx) {
  if (sparse) {
    return fall_back<at::_ops::_embedding_bag_backward>("a sparse gradient", grad, indices, offsets, offset2bag, bag_size, maximum_indices,
                                                        num_weights.guard_int(__FILE__, __LINE__), scale_grad_by_freq, mode, sparse,
                                                        per_sample_weights, padding_idx);
  }
  return NpuNativeFunctions::_embedding_bag_dense_backward_symint(grad, indices, offset2bag, bag_size, maximum_indices, num_weights, scale_grad_by_freq, mode,
                                          per_sample_weights, padding_idx);
}

at::Tensor NpuNativeFunctions::_embedding_bag_per_sample_weights_backward(const at::Tensor& grad, const at::Tensor& weight,
                                                                          const at::Tensor& indices, const at::Tensor& offsets,
                                                                          const at::Tensor& offset2bag, int64_t mode, int64_t padding_idx) {
  TORCH_CHECK(mode == kSum, "embedding_bag_backward: per_sample_weights only supported for mode='sum'");
  if (!chip_float(grad) || !chip_float(weight) || !on_npu(indices) || offset2bag.numel() != indices.numel()) {
    return fall_back<at::_ops::_embedding_bag_per_sample_weights_backward>("not chip floats", grad, weight, indices, offsets, offset2bag, mode,
                                                                          padding_idx);
  }
  const at::Tensor products = at::mul(at::index_select(as_f32(grad), 0, offset2bag), as_f32(at::index_select(weight, 0, indices)));
  const at::Tensor dots = at::sum(without_padding(products, indices, padding_idx), {-1});
  return dots.to(grad.scalar_type());
}

}  // namespace npusim
