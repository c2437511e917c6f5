// Batch norm on the npu: per-channel statistics by row reductions (over the
// positions, then over the batch) and the normalization by broadcast
// elementwise kernels, all in f32 and rounded once to the input's dtype, as
// the CPU computes it. The forward reads a bf16 or f16 input as it is (the
// kernels convert it on the chip): eval is one pass over x.
//
//   training   mean and biased variance over (N, positions); the running
//              stats updated in place with the unbiased variance
//   eval       the running stats; y = x * scale + shift with
//              scale = weight * rsqrt(var + eps), shift = bias - mean * scale
//   backward   x^ = (x - mean) * invstd, sums of grad and grad * x^ per
//              channel; grad_x = weight * invstd * (grad - mean(grad) - x^ *
//              mean(grad * x^)) in training, grad * weight * invstd in eval
#include <ATen/Functions.h>
#include <torch/library.h>

#include "PrivateUse1NativeFunctions.h"
#include "cpu_fallback.h"
#include "kernel_launch.h"

namespace npusim {
namespace {

bool chip_ready(const at::Tensor& x, std::initializer_list<const std::optional<at::Tensor>*> others) {
  return x.dim() >= 2 && chip_floats(x, others);
}

// x [N, C, ...] as [N, C, positions], in its dtype.
at::Tensor rows_in_own_dtype(const at::Tensor& x) { return (x.is_contiguous() ? x : x.contiguous()).view({x.size(0), x.size(1), -1}); }
// The same in f32.
at::Tensor rows_of(const at::Tensor& x) { return as_f32(rows_in_own_dtype(x)); }
// [C] as [1, C, 1], to broadcast over rows_of's layout.
at::Tensor per_channel(const at::Tensor& v) { return as_f32(v).view({1, -1, 1}); }
// The mean over the batch and the positions of t [N, C, P]: [C].
at::Tensor channel_mean(const at::Tensor& t) { return at::mean(at::mean(t, {2}), {0}); }
at::Tensor channel_sum(const at::Tensor& t) { return at::sum(at::sum(t, {2}), {0}); }

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> NpuNativeFunctions::native_batch_norm(const at::Tensor& input,
                                                                                     const std::optional<at::Tensor>& weight,
                                                                                     const std::optional<at::Tensor>& bias,
                                                                                     const std::optional<at::Tensor>& running_mean,
                                                                                     const std::optional<at::Tensor>& running_var,
                                                                                     bool training, double momentum, double eps) {
  if (!chip_ready(input, {&weight, &bias, &running_mean, &running_var}) || (!training && (!defined(running_mean) || !defined(running_var)))) {
    // Not through fall_back: the op updates the running statistics in place, and its schema does not say so
    // (no (a!)), so the boxed fallback would not copy them back.
    note_cpu_fallback("aten::native_batch_norm", "not chip floats, or eval mode without running statistics");
    std::optional<at::Tensor> rm = on_host(running_mean), rv = on_host(running_var);
    auto [out, mean, invstd] = at::native_batch_norm(input.cpu(), on_host(weight), on_host(bias), rm, rv, training, momentum, eps);
    if (defined(running_mean)) running_mean->copy_(*rm);
    if (defined(running_var)) running_var->copy_(*rv);
    return {to_npu(out), to_npu(mean), to_npu(invstd)};
  }
  const at::ScalarType dtype = input.scalar_type();
  const at::Tensor x = rows_in_own_dtype(input);
  at::Tensor mean, var;
  if (training) {
    mean = at::mean(at::mean(x, {2}, false, at::kFloat), {0});
    var = channel_mean(elementwise_chain_in_f32({x, per_channel(mean)}, "sub(in0, in1); mul(%0, %0)", at::kFloat));
    const int64_t count = x.size(0) * x.size(2);
    if (defined(running_mean)) running_mean->copy_(at::add(at::mul(as_f32(*running_mean), 1 - momentum), at::mul(mean, momentum)));
    if (defined(running_var)) {
      const double unbias = count > 1 ? double(count) / double(count - 1) : 1.0;
      running_var->copy_(at::add(at::mul(as_f32(*running_var), 1 - momentum), at::mul(var, momentum * unbias)));
    }
  } else {
    mean = as_f32(*running_mean), var = as_f32(*running_var);
  }
  // Chains: the per-channel vectors in 3 kernels and the normalization in 1 (x converted inside it), where
  // ops one by one took 5 and 4 (the same f32 steps, so the same roundings).
  const at::Tensor invstd = elementwise_chain({var}, "add(in0, " + chain_constant(eps) + "); rsqrt(%0)");
  const at::Tensor scale = defined(weight) ? at::mul(invstd, as_f32(*weight)) : invstd;
  const at::Tensor shift = defined(bias) ? elementwise_chain({mean, scale, as_f32(*bias)}, "mul(in0, in1); sub(in2, %0)")
                                         : elementwise_chain({mean, scale}, "mul(in0, in1); neg(%0)");
  const at::Tensor out = elementwise_chain_in_f32({x, per_channel(scale), per_channel(shift)}, "mul(in0, in1); add(%0, in2)", dtype)
                             .view(input.sizes());
  if (!training) {
    const at::Tensor none = new_npu({0}, dtype);
    return {out, none, none};
  }
  return {out, mean.to(dtype), invstd.to(dtype)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> NpuNativeFunctions::_native_batch_norm_legit(const at::Tensor& input,
                                                                                            const std::optional<at::Tensor>& weight,
                                                                                            const std::optional<at::Tensor>& bias,
                                                                                            at::Tensor& running_mean,
                                                                                            at::Tensor& running_var, bool training,
                                                                                            double momentum, double eps) {
  return NpuNativeFunctions::native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps);
}
std::tuple<at::Tensor, at::Tensor, at::Tensor> NpuNativeFunctions::_native_batch_norm_legit(const at::Tensor& input,
                                                                                            const std::optional<at::Tensor>& weight,
                                                                                            const std::optional<at::Tensor>& bias,
                                                                                            bool training, double momentum, double eps) {
  return NpuNativeFunctions::native_batch_norm(input, weight, bias, std::nullopt, std::nullopt, training, momentum, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> NpuNativeFunctions::native_batch_norm_backward(const at::Tensor& grad,
                                                                                              const at::Tensor& input,
                                                                                              const std::optional<at::Tensor>& weight,
                                                                                              const std::optional<at::Tensor>& running_mean,
                                                                                              const std::optional<at::Tensor>& running_var,
                                                                                              const std::optional<at::Tensor>& save_mean,
                                                                                              const std::optional<at::Tensor>& save_invstd,
                                                                                              bool training, double eps,
                                                                                              std::array<bool, 3> mask) {
  const bool stats = training ? defined(save_mean) && defined(save_invstd) : defined(running_mean) && defined(running_var);
  if (!chip_ready(input, {&weight, &running_mean, &running_var, &save_mean, &save_invstd}) || !chip_float(grad) || !stats) {
    return fall_back<at::_ops::native_batch_norm_backward>("not chip floats, or no saved or running statistics", grad, input, weight,
                                                           running_mean, running_var, save_mean, save_invstd, training, eps, mask);
  }
  const at::Tensor x = rows_of(input), g = rows_of(grad);
  const at::Tensor mean = training ? as_f32(*save_mean) : as_f32(*running_mean);
  const at::Tensor invstd = training ? as_f32(*save_invstd) : at::rsqrt(at::add(as_f32(*running_var), eps));
  const at::Tensor normalized = at::mul(at::sub(x, per_channel(mean)), per_channel(invstd));
  const at::Tensor grad_bias = channel_sum(g);
  const at::Tensor grad_weight = channel_sum(at::mul(g, normalized));
  at::Tensor gi, gw, gb;
  if (mask[0]) {
    const at::Tensor scale = defined(weight) ? at::mul(invstd, as_f32(*weight)) : invstd;
    at::Tensor centered = g;
    if (training) {
      const double count = double(x.size(0) * x.size(2));
      centered = at::sub(at::sub(g, per_channel(at::div(grad_bias, count))), at::mul(normalized, per_channel(at::div(grad_weight, count))));
    }
    gi = at::mul(centered, per_channel(scale)).to(input.scalar_type()).view(input.sizes());
  }
  const at::ScalarType param = defined(weight) ? weight->scalar_type() : input.scalar_type();
  if (mask[1]) gw = grad_weight.to(param);
  if (mask[2]) gb = grad_bias.to(param);
  return {gi, gw, gb};
}

}  // namespace npusim
