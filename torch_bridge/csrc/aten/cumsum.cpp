// Cumulative sums on the npu (cumsum, so position ids from an attention mask:
// mask.cumsum(-1) - 1). The chip has no scan; a prefix sum along a dim of L
// elements is a product with the upper-triangular ones, on the tensor core:
//   y [..., L] = x [..., L] @ U [L, L],  U[i, j] = (i <= j)
// with U built on the chip (a comparison of two position vectors), L^2 MACs
// per row: cheap for the lengths this is for (sequence positions, up to 4096).
//   floats  in x's dtype, summed in f32, rounded once per element (the CPU
//           adds in order in a wider type: within f32 rounding; f32 on a
//           tensor core without f32 as bf16 parts, as every f32 matmul);
//           a tensor with a NaN or an infinity by a Hillis-Steele scan of
//           f32 adds instead (in the product, 0 * inf spreads NaN backwards)
//   integers (bool, uint8, int32, int64 into int64 or int32) as int8 on the
//           tensor core into exact int32 sums, widened: where values lie in
//           [-128, 127] (masks, flags), which is checked on the chip; other
//           values by a Hillis-Steele scan (scan.h) of integer adds, exact and
//           wrapping (int64 on its words), log2 L steps; dims longer than
//           2^20 go to the CPU, counted
// logcumsumexp is a Hillis-Steele scan (scan.h) of logaddexp, which is
// associative and neither underflows nor overflows (a cumsum of exp would):
// in f32, rounded once, within log2 L roundings of the CPU's sequential
// logaddexp; the same infinity handling (logaddexp's).
#include <ATen/Functions.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

#include "PrivateUse1NativeFunctions.h"
#include "cpu_fallback.h"
#include "kernel_launch.h"
#include "scan.h"

namespace npusim {
namespace {

constexpr int64_t kMaxLength = 4096;
constexpr int64_t kMaxScanLength = int64_t{1} << 20;  // (20 steps of a cat and an add)

// U [L, L] of `dtype`: ones on and above the diagonal.
at::Tensor upper_ones(int64_t length, at::ScalarType dtype) {
  const at::Tensor positions = to_npu(at::arange(length, at::TensorOptions().dtype(at::kInt)));
  return at::le(positions.view({length, 1}), positions.view({1, length})).to(dtype);
}

// An integer tensor as int32 on the chip (int64: its low word).
at::Tensor as_int32(const at::Tensor& x) { return x.scalar_type() == at::kLong ? index_words(x) : x.to(at::kInt); }

// Whether x's values fit int8 (checked on the chip; int64 also needs its high words to be the low words' signs).
bool fits_int8(const at::Tensor& x) {
  if (x.scalar_type() == at::kBool) return true;
  if (x.scalar_type() == at::kLong) {
    const at::Tensor words = int64_words(x);
    const at::Tensor sign = at::where(at::lt(words.select(-1, 0), 0), at::scalar_tensor(-1, words.options().device(at::kCPU)),
                                      at::scalar_tensor(0, words.options().device(at::kCPU)));
    if (at::any(at::ne(words.select(-1, 1), sign).reshape({-1}), 0).cpu().item<bool>()) return false;
  }
  const at::Tensor values = as_int32(x).to(at::kFloat).reshape({-1});
  return at::amax(values, {0}).cpu().item<double>() <= 127 && at::amin(values, {0}).cpu().item<double>() >= -128;
}

}  // namespace

at::Tensor& NpuNativeFunctions::cumsum_out(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype, at::Tensor& out) {
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  const at::ScalarType result_type = dtype.value_or(at::isIntegralType(self.scalar_type(), true) ? at::kLong : self.scalar_type());
  const int64_t length = self.dim() == 0 ? 1 : self.size(d);
  const bool floats = chip_float(self) && result_type == self.scalar_type();
  const bool integers = on_npu(self) && at::isIntegralType(self.scalar_type(), true) && (result_type == at::kLong || result_type == at::kInt) &&
                        self.numel() > 0;
  at::Tensor result;
  std::string declined;
  if (self.numel() == 0 || self.dim() == 0) declined = "an empty or 0-dim tensor";
  else if (length > kMaxLength) declined = "a dim longer than " + std::to_string(kMaxLength);
  else if (!floats && !integers) declined = "a dtype or dtype conversion the kernel does not take";
  else if (integers && !fits_int8(self)) declined = "integers beyond int8";
  if (declined.empty() && floats && !at::all(at::isfinite(self)).cpu().item<bool>()) {
    // A NaN or an infinity times U's zeros would reach the sums before it too (0 * inf is NaN): such a tensor is
    // summed by a scan of f32 adds, which carries them forward only, as the CPU's running sum does.
    const at::Tensor rows = as_f32(self).movedim(d, -1);
    result = inclusive_scan(rows, [](const at::Tensor& earlier, const at::Tensor& later) { return at::add(earlier, later); })
                 .movedim(-1, d)
                 .to(self.scalar_type());
  }
  if (declined.empty() && !result.defined()) {
    const at::ScalarType operand = floats ? self.scalar_type() : at::kChar;
    const at::Tensor values = floats || self.scalar_type() == at::kBool ? self : as_int32(self);
    const at::Tensor x = values.movedim(d, -1).reshape({-1, length}).to(operand).contiguous();
    at::Tensor sums = new_npu({x.size(0), length}, floats ? operand : at::kInt);
    if (gemm_into(x, upper_ones(length, operand), nullptr, sums)) {
      std::vector<int64_t> moved;  // self's shape with dim d last
      for (int64_t k = 0; k < self.dim(); ++k)
        if (k != d) moved.push_back(self.size(k));
      moved.push_back(length);
      result = sums.view(moved).movedim(-1, d);
      if (!floats) result = result.to(result_type);
    }
  }
  if (!result.defined() && integers && self.dim() > 0 && length <= kMaxScanLength) {
    // Integers beyond int8 (a mixture of experts' offsets into its tokens sorted by expert): a
    // Hillis-Steele scan of integer adds, exact and wrapping as the CPU's (int64 on its words).
    const at::Tensor values = self.to(result_type).movedim(d, -1);
    result = inclusive_scan(values, [](const at::Tensor& earlier, const at::Tensor& later) { return at::add(earlier, later); }).movedim(-1, d);
  }
  if (!result.defined()) return fall_back<at::_ops::cumsum_out>(declined, self, dim, dtype, out);  // (empty: the kernel's reason)
  return into(result, out);
}

at::Tensor NpuNativeFunctions::_logcumsumexp(const at::Tensor& self, int64_t dim) {
  if (!chip_float(self) || self.numel() == 0) {
    return fall_back<at::_ops::_logcumsumexp>("not a non-empty f32, bf16 or f16 tensor", self, dim);
  }
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  const at::Tensor rows = self.dim() == 0 ? as_f32(self).view({1}) : as_f32(self).movedim(d, -1);
  const at::Tensor scan = inclusive_scan(rows, [](const at::Tensor& earlier, const at::Tensor& later) { return at::logaddexp(earlier, later); });
  const at::Tensor result = self.dim() == 0 ? scan.view(c10::IntArrayRef{}) : scan.movedim(-1, d);
  return result.to(self.scalar_type()).contiguous();
}

}  // namespace npusim
