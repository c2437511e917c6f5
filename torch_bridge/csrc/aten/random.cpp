// The npu's random ATen ops, on the chip's counter-based v.rand (compiler/ops.def: uniform, normal,
// bernoulli), drawing from the npu's generators (generator.h). Each launch reserves the counters it uses, so a seed gives the
// same numbers on every run and every chip config; they differ from the
// CPU's (a different algorithm), as CUDA's do.
//
//   uniform_, normal_, bernoulli_(p)   one kernel into the tensor (a temporary
//                                      and a copy when it is not contiguous)
//   bernoulli(probabilities)           uniform, then u < p on the chip
//   native_dropout                     bernoulli(1 - p) as the bool mask, then
//                                      where(mask, x * scale, 0) in f32, rounded once
//   native_dropout_backward            where(mask, grad * scale, 0), likewise
//   multinomial                        inverse transform: u times each row's total, the
//                                      draw the count of cumulative sums at or below it
//                                      (with replacement, or one draw)
//   random_(from, to)                  (so torch.randint) from + floor(u (to - from)) in f32, u uniform:
//                                      ranges up to 2^24 (each value's probability within
//                                      range / 2^24 of uniform), integers kept in i32 and widened
//   randperm                           the positions of n uniform keys sorted (the topk kernel;
//                                      n up to 4096)
// and arange.start_out, which shares the generator kernel (v.iota in place of v.rand).
#include <ATen/Functions.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <tuple>

#include "PrivateUse1NativeFunctions.h"
#include "cpu_fallback.h"
#include "runtime/generator.h"
#include "kernel_launch.h"
#include "runtime/runtime.h"

namespace npusim {
namespace {

using npu::compiler::OpDesc;
using npu::compiler::OpKind;

// The random kernel `kind` into `self` (any float chip dtype; bool for bernoulli); false if the chip cannot.
bool generate(OpKind kind, const at::Tensor& self, double param0, double param1, std::optional<at::Generator> generator) {
  if (self.numel() == 0) return true;
  at::Tensor out = self.is_contiguous() ? self : new_npu(self.sizes(), self.scalar_type());
  const auto make_op = [&] {
    OpDesc op(kind, {}, describe(out));
    op.random_params = {param0, param1};
    return op;
  };
  std::array<uint64_t, 8> args{};
  // Reserved before the launch, so that the next op's numbers differ even when this one cannot run.
  // (Callers pass chip dtypes only: make_op describes.)
  std::tie(args[0], args[1]) = reserve_random_counters(generator, npu::compiler::random_counters(make_op()));
  if (!try_run(make_op, {}, out, args)) return false;
  if (!out.is_same(self)) self.copy_(out);
  return true;
}

// Why the chip cannot generate into self (f64, integers; empty: the kernel's reason). Those ops take the CPU
// fallback without the npu generator: the CPU's default generator draws them (torch.manual_seed seeds it too).
std::string off_chip_reason(const at::Tensor& self) {
  return on_npu(self) && !chip_float(self) ? std::string("dtype ") + c10::toString(self.scalar_type()) + " is not on the chip" : "";
}

}  // namespace

at::Tensor& NpuNativeFunctions::uniform_(at::Tensor& self, double from, double to, std::optional<at::Generator> generator) {
  TORCH_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=", from, " > to=", to);
  if (chip_float(self) && generate(OpKind::UNIFORM, self, from, to, generator)) return self;
  return fall_back<at::_ops::uniform_>(off_chip_reason(self), self, from, to, std::nullopt);
}

at::Tensor& NpuNativeFunctions::normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> generator) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  if (chip_float(self) && generate(OpKind::NORMAL, self, mean, std, generator)) return self;
  return fall_back<at::_ops::normal_>(off_chip_reason(self), self, mean, std, std::nullopt);
}

at::Tensor& NpuNativeFunctions::bernoulli_(at::Tensor& self, double p, std::optional<at::Generator> generator) {
  TORCH_CHECK(0 <= p && p <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", p);
  if ((chip_float(self) || (on_npu(self) && self.scalar_type() == at::kBool)) && generate(OpKind::BERNOULLI, self, p, 0, generator))
    return self;
  return fall_back<at::_ops::bernoulli__float>(off_chip_reason(self), self, p, std::nullopt);
}

// Each element 1 with its own probability: u < p, u uniform from the npu generator.
at::Tensor NpuNativeFunctions::bernoulli(const at::Tensor& probabilities, std::optional<at::Generator> generator) {
  if (chip_float(probabilities)) {
    at::Tensor u = new_npu(probabilities.sizes(), at::kFloat);
    if (generate(OpKind::UNIFORM, u, 0, 1, generator)) return at::lt(u, as_f32(probabilities)).to(probabilities.scalar_type());
  }
  return fall_back<at::_ops::bernoulli>("", probabilities, std::nullopt);
}

// Draws by inverse transform on the chip: u uniform from the npu generator times each row's total;
// the category drawn is the count of the row's cumulative sums (the cumsum kernel, f32) at or below
// it, so a category of probability 0 is never drawn (its cumulative sum equals the one before). The
// product is kept below the total (a u that rounds it up would count every category). With replacement, or
// one draw; without replacement beyond one draw, and beyond 2^26 comparisons, the CPU, counted. The
// CPU's checks first (one read of two flags from the device).
at::Tensor NpuNativeFunctions::multinomial(const at::Tensor& self, int64_t n_sample, bool replacement,
                                           std::optional<at::Generator> generator) {
  TORCH_CHECK(self.dim() == 1 || self.dim() == 2, "prob_dist must be 1 or 2 dim");
  TORCH_CHECK(n_sample > 0, "cannot sample n_sample <= 0 samples");
  const int64_t categories = self.size(-1), rows = self.dim() == 1 ? 1 : self.size(0);
  TORCH_CHECK(replacement || n_sample <= categories, "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  if (chip_float(self) && (replacement || n_sample == 1) && categories > 0 && rows * n_sample * categories <= (int64_t{1} << 26)) {
    const at::Tensor p = as_f32(self.view({rows, categories}));
    // Per row: an invalid probability, a total of 0 (the rows' flags read once, checked on the host).
    const at::Tensor invalid = at::logical_or(at::lt(p, 0.0), at::logical_not(at::isfinite(p))).any(-1);
    const at::Tensor cdf = at::cumsum(p, -1);
    const at::Tensor total = cdf.narrow(1, categories - 1, 1);
    const at::Tensor flags = at::stack({invalid, at::le(total, 0.0).view({rows})}).cpu();
    TORCH_CHECK(!flags[0].any().item<bool>(), "probability tensor contains either `inf`, `nan` or element < 0");
    TORCH_CHECK(!flags[1].any().item<bool>(), "invalid multinomial distribution (sum of probabilities <= 0)");
    at::Tensor u = new_npu({rows, n_sample}, at::kFloat);
    if (generate(OpKind::UNIFORM, u, 0, 1, generator)) {
      const at::Tensor target = at::minimum(at::mul(u, total), at::mul(total, 1.0 - std::ldexp(1.0, -23)));
      const at::Tensor drawn = at::le(cdf.unsqueeze(1), target.unsqueeze(2)).sum(-1);  // int64
      return self.dim() == 1 ? drawn.view({n_sample}) : drawn;
    }
  }
  return fall_back<at::_ops::multinomial>("", self, n_sample, replacement, std::nullopt);
}

// arange into an npu tensor: the size and the argument checks are PyTorch's (its meta kernel),
// the values the arange kernel's: floats directly (f32(i) * step + start, exact for integers below
// 2^24), integers in i32 (widened to int64 on the chip) where every value fits 32 bits. int64
// beyond 32 bits and f64 take the CPU's values, counted.
at::Tensor& NpuNativeFunctions::arange_out(const at::Scalar& start, const at::Scalar& end, const at::Scalar& step, at::Tensor& out) {
  const at::Tensor meta = at::arange(start, end, step, out.options().device(at::kMeta));
  if (out.sizes() != meta.sizes()) out.resize_(meta.sizes());
  const int64_t n = meta.numel();
  if (n == 0) return out;
  const at::ScalarType dtype = out.scalar_type();
  const bool float_out = chip_float_dtype(dtype);
  bool fits_i32 = false;
  if (dtype == at::kLong || dtype == at::kInt) {
    const auto in_i32 = [](int64_t v) { return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max(); };
    const int64_t first = start.toLong(), stride = step.toLong();
    fits_i32 = n < (int64_t{1} << 31) && in_i32(first) && in_i32(stride) && in_i32(first + stride * (n - 1));
  }
  if ((float_out || fits_i32) && n < (int64_t{1} << 31) && out.is_contiguous() && on_npu(out)) {  // (the index is an i32)
    const at::Tensor values = dtype == at::kLong ? new_npu({n}, at::kInt) : out.view({n});
    const auto make = [&] {
      OpDesc op(OpKind::ARANGE, {}, describe(values));
      op.random_params = {start.toDouble(), step.toDouble()};
      return op;
    };
    if (try_run(make, {}, values)) {
      if (dtype == at::kLong) out.view({n}).copy_(values);
      return out;
    }
  }
  return fall_back<at::_ops::arange_start_out>("", start, end, step, out);
}

// linspace into an npu tensor of a float dtype: ATen's formula, start + step * i for the first half
// and end - step * (steps - 1 - i) for the second, step = (end - start) / (steps - 1), in f32 from
// the arange kernel's exact i, rounded once (the CPU rounds in the dtype and, vectorized, adds lane
// offsets to a base: within an f32 rounding or two). Integer and f64 outputs: the CPU's, counted.
at::Tensor& NpuNativeFunctions::linspace_out(const at::Scalar& start, const at::Scalar& end, int64_t steps, at::Tensor& out) {
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  if (out.numel() != steps) out.resize_({steps});
  if (steps == 0) return out;
  if (chip_float(out) && steps < (int64_t{1} << 24)) {
    if (steps == 1) return out.fill_(start);
    const float first = start.to<float>(), last = end.to<float>(), step = (last - first) / float(steps - 1);
    const at::Tensor i = at::arange(steps, at::TensorOptions().dtype(at::kFloat).device(kNpu));
    const at::Tensor from_start = elementwise_chain({i}, "mul(in0, " + chain_constant(step) + "); add(%0, " + chain_constant(first) + ")");
    const at::Tensor from_end = elementwise_chain(
        {i}, "sub(" + std::to_string(steps - 1) + ", in0); mul(%0, " + chain_constant(step) + "); sub(" + chain_constant(last) + ", %1)");
    out.copy_(at::where(at::lt(i, double(steps / 2)), from_start, from_end));
    return out;
  }
  return fall_back<at::_ops::linspace_out>("not an f32, bf16 or f16 output, or 2^24 steps or more", start, end, steps, out);
}

// Integers in [from, to) from uniform f32 draws. Ranges beyond 2^24, f64 and the full-range random_()
// go to the CPU's generator, counted.
at::Tensor& NpuNativeFunctions::random_(at::Tensor& self, int64_t from, std::optional<int64_t> to_opt,
                                        std::optional<at::Generator> generator) {
  const bool integer = self.scalar_type() == at::kLong || self.scalar_type() == at::kInt || self.scalar_type() == at::kChar ||
                       self.scalar_type() == at::kByte || self.scalar_type() == at::kBool;
  if (to_opt) TORCH_CHECK(from < *to_opt, "random_ expects 'from' to be less than 'to', but got from=", from, " >= to=", *to_opt);
  const bool supported = on_npu(self) && to_opt && (integer || chip_float(self)) && *to_opt - from <= (int64_t{1} << 24) &&
                         from >= std::numeric_limits<int32_t>::min() && *to_opt - 1 <= std::numeric_limits<int32_t>::max();
  if (supported) {
    if (self.numel() == 0) return self;
    const int64_t range = *to_opt - from;
    at::Tensor u = new_npu(self.sizes(), at::kFloat);
    if (generate(OpKind::UNIFORM, u, 0, 1, generator)) {
      // floor(u range) may round up to range where u is within 2^-24 of 1: kept below it.
      const at::Tensor offset = at::floor(at::mul(u, double(range))).to(at::kInt);
      const at::Tensor value = elementwise_chain({offset}, "minimum(in0, " + std::to_string(range - 1) + "); add(%0, " + std::to_string(from) + ")");
      self.copy_(value);
      return self;
    }
  }
  // (The CPU's default generator draws: an npu generator cannot.)
  return fall_back<at::_ops::random__from>("a range beyond 2^24 or int32, no upper bound, or a dtype the chip does not store", self, from,
                                           to_opt, std::nullopt);
}
at::Tensor& NpuNativeFunctions::random_(at::Tensor& self, int64_t to, std::optional<at::Generator> generator) {
  return NpuNativeFunctions::random_(self, 0, to, generator);
}

// A random permutation of 0 .. n - 1: the sorted order of n uniform keys (equal keys, 2^-24 apart at
// worst, keep their order: the sort is stable).
at::Tensor& NpuNativeFunctions::randperm_out(int64_t n, std::optional<at::Generator> generator, at::Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be non-negative, got", n);
  if (out.numel() != n) out.resize_({n});
  if (n == 0) return out;
  if (on_npu(out) && n <= 4096 && (out.scalar_type() == at::kLong || out.scalar_type() == at::kInt || chip_float(out))) {
    at::Tensor keys = new_npu({n}, at::kFloat);
    if (generate(OpKind::UNIFORM, keys, 0, 1, generator)) {
      out.copy_(std::get<1>(at::topk(keys, n, 0, /*largest=*/false, /*sorted=*/true)));  // (a stable sort)
      return out;
    }
  }
  return fall_back<at::_ops::randperm_generator_out>("more than 4096 elements, or an output dtype the chip does not store", n, std::nullopt, out);
}

namespace {

// where(mask, x * scale, 0), the product in f32 and rounded once, as the CPU's x * mask * scale.
at::Tensor masked_scale(const at::Tensor& x, const at::Tensor& mask, double scale) {
  const at::Tensor scaled = at::mul(as_f32(x), at::scalar_tensor(scale, at::TensorOptions().dtype(at::kFloat)));
  const at::Tensor kept = at::where(mask, scaled, at::scalar_tensor(0.0, at::TensorOptions().dtype(at::kFloat)));
  return kept.scalar_type() == x.scalar_type() ? kept : kept.to(x.scalar_type());
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> NpuNativeFunctions::native_dropout(const at::Tensor& input, double p, std::optional<bool> train) {
  TORCH_CHECK(0 <= p && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  if (train.has_value() && !*train) return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  const double keep = 1.0 - p, scale = keep == 0 ? 0.0 : 1.0 / keep;
  if (chip_float(input)) {
    at::Tensor mask = new_npu(input.sizes(), at::kBool);
    if (generate(OpKind::BERNOULLI, mask, keep, 0, std::nullopt)) return {masked_scale(input, mask, scale), mask};
  }
  return fall_back<at::_ops::native_dropout>("not a chip float", input, p, train);
}

at::Tensor NpuNativeFunctions::native_dropout_backward(const at::Tensor& grad, const at::Tensor& mask, double scale) {
  if (chip_float(grad) && on_npu(mask) && mask.scalar_type() == at::kBool) return masked_scale(grad, mask, scale);
  return fall_back<at::_ops::native_dropout_backward>("", grad, mask, scale);
}

}  // namespace npusim
