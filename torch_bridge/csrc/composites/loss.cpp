// Classification losses and softmax gradients on the npu, composed from the
// gather, select, elementwise and row kernels:
//
//   nll_loss        each row's target class picked by the gather kernel from the
//                   flattened input (index row * C + class, the int64 targets read
//                   as their low 32-bit words); ignored targets weigh 0
//   its backward    -grad * weight[class] at each row's class (a comparison with
//                   the class numbers and a select), 0 elsewhere
//   log_softmax'    grad - exp(out) * sum(grad)    } one row kernel each (their dim
//   softmax'        out * (grad - sum(grad * out)) } moved last), else composed
//   nll_loss2d      the same with the class dim moved last ([N, C, H, W] scores)
// Together with log_softmax, `F.cross_entropy` trains on the chip.
#include <ATen/Functions.h>
#include <torch/library.h>

#include "PrivateUse1NativeFunctions.h"
#include "aten/cpu_fallback.h"
#include "aten/kernel_launch.h"

namespace npusim {
namespace {

using npu::compiler::OpKind;

// i32 [n] on the npu: 0, step, 2 * step, ...
at::Tensor iota(int64_t n, int64_t step) {
  return to_npu(at::arange(0, n * step, step, at::TensorOptions().dtype(at::kInt)));
}

// One row per target: the class picked (0 for an ignored target) and its weight (0 when ignored).
struct Targets {
  at::Tensor classes;  // i32 [N]
  at::Tensor weights;  // [N], the input's dtype
};

Targets targets_of(const at::Tensor& target, const std::optional<at::Tensor>& weight, int64_t ignore_index, at::ScalarType dtype) {
  // int64 targets as their low words (class numbers are small and non-negative; ignore_index is compared as i32).
  const at::Tensor low = dense(target.reshape({-1})).view(at::kInt).view({-1, 2}).select(1, 0);
  const at::Tensor valid = at::ne(low, ignore_index);
  const at::Tensor classes = at::where(valid, low, at::zeros({}, at::TensorOptions().dtype(at::kInt)));
  const at::Tensor zero = at::zeros({}, at::TensorOptions().dtype(dtype));
  at::Tensor weights = valid.to(dtype);
  if (weight && weight->defined()) weights = at::where(valid, at::index_select(weight->to(dtype), 0, classes), zero);
  return {classes, weights};
}

bool chip_ready(const at::Tensor& self, const at::Tensor& target, const std::optional<at::Tensor>& weight) {
  return chip_float(self) && on_npu(target) && target.scalar_type() == at::kLong && (self.dim() == 1 || self.dim() == 2) &&
         self.numel() > 0 && (!weight || !weight->defined() || chip_float(*weight));
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> NpuNativeFunctions::nll_loss_forward(const at::Tensor& self, const at::Tensor& target,
                                                                        const std::optional<at::Tensor>& weight, int64_t reduction,
                                                                        int64_t ignore_index) {
  if (chip_ready(self, target, weight)) {
    const at::Tensor x = dense(self.dim() == 1 ? self.unsqueeze(0) : self);
    const int64_t n = x.size(0), c = x.size(1);
    const Targets t = targets_of(target, weight, ignore_index, x.scalar_type());
    const at::Tensor picked = at::index_select(x.reshape({-1}), 0, at::add(t.classes, iota(n, c)));
    const at::Tensor losses = at::neg(at::mul(picked, t.weights));
    if (reduction == at::Reduction::None)
      return {self.dim() == 1 ? losses.reshape({}) : losses, at::zeros({}, x.options())};
    const at::Tensor total = at::sum(t.weights), sum = at::sum(losses);
    return {reduction == at::Reduction::Mean ? at::div(sum, total) : sum, total};
  }
  return fall_back<at::_ops::nll_loss_forward>("", self, target, weight, reduction, ignore_index);
}

at::Tensor NpuNativeFunctions::nll_loss_backward(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                                                 const std::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                                                 const at::Tensor& total_weight) {
  if (chip_ready(self, target, weight) && chip_float(grad) && on_npu(total_weight)) {
    const int64_t n = self.dim() == 1 ? 1 : self.size(0), c = self.size(-1);
    const Targets t = targets_of(target, weight, ignore_index, self.scalar_type());
    at::Tensor g = reduction == at::Reduction::None ? grad.reshape({n}) : grad;
    if (reduction == at::Reduction::Mean) g = at::div(g, total_weight);
    const at::Tensor scale = at::neg(at::mul(t.weights, g)).reshape({n, 1});
    const at::Tensor at_class = at::eq(iota(c, 1).view({1, c}), t.classes.view({n, 1}));
    return at::where(at_class, scale, at::zeros({}, at::TensorOptions().dtype(self.scalar_type()))).reshape(self.sizes());
  }
  return fall_back<at::_ops::nll_loss_backward>("", grad, self, target, weight, reduction, ignore_index, total_weight);
}

// nll_loss2d (F.cross_entropy over [N, C, H, W] scores: segmentation): the class dim moved last and the
// pixels made rows, then nll_loss as above; the gradient moved back.
std::tuple<at::Tensor, at::Tensor> NpuNativeFunctions::nll_loss2d_forward(const at::Tensor& self, const at::Tensor& target,
                                                                          const std::optional<at::Tensor>& weight, int64_t reduction,
                                                                          int64_t ignore_index) {
  if (self.dim() == 4 && target.dim() == 3 && chip_float(self)) {
    const int64_t c = self.size(1);
    auto [out, total] = NpuNativeFunctions::nll_loss_forward(self.movedim(1, -1).reshape({-1, c}), target.reshape({-1}), weight, reduction, ignore_index);
    return {reduction == at::Reduction::None ? out.view(target.sizes()) : out, total};
  }
  return fall_back<at::_ops::nll_loss2d_forward>("not [N, C, H, W] chip floats with [N, H, W] targets", self, target, weight, reduction,
                                                 ignore_index);
}

at::Tensor NpuNativeFunctions::nll_loss2d_backward(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                                                   const std::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                                                   const at::Tensor& total_weight) {
  if (self.dim() == 4 && target.dim() == 3 && chip_float(self)) {
    const int64_t c = self.size(1);
    const at::Tensor rows = self.movedim(1, -1).reshape({-1, c});
    const at::Tensor g = reduction == at::Reduction::None ? grad.reshape({-1}) : grad;
    const at::Tensor grad_rows = NpuNativeFunctions::nll_loss_backward(g, rows, target.reshape({-1}), weight, reduction, ignore_index, total_weight);
    return grad_rows.view({self.size(0), self.size(2), self.size(3), c}).movedim(-1, 1).contiguous();
  }
  return fall_back<at::_ops::nll_loss2d_backward>("not [N, C, H, W] chip floats with [N, H, W] targets", grad, self, target, weight,
                                                  reduction, ignore_index, total_weight);
}

namespace {

// The row kernel of a softmax's or log_softmax's backward along `dim` (moved last in the gradient,
// the output and the result); false where it cannot run (rows too long for the scratchpad).
bool row_backward(OpKind kind, const at::Tensor& grad, const at::Tensor& output, int64_t dim, const at::Tensor& result) {
  if (grad.sizes() != output.sizes()) return false;
  const int64_t d = at::maybe_wrap_dim(dim, grad.dim());
  return try_run_rows(kind, {grad.movedim(d, -1), output.movedim(d, -1)}, result.movedim(d, -1));
}

}  // namespace

// The gradients of log_softmax and softmax from their outputs, in f32, rounded once to the input's dtype.
at::Tensor NpuNativeFunctions::_log_softmax_backward_data(const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                                                          at::ScalarType input_dtype) {
  if (chip_float(grad) && chip_float(output) && output.dim() > 0 && chip_float_dtype(input_dtype)) {
    at::Tensor result = new_npu(grad.sizes(), input_dtype);
    if (row_backward(OpKind::LOG_SOFTMAX_BACKWARD, grad, output, dim, result)) return result;
    const at::Tensor g = as_f32(grad), y = as_f32(output);
    return at::sub(g, at::mul(at::exp(y), at::sum(g, {dim}, true))).to(input_dtype);
  }
  return fall_back<at::_ops::_log_softmax_backward_data>("", grad, output, dim, input_dtype);
}

at::Tensor NpuNativeFunctions::_softmax_backward_data(const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                                                      at::ScalarType input_dtype) {
  if (chip_float(grad) && chip_float(output) && output.dim() > 0 && chip_float_dtype(input_dtype)) {
    at::Tensor result = new_npu(grad.sizes(), input_dtype);
    if (row_backward(OpKind::SOFTMAX_BACKWARD, grad, output, dim, result)) return result;
    const at::Tensor g = as_f32(grad), y = as_f32(output);
    return at::mul(y, at::sub(g, at::sum(at::mul(g, y), {dim}, true))).to(input_dtype);
  }
  return fall_back<at::_ops::_softmax_backward_data>("", grad, output, dim, input_dtype);
}

}  // namespace npusim
