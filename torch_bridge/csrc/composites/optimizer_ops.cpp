// The optimizer and mixed-precision ops of training loops that have no one
// kernel on the chip, composed of its kernels (they ran on the CPU):
//
//   _fused_adam_, _fused_adamw_   Adam(fused=True), AdamW(fused=True): the update
//                                 of ATen's fused kernels, per parameter in place;
//                                 the step count read on the host, as the CPU's
//                                 fused kernel reads it
//   _amp_foreach_non_finite_check_and_unscale_, _amp_update_scale_
//                                 torch.amp.GradScaler's unscale and its scale
//                                 update, on the device without a host read
//
// With an optimizer that is not fused, GradScaler computes its inverse scale
// in f64 (`_scale.double().reciprocal().float()`), which the chip has no dtype
// for: those two small ops stay on the CPU, counted. A fused optimizer takes
// the scale itself and needs neither.
#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <torch/library.h>

#include <cmath>
#include <type_traits>

#include "PrivateUse1NativeFunctions.h"
#include "aten/kernel_launch.h"

namespace npusim {
namespace {

void fused_adam(bool decoupled_weight_decay, at::TensorList params, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
                at::TensorList max_exp_avg_sqs, at::TensorList state_steps, double lr, double beta1, double beta2, double weight_decay,
                double eps, bool amsgrad, bool maximize, const std::optional<at::Tensor>& grad_scale,
                const std::optional<at::Tensor>& found_inf) {
  // A step with non-finite gradients (GradScaler's found_inf) changes nothing.
  if (found_inf && found_inf->defined() && found_inf->item<double>() == 1.0) return;
  for (size_t i = 0; i < params.size(); ++i) {
    at::Tensor param = params[i], grad = grads[i], exp_avg = exp_avgs[i], exp_avg_sq = exp_avg_sqs[i];
    if (grad_scale && grad_scale->defined()) grad.div_(*grad_scale);  // (stored unscaled, as the fused kernels do)
    at::Tensor g = maximize ? grad.neg() : grad;
    if (weight_decay != 0) {
      if (decoupled_weight_decay) param.mul_(1 - lr * weight_decay);
      else g = g + param * weight_decay;
    }
    exp_avg.lerp_(g, 1 - beta1);
    exp_avg_sq.mul_(beta2).addcmul_(g, g, 1 - beta2);
    const double step = state_steps[i].item<double>();
    const double bias_correction1 = 1 - std::pow(beta1, step), bias_correction2_sqrt = std::sqrt(1 - std::pow(beta2, step));
    at::Tensor second_moment = exp_avg_sq;
    if (amsgrad) {
      at::Tensor max_exp_avg_sq = max_exp_avg_sqs[i];
      max_exp_avg_sq.copy_(at::maximum(max_exp_avg_sq, exp_avg_sq));
      second_moment = max_exp_avg_sq;
    }
    const at::Tensor denominator = (second_moment.sqrt() / bias_correction2_sqrt).add_(eps);
    param.addcdiv_(exp_avg, denominator, -lr / bias_correction1);
  }
}

}  // namespace

// found_inf becomes 1 where any gradient holds an inf or a NaN; every gradient is multiplied by inv_scale.
void NpuNativeFunctions::_amp_foreach_non_finite_check_and_unscale_(at::TensorList grads, at::Tensor& found_inf, const at::Tensor& inv_scale) {
  for (const at::Tensor& grad : grads) {
    if (grad.numel() == 0) continue;
    const at::Tensor non_finite = at::logical_not(at::isfinite(grad)).any().to(found_inf.scalar_type()).view(found_inf.sizes());
    found_inf.copy_(at::maximum(found_inf, non_finite));
    grad.mul_(inv_scale);
  }
}

// After a step with non-finite gradients the scale backs off and the count of good steps restarts; after
// growth_interval good steps in a row it grows (unless that overflows) and the count restarts.
at::Tensor& NpuNativeFunctions::_amp_update_scale_(at::Tensor& scale, at::Tensor& growth_tracker, const at::Tensor& found_inf,
                                                   double growth_factor, double backoff_factor, int64_t growth_interval) {
  const at::Tensor found = at::gt(found_inf, 0);
  const at::Tensor counted = at::where(found, at::zeros_like(growth_tracker), growth_tracker + 1);
  const at::Tensor grown = scale * growth_factor;
  const at::Tensor grow = at::logical_and(at::eq(counted, growth_interval), at::isfinite(grown));
  const at::Tensor next = at::where(found, scale * backoff_factor, at::where(grow, grown, scale));
  growth_tracker.copy_(at::where(at::eq(counted, growth_interval), at::zeros_like(counted), counted));
  scale.copy_(next);
  return scale;
}

// The four overloads: Adam or AdamW, a number or a tensor as the learning rate.
void NpuNativeFunctions::_fused_adam_(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
                                      at::TensorList max_exp_avg_sqs, at::TensorList state_steps, double lr, double beta1, double beta2,
                                      double weight_decay, double eps, bool amsgrad, bool maximize,
                                      const std::optional<at::Tensor>& grad_scale, const std::optional<at::Tensor>& found_inf) {
  fused_adam(false, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, beta1, beta2, weight_decay, eps, amsgrad,
             maximize, grad_scale, found_inf);
}
void NpuNativeFunctions::_fused_adam_(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
                                      at::TensorList max_exp_avg_sqs, at::TensorList state_steps, const at::Tensor& lr, double beta1,
                                      double beta2, double weight_decay, double eps, bool amsgrad, bool maximize,
                                      const std::optional<at::Tensor>& grad_scale, const std::optional<at::Tensor>& found_inf) {
  fused_adam(false, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr.item<double>(), beta1, beta2, weight_decay,
             eps, amsgrad, maximize, grad_scale, found_inf);
}
void NpuNativeFunctions::_fused_adamw_(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
                                       at::TensorList max_exp_avg_sqs, at::TensorList state_steps, double lr, double beta1, double beta2,
                                       double weight_decay, double eps, bool amsgrad, bool maximize,
                                       const std::optional<at::Tensor>& grad_scale, const std::optional<at::Tensor>& found_inf) {
  fused_adam(true, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, beta1, beta2, weight_decay, eps, amsgrad,
             maximize, grad_scale, found_inf);
}
void NpuNativeFunctions::_fused_adamw_(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
                                       at::TensorList max_exp_avg_sqs, at::TensorList state_steps, const at::Tensor& lr, double beta1,
                                       double beta2, double weight_decay, double eps, bool amsgrad, bool maximize,
                                       const std::optional<at::Tensor>& grad_scale, const std::optional<at::Tensor>& found_inf) {
  fused_adam(true, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr.item<double>(), beta1, beta2, weight_decay,
             eps, amsgrad, maximize, grad_scale, found_inf);
}

}  // namespace npusim
