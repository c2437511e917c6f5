// Ops built on the vector unit's exp and log, each computed in f32 and rounded once to its dtype
// (ATen's CPU arithmetic for bf16 and f16):
//   exp2(x)        2 ** x, v.pow of 2 (the host's powf: within an f32 ulp of the CPU's exp2)
//   log2, log10    log(x) times 1 / ln 2 or 1 / ln 10 (within two f32 ulps of the CPU's)
//   xlogy(x, y)    x log(y); 0 where x == 0, NaN where y is NaN (in ATen's order), so F.kl_div
//   binary_cross_entropy(p, y, w)   ATen's -w (y max(log p, -100) + (1 - y) max(log1p(-p), -100)),
//                  its mean or sum; its backward grad w (p - y) / max(p (1 - p), 1e-12), ATen's formula
//                  and epsilon, divided by the element count for a mean
// Integer, f64 and empty operands go to the CPU, counted.
#include <ATen/Functions.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "PrivateUse1NativeFunctions.h"
#include "cpu_fallback.h"
#include "kernel_launch.h"

namespace npusim {
namespace {

constexpr const char* kNotOnChip = "operands not all non-empty f32, bf16 or f16";

at::Tensor rounded_to(const at::Tensor& t, at::ScalarType dtype) { return t.scalar_type() == dtype ? t : t.to(dtype); }

// log(x) times a constant, in f32 (one kernel for bf16 and f16 too), rounded once.
at::Tensor scaled_log(const at::Tensor& x, double scale) {
  return elementwise_chain_in_f32({x}, "log(in0); mul(%0, " + chain_constant(scale) + ")");
}

}  // namespace

at::Tensor NpuNativeFunctions::exp2(const at::Tensor& x) {
  if (!non_empty_chip_floats({&x})) return fall_back<at::_ops::exp2>("", x);
  return at::pow(2.0, x);
}

at::Tensor NpuNativeFunctions::log2(const at::Tensor& x) {
  if (!non_empty_chip_floats({&x})) return fall_back<at::_ops::log2>("", x);
  return scaled_log(x, 1.0 / std::log(2.0));
}

at::Tensor NpuNativeFunctions::log10(const at::Tensor& x) {
  if (!non_empty_chip_floats({&x})) return fall_back<at::_ops::log10>("", x);
  return scaled_log(x, 1.0 / std::log(10.0));
}

at::Tensor NpuNativeFunctions::xlogy(const at::Tensor& x, const at::Tensor& y) {
  const at::ScalarType dtype = at::result_type(x, y);
  const bool scalar_x = !on_npu(x) && x.dim() == 0, scalar_y = !on_npu(y) && y.dim() == 0;
  if (!chip_float_dtype(dtype) || (!scalar_x && !non_empty_chip_floats({&x})) || (!scalar_y && !non_empty_chip_floats({&y})))
    return fall_back<at::_ops::xlogy_Tensor>("", x, y);
  const at::Tensor xf = as_f32(to_npu(x)), yf = as_f32(to_npu(y));
  const at::Tensor zero = at::zeros({}, at::TensorOptions().dtype(at::kFloat));
  const at::Tensor nan = at::full({}, std::numeric_limits<float>::quiet_NaN(), at::TensorOptions().dtype(at::kFloat));
  const at::Tensor product = elementwise_chain({xf, yf}, "log(in1); mul(in0, %0)");
  const at::Tensor result = at::where(at::isnan(yf), nan, at::where(at::eq(xf, 0), zero, product));
  return rounded_to(result, dtype);
}

namespace {

bool bce_on_chip(const at::Tensor& p, const at::Tensor& y, const std::optional<at::Tensor>& w) {
  return non_empty_chip_floats({&p, &y}) && p.sizes() == y.sizes() && (!defined(w) || non_empty_chip_floats({&*w}));
}

}  // namespace

at::Tensor NpuNativeFunctions::binary_cross_entropy(const at::Tensor& p, const at::Tensor& y, const std::optional<at::Tensor>& w,
                                                    int64_t reduction) {
  if (!bce_on_chip(p, y, w)) return fall_back<at::_ops::binary_cross_entropy>("", p, y, w, reduction);
  const at::Tensor pf = as_f32(p), yf = as_f32(y);
  const at::Tensor log_p = at::clamp_min(at::log(pf), -100), log_q = at::clamp_min(at::log1p(at::neg(pf)), -100);
  // (y - 1) log_q - y log_p
  at::Tensor loss = elementwise_chain({yf, log_p, log_q}, "sub(in0, 1); mul(%0, in2); mul(in0, in1); sub(%1, %2)");
  if (defined(w)) loss = at::mul(loss, as_f32(*w));
  if (reduction == at::Reduction::Mean) loss = at::mean(loss);
  else if (reduction == at::Reduction::Sum) loss = at::sum(loss);
  return rounded_to(loss, p.scalar_type());
}

at::Tensor NpuNativeFunctions::binary_cross_entropy_backward(const at::Tensor& grad, const at::Tensor& p, const at::Tensor& y,
                                                             const std::optional<at::Tensor>& w, int64_t reduction) {
  if (!bce_on_chip(p, y, w) || !chip_float(grad))
    return fall_back<at::_ops::binary_cross_entropy_backward>(kNotOnChip, grad, p, y, w, reduction);
  // grad (p - y) / max((1 - p) p, 1e-12)
  at::Tensor result = elementwise_chain({as_f32(grad), as_f32(p), as_f32(y)},
                                        "sub(in1, in2); mul(in0, %0); sub(1, in1); mul(%2, in1); maximum(%3, 1e-12); div(%1, %4)");
  if (defined(w)) result = at::mul(result, as_f32(*w));
  if (reduction == at::Reduction::Mean) result = at::div(result, double(p.numel()));
  return rounded_to(result, p.scalar_type());
}

}  // namespace npusim
