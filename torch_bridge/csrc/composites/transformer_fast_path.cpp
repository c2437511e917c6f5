// The inference fast paths of nn.MultiheadAttention and nn.TransformerEncoderLayer
// (torch._native_multi_head_attention, torch._transformer_encoder_layer_fwd),
// which PyTorch takes on a "privateuse1" device as on CUDA (batch-first, eval,
// no grad): here the layers' own arithmetic, op by op on the chip (linear,
// scaled_dot_product_attention, layer_norm, relu or gelu), so that the whole
// layer no longer runs on the CPU. The masks are nn.MultiheadAttention's
// (merge_masks): type 0 an attention mask [L, S], type 1 a key padding mask
// [B, S], type 2 one of [B, H, L, S]; a bool mask's True means "do not
// attend", a float mask is added to the scores.
#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <torch/library.h>

#include <cmath>

#include "PrivateUse1NativeFunctions.h"
#include "aten/kernel_launch.h"

namespace npusim {
namespace {

// The mask in scaled_dot_product_attention's terms ([.., L, S] broadcast to [B, H, L, S]; bool True: attend).
std::optional<at::Tensor> attention_mask(const std::optional<at::Tensor>& mask, std::optional<int64_t> mask_type, int64_t batch) {
  if (!mask || !mask->defined()) return std::nullopt;
  at::Tensor m = mask->scalar_type() == at::kBool ? mask->logical_not() : *mask;
  const int64_t type = mask_type.value_or(m.dim() == 2 && m.size(0) == batch ? 1 : 0);
  TORCH_CHECK(type >= 0 && type <= 2, "npusim: mask_type ", type, " is not one of 0 (attention), 1 (key padding), 2 (merged)");
  if (type == 1) return m.view({m.size(0), 1, 1, m.size(-1)});
  return m;
}

struct Attention {
  at::Tensor output, weights;  // weights: undefined unless asked for
};

// softmax(q k^T / sqrt(D) + mask) v per head, projected in and out; x is [B, L, E] (batch first).
Attention multi_head_attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t embed_dim, int64_t heads,
                               const at::Tensor& qkv_weight, const at::Tensor& qkv_bias, const at::Tensor& proj_weight,
                               const at::Tensor& proj_bias, const std::optional<at::Tensor>& mask, std::optional<int64_t> mask_type,
                               bool need_weights, bool average_weights) {
  TORCH_CHECK(query.dim() == 3 && key.dim() == 3 && value.dim() == 3, "npusim: the fast path's inputs are [B, L, E]");
  TORCH_CHECK(embed_dim % heads == 0, "npusim: embed_dim ", embed_dim, " is not a multiple of num_heads ", heads);
  const int64_t batch = query.size(0), head_dim = embed_dim / heads;
  const std::vector<at::Tensor> w = qkv_weight.chunk(3, 0), b = qkv_bias.chunk(3, 0);
  const auto heads_of = [&](const at::Tensor& x, int64_t i) {
    return at::linear(x, w[size_t(i)], b[size_t(i)]).view({batch, x.size(1), heads, head_dim}).transpose(1, 2);
  };
  const at::Tensor q = heads_of(query, 0), k = heads_of(key, 1), v = heads_of(value, 2);
  const std::optional<at::Tensor> m = attention_mask(mask, mask_type, batch);
  Attention result;
  at::Tensor heads_out;
  if (!need_weights) {
    heads_out = at::scaled_dot_product_attention(q, k, v, m);
  } else {  // the probabilities themselves are asked for: the unfused form
    at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) / std::sqrt(double(head_dim));
    if (m) scores = m->scalar_type() == at::kBool ? scores.masked_fill(m->logical_not(), -INFINITY) : scores + *m;
    const at::Tensor p = at::softmax(scores, -1);
    heads_out = at::matmul(p, v);
    result.weights = average_weights ? p.mean(1) : p;
  }
  result.output = at::linear(heads_out.transpose(1, 2).reshape({batch, query.size(1), embed_dim}), proj_weight, proj_bias);
  return result;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> NpuNativeFunctions::_native_multi_head_attention(const at::Tensor& query, const at::Tensor& key,
                                                                                    const at::Tensor& value, int64_t embed_dim,
                                                                                    int64_t num_head, const at::Tensor& qkv_weight,
                                                                                    const at::Tensor& qkv_bias,
                                                                                    const at::Tensor& proj_weight,
                                                                                    const at::Tensor& proj_bias,
                                                                                    const std::optional<at::Tensor>& mask,
                                                                                    bool need_weights, bool average_attn_weights,
                                                                                    std::optional<int64_t> mask_type) {
  Attention a = multi_head_attention(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias, proj_weight, proj_bias, mask, mask_type,
                                     need_weights, average_attn_weights);
  return {a.output, a.weights.defined() ? a.weights : new_npu({0}, query.scalar_type())};
}

at::Tensor NpuNativeFunctions::_transformer_encoder_layer_fwd(const at::Tensor& src, int64_t embed_dim, int64_t num_heads,
                                                              const at::Tensor& qkv_weight, const at::Tensor& qkv_bias,
                                                              const at::Tensor& proj_weight, const at::Tensor& proj_bias, bool use_gelu,
                                                              bool norm_first, double eps, const at::Tensor& norm_weight_1,
                                                              const at::Tensor& norm_bias_1, const at::Tensor& norm_weight_2,
                                                              const at::Tensor& norm_bias_2, const at::Tensor& ffn_weight_1,
                                                              const at::Tensor& ffn_bias_1, const at::Tensor& ffn_weight_2,
                                                              const at::Tensor& ffn_bias_2, const std::optional<at::Tensor>& mask,
                                                              std::optional<int64_t> mask_type) {
  const auto attention = [&](const at::Tensor& x) {
    return multi_head_attention(x, x, x, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, mask, mask_type, false, false)
        .output;
  };
  const auto feed_forward = [&](const at::Tensor& x) {
    const at::Tensor hidden = at::linear(x, ffn_weight_1, ffn_bias_1);
    return at::linear(use_gelu ? at::gelu(hidden) : at::relu(hidden), ffn_weight_2, ffn_bias_2);
  };
  const auto norm = [&](const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) { return at::layer_norm(x, {embed_dim}, w, b, eps); };
  at::Tensor x = src;
  if (norm_first) {
    x = x + attention(norm(x, norm_weight_1, norm_bias_1));
    return x + feed_forward(norm(x, norm_weight_2, norm_bias_2));
  }
  x = norm(x + attention(x), norm_weight_1, norm_bias_1);
  return norm(x + feed_forward(x), norm_weight_2, norm_bias_2);
}

}  // namespace npusim
