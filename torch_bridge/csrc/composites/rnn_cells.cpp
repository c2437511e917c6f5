// The fused LSTM and GRU cells, which ATen's RNN code calls for every non-CPU device (so nn.LSTM,
// nn.GRU, nn.LSTMCell and nn.GRUCell reach them: without these kernels they raised, the CPU having
// none to fall back on). The gate projections are matmuls already done by the caller; here the
// gates' sums, activations and state updates run as elementwise chains in f32, rounded once to the
// dtype, with the formulas and the saved workspace layout of ATen's GPU kernels:
//   LSTM   gates = input_gates + hidden_gates (+ both biases), chunks i, f, g, o:
//          i, f, o = sigmoid, g = tanh; cy = f cx + i g; hy = o tanh(cy); workspace [B, 4H] = i, f, g, o
//          backward: gcx = go o (1 - tanh(cy)^2) + gcy; the gates' gradients gcx g i (1 - i),
//          gcx cx f (1 - f), gcx i (1 - g^2), go tanh(cy) o (1 - o); grad cx = gcx f
//   GRU    chunks r, z, n: r, z = sigmoid(input + hidden (+ biases)); hn = hidden_n (+ its bias);
//          n = tanh(input_n (+ its bias) + r hn); hy = n + z (hx - n); workspace [B, 5H] = r, z, n, hx, hn
//          backward: gz = go (hx - n) z (1 - z), ghx = go z, gn = go (1 - z)(1 - n^2), ghn = gn r,
//          gr = gn hn r (1 - r); bias gradients as the gates' column sums
// Other dtypes and shapes: the CPU, which has no kernels for these and raises, as before.
#include <ATen/Functions.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "PrivateUse1NativeFunctions.h"
#include "aten/cpu_fallback.h"
#include "aten/kernel_launch.h"

namespace npusim {
namespace {

// The chip computes these where every tensor present is a chip float on the npu.
bool on_chip(std::initializer_list<const at::Tensor*> tensors) {
  for (const at::Tensor* t : tensors)
    if (t->defined() && !chip_float(*t)) return false;
  return true;
}

// Chunk k of H columns of a [B, n H] tensor (or of an [n H] bias; an absent bias stays absent).
at::Tensor gate_columns(const at::Tensor& t, int64_t k, int64_t hidden, int64_t count = 1) {
  return t.defined() ? t.narrow(-1, k * hidden, count * hidden) : t;
}

// The sum of the defined `terms` in f32, then `activation` ("sigmoid", "tanh") unless it is empty.
at::Tensor summed(const std::vector<at::Tensor>& terms, const std::string& activation) {
  std::vector<at::Tensor> inputs;
  for (const at::Tensor& t : terms)
    if (t.defined()) inputs.push_back(as_f32(t));
  std::string chain, last = "in0";
  for (size_t i = 1; i < inputs.size(); ++i) {
    chain += (i > 1 ? "; " : "") + std::string("add(") + last + ", in" + std::to_string(i) + ")";
    last = "%" + std::to_string(i - 1);
  }
  if (activation.empty()) return inputs.size() == 1 ? inputs[0] : elementwise_chain(inputs, chain);
  return elementwise_chain(inputs, chain + (chain.empty() ? "" : "; ") + activation + "(" + last + ")");
}

// A [B, parts.size() * H] tensor of dtype made of the parts, side by side.
at::Tensor side_by_side(const std::vector<at::Tensor>& parts, at::ScalarType dtype) {
  const int64_t hidden = parts[0].size(-1);
  at::Tensor out = new_npu({parts[0].size(0), hidden * int64_t(parts.size())}, dtype);
  for (size_t k = 0; k < parts.size(); ++k) gate_columns(out, int64_t(k), hidden).copy_(parts[k]);
  return out;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> NpuNativeFunctions::_thnn_fused_lstm_cell(const at::Tensor& input_gates,
                                                                                         const at::Tensor& hidden_gates,
                                                                                         const at::Tensor& cx,
                                                                                         const std::optional<at::Tensor>& input_bias,
                                                                                         const std::optional<at::Tensor>& hidden_bias) {
  const at::Tensor b1 = defined(input_bias) ? *input_bias : at::Tensor(), b2 = defined(hidden_bias) ? *hidden_bias : at::Tensor();
  if (!on_chip({&input_gates, &hidden_gates, &cx, &b1, &b2}) || input_gates.dim() != 2 || cx.dim() != 2 || input_gates.numel() == 0) {
    return fall_back<at::_ops::_thnn_fused_lstm_cell>("not 2-D chip floats", input_gates, hidden_gates, cx, input_bias, hidden_bias);
  }
  TORCH_CHECK(input_gates.sizes() == hidden_gates.sizes() && input_gates.size(1) == 4 * cx.size(1) && input_gates.size(0) == cx.size(0),
              "_thnn_fused_lstm_cell: gates of [B, 4H] and a cell state of [B, H] expected");
  const int64_t h = cx.size(1);
  const auto gate = [&](int64_t k, const char* activation) {
    return summed({gate_columns(input_gates, k, h), gate_columns(hidden_gates, k, h), gate_columns(b1, k, h), gate_columns(b2, k, h)}, activation);
  };
  const at::Tensor i = gate(0, "sigmoid"), f = gate(1, "sigmoid"), g = gate(2, "tanh"), o = gate(3, "sigmoid");
  const at::Tensor cy = elementwise_chain({f, as_f32(cx), i, g}, "mul(in0, in1); mul(in2, in3); add(%0, %1)");
  const at::Tensor hy = elementwise_chain({o, cy}, "tanh(in1); mul(in0, %0)");
  const at::ScalarType dtype = input_gates.scalar_type();
  return {hy.to(dtype), cy.to(dtype), side_by_side({i, f, g, o}, dtype)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> NpuNativeFunctions::_thnn_fused_lstm_cell_backward_impl(const std::optional<at::Tensor>& grad_hy,
                                                                                                       const std::optional<at::Tensor>& grad_cy,
                                                                                                       const at::Tensor& cx,
                                                                                                       const at::Tensor& cy,
                                                                                                       const at::Tensor& workspace,
                                                                                                       bool has_bias) {
  const at::Tensor go_given = defined(grad_hy) ? *grad_hy : at::Tensor(), gc_given = defined(grad_cy) ? *grad_cy : at::Tensor();
  if (!on_chip({&go_given, &gc_given, &cx, &cy, &workspace}) || cx.dim() != 2 || workspace.dim() != 2 || cx.numel() == 0) {
    return fall_back<at::_ops::_thnn_fused_lstm_cell_backward_impl>("not 2-D chip floats", grad_hy, grad_cy, cx, cy, workspace, has_bias);
  }
  const int64_t h = cx.size(1);
  const at::Tensor zero = at::zeros(cx.sizes(), at::TensorOptions().dtype(at::kFloat).device(kNpu));
  const at::Tensor go = go_given.defined() ? as_f32(go_given) : zero, gc = gc_given.defined() ? as_f32(gc_given) : zero;
  const auto saved = [&](int64_t k) { return as_f32(gate_columns(workspace, k, h)); };
  const at::Tensor i = saved(0), f = saved(1), g = saved(2), o = saved(3);
  const at::Tensor c = as_f32(cy);
  const at::Tensor gcx = elementwise_chain({go, o, c, gc}, "tanh(in2); mul(%0, %0); sub(1, %1); mul(in0, in1); mul(%3, %2); add(%4, in3)");
  // x (1 - s) s for a sigmoid's output s, times the incoming gradient a * b.
  const std::string through_sigmoid = "mul(in0, in1); sub(1, in2); mul(%0, %1); mul(%2, in2)";
  const at::Tensor gi = elementwise_chain({gcx, g, i}, through_sigmoid);
  const at::Tensor gf = elementwise_chain({gcx, as_f32(cx), f}, through_sigmoid);
  const at::Tensor gg = elementwise_chain({gcx, i, g}, "mul(in0, in1); mul(in2, in2); sub(1, %1); mul(%0, %2)");
  const at::Tensor gout = elementwise_chain({go, c, o}, "tanh(in1); mul(in0, %0); sub(1, in2); mul(%1, %2); mul(%3, in2)");
  const at::ScalarType dtype = workspace.scalar_type();
  const at::Tensor grad_gates = side_by_side({gi, gf, gg, gout}, dtype);
  const at::Tensor grad_cx = at::mul(gcx, f).to(dtype);
  return {grad_gates, grad_cx, has_bias ? at::sum(grad_gates, {0}) : at::Tensor()};
}

std::tuple<at::Tensor, at::Tensor> NpuNativeFunctions::_thnn_fused_gru_cell(const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                                                                            const at::Tensor& hx,
                                                                            const std::optional<at::Tensor>& input_bias,
                                                                            const std::optional<at::Tensor>& hidden_bias) {
  const at::Tensor b1 = defined(input_bias) ? *input_bias : at::Tensor(), b2 = defined(hidden_bias) ? *hidden_bias : at::Tensor();
  if (!on_chip({&input_gates, &hidden_gates, &hx, &b1, &b2}) || input_gates.dim() != 2 || hx.dim() != 2 || input_gates.numel() == 0) {
    return fall_back<at::_ops::_thnn_fused_gru_cell>("not 2-D chip floats", input_gates, hidden_gates, hx, on_host(input_bias), on_host(hidden_bias));
  }
  TORCH_CHECK(input_gates.sizes() == hidden_gates.sizes() && input_gates.size(1) == 3 * hx.size(1) && input_gates.size(0) == hx.size(0),
              "_thnn_fused_gru_cell: gates of [B, 3H] and a hidden state of [B, H] expected");
  const int64_t h = hx.size(1);
  const auto first_two = [&](const at::Tensor& t) { return gate_columns(t, 0, h, 2); };  // r and z together
  const at::Tensor reset_update = summed({first_two(input_gates), first_two(hidden_gates), first_two(b1), first_two(b2)}, "sigmoid");
  const at::Tensor r = gate_columns(reset_update, 0, h), z = gate_columns(reset_update, 1, h);
  const at::Tensor hn = summed({gate_columns(hidden_gates, 2, h), gate_columns(b2, 2, h)}, "");
  const at::Tensor input_n = summed({gate_columns(input_gates, 2, h), gate_columns(b1, 2, h)}, "");
  const at::Tensor n = elementwise_chain({input_n, r, hn}, "mul(in1, in2); add(in0, %0); tanh(%1)");
  const at::Tensor hy = elementwise_chain({n, z, as_f32(hx)}, "sub(in2, in0); mul(in1, %0); add(in0, %1)");
  const at::ScalarType dtype = input_gates.scalar_type();
  return {hy.to(dtype), side_by_side({r, z, n, as_f32(hx), hn}, dtype)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> NpuNativeFunctions::_thnn_fused_gru_cell_backward(const at::Tensor& grad_hy,
                                                                                                                         const at::Tensor& workspace,
                                                                                                                         bool has_bias) {
  if (!on_chip({&grad_hy, &workspace}) || grad_hy.dim() != 2 || workspace.dim() != 2 || grad_hy.numel() == 0) {
    return fall_back<at::_ops::_thnn_fused_gru_cell_backward>("not 2-D chip floats", grad_hy, workspace, has_bias);
  }
  const int64_t h = grad_hy.size(1);
  const at::Tensor go = as_f32(grad_hy);
  const auto saved = [&](int64_t k) { return as_f32(gate_columns(workspace, k, h)); };
  const at::Tensor r = saved(0), z = saved(1), n = saved(2), hx = saved(3), hn = saved(4);
  const at::Tensor gz = elementwise_chain({go, hx, n, z}, "sub(in1, in2); mul(in0, %0); sub(1, in3); mul(%1, %2); mul(%3, in3)");
  const at::Tensor gn = elementwise_chain({go, z, n}, "sub(1, in1); mul(in0, %0); mul(in2, in2); sub(1, %2); mul(%1, %3)");
  const at::Tensor gr = elementwise_chain({gn, hn, r}, "mul(in0, in1); sub(1, in2); mul(%0, %1); mul(%2, in2)");
  const at::ScalarType dtype = workspace.scalar_type();
  const at::Tensor grad_input_gates = side_by_side({gr, gz, gn}, dtype);
  const at::Tensor grad_hidden_gates = side_by_side({gr, gz, at::mul(gn, r)}, dtype);
  const at::Tensor grad_hx = at::mul(go, z).to(dtype);
  if (!has_bias) return {grad_input_gates, grad_hidden_gates, grad_hx, at::Tensor(), at::Tensor()};
  return {grad_input_gates, grad_hidden_gates, grad_hx, at::sum(grad_input_gates, {0}), at::sum(grad_hidden_gates, {0})};
}

}  // namespace npusim
