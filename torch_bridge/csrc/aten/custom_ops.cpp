// The npusim:: custom ops: the fused kernels that the torch.compile backend
// lowers to, also callable from eager code (torch.ops.npusim.*).
//   gemm(a, b, bias, alpha, beta, epilogue, residual)
//                                            epilogue(alpha * a @ b + beta * bias + residual), one kernel
//   layer_norm(x, weight, bias, eps, dtype)  over the last dim, one kernel
//   rms_norm(x, weight, eps, dtype)          x * rsqrt(mean(x^2) + eps) * weight over the last dim, one kernel
//                                            (the norms' dtype: the result's, x's or f32: the
//                                            norm of x.float() without converting x first)
//   conv2d(x, w, bias, stride, padding, dilation, groups, epilogue, scale, residual)
//                                            epilogue(conv2d(x, w) * scale + bias + residual),
//                                            scale and bias per output channel: im2col and one
//                                            matmul, the rest on its tiles in the accumulator
//                                            (conv.cpp)
//   max_pool2d(x, kernel, stride, padding, dilation, ceil_mode)
//                                            max pooling's values without its indices:
//                                            im2col and one row max (pooling.cpp)
//   attention(q, k, v, is_causal, scale)     softmax(scale * q @ k^T) @ v, one flash-attention
//                                            kernel (attention.cpp)
//   elementwise_chain(inputs, chain, dtype)  a chain of elementwise ops, one kernel
//                                            (elementwise_chain.cpp)
// Their schemas are all declared here (TORCH_LIBRARY below); their kernels
// where the comments say.
// Each has a kernel for the npu (through the compiler) and one for the CPU
// (the same arithmetic from ATen ops, in f32, rounded once at the end). Fake
// kernels and autograd are registered in Python (npusim/custom_ops.py).
#include <ATen/ExpandUtils.h>
#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <torch/library.h>

#include "custom_ops.h"
#include "cpu_fallback.h"
#include "kernel_launch.h"
#include "runtime/runtime.h"

namespace npusim {
namespace {

using npu::compiler::OpDesc;
using npu::compiler::OpKind;

at::Tensor activation(const std::string& name, const at::Tensor& z) {
  if (name == "relu") return at::relu(z);
  if (name == "gelu") return at::gelu(z);
  if (name == "gelu_tanh") return at::gelu(z, "tanh");
  if (name == "silu") return at::silu(z);
  if (name == "tanh") return at::tanh(z);
  return at::sigmoid(z);
}

std::vector<int64_t> gemm_shape(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.dim() >= 2 && b.dim() >= 2, "npusim::gemm: a is [..., M, K] and b [..., K, N]");
  TORCH_CHECK(a.size(-1) == b.size(-2), "npusim::gemm: a is [..., M, K] and b [..., K, N]; K differs (", a.size(-1), " and ", b.size(-2),
              ")");
  std::vector<int64_t> shape = at::infer_size(a.sizes().slice(0, size_t(a.dim() - 2)), b.sizes().slice(0, size_t(b.dim() - 2)));
  shape.push_back(a.size(-2));
  shape.push_back(b.size(-1));
  return shape;
}

at::Tensor gemm_cpu(const at::Tensor& a, const at::Tensor& b, const std::optional<at::Tensor>& bias, double alpha, double beta,
                    const std::vector<std::string>& epilogue, const std::optional<at::Tensor>& residual) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "npusim::gemm: a and b have one dtype");
  gemm_shape(a, b);
  at::Tensor z = at::matmul(a.to(at::kFloat), b.to(at::kFloat));
  if (alpha != 1.0) z = at::mul(z, alpha);
  if (bias) z = at::add(z, bias->to(at::kFloat), beta);
  if (residual) z = at::add(z, residual->to(at::kFloat));
  for (const std::string& name : epilogue) epilogue_kind(name), z = activation(name, z);
  return z.to(a.scalar_type());
}

// A norm's result dtype: x's unless asked for f32.
at::ScalarType norm_dtype(const char* name, const at::Tensor& x, std::optional<at::ScalarType> dtype) {
  TORCH_CHECK(x.dim() >= 1, name, ": x has at least one dim");
  TORCH_CHECK(!dtype || *dtype == x.scalar_type() || *dtype == at::kFloat, name, ": dtype is x's or float32, got ", *dtype);
  return dtype.value_or(x.scalar_type());
}

at::Tensor layer_norm_cpu(const at::Tensor& x, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias, double eps,
                          std::optional<at::ScalarType> dtype) {
  const at::ScalarType result = norm_dtype("npusim::layer_norm", x, dtype);
  const at::Tensor w = weight ? weight->to(at::kFloat) : at::Tensor(), bb = bias ? bias->to(at::kFloat) : at::Tensor();
  return at::layer_norm(x.to(at::kFloat), {x.size(-1)}, w, bb, eps).to(result);
}

at::Tensor rms_norm_cpu(const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps, std::optional<at::ScalarType> dtype) {
  const at::ScalarType result = norm_dtype("npusim::rms_norm", x, dtype);
  const at::Tensor xf = x.to(at::kFloat);
  at::Tensor y = xf * at::rsqrt((xf * xf).mean(-1, true) + eps);
  if (weight) y = y * weight->to(at::kFloat);
  return y.to(result);
}

}  // namespace

// The activations a gemm or conv2d epilogue can apply (their derivatives are in custom_ops.py).
OpKind epilogue_kind(const std::string& name) {
  static const char* const kAllowed[] = {"relu", "gelu", "gelu_tanh", "silu", "tanh", "sigmoid"};
  OpKind kind{};
  for (const char* allowed : kAllowed)
    if (name == allowed && npu::compiler::find_op(name, &kind)) return kind;
  TORCH_CHECK(false, "npusim: epilogue '", name, "' is not one of relu, gelu, gelu_tanh, silu, tanh, sigmoid");
}

at::Tensor conv2d_cpu(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias, c10::IntArrayRef stride,
                      c10::IntArrayRef padding, c10::IntArrayRef dilation, int64_t groups, const std::vector<std::string>& epilogue,
                      const std::optional<at::Tensor>& scale, const std::optional<at::Tensor>& residual) {
  TORCH_CHECK(x.dim() == 4 && weight.dim() == 4, "npusim::conv2d: x is [N, C, H, W] and weight [Cout, C/groups, KH, KW]");
  TORCH_CHECK(x.scalar_type() == weight.scalar_type(), "npusim::conv2d: x and weight have one dtype");
  TORCH_CHECK(!scale || bias, "npusim::conv2d: a scale comes with a bias");
  at::Tensor z = at::conv2d(x.to(at::kFloat), weight.to(at::kFloat), std::nullopt, stride, padding, dilation, groups);
  if (scale) z = at::mul(z, scale->to(at::kFloat).view({1, -1, 1, 1}));
  if (bias) z = at::add(z, bias->to(at::kFloat).view({1, -1, 1, 1}));
  if (residual) {
    TORCH_CHECK(residual->sizes() == z.sizes(), "npusim::conv2d: the residual is ", residual->sizes(), ", the output ", z.sizes());
    z = at::add(z, residual->to(at::kFloat));
  }
  for (const std::string& name : epilogue) epilogue_kind(name), z = activation(name, z);
  return z.to(x.scalar_type());
}

at::Tensor gemm_npu(const at::Tensor& a, const at::Tensor& b, const std::optional<at::Tensor>& bias, double alpha, double beta,
                    const std::vector<std::string>& epilogue, const std::optional<at::Tensor>& residual) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "npusim::gemm: a and b have one dtype");
  std::vector<OpKind> steps;
  for (const std::string& name : epilogue) steps.push_back(epilogue_kind(name));
  at::Tensor out = new_npu(gemm_shape(a, b), a.scalar_type());
  if (residual) at::infer_size(residual->sizes(), out.sizes());  // a c10::Error unless it broadcasts
  std::vector<at::Tensor> inputs = {to_npu(a), to_npu(b)};
  if (!bias && !residual && steps.empty() && alpha == 1.0 && split_k_into(inputs[0], inputs[1], out)) return out;
  if (bias) inputs.push_back(to_npu(*bias));
  if (residual) inputs.push_back(to_npu(*residual));
  const auto make_op = [&] {
    std::vector<npu::compiler::TensorDesc> described;
    for (const at::Tensor& t : inputs) described.push_back(describe(t));
    OpDesc op(OpKind::MATMUL, described, describe(out));
    op.residual = residual.has_value();
    op.alpha = alpha, op.beta = beta, op.epilogue = steps, op.f32_precision = f32_matmul_precision();
    return op;
  };
  if (try_run(make_op, inputs, out)) return out;
  return fall_back_by_name<decltype(gemm_npu)>("npusim::gemm", "", a, b, bias, alpha, beta, epilogue, residual);
}

at::Tensor layer_norm_npu(const at::Tensor& x, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias, double eps,
                          std::optional<at::ScalarType> dtype) {
  at::Tensor out = new_npu(x.sizes(), norm_dtype("npusim::layer_norm", x, dtype));
  std::vector<at::Tensor> inputs = {x};
  // The kernel's bias comes after a weight: no weight is a weight of ones.
  if (weight || bias) inputs.push_back(weight ? to_npu(*weight) : to_npu(at::ones({x.size(-1)}, x.options().device(at::kCPU))));
  if (bias) inputs.push_back(to_npu(*bias));
  const auto make_op = [&] {
    std::vector<npu::compiler::TensorDesc> described;
    for (const at::Tensor& t : inputs) described.push_back(describe(t));
    OpDesc op(OpKind::LAYER_NORM, described, describe(out));
    op.epsilon = eps;
    return op;
  };
  if (try_run(make_op, inputs, out)) return out;
  if (!x.is_contiguous()) {
    // Leading dims that do not merge into rows (a [B, C, T] activation permuted to [B, T, C], as
    // speech and vision encoders do): the rows made contiguous by the chip's copy kernel first.
    inputs[0] = x.contiguous();
    if (try_run(make_op, inputs, out)) return out;
  }
  return fall_back_by_name<decltype(layer_norm_npu)>("npusim::layer_norm", "", x, weight, bias, eps, dtype);
}

at::Tensor rms_norm_npu(const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps, std::optional<at::ScalarType> dtype) {
  at::Tensor out = new_npu(x.sizes(), norm_dtype("npusim::rms_norm", x, dtype));
  std::vector<at::Tensor> inputs = {x};
  if (weight) inputs.push_back(to_npu(*weight));
  const auto make_op = [&] {
    std::vector<npu::compiler::TensorDesc> described;
    for (const at::Tensor& t : inputs) described.push_back(describe(t));
    OpDesc op(OpKind::RMS_NORM, described, describe(out));
    op.epsilon = eps;
    return op;
  };
  if (try_run(make_op, inputs, out)) return out;
  if (!x.is_contiguous()) {  // leading dims that do not merge into rows: made contiguous on the chip first
    inputs[0] = x.contiguous();
    if (try_run(make_op, inputs, out)) return out;
  }
  return fall_back_by_name<decltype(rms_norm_npu)>("npusim::rms_norm", "", x, weight, eps, dtype);
}

TORCH_LIBRARY(npusim, m) {
  m.def("gemm(Tensor a, Tensor b, Tensor? bias, float alpha, float beta, str[] epilogue, Tensor? residual=None) -> Tensor");
  m.def("layer_norm(Tensor x, Tensor? weight=None, Tensor? bias=None, float eps=1e-05, ScalarType? dtype=None) -> Tensor");
  m.def("rms_norm(Tensor x, Tensor? weight=None, float eps=1.1920928955078125e-07, ScalarType? dtype=None) -> Tensor");
  m.def("conv2d(Tensor x, Tensor weight, Tensor? bias, int[2] stride, int[2] padding, int[2] dilation, int groups, str[] epilogue, "
        "Tensor? scale=None, Tensor? residual=None) -> Tensor");
  m.def("max_pool2d(Tensor x, int[2] kernel_size, int[2] stride, int[2] padding, int[2] dilation, bool ceil_mode) -> Tensor");
  m.def("attention(Tensor q, Tensor k, Tensor v, bool is_causal, float? scale) -> Tensor");
  m.def("elementwise_chain(Tensor[] inputs, str chain, ScalarType? dtype=None) -> Tensor");
}

TORCH_LIBRARY_IMPL(npusim, CPU, m) {
  m.impl("gemm", gemm_cpu);
  m.impl("layer_norm", layer_norm_cpu);
  m.impl("rms_norm", rms_norm_cpu);
  m.impl("conv2d", conv2d_cpu);
}

TORCH_LIBRARY_IMPL(npusim, PrivateUse1, m) {
  m.impl("gemm", gemm_npu);
  m.impl("layer_norm", layer_norm_npu);
  m.impl("rms_norm", rms_norm_npu);
  m.impl("conv2d", conv2d_npu);
}

}  // namespace npusim
