// Complex tensors on the npu: complex64 as pairs of f32 (the real part first: ATen's layout, so
// view_as_real is a view), the elementwise ops on those pairs (add, sub, mul, div, neg, abs; polar, angle,
// conj_physical), and the FFTs as matmuls with DFT matrices.
//
// The FFTs (_fft_r2c, _fft_c2r, _fft_c2c: torch.fft.*, torch.stft, torch.istft) run as dense DFTs on the
// tensor cores, as XLA runs small FFTs on a TPU: along one dim of length n, a real signal times an
// [n, 2k] matrix of cosines and sines gives k complex bins (k = n/2 + 1 one-sided), interleaved as
// complex64 stores them; a complex signal, seen as [2n] reals, times a [2n, 2n] matrix gives n bins; the
// inverse real transform takes the k one-sided bins ([2k] reals) times a [2k, n] matrix whose rows weigh
// each bin by 2 but the first and (n even) the last, as Hermitian symmetry gives. Several dims are
// transformed one after another (the last of them the real one). The normalization folds into the
// matrices. The matrices are made on the host in double precision (angles reduced modulo n) and kept on
// the device, a few of them (kMaxCachedMatrices), each at most kMaxMatrixElements f32: a longer signal,
// and f64, runs on the CPU, counted. A dense DFT costs n^2 MACs a signal where an FFT costs n log n: on
// the chip it is the tensor cores' work, which for the lengths of spectrograms and token mixing (up to a
// few thousand) a TPU-like chip does faster than a vector FFT would.
#include "PrivateUse1NativeFunctions.h"
#include "complex_ops.h"

#include <ATen/Functions.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <torch/library.h>

#include <cmath>
#include <map>
#include <mutex>
#include <tuple>

#include "cpu_fallback.h"
#include "cpu_fallback.h"
#include "kernel_launch.h"

namespace npusim {
namespace {

using npu::compiler::OpKind;

constexpr int64_t kMaxMatrixElements = int64_t{1} << 22;  // 16 MiB of f32
constexpr size_t kMaxCachedMatrices = 16;

bool chip_complex(const at::Tensor& t) { return on_npu(t) && t.scalar_type() == at::kComplexFloat && !t.is_conj() && !t.is_neg(); }

// [..., 2] f32: a complex64 npu tensor's parts (a view), or a real one's with a zero imaginary part.
at::Tensor parts(const at::Tensor& t) {
  if (t.is_complex()) return at::view_as_real(t);
  const at::Tensor real = as_f32(t);
  return at::stack({real, at::zeros_like(real)}, -1);
}
at::Tensor from_parts(const at::Tensor& pairs) { return at::view_as_complex(pairs.contiguous()); }

// An operand of a complex binary op, on the npu: a complex64 or chip float npu tensor, or a number.
std::optional<at::Tensor> operand(const at::Tensor& t) {
  if (!on_npu(t)) {
    if (t.dim() != 0) return std::nullopt;
    return to_npu(t.to(t.is_complex() ? at::kComplexFloat : at::kFloat));
  }
  if (chip_complex(t) || chip_float(t)) return t;
  return std::nullopt;
}

// ---- the DFT matrices ----

enum class Dft { kRealToComplex, kComplexToComplex, kComplexToReal };

double normalization_scale(int64_t normalization, int64_t n) {
  // at::native::fft_norm_mode: 0 none, 1 by 1/sqrt(n), 2 by 1/n.
  return normalization == 1 ? 1.0 / std::sqrt(double(n)) : normalization == 2 ? 1.0 / double(n) : 1.0;
}

// A transform along one dim: its kind, the signal's length n, and the bins k (r2c: out; c2r: in).
struct DimTransform {
  Dft kind;
  int64_t n, k;
  int64_t matrix_elements() const { return kind == Dft::kComplexToComplex ? 4 * n * n : 2 * k * n; }
};

// The matrix for a signal of length n (the output's length for kComplexToReal), k bins out (r2c) or in
// (c2r); `sign` the exponent's sign (-1 forward).
at::Tensor dft_matrix(Dft kind, int64_t n, int64_t k, double scale, int sign) {
  static std::mutex mutex;
  static std::map<std::tuple<int, int64_t, int64_t, double, int>, at::Tensor> cache;
  const auto key = std::make_tuple(int(kind), n, k, scale, sign);
  {
    const std::lock_guard<std::mutex> lock(mutex);
    const auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  const int64_t rows = kind == Dft::kRealToComplex ? n : kind == Dft::kComplexToComplex ? 2 * n : 2 * k;
  const int64_t cols = kind == Dft::kRealToComplex ? 2 * k : kind == Dft::kComplexToComplex ? 2 * n : n;
  at::Tensor host = at::empty({rows, cols}, at::TensorOptions().dtype(at::kFloat));
  float* w = host.data_ptr<float>();
  const double two_pi = 2.0 * M_PI;
  const auto theta_of = [&](int64_t a, int64_t b) { return two_pi * double((a * b) % n) / double(n); };
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      double value = 0;
      if (kind == Dft::kRealToComplex) {  // bin c / 2 of sample r: (cos, sign * sin)
        const double theta = theta_of(r, c / 2);
        value = c % 2 == 0 ? std::cos(theta) : sign * std::sin(theta);
      } else if (kind == Dft::kComplexToComplex) {  // (xr + i xi) (cos + i sign sin)
        const double theta = theta_of(r / 2, c / 2), cosine = std::cos(theta), sine = sign * std::sin(theta);
        const bool real_in = r % 2 == 0, real_out = c % 2 == 0;
        value = real_in ? (real_out ? cosine : sine) : (real_out ? -sine : cosine);
      } else {  // sample c from bin r / 2: weight * Re((xr + i xi) (cos + i sin))
        const int64_t bin = r / 2;
        const double weight = (bin == 0 || 2 * bin == n) ? 1.0 : 2.0, theta = theta_of(bin, c);
        value = weight * (r % 2 == 0 ? std::cos(theta) : -std::sin(theta));
      }
      w[r * cols + c] = float(value * scale);
    }
  at::Tensor matrix = to_npu(host);
  const std::lock_guard<std::mutex> lock(mutex);
  if (cache.size() >= kMaxCachedMatrices) cache.clear();
  cache.emplace(key, matrix);
  return matrix;
}

// ---- the transforms along the last dim ----

at::Tensor real_to_complex_last(const at::Tensor& x, bool onesided, int64_t normalization) {
  const int64_t n = x.size(-1), k = onesided ? n / 2 + 1 : n;
  const at::Tensor y = at::matmul(x, dft_matrix(Dft::kRealToComplex, n, k, normalization_scale(normalization, n), -1));
  return at::view_as_complex(y.unflatten(-1, {k, 2}));
}

at::Tensor complex_to_complex_last(const at::Tensor& x, bool forward, int64_t normalization) {
  const int64_t n = x.size(-1);
  const at::Tensor y = at::matmul(at::view_as_real(x).flatten(-2),
                                  dft_matrix(Dft::kComplexToComplex, n, n, normalization_scale(normalization, n), forward ? -1 : 1));
  return at::view_as_complex(y.unflatten(-1, {n, 2}));
}

at::Tensor complex_to_real_last(const at::Tensor& x, int64_t n, int64_t normalization) {
  const int64_t k = n / 2 + 1;
  return at::matmul(at::view_as_real(x.narrow(-1, 0, k)).flatten(-2),
                    dft_matrix(Dft::kComplexToReal, n, k, normalization_scale(normalization, n), 1));
}

template <typename Transform>
at::Tensor along(const at::Tensor& x, int64_t dim, const Transform& transform) {
  if (dim == x.dim() - 1) return transform(x);
  return transform(x.movedim(dim, -1)).movedim(-1, dim);
}

// Whether the chip takes the transform: an f32 (r2c) or complex64 (c2c, c2r) npu tensor, not empty,
// every dim's matrix within bounds.
bool fft_on_chip(const at::Tensor& x, bool complex_input, const std::vector<DimTransform>& transforms) {
  if (!on_npu(x) || x.numel() == 0 || (complex_input ? !chip_complex(x) : x.scalar_type() != at::kFloat)) return false;
  for (const DimTransform& t : transforms)
    if (t.n < 1 || t.n > kMaxMatrixElements || t.matrix_elements() > kMaxMatrixElements) return false;
  return true;
}

constexpr const char* kFftReason = "not an f32 or complex64 npu tensor, or a signal too long for a DFT matrix of 2^22 elements";

std::vector<int64_t> wrapped(const at::Tensor& x, c10::IntArrayRef dims) {
  std::vector<int64_t> out;
  for (const int64_t d : dims) out.push_back(at::maybe_wrap_dim(d, x.dim()));
  return out;
}

}  // namespace

at::Tensor NpuNativeFunctions::_fft_r2c(const at::Tensor& self, c10::IntArrayRef dim, int64_t normalization, bool onesided) {
  const std::vector<int64_t> dims = wrapped(self, dim);
  std::vector<DimTransform> transforms;
  for (size_t i = 0; i + 1 < dims.size(); ++i) transforms.push_back({Dft::kComplexToComplex, self.size(dims[i]), self.size(dims[i])});
  if (!dims.empty()) {
    const int64_t n = self.size(dims.back());
    transforms.push_back({Dft::kRealToComplex, n, onesided ? n / 2 + 1 : n});
  }
  if (dims.empty() || !fft_on_chip(self, false, transforms)) {
    return fall_back<at::_ops::_fft_r2c>(kFftReason, self, dim, normalization, onesided);
  }
  at::Tensor y = along(self, dims.back(), [&](const at::Tensor& x) { return real_to_complex_last(x, onesided, normalization); });
  for (size_t i = 0; i + 1 < dims.size(); ++i)
    y = along(y, dims[i], [&](const at::Tensor& x) { return complex_to_complex_last(x, true, normalization); });
  return y.contiguous();
}

at::Tensor NpuNativeFunctions::_fft_c2c(const at::Tensor& self, c10::IntArrayRef dim, int64_t normalization, bool forward) {
  const std::vector<int64_t> dims = wrapped(self, dim);
  std::vector<DimTransform> transforms;
  for (const int64_t d : dims) transforms.push_back({Dft::kComplexToComplex, self.size(d), self.size(d)});
  if (dims.empty() || !fft_on_chip(self, true, transforms)) {
    return fall_back<at::_ops::_fft_c2c>(kFftReason, self, dim, normalization, forward);
  }
  at::Tensor y = self;
  for (const int64_t d : dims) y = along(y, d, [&](const at::Tensor& x) { return complex_to_complex_last(x, forward, normalization); });
  return y.contiguous();
}

at::Tensor NpuNativeFunctions::_fft_c2r(const at::Tensor& self, c10::IntArrayRef dim, int64_t normalization, int64_t last_dim_size) {
  const std::vector<int64_t> dims = wrapped(self, dim);
  std::vector<DimTransform> transforms;
  for (size_t i = 0; i + 1 < dims.size(); ++i) transforms.push_back({Dft::kComplexToComplex, self.size(dims[i]), self.size(dims[i])});
  transforms.push_back({Dft::kComplexToReal, last_dim_size, last_dim_size / 2 + 1});
  if (dims.empty() || !fft_on_chip(self, true, transforms) || self.size(dims.back()) < last_dim_size / 2 + 1) {
    return fall_back<at::_ops::_fft_c2r>(kFftReason, self, dim, normalization, last_dim_size);
  }
  at::Tensor y = self;
  for (size_t i = 0; i + 1 < dims.size(); ++i)
    y = along(y, dims[i], [&](const at::Tensor& x) { return complex_to_complex_last(x, false, normalization); });
  y = along(y, dims.back(), [&](const at::Tensor& x) { return complex_to_real_last(x, last_dim_size, normalization); });
  return y.contiguous();
}

// torch.polar (a rotary embedding's complex frequencies, as Meta's Llama writes them): abs (cos, sin) of angle.
at::Tensor NpuNativeFunctions::polar(const at::Tensor& abs, const at::Tensor& angle) {
  if (!on_npu(abs) || !on_npu(angle) || abs.scalar_type() != at::kFloat || angle.scalar_type() != at::kFloat)
    return fall_back<at::_ops::polar>("not f32 npu tensors", abs, angle);
  return from_parts(at::stack({at::mul(abs, at::cos(angle)), at::mul(abs, at::sin(angle))}, -1));
}

// The conjugate, stored: (re, -im).
at::Tensor NpuNativeFunctions::_conj_physical(const at::Tensor& self) {
  if (!chip_complex(self)) return fall_back<at::_ops::_conj_physical>("not a complex64 npu tensor", self);
  const at::Tensor p = at::view_as_real(self);
  return from_parts(at::stack({p.select(-1, 0), at::neg(p.select(-1, 1))}, -1));
}

// The argument of a complex number: atan2(im, re).
at::Tensor NpuNativeFunctions::angle(const at::Tensor& self) {
  if (!chip_complex(self)) return fall_back<at::_ops::angle>("not a complex64 npu tensor", self);
  const at::Tensor p = at::view_as_real(self);
  return at::atan2(p.select(-1, 1), p.select(-1, 0));
}

std::optional<at::Tensor> complex_unary(OpKind kind, const at::Tensor& self) {
  if (!chip_complex(self) || self.numel() == 0) return std::nullopt;
  const at::Tensor p = at::view_as_real(self);
  if (kind == OpKind::NEG) return from_parts(at::neg(p));
  if (kind == OpKind::ABS) return at::hypot(p.select(-1, 0), p.select(-1, 1));
  return std::nullopt;
}

namespace {

// a / b. A real divisor divides both parts; a complex one as c10::complex does (Smith's method: the ratio
// of the divisor's smaller part to its larger, so that no product overflows where the quotient does not):
// |br| >= |bi|: r = bi / br, d = br + bi r, ((ar + ai r) + i (ai - ar r)) / d; else r = br / bi,
// d = br r + bi, ((ar r + ai) + i (ai r - ar)) / d.
at::Tensor complex_divide(const at::Tensor& a, const at::Tensor& b) {
  if (!b.is_complex()) return from_parts(at::div(parts(a), as_f32(b).unsqueeze(-1)));
  const at::Tensor pa = parts(a), pb = parts(b);
  const at::Tensor ar = pa.select(-1, 0), ai = pa.select(-1, 1), br = pb.select(-1, 0), bi = pb.select(-1, 1);
  const at::Tensor real_larger = at::ge(at::abs(br), at::abs(bi));
  const at::Tensor ratio = at::where(real_larger, at::div(bi, br), at::div(br, bi));
  const at::Tensor denominator = at::where(real_larger, at::add(br, at::mul(bi, ratio)), at::add(at::mul(br, ratio), bi));
  const at::Tensor real = at::where(real_larger, at::add(ar, at::mul(ai, ratio)), at::add(at::mul(ar, ratio), ai));
  const at::Tensor imaginary = at::where(real_larger, at::sub(ai, at::mul(ar, ratio)), at::sub(at::mul(ai, ratio), ar));
  return from_parts(at::stack({at::div(real, denominator), at::div(imaginary, denominator)}, -1));
}

}  // namespace

std::optional<at::Tensor> complex_binary(OpKind kind, const at::Tensor& a_in, const at::Tensor& b_in) {
  if ((kind != OpKind::ADD && kind != OpKind::SUB && kind != OpKind::MUL && kind != OpKind::DIV) ||
      at::result_type(a_in, b_in) != at::kComplexFloat)
    return std::nullopt;
  const std::optional<at::Tensor> a = operand(a_in), b = operand(b_in);
  if (!a || !b || (!on_npu(a_in) && !on_npu(b_in)) || a->numel() == 0 || b->numel() == 0) return std::nullopt;
  if (kind == OpKind::ADD) return from_parts(at::add(parts(*a), parts(*b)));
  if (kind == OpKind::SUB) return from_parts(at::sub(parts(*a), parts(*b)));
  if (kind == OpKind::DIV) return complex_divide(*a, *b);
  // A real factor scales both parts; two complex ones: (ar br - ai bi) + i (ar bi + ai br).
  if (!b->is_complex()) return from_parts(at::mul(parts(*a), as_f32(*b).unsqueeze(-1)));
  if (!a->is_complex()) return from_parts(at::mul(parts(*b), as_f32(*a).unsqueeze(-1)));
  const at::Tensor pa = parts(*a), pb = parts(*b);
  const at::Tensor ar = pa.select(-1, 0), ai = pa.select(-1, 1), br = pb.select(-1, 0), bi = pb.select(-1, 1);
  return from_parts(at::stack({at::sub(at::mul(ar, br), at::mul(ai, bi)), at::add(at::mul(ar, bi), at::mul(ai, br))}, -1));
}

bool copy_complex_on_chip(const at::Tensor& self, const at::Tensor& dst) {
  if (!on_npu(self) || !on_npu(dst) || !chip_complex(dst)) return false;
  const at::Tensor target = at::view_as_real(dst);
  const at::Tensor source = chip_complex(self) ? at::view_as_real(self) : chip_float(self) ? parts(self.expand(dst.sizes())) : at::Tensor();
  if (!source.defined()) return false;
  target.copy_(source);
  return true;
}

namespace {

// A copy whose source or target carries a lazy conjugation or negation bit (torch.conj, _neg_view) and
// involves the npu. ATen's copy_ hands a device copy to _copy_from, and the math-bit fallback would resolve
// the bit by cloning, a copy_ that comes back here: the bit is handled here instead. The copy moves the
// values stored (the bit toggled off on both sides where both have it), and the target is then
// conjugated or negated where only the source had the bit.
template <bool kConjugate>
at::Tensor copy_resolving_bit(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  const auto has = [](const at::Tensor& t) { return kConjugate ? t.is_conj() : t.is_neg(); };
  const auto toggled = [](const at::Tensor& t) { return kConjugate ? t.conj() : t._neg_view(); };
  const at::Tensor source = has(self) ? toggled(self) : self, target = has(dst) ? toggled(dst) : dst;
  at::_copy_from(source, target, non_blocking);
  if (has(self) != has(dst)) {
    // The values the target holds are the source's stored ones: conjugate or negate them where they are.
    if (!kConjugate) {
      target.neg_();
    } else if (on_npu(target)) {
      at::view_as_real(target).select(-1, 1).neg_();
    } else {
      target.conj_physical_();
    }
  }
  return dst;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, Conjugate, m) { m.impl("_copy_from", copy_resolving_bit<true>); }
TORCH_LIBRARY_IMPL(aten, Negative, m) { m.impl("_copy_from", copy_resolving_bit<false>); }

// Views: ATen's own kernels.
at::Tensor NpuNativeFunctions::view_as_real(const at::Tensor& self) { return at::native::view_as_real(self); }
at::Tensor NpuNativeFunctions::view_as_complex(const at::Tensor& self) { return at::native::view_as_complex(self); }

}  // namespace npusim
