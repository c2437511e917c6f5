// Scaled-dot-product attention on the npu.
//
// torch.nn.functional.scaled_dot_product_attention asks each backend which
// implementation to use (_fused_sdp_choice): without a mask or dropout the
// npu answers OVERRIDEABLE, and PyTorch calls
// _scaled_dot_product_fused_attention_overrideable, which runs the compiler's
// fused flash-attention kernel (one kernel, the scores never in DRAM; f32 on a
// tensor core without f32 as bf16 parts, at torch's float32 matmul precision),
// or, where the compiler declines it (a layout it cannot read even copied),
// the unfused sequence on the chip: scores by gemm (the causal mask as its
// bias), softmax, gemm. With a mask (bool or additive) and nothing that needs a
// gradient of its own, also OVERRIDEABLE: the fused kernel with the mask as its
// fourth input, else the unfused sequence with the mask added to
// the scores in the gemm's epilogue (as its residual); either way rows whose
// keys are all masked give zeros, as PyTorch's math does (graph mode turns a
// constant causal mask into is_causal: npusim/lowering.py). The backward
// recomputes the probabilities with the mask. With dropout, or a mask that
// needs a gradient, PyTorch's math decomposition runs, op by op. The same
// forward is the custom op npusim::attention.
//
// The forward does not compute the logsumexp that the op returns (a buffer
// of the right shape, unwritten): the npu's backward recomputes the
// probabilities from q, k and v, with the unfused ops on the chip.
//
// Grouped-query attention (enable_gqa: Hq query heads, Hkv = Hq / G key/value
// heads, as Llama's) reaches the same op with k and v of Hkv heads: q is viewed
// [..., Hkv, G, L, D] and k, v [..., Hkv, 1, S, D], so that the kernels read each
// key/value head once per query tile of its group, broadcast (stride 0), never
// repeated in memory; the backward sums k's and v's gradients over the group.
#include <ATen/ExpandUtils.h>
#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "PrivateUse1NativeFunctions.h"
#include "custom_ops.h"
#include "kernel_launch.h"
#include "runtime/runtime.h"

namespace npusim {

namespace {
using npu::compiler::OpDesc;
using npu::compiler::OpKind;

double default_scale(const at::Tensor& q, std::optional<double> scale) { return scale ? *scale : 1.0 / std::sqrt(double(q.size(-1))); }

// The causal mask as an additive f32 bias [L, S]: -inf above the diagonal (keys j > query i).
std::optional<at::Tensor> causal_bias(const at::Tensor& q, const at::Tensor& k, bool is_causal) {
  if (!is_causal) return std::nullopt;
  const at::Tensor above = at::ones({q.size(-2), k.size(-2)}, at::kBool).triu(1);
  return to_npu(at::zeros({q.size(-2), k.size(-2)}, at::kFloat).masked_fill(above, -std::numeric_limits<float>::infinity()));
}

// Whether t's dims before its last two merge into one stride (size-1 dims aside).
bool batch_dims_merge(const at::Tensor& t) {
  int64_t outer_stride = -1;
  for (int64_t d = 0; d + 2 < t.dim(); ++d) {
    if (t.size(d) == 1) continue;
    if (outer_stride >= 0 && outer_stride != t.stride(d) * t.size(d)) return false;
    outer_stride = t.stride(d);
  }
  return true;
}

// A bool mask as 0 (visible) / -inf (hidden) in f32; an additive mask as it is.
at::Tensor additive(const at::Tensor& mask) {
  if (mask.scalar_type() != at::kBool) return mask;
  return at::where(mask, at::zeros({}, mask.options().dtype(at::kFloat)),
                   at::full({}, -std::numeric_limits<float>::infinity(), mask.options().dtype(at::kFloat)));
}

// An attention mask as an additive mask of the scores' shape [..., L, S] (a view:
// broadcast dims stride 0), dense where its batch dims would not merge into one
// stride, which the matmul kernel needs to add it as a residual.
at::Tensor additive_mask(const at::Tensor& mask, c10::IntArrayRef scores_shape) {
  const at::Tensor additive_view = additive(mask).expand(scores_shape);
  return batch_dims_merge(additive_view) ? additive_view : additive_view.contiguous();
}

// P = softmax(scale * q @ k^T + mask), on the chip: the causal mask as the gemm's bias, another mask as its residual.
at::Tensor probabilities(const at::Tensor& q, const at::Tensor& k, bool is_causal, double scale, const at::Tensor* mask = nullptr) {
  std::optional<at::Tensor> residual;
  if (mask) {
    std::vector<int64_t> shape = at::infer_size(q.sizes().slice(0, size_t(q.dim() - 2)), k.sizes().slice(0, size_t(k.dim() - 2)));
    shape.push_back(q.size(-2)), shape.push_back(k.size(-2));
    residual = additive_mask(*mask, shape);
  }
  const at::Tensor scores = gemm_npu(q, k.transpose(-2, -1), causal_bias(q, k, is_causal), scale, 1.0, {}, residual);
  return at::_softmax(scores, -1, false);
}

// The output of attention under a mask, with the rows whose keys are all masked made zeros
// (PyTorch's _safe_softmax; softmax itself gives NaN there). Computed on the mask, not the scores.
at::Tensor zero_fully_masked_rows(const at::Tensor& out, const at::Tensor& mask) {
  const at::Tensor visible = mask.scalar_type() == at::kBool ? mask : at::ne(mask, -std::numeric_limits<double>::infinity());
  return at::where(visible.any(-1, true), out, at::zeros({}, out.options()));
}
// q, k, v (and a mask) of grouped-query attention as the views described at the top, or as they are
// where the head counts agree.
struct Grouped {
  at::Tensor q, k, v;
  std::optional<at::Tensor> mask;
  bool grouped = false;
};
Grouped grouped_views(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor* mask) {
  Grouped g{q, k, v, mask ? std::optional<at::Tensor>(*mask) : std::nullopt};
  if (q.dim() < 3 || k.size(-3) == q.size(-3)) return g;
  const int64_t kv_heads = k.size(-3), group = q.size(-3) / kv_heads;
  g.grouped = true;
  g.q = q.unflatten(-3, {kv_heads, group});
  g.k = k.unsqueeze(-3), g.v = v.unsqueeze(-3);
  // A mask with a head dim of Hq splits it as q's; one broadcast over the heads gets a group dim of 1, and
  // one per batch element is made dense over the key/value heads, so that its batch dims merge with k's and
  // v's into the kernel's two (batch x key/value head, group).
  if (mask && mask->dim() >= 3 && mask->size(-3) == q.size(-3)) {
    g.mask = mask->unflatten(-3, {kv_heads, group});
  } else if (mask) {
    at::Tensor m = mask->unsqueeze(-3);
    if (m.dim() == 5 && m.size(0) > 1) {
      std::vector<int64_t> sizes(m.sizes().begin(), m.sizes().end());
      sizes[1] = kv_heads;
      m = m.expand(sizes).contiguous();
    }
    g.mask = m;
  }
  return g;
}
// [..., Hkv, G, L, E] back to [..., Hq, L, E].
at::Tensor ungrouped(const at::Tensor& t) { return t.flatten(-4, -3); }
}  // namespace

at::Tensor attention_npu(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool is_causal, double scale,
                         const at::Tensor* mask = nullptr) {
  TORCH_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2, "attention: q, k and v have at least 2 dims");
  std::vector<int64_t> shape(q.sizes().begin(), q.sizes().end());
  shape.back() = v.size(-1);
  // The output laid out in the order of q's strides (PyTorch's SDPA kernels do the same, and compiled graphs view it so).
  const auto laid_out = [&](const at::Tensor& result) {
    if (q.is_contiguous()) return result;
    at::Tensor in_order = new_npu_in_order_of(result.sizes(), result.scalar_type(), q);
    if (in_order.strides() == result.strides()) return result;
    in_order.copy_(result);
    return in_order;
  };
  // The fused kernel takes an additive mask (f32 or q's dtype; a bool mask becomes 0 / -inf in f32) as
  // it is, broadcast dims and all, and gives zeros where a query's keys are all masked, as PyTorch does.
  const std::optional<at::Tensor> fused_mask = mask ? std::optional<at::Tensor>(additive(*mask)) : std::nullopt;
  const auto fused = [&](const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in, const at::Tensor& out) {
    std::vector<at::Tensor> inputs = {q_in, k_in, v_in};
    if (fused_mask) inputs.push_back(*fused_mask);
    const auto make_op = [&] {
      std::vector<npu::compiler::TensorDesc> described;
      for (const at::Tensor& t : inputs) described.push_back(describe(t));
      OpDesc op(OpKind::ATTENTION, described, describe(out));
      op.scale = scale, op.is_causal = is_causal, op.f32_precision = f32_matmul_precision();
      return op;
    };
    return try_run(make_op, inputs, out);
  };
  // The kernel walks up to two batch dims (batch and heads laid out apart too) and reads heads in place;
  // it writes the output in q's order itself, so that no copy follows.
  at::Tensor out = q.is_contiguous() ? new_npu(shape, q.scalar_type()) : new_npu_in_order_of(shape, q.scalar_type(), q);
  if (fused(q, k, v, out)) return laid_out(out);
  // Else batch and head dims that do not merge into one stride (heads interleaved with the sequence,
  // B and H > 1; or grouped-query attention's three batch dims with q's heads laid out apart) are
  // copied contiguous on the chip, and the output is written dense, then copied into q's layout.
  const at::Tensor qm = batch_dims_merge(q) ? q : q.contiguous(), km = batch_dims_merge(k) ? k : k.contiguous(),
                   vm = batch_dims_merge(v) ? v : v.contiguous();
  const bool copied = !qm.is_same(q) || !km.is_same(k) || !vm.is_same(v);
  const at::Tensor dense_out = out.is_contiguous() ? out : new_npu(shape, q.scalar_type());
  if (copied && fused(qm, km, vm, dense_out)) return laid_out(dense_out);
  if (qm.stride(-1) != 1 || km.stride(-1) != 1 || vm.stride(-1) != 1) {  // the kernel reads head dims contiguous
    if (fused(qm.contiguous(), km.contiguous(), vm.contiguous(), dense_out)) return laid_out(dense_out);
  }
  // Where it declines: gemm (the mask in its epilogue), softmax, gemm, the last straight into q's layout.
  const at::Tensor p = probabilities(qm, km, is_causal, scale, fused_mask ? &*fused_mask : nullptr);
  at::Tensor result = q.is_contiguous() ? new_npu(shape, q.scalar_type()) : new_npu_in_order_of(shape, q.scalar_type(), q);
  if (!gemm_into(p, vm, nullptr, result)) result = gemm_npu(p, vm, std::nullopt, 1.0, 1.0, {});
  return laid_out(mask ? zero_fully_masked_rows(result, *mask) : result);
}

int64_t NpuNativeFunctions::_fused_sdp_choice(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                              const std::optional<at::Tensor>& mask, double dropout, bool is_causal,
                                              std::optional<double> scale, bool enable_gqa) {
  constexpr int64_t kMath = 0, kOverrideable = 4;  // torch.nn.attention.SDPBackend
  // Grouped-query attention where the query heads are a multiple of the key/value heads (else PyTorch's
  // math path gives its error).
  // (Sizes as SymInts: under torch.compile's dynamic shapes these tests become guards on the sizes'
  // relations; Tensor::size() would specialize the graph to each size.)
  const bool groups_fit = !enable_gqa || (q.dim() >= 3 && k.dim() == q.dim() && v.dim() == q.dim() && k.sym_size(-3) == v.sym_size(-3) &&
                                          k.sym_size(-3) > 0 && q.sym_size(-3) % k.sym_size(-3) == 0);
  const bool plain = dropout == 0.0 && groups_fit && (q.dim() == 3 || q.dim() == 4) && at::isFloatingType(q.scalar_type()) &&
                     q.scalar_type() == k.scalar_type() && q.scalar_type() == v.scalar_type();
  // A mask: bool, or additive in q's dtype, that takes no gradient itself (the npu's backward gives q, k and v theirs).
  const bool maskable =
      !mask || ((mask->scalar_type() == at::kBool || mask->scalar_type() == q.scalar_type()) && !is_causal && mask->dim() <= q.dim() &&
                !mask->requires_grad());
  return plain && maskable ? kOverrideable : kMath;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor, at::Tensor, at::Tensor>
NpuNativeFunctions::_scaled_dot_product_fused_attention_overrideable(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                                     const std::optional<at::Tensor>& bias, double dropout, bool is_causal,
                                                                     bool return_debug_mask, std::optional<double> scale) {
  TORCH_CHECK(dropout == 0.0, "npusim: the fused attention takes no dropout");
  const Grouped g = grouped_views(q, k, v, bias ? &*bias : nullptr);
  at::Tensor out = attention_npu(g.q, g.k, g.v, is_causal, default_scale(q, scale), g.mask ? &*g.mask : nullptr);
  if (g.grouped) out = ungrouped(out);
  const int64_t batch = q.dim() == 4 ? q.size(0) : 1, heads = q.size(-3);
  const at::Tensor logsumexp = new_npu({batch, heads, q.size(-2)}, at::kFloat);  // see the note at the top
  const at::Tensor seed = at::empty({}, q.options().dtype(at::kLong).device(at::kCPU));
  return {out, logsumexp, at::Tensor(), at::Tensor(), c10::SymInt(q.size(-2)), c10::SymInt(k.size(-2)), seed, seed, at::Tensor()};
}

// The gradients from the probabilities, recomputed: with P = softmax(S), S = scale q k^T (+ mask),
// dV = P^T dO, dP = dO V^T, dS = P * (dP - rowsum(dP * P)), dQ = scale dS K, dK = scale dS^T Q.
// A query whose keys are all masked has P = 0 (the forward's zeros), so its gradients are 0.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>
NpuNativeFunctions::_scaled_dot_product_fused_attention_overrideable_backward_symint(const at::Tensor& grad_out, const at::Tensor& q,
                                                                                     const at::Tensor& k, const at::Tensor& v,
                                                                                     const at::Tensor& attn_bias, std::array<bool, 4> mask,
                                                                                     const at::Tensor&, const at::Tensor&,
                                                                                     const at::Tensor&, const at::Tensor&, c10::SymInt,
                                                                                     c10::SymInt, double, bool is_causal, const at::Tensor&,
                                                                                     const at::Tensor&, std::optional<double> scale_opt) {
  // fused_sdp_choice keeps a mask that needs a gradient of its own on PyTorch's math.
  TORCH_CHECK(!mask[3], "npusim: the attention backward gives no gradient for the mask");
  const double scale = default_scale(q, scale_opt);
  // Grouped-query attention: each key/value head's G query heads as G*L rows of one head, [..., Hkv, G*L, D]
  // (no broadcast for the gemms, and the products with q and the output's gradient sum k's and v's gradients
  // over the group themselves); the causal mask then is an explicit bias, as the rows are no longer positions.
  const bool grouped = q.dim() >= 3 && k.size(-3) != q.size(-3);
  const int64_t kv_heads = k.size(-3), group = grouped ? q.size(-3) / kv_heads : 1, queries = q.size(-2);
  const auto rows = [&](const at::Tensor& t) { return grouped ? t.unflatten(-3, {kv_heads, group}).flatten(-3, -2) : t; };
  std::optional<at::Tensor> bias;
  if (attn_bias.defined()) {
    std::vector<int64_t> scores(q.sizes().begin(), q.sizes().end());
    scores.back() = k.size(-2);
    bias = grouped ? rows(attn_bias.expand(scores)) : attn_bias;
  } else if (grouped && is_causal) {
    bias = causal_bias(q, k, true)->expand({group, queries, k.size(-2)}).reshape({group * queries, k.size(-2)});
  }
  // The gemms need one batch stride per operand (batch and heads laid out apart are copied, as in the forward).
  const auto merged = [](const at::Tensor& t) { return batch_dims_merge(t) ? t : t.contiguous(); };
  const at::Tensor qm = merged(rows(q)), km = merged(k), vm = merged(v), gm = merged(rows(grad_out));
  at::Tensor p = probabilities(qm, km, is_causal && !grouped, scale, bias ? &*bias : nullptr);
  if (attn_bias.defined()) p = zero_fully_masked_rows(p, *bias);
  const at::Tensor dp = gemm_npu(gm, vm.transpose(-2, -1), std::nullopt, 1.0, 1.0, {});
  const at::Tensor ds = p * (dp - (dp * p).sum({-1}, true));
  at::Tensor dq, dk, dv;
  if (mask[0]) dq = gemm_npu(ds, km, std::nullopt, scale, 1.0, {});
  if (mask[1]) dk = gemm_npu(ds.transpose(-2, -1), qm, std::nullopt, scale, 1.0, {});
  if (mask[2]) dv = gemm_npu(p.transpose(-2, -1), gm, std::nullopt, 1.0, 1.0, {});
  if (grouped && dq.defined()) dq = dq.unflatten(-2, {group, queries}).flatten(-4, -3);  // back to q's heads
  // Each gradient laid out as its input is (as PyTorch's meta function says, and compiled graphs view it so).
  const auto laid_out_as = [](const at::Tensor& gradient, const at::Tensor& input) {
    if (!gradient.defined() || gradient.strides() == input.strides()) return gradient;
    at::Tensor result = at::empty_like(input);
    result.copy_(gradient);
    return result;
  };
  return {laid_out_as(dq, q), laid_out_as(dk, k), laid_out_as(dv, v), at::Tensor()};
}

namespace {

at::Tensor attention_cpu(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool is_causal, std::optional<double> scale) {
  return at::scaled_dot_product_attention(q.to(at::kFloat), k.to(at::kFloat), v.to(at::kFloat), std::nullopt, 0.0, is_causal, scale)
      .to(q.scalar_type());
}

at::Tensor attention_op_npu(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool is_causal, std::optional<double> scale) {
  return attention_npu(to_npu(q), to_npu(k), to_npu(v), is_causal, default_scale(q, scale));
}

}  // namespace

}  // namespace npusim

namespace at::native {
// scaled_dot_product_attention asks this stub, per device type, which implementation to run.
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &npusim::NpuNativeFunctions::_fused_sdp_choice)
}  // namespace at::native

namespace npusim {

TORCH_LIBRARY_IMPL(npusim, CPU, m) { m.impl("attention", attention_cpu); }
TORCH_LIBRARY_IMPL(npusim, PrivateUse1, m) { m.impl("attention", attention_op_npu); }

}  // namespace npusim
