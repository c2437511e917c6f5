// Vector norms on the npu (linalg_vector_norm: torch.linalg.vector_norm,
// torch.norm, clip_grad_norm_'s per-tensor and total norms), over any dims,
// from the elementwise kernels and the reductions, in f32, rounded once:
//   ord 2         sqrt(sum(x * x))
//   ord inf/-inf  amax / amin of |x|
//   ord 1         sum(|x|)
//   ord 0         the count of nonzero elements
//   other p       sum(|x| ^ p) ^ (1 / p)
// The CPU accumulates in double: results agree to f32 rounding, and a sum of
// squares beyond f32's range (|x| around 1e19) overflows here. Other dtypes
// (f64, integers) and empty tensors go to the CPU, counted.
#include <ATen/Functions.h>
#include <torch/library.h>

#include <cmath>
#include <vector>

#include "kernel_launch.h"

namespace npusim {
namespace {

at::Tensor& vector_norm_out(const at::Tensor& self, const at::Scalar& ord, at::OptionalIntArrayRef dim, bool keepdim,
                            std::optional<at::ScalarType> dtype, at::Tensor& out) {
  const at::ScalarType result_type = dtype.value_or(self.scalar_type());
  const bool supported = chip_float(self) && self.numel() > 0 && chip_float_dtype(result_type);
  at::Tensor result;
  if (!supported) {
    note_cpu_fallback("aten::linalg_vector_norm.out");
    result = at::linalg_vector_norm(self.cpu(), ord, dim, keepdim, dtype);
  } else {
    const double p = ord.toDouble();
    const at::Tensor x = as_f32(self);
    // The reductions take the dims as given; none or an empty list is every dim, as for the norm.
    const std::vector<int64_t> all;
    const at::OptionalIntArrayRef dims = dim.has_value() && !dim->empty() ? dim : at::OptionalIntArrayRef(all);
    const auto sum = [&](const at::Tensor& t) { return at::sum(t, dims, keepdim); };
    if (p == 2) {
      result = at::sqrt(sum(at::mul(x, x)));
    } else if (std::isinf(p)) {
      result = p > 0 ? at::amax(at::abs(x), dims.value_or(all), keepdim) : at::amin(at::abs(x), dims.value_or(all), keepdim);
    } else if (p == 1) {
      result = sum(at::abs(x));
    } else if (p == 0) {
      result = sum(at::ne(x, 0).to(at::kFloat));
    } else {
      result = at::pow(sum(at::pow(at::abs(x), p)), 1.0 / p);
    }
  }
  return into(result, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("linalg_vector_norm.out", vector_norm_out); }

}  // namespace npusim
