// ATen ops on the "npu" device: the minimum set (tensors, views, copies,
// scalars, fill), kernels through the compiler for the ops it supports, and
// a boxed CPU fallback, counted per op, for everything else.
#include <ATen/EmptyTensor.h>
#include <ATen/ExpandUtils.h>
#include <ATen/Functions.h>
#include <ATen/ScalarOps.h>
#include <ATen/TensorOperators.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/view_native.h>
#include <c10/util/accumulate.h>
#include <torch/library.h>

#include <algorithm>
#include <numeric>
#include <limits>
#include <cmath>
#include <cstring>
#include <functional>

#include "PrivateUse1NativeFunctions.h"
#include "npusim/compiler/compiler.h"
#include "custom_ops.h"
#include "int64_arithmetic.h"
#include "leading_slices.h"
#include "nonzero.h"
#include "complex_ops.h"
#include "cpu_fallback.h"
#include "kernel_launch.h"
#include "runtime/runtime.h"

namespace npusim {
namespace {

using npu::compiler::OpDesc;
using npu::compiler::OpKind;
using npu::compiler::UnsupportedOp;

// ---- tensors and views --------------------------------------------------------

}  // namespace

at::Tensor NpuNativeFunctions::empty(c10::IntArrayRef size, std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                                     std::optional<at::Device> device, std::optional<bool> pin_memory,
                                     std::optional<at::MemoryFormat> format) {
  const c10::DispatchKeySet keys(c10::DispatchKey::PrivateUse1);
  return at::detail::empty_generic(size, c10::GetAllocator(kNpu), keys, c10::dtype_or_default(dtype), format);
}

at::Tensor NpuNativeFunctions::empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                                             std::optional<at::Layout>, std::optional<at::Device>, std::optional<bool>) {
  const c10::DispatchKeySet keys(c10::DispatchKey::PrivateUse1);
  return at::detail::empty_strided_generic(size, stride, c10::GetAllocator(kNpu), keys, c10::dtype_or_default(dtype));
}

const at::Tensor& NpuNativeFunctions::resize_(const at::Tensor& self, c10::IntArrayRef size, std::optional<at::MemoryFormat>) {
  at::native::resize_impl_cpu_(self.unsafeGetTensorImpl(), size, std::nullopt, /*resize_storage=*/false);
  const size_t needed = at::detail::computeStorageNbytesContiguous(size, self.dtype().itemsize(), self.storage_offset());
  if (needed > self.storage().nbytes()) at::detail::getPrivateUse1Hooks().resizePrivateUse1Bytes(self.storage(), needed);
  return self;
}

at::Tensor& NpuNativeFunctions::set_(at::Tensor& self, c10::Storage source) {
  const int64_t bytes = static_cast<int64_t>(source.nbytes());
  const int64_t numel = bytes / static_cast<int64_t>(self.dtype().itemsize());
  self.unsafeGetTensorImpl()->set_storage_keep_dtype(std::move(source));
  self.unsafeGetTensorImpl()->set_sizes_contiguous({numel});
  self.unsafeGetTensorImpl()->set_storage_offset(0);
  return self;
}

at::Tensor& NpuNativeFunctions::set_(at::Tensor& self, c10::Storage source, int64_t offset, c10::IntArrayRef size, c10::IntArrayRef stride) {
  self.unsafeGetTensorImpl()->set_storage_keep_dtype(std::move(source));
  self.unsafeGetTensorImpl()->set_storage_offset(offset);
  self.unsafeGetTensorImpl()->set_sizes_and_strides(size, stride);
  return self;
}

namespace {

// ---- copies -------------------------------------------------------------------

// A contiguous device copy of a device tensor (the compiled copy kernel reads any strides).
// dst = src (converted to dst's dtype) by the copy or cast kernel, any strides. The
// kernel reads at most six dims that do not merge; more are copied a slice of the
// first dim at a time (up to kMaxSlices kernels). False if the chip cannot do it.
// An 8-byte element type the chip has no dtype for (int64, f64) as pairs of i32 words: for copies, which move bits.
npu::compiler::TensorDesc describe_as_words(const at::Tensor& t) {
  npu::compiler::TensorDesc desc;
  desc.dtype = npu::isa::DType::I32;
  for (int64_t d = 0; d < t.dim(); ++d) desc.shape.push_back(t.size(d)), desc.strides.push_back(2 * t.stride(d));
  desc.shape.push_back(2), desc.strides.push_back(1);
  desc.storage_offset = 2 * t.storage_offset();
  return desc;
}

bool copy_on_chip(const at::Tensor& src, const at::Tensor& dst) {
  constexpr int64_t kMaxSlices = 256;
  const OpKind kind = src.scalar_type() == dst.scalar_type() ? OpKind::COPY : OpKind::CAST;
  if (kind == OpKind::COPY && src.dtype().itemsize() == 8) {
    if (try_run([&] { return OpDesc(kind, {describe_as_words(src)}, describe_as_words(dst)); }, {src}, dst)) return true;
  } else if (try_run([&] { return OpDesc(kind, {describe(src)}, describe(dst)); }, {src}, dst)) {
    return true;
  }
  if (src.dim() <= 1 || src.dim() != dst.dim() || src.size(0) != dst.size(0) || src.size(0) > kMaxSlices) return false;
  for (int64_t i = 0; i < src.size(0); ++i)
    if (!copy_on_chip(src.select(0, i), dst.select(0, i))) return false;
  return true;
}

// A contiguous device copy of a device tensor.
at::Tensor contiguous_on_npu(const at::Tensor& t) {
  if (t.is_contiguous()) return t;
  at::Tensor out = NpuNativeFunctions::empty(t.sizes(), t.scalar_type(), std::nullopt, std::nullopt, std::nullopt, std::nullopt);
  if (!copy_on_chip(t, out)) throw UnsupportedOp("a view the copy kernel cannot read");
  return out;
}

// A host copy of a device tensor's whole storage, viewed with the tensor's
// sizes, strides and offset: for views the copy kernel cannot read (more
// than three dimensions that do not merge).
at::Tensor strided_via_storage(const at::Tensor& t) {
  Runtime& runtime = Runtime::get();
  runtime.note_fallback("aten::_copy_from (a view the copy kernel cannot read)");
  runtime.synchronize();
  const int64_t elements = int64_t(t.storage().nbytes() / t.dtype().itemsize());
  at::Tensor storage = at::empty({elements}, t.options().device(at::kCPU));
  if (elements > 0) runtime.read_device(Runtime::buffer_of(t), 0, storage.data_ptr(), storage.nbytes());
  return storage.as_strided(t.sizes(), t.strides(), t.storage_offset());
}

}  // namespace

at::Tensor NpuNativeFunctions::_copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  Runtime& runtime = Runtime::get();
  const size_t element = self.dtype().itemsize();
  if (on_npu(self) && !on_npu(dst)) {  // device to host
    runtime.synchronize();
    at::Tensor src;
    try {
      src = contiguous_on_npu(self);
    } catch (const UnsupportedOp&) {
      dst.copy_(strided_via_storage(self), non_blocking);
      return dst;
    }
    if (src.data_ptr() != self.data_ptr() || !self.is_contiguous()) runtime.synchronize();
    at::Tensor host = at::empty(src.sizes(), src.options().device(at::kCPU));
    if (host.numel() > 0)
      runtime.read_device(Runtime::buffer_of(src), uint64_t(src.storage_offset()) * element, host.data_ptr(), host.nbytes());
    dst.copy_(host, non_blocking);
    return dst;
  }
  if (!on_npu(self) && on_npu(dst)) {  // host to device
    at::Tensor host = self.to(dst.scalar_type()).expand(dst.sizes()).contiguous();
    runtime.synchronize();  // the destination may be in use by queued kernels
    if (dst.is_contiguous()) {
      if (host.numel() > 0)
        runtime.write_device(Runtime::buffer_of(dst), uint64_t(dst.storage_offset()) * element, host.data_ptr(), host.nbytes());
    } else {
      at::Tensor staged = NpuNativeFunctions::empty(dst.sizes(), dst.scalar_type(), std::nullopt, std::nullopt, std::nullopt, std::nullopt);
      runtime.write_device(Runtime::buffer_of(staged), 0, host.data_ptr(), host.nbytes());
      if (!copy_on_chip(staged, dst)) {
        // Through the whole storage: read it, write the view on the host, write it back.
        at::Tensor view = strided_via_storage(dst);
        view.copy_(host);
        runtime.write_device(Runtime::buffer_of(dst), 0, view.storage().data_ptr().get(), dst.storage().nbytes());
      }
    }
    return dst;
  }
  // Device to device: the compiled copy or cast (any strides, broadcasting); what the chip cannot do goes through the host.
  if (copy_on_chip(self, dst)) return dst;
  // int64, which the chip stores as pairs of i32 words: to bool (nonzero where either word is), to int32
  // (the low word: the CPU's conversion wraps the same way), and from int32 (the high word the sign).
  if (self.scalar_type() == at::kLong && dst.scalar_type() == at::kBool) {
    const at::Tensor words = int64_words(self);
    if (copy_on_chip(at::maximum(at::ne(words.select(-1, 0), 0), at::ne(words.select(-1, 1), 0)), dst)) return dst;
  }
  if (self.scalar_type() == at::kLong && dst.scalar_type() == at::kInt && copy_on_chip(int64_words(self).select(-1, 0), dst)) return dst;
  // int64 to a float (counts dividing a loss, labels): a value that fits in 32 bits (its high word the low
  // word's sign) converts from its low word, rounded once as on the CPU; a larger one is high word * 2^32
  // + the low word read unsigned, in f32 (two roundings where the CPU makes one: within an f32 rounding).
  if (self.scalar_type() == at::kLong && chip_float_dtype(dst.scalar_type())) {
    const at::Tensor words = int64_words(self);
    const at::Tensor low = words.select(-1, 0), high = words.select(-1, 1);
    const at::Tensor negative = at::lt(low, 0);
    const at::Tensor fits = at::eq(high, at::where(negative, at::scalar_tensor(-1, low.options().device(at::kCPU)),
                                                   at::scalar_tensor(0, low.options().device(at::kCPU))));
    const at::Tensor low_f32 = low.to(at::kFloat);
    const at::Tensor unsigned_low = at::where(negative, at::add(low_f32, 4294967296.0), low_f32);
    const at::Tensor large = at::add(at::mul(high.to(at::kFloat), 4294967296.0), unsigned_low);
    if (copy_on_chip(at::where(fits, low_f32, large), dst)) return dst;
  }
  // A float to int64 (T5's log-spaced position buckets): truncated toward zero. Below 2^31 in magnitude the
  // chip's f32 to i32 conversion gives the low word, the sign the high one; above, the truncated value is
  // an integer of at most 24 significant bits, split exactly into high = floor(t / 2^32) and the low word
  // t - high 2^32 (read signed). NaN, infinities and values beyond int64 give INT64_MIN, as x86 does.
  if (chip_float_dtype(self.scalar_type()) && dst.scalar_type() == at::kLong) {
    const auto on_host = [](auto value) { return at::scalar_tensor(value, at::TensorOptions().device(at::kCPU)); };
    const at::Tensor t = at::trunc(self.to(at::kFloat));
    const at::Tensor small = at::lt(at::abs(t), 2147483648.0);
    const at::Tensor high_f = at::floor(at::mul(t, 1.0 / 4294967296.0));
    const at::Tensor low_f = at::sub(t, at::mul(high_f, 4294967296.0));
    const at::Tensor low_large = at::where(at::ge(low_f, 2147483648.0), at::sub(low_f, 4294967296.0), low_f);
    const at::Tensor in_range = at::lt(at::abs(t), 9223372036854775808.0);  // false for NaN too
    const at::Tensor low = at::where(in_range, at::where(small, t, low_large), on_host(0.0f)).to(at::kInt);
    const at::Tensor high = at::where(in_range, at::where(small, at::where(at::lt(t, 0), on_host(-1.0f), on_host(0.0f)), high_f),
                                      on_host(-2147483648.0f))
                                .to(at::kInt);
    const at::Tensor words = int64_words(dst);
    if (copy_on_chip(low, words.select(-1, 0)) && copy_on_chip(high, words.select(-1, 1))) return dst;
  }
  const bool narrow_integer = self.scalar_type() == at::kInt || self.scalar_type() == at::kBool || self.scalar_type() == at::kByte ||
                              self.scalar_type() == at::kChar;
  if (narrow_integer && dst.scalar_type() == at::kLong) {  // (bool, uint8 and int8 through int32: masks made counts)
    const at::Tensor value = self.scalar_type() == at::kInt ? self : self.to(at::kInt);
    const at::Tensor words = int64_words(dst);
    const at::Tensor sign = at::where(at::lt(value, 0), at::scalar_tensor(-1, value.options().device(at::kCPU)),
                                      at::scalar_tensor(0, value.options().device(at::kCPU)));
    if (copy_on_chip(value, words.select(-1, 0)) && copy_on_chip(sign, words.select(-1, 1))) return dst;
  }
  if (copy_complex_on_chip(self, dst)) return dst;
  note_cpu_fallback(self.scalar_type() == dst.scalar_type() ? "aten::_copy_from (device to device)" : "aten::_copy_from (device dtype conversion)");
  NpuNativeFunctions::_copy_from(NpuNativeFunctions::_copy_from(self, at::empty(self.sizes(), self.options().device(at::kCPU)), false).to(dst.scalar_type()), dst, false);
  return dst;
}

at::Tensor NpuNativeFunctions::_copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  NpuNativeFunctions::resize_(dst, self.sizes(), std::nullopt);
  return NpuNativeFunctions::_copy_from(self, dst, false);
}

// item(): the one element of a tensor of any shape ([1], [1, 1] as well as []).
at::Scalar NpuNativeFunctions::_local_scalar_dense(const at::Tensor& self) {
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(), " elements cannot be converted to Scalar");
  const at::Tensor host = NpuNativeFunctions::_copy_from(self, at::empty(self.sizes(), self.options().device(at::kCPU)), false);
  return host.item();
}

namespace {

// ---- compiled ops -------------------------------------------------------------


}  // namespace

// An elementwise kernel (inputs broadcast to out). The kernels read at most six dims that do not
// merge; more run a slice of the first dim at a time (up to 256 kernels). False if the chip cannot.
bool run_elementwise(OpKind kind, const std::vector<at::Tensor>& inputs, const at::Tensor& out) {
  const auto make_op = [&] {
    std::vector<npu::compiler::TensorDesc> described;
    for (const at::Tensor& t : inputs) described.push_back(describe(t));
    return OpDesc(kind, described, describe(out));
  };
  if (try_run(make_op, inputs, out)) return true;
  if (out.dim() <= 3 || out.size(0) > 256) return false;
  std::vector<at::Tensor> expanded;
  for (const at::Tensor& t : inputs) expanded.push_back(t.expand(out.sizes()));
  for (int64_t i = 0; i < out.size(0); ++i) {
    std::vector<at::Tensor> slices;
    for (const at::Tensor& t : expanded) slices.push_back(t.select(0, i));
    if (!run_elementwise(kind, slices, out.select(0, i))) return false;
  }
  return true;
}

at::Tensor unary(OpKind kind, const at::Tensor& self, const std::function<at::Tensor()>& fallback) {
  if (self.is_complex())
    if (std::optional<at::Tensor> result = complex_unary(kind, self)) return *result;
  if ((kind == OpKind::NEG || kind == OpKind::ABS) && self.scalar_type() == at::kLong && on_npu(self) && self.numel() > 0) {
    // int64 on its words (T5's relative position buckets): 0 - x with the borrow; abs where the high word is negative.
    const at::Tensor negated = int64_add(at::zeros_like(self), self, true);
    return kind == OpKind::NEG ? negated : at::where(at::lt(int64_high_word(self), 0), negated, self);
  }
  at::Tensor out = new_npu_like(self.sizes(), self.scalar_type(), {&self});
  if (run_elementwise(kind, {self}, out)) return out;
  return fallback();
}

// In place (nn.ReLU(inplace=True) and friends): the kernel writes each tile where it read it, when self's
// elements do not overlap; otherwise the result is computed apart and copied back.
at::Tensor& unary_(OpKind kind, at::Tensor& self, const std::function<at::Tensor()>& fallback) {
  if (self.is_non_overlapping_and_dense() && run_elementwise(kind, {self}, self)) return self;
  self.copy_(unary(kind, self, fallback));
  return self;
}

// A Python number as PyTorch itself passes one: a 0-dim CPU tensor of the number's own kind (int64, double,
// bool) marked as a wrapped number, which type promotion ranks below every tensor (int32 ** 3 stays int32, and
// so does a 0-dim int32 compared with 0). A tensor made with the default dtype, f32, promoted every integer
// result to f32.
at::Tensor cpu_scalar(const at::Scalar& value) { return at::native::wrapped_scalar_tensor(value); }

// PyTorch's rule for operands on two devices: a 0-dim CPU tensor (a scalar) may join device tensors; any
// other CPU tensor is an error, as on CUDA, not copied to the device behind the caller's back.
void check_operand_device(const at::Tensor& t, const char* op) {
  TORCH_CHECK(on_npu(t) || (t.dim() == 0 && t.device().is_cpu()),
              "Expected all tensors to be on the same device, but found at least two devices, npu:0 and ", t.device(), "! (", op, ")");
}

// Binary ops with broadcasting, after PyTorch's type promotion: a Python
// number or a 0-dim CPU tensor becomes a 0-dim device tensor of the common
// dtype, and a device tensor of another dtype is cast on the chip first.
at::Tensor binary(OpKind kind, const char* name, const at::Tensor& a_in, const at::Tensor& b_in, bool bool_result,
                  const std::function<at::Tensor()>& fallback) {
  check_operand_device(a_in, name);
  check_operand_device(b_in, name);
  const at::ScalarType common = at::result_type(a_in, b_in);
  if (at::isComplexType(common))
    if (std::optional<at::Tensor> result = complex_binary(kind, a_in, b_in)) return *result;
  const auto chip_dtype = [](at::ScalarType t) { return t != at::kLong && t != at::kDouble && !at::isComplexType(t); };
  const auto prepare = [&](const at::Tensor& t) {
    if (!on_npu(t) && t.dim() == 0) return to_npu(t.to(common));
    // (int64 into a float: the cast through its words, below; a chip integer or bool into int64: its
    // words made on the chip.)
    const bool castable = chip_dtype(t.scalar_type()) || (t.scalar_type() == at::kLong && at::isFloatingType(common));
    const bool widened = common == at::kLong && chip_dtype(t.scalar_type()) && at::isIntegralType(t.scalar_type(), true);
    if (on_npu(t) && t.scalar_type() != common && ((castable && chip_dtype(common)) || widened)) return t.to(common);
    return to_npu(t);
  };
  const at::Tensor a = prepare(a_in), b = prepare(b_in);
  if ((kind == OpKind::EQ || kind == OpKind::NE) && common == at::kLong && a.scalar_type() == common && b.scalar_type() == common) {
    // int64 (the chip has none): equal when both 32-bit words are (targets against ignore_index, labels
    // against predictions).
    const at::Tensor words = binary(kind, name, int64_words(a), int64_words(b), true, fallback);
    const at::Tensor low = words.select(-1, 0), high = words.select(-1, 1);
    return kind == OpKind::EQ ? at::minimum(low, high) : at::maximum(low, high);
  }
  if (common == at::kLong && a.scalar_type() == common && b.scalar_type() == common && a.numel() > 0 && b.numel() > 0) {
    // int64 on its words (int64_arithmetic.h).
    switch (kind) {
      case OpKind::ADD: return int64_add(a, b, false);
      case OpKind::SUB: return int64_add(a, b, true);
      case OpKind::MUL: return int64_mul(a, b);
      case OpKind::BITWISE_AND:
      case OpKind::BITWISE_OR:
      case OpKind::BITWISE_XOR: return int64_bitwise(kind, a, b);
      case OpKind::LT:
      case OpKind::LE:
      case OpKind::GT:
      case OpKind::GE: return int64_compare(kind, a, b);
      case OpKind::MAXIMUM: return int64_extremum(true, a, b);
      case OpKind::MINIMUM: return int64_extremum(false, a, b);
      default: break;
    }
  }
  if (a.scalar_type() == common && b.scalar_type() == common) {
    at::Tensor out = new_npu_like(at::infer_size(a.sizes(), b.sizes()), bool_result ? at::kBool : common, {&a, &b});
    if (run_elementwise(kind, {a, b}, out)) return out;
  }
  return fallback();
}

namespace {

at::Tensor mul(const at::Tensor& a, const at::Tensor& b) {
  return binary(OpKind::MUL, "aten::mul.Tensor", a, b, false, [&] { return fall_back<at::_ops::mul_Tensor>("", a, b); });
}
// b * alpha (two kernels when alpha != 1: the chip's add has no scale).
at::Tensor scaled(const at::Tensor& b, const at::Scalar& alpha) {
  return alpha.equal(1) ? b : npusim::mul(b, at::scalar_tensor(alpha, b.options().device(at::kCPU)));
}
}  // namespace

at::Tensor NpuNativeFunctions::add(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  return binary(OpKind::ADD, "aten::add.Tensor", a, scaled(b, alpha), false, [&] { return fall_back<at::_ops::add_Tensor>("", a, b, alpha); });
}
at::Tensor NpuNativeFunctions::sub(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  return binary(OpKind::SUB, "aten::sub.Tensor", a, scaled(b, alpha), false, [&] { return fall_back<at::_ops::sub_Tensor>("", a, b, alpha); });
}
// True division; integers (and bools) are converted to the default float dtype first, as ATen does.
at::Tensor NpuNativeFunctions::div(const at::Tensor& a, const at::Tensor& b) {
  const at::ScalarType common = at::result_type(a, b);
  if (at::isIntegralType(common, /*includeBool=*/true)) {
    const at::ScalarType to = c10::typeMetaToScalarType(at::get_default_dtype());
    return NpuNativeFunctions::div(a.to(to), b.to(to));
  }
  if (!at::isFloatingType(common) && !at::isComplexType(common)) return fall_back<at::_ops::div_Tensor>("", a, b);
  return binary(OpKind::DIV, "aten::div.Tensor", a, b, false, [&] { return fall_back<at::_ops::div_Tensor>("", a, b); });
}
at::Tensor NpuNativeFunctions::div(const at::Tensor& a, const at::Scalar& b) { return NpuNativeFunctions::div(a, cpu_scalar(b)); }

namespace {
at::Tensor maximum(const at::Tensor& a, const at::Tensor& b) {
  return binary(OpKind::MAXIMUM, "aten::maximum", a, b, false, [&] { return fall_back<at::_ops::maximum>("", a, b); });
}
at::Tensor minimum(const at::Tensor& a, const at::Tensor& b) {
  return binary(OpKind::MINIMUM, "aten::minimum", a, b, false, [&] { return fall_back<at::_ops::minimum>("", a, b); });
}
}  // namespace

// base ** x (pow.Scalar, as RoPE's 10000 ** (i / d)): v.pow of the base filled to x's shape, for floats.
at::Tensor NpuNativeFunctions::pow(const at::Scalar& base, const at::Tensor& exponent) {
  const at::ScalarType dtype = at::result_type(base, exponent);
  const auto fallback = [&] { return fall_back<at::_ops::pow_Scalar>("", base, exponent); };
  if (!at::isFloatingType(dtype) || dtype == at::kDouble || !on_npu(exponent)) return fallback();
  const at::Tensor filled = at::full(exponent.sizes(), base, exponent.options().dtype(dtype));
  return binary(OpKind::POW, "aten::pow.Scalar", filled, exponent, false, fallback);
}

// logical_not(x) is x == 0, for every dtype the comparison kernel takes.
at::Tensor NpuNativeFunctions::logical_not(const at::Tensor& self) {
  const at::Tensor zero = at::zeros({}, self.options().device(at::kCPU));  // of self's dtype: no promotion
  return binary(OpKind::EQ, "aten::logical_not", self, zero, true, [&] { return fall_back<at::_ops::logical_not>("", self); });
}

namespace {
// x != 0 as bool.
at::Tensor truth(const at::Tensor& self) {
  if (self.scalar_type() == at::kBool) return self;
  const at::Tensor zero = at::zeros({}, self.options().device(at::kCPU));
  return binary(OpKind::NE, "aten::ne.Scalar", self, zero, true, [&] { return fall_back<at::_ops::ne_Scalar>("", self, 0); });
}
}  // namespace

// logical_and / logical_or of any dtypes: the minimum / maximum of their truth values (bools as 0/1 bytes).
at::Tensor NpuNativeFunctions::logical_and(const at::Tensor& a, const at::Tensor& b) { return npusim::minimum(truth(a), truth(b)); }
at::Tensor NpuNativeFunctions::logical_or(const at::Tensor& a, const at::Tensor& b) { return npusim::maximum(truth(a), truth(b)); }
// isnan: x != x for floats; nothing is NaN in an integer tensor.
at::Tensor NpuNativeFunctions::isnan(const at::Tensor& self) {
  if (!at::isFloatingType(self.scalar_type())) return at::zeros(self.sizes(), self.options().dtype(at::kBool));
  return at::ne(self, self);
}
// nan_to_num: NaN, +inf and -inf replaced by the select kernel (by default with 0 and the dtype's
// largest and lowest finite values); integers hold none of them.
at::Tensor NpuNativeFunctions::nan_to_num(const at::Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                                          std::optional<double> neginf) {
  if (!chip_float(self) || self.numel() == 0)
    return fall_back<at::_ops::nan_to_num>("", self, nan, posinf, neginf);
  const double largest = self.scalar_type() == at::kFloat ? double(std::numeric_limits<float>::max())
                         : self.scalar_type() == at::kHalf ? double(std::numeric_limits<c10::Half>::max())
                                                           : double(std::numeric_limits<c10::BFloat16>::max());
  const auto value = [&](double v) { return at::scalar_tensor(v, at::TensorOptions().dtype(self.scalar_type())); };
  const double infinity = std::numeric_limits<double>::infinity();
  at::Tensor result = at::where(at::ne(self, self), value(nan.value_or(0.0)), self);
  result = at::where(at::eq(self, infinity), value(posinf.value_or(largest)), result);
  return at::where(at::eq(self, -infinity), value(neginf.value_or(-largest)), result);
}

namespace {
// clamp(x, min, max) = minimum(maximum(x, min), max), after type promotion (a NaN stays NaN; min > max gives max).
at::Tensor clamp(const at::Tensor& self, const std::optional<at::Scalar>& min, const std::optional<at::Scalar>& max) {
  at::Tensor result = self;
  if (min) result = npusim::maximum(result, cpu_scalar(*min));
  if (max) result = npusim::minimum(result, cpu_scalar(*max));
  return result;
}

}  // namespace

at::Tensor NpuNativeFunctions::gelu(const at::Tensor& self, c10::string_view approximate) {
  const bool tanh = approximate == "tanh";
  at::Tensor out = new_npu_like(self.sizes(), self.scalar_type(), {&self});
  if (try_run([&] { return OpDesc(tanh ? OpKind::GELU_TANH : OpKind::GELU, {describe(self)}, describe(out)); }, {self}, out)) return out;
  return fall_back<at::_ops::gelu>("", self, approximate);
}

// gelu's derivative by ATen's formulas, one elementwise chain in f32, rounded once (half-precision
// inputs converted on the chip):
//   none: grad * (cdf + x * pdf), cdf = (1 + erf(x / sqrt 2)) / 2, pdf = exp(-x^2 / 2) / sqrt(2 pi)
//   tanh: grad * ((1 + t) / 2 + x / 2 * (1 - t^2) * beta * (1 + 3 kappa x^2)), t = tanh(beta * (x + kappa x^3))
at::Tensor NpuNativeFunctions::gelu_backward(const at::Tensor& grad, const at::Tensor& self, c10::string_view approximate) {
  const at::ScalarType dtype = grad.scalar_type();
  if (chip_float(grad) && chip_float(self) && self.scalar_type() == dtype && grad.numel() > 0) {
    std::string chain;
    if (approximate == "tanh") {
      constexpr double kBeta = M_SQRT2 * M_2_SQRTPI * 0.5, kKappa = 0.044715;
      chain = "mul(in1, in1); mul(%0, in1); mul(%1, " + chain_constant(kKappa) + "); add(in1, %2); mul(%3, " + chain_constant(kBeta) +
              "); tanh(%4); add(%5, 1); mul(%6, 0.5); mul(in1, 0.5); mul(%5, %5); sub(1, %9); mul(%8, %10); mul(%11, " +
              chain_constant(kBeta) + "); mul(%0, " + chain_constant(3 * kKappa) + "); add(%13, 1); mul(%12, %14); add(%7, %15); mul(in0, %16)";
    } else {
      chain = "mul(in1, " + chain_constant(M_SQRT1_2) + "); erf(%0); add(%1, 1); mul(%2, 0.5); mul(in1, in1); mul(%4, -0.5); exp(%5); mul(%6, " +
              chain_constant(M_2_SQRTPI * M_SQRT1_2 * 0.5) + "); mul(in1, %7); add(%3, %8); mul(in0, %9)";
    }
    return elementwise_chain_in_f32({grad, self}, chain);
  }
  return fall_back<at::_ops::gelu_backward>("", grad, self, approximate);
}

namespace {

// out = beta * bias + alpha * (a @ b)
at::Tensor matmul_op(const at::Tensor& a, const at::Tensor& b, const at::Tensor* bias, double alpha, double beta, const char* name,
                     const std::function<at::Tensor()>& fallback) {
  std::vector<int64_t> shape(a.sizes().begin(), a.sizes().end() - 1);
  shape.push_back(b.size(-1));
  if (a.scalar_type() == b.scalar_type() && (!bias || on_npu(*bias))) {
    at::Tensor out = new_npu(shape, a.scalar_type());
    if (!bias && alpha == 1.0 && on_npu(a) && on_npu(b) && split_k_into(a, b, out)) return out;
    std::vector<at::Tensor> inputs = {a, b};
    if (bias) inputs.push_back(*bias);
    const auto make_op = [&] {
      OpDesc op(OpKind::MATMUL, {describe(a), describe(b)}, describe(out));
      if (bias) op.inputs.push_back(describe(*bias));
      op.alpha = alpha, op.beta = beta;
      op.f32_precision = f32_matmul_precision();
      return op;
    };
    if (try_run(make_op, inputs, out)) return out;
  }
  return fallback();
}
}  // namespace

at::Tensor NpuNativeFunctions::mm(const at::Tensor& a, const at::Tensor& b) {
  return matmul_op(a, b, nullptr, 1, 1, "aten::mm", [&] { return fall_back<at::_ops::mm>("", a, b); });
}
// torch._int_mm: int8 [M, K] @ int8 [K, N] -> int32, the tensor core's i8 products summed exactly in i32.
at::Tensor NpuNativeFunctions::_int_mm(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "_int_mm: a is [M, K] and b [K, N]");
  TORCH_CHECK(a.scalar_type() == at::kChar && b.scalar_type() == at::kChar, "_int_mm: a and b are int8");
  at::Tensor out = new_npu({a.size(0), b.size(1)}, at::kInt);
  if (on_npu(a) && on_npu(b) && a.size(1) > 0 && gemm_into(a, b, nullptr, out)) return out;
  return fall_back<at::_ops::_int_mm>("", a, b);
}
at::Tensor NpuNativeFunctions::bmm(const at::Tensor& a, const at::Tensor& b) {
  return matmul_op(a, b, nullptr, 1, 1, "aten::bmm", [&] { return fall_back<at::_ops::bmm>("", a, b); });
}
at::Tensor NpuNativeFunctions::addmm(const at::Tensor& bias, const at::Tensor& a, const at::Tensor& b, const at::Scalar& beta,
                                     const at::Scalar& alpha) {
  return matmul_op(a, b, &bias, alpha.toDouble(), beta.toDouble(), "aten::addmm",
                   [&] { return fall_back<at::_ops::addmm>("", bias, a, b, beta, alpha); });
}

// baddbmm: beta * self + alpha * (a @ b) per batch. A self that does not vary over the batch is the
// matmul's bias; one that does is its residual when beta is 1, else added scaled after the product;
// beta 0 ignores self (NaNs in it included), as the CPU does.
at::Tensor NpuNativeFunctions::baddbmm(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b, const at::Scalar& beta,
                                       const at::Scalar& alpha) {
  const auto fallback = [&] { return fall_back<at::_ops::baddbmm>("", self, a, b, beta, alpha); };
  const double beta_value = beta.toDouble(), alpha_value = alpha.toDouble();
  if (beta_value == 0) return matmul_op(a, b, nullptr, alpha_value, 1.0, "aten::baddbmm", fallback);
  const bool varies = self.dim() == 3 && self.size(0) > 1 && self.stride(0) != 0;
  if (!varies) return matmul_op(a, b, &self, alpha_value, beta_value, "aten::baddbmm", fallback);
  if (beta_value == 1 && on_npu(self) && on_npu(a) && on_npu(b) && self.scalar_type() == a.scalar_type() && a.scalar_type() == b.scalar_type()) {
    at::Tensor out = new_npu({a.size(0), a.size(1), b.size(2)}, a.scalar_type());
    const auto make_op = [&] {
      OpDesc op(OpKind::MATMUL, {describe(a), describe(b), describe(self)}, describe(out));
      op.residual = true, op.alpha = alpha_value, op.f32_precision = f32_matmul_precision();
      return op;
    };
    if (try_run(make_op, {a, b, self}, out)) return out;
  }
  const at::Tensor product = matmul_op(a, b, nullptr, alpha_value, 1.0, "aten::baddbmm", fallback);
  return at::add(product, beta_value == 1 ? self : at::mul(self, beta));
}
// The .out forms (torch.mm(a, b, out=...): a mixture of experts writing each expert's rows into its slice).

namespace {

// Row ops work along the last dim; another dim is moved there as a view (the
// kernel reads it strided), for the input and the output alike.
// half_to_float (a bf16 or f16 input, an f32 result): the kernel converts the rows on the chip and keeps
// its f32 result; where it cannot, the input is converted by a kernel of its own first.
at::Tensor row_op(OpKind kind, const char* name, const at::Tensor& self, int64_t dim, bool half_to_float,
                  const std::function<at::Tensor()>& fallback) {
  const bool half = self.scalar_type() == at::kBFloat16 || self.scalar_type() == at::kHalf;
  TORCH_CHECK(!half_to_float || half, name, ": conversion to float is for bf16 and f16 inputs, got ", self.scalar_type());
  if (self.dim() > 0) {
    const int64_t d = at::maybe_wrap_dim(dim, self.dim());
    at::Tensor out = new_npu(self.sizes(), half_to_float ? at::kFloat : self.scalar_type());
    if (try_run_rows(kind, {self.movedim(d, -1)}, out.movedim(d, -1))) return out;
    if (half_to_float) return row_op(kind, name, self.to(at::kFloat), dim, false, fallback);
  }
  return fallback();
}
}  // namespace

// (The CPU's kernels take no half_to_float for bf16: its fallback converts first.)
at::Tensor NpuNativeFunctions::_softmax(const at::Tensor& self, int64_t dim, bool half_to_float) {
  return row_op(OpKind::SOFTMAX, "aten::_softmax", self, dim, half_to_float,
                [&] { return fall_back<at::_ops::_softmax>("", half_to_float ? self.to(at::kFloat) : self, dim, false); });
}
at::Tensor NpuNativeFunctions::_log_softmax(const at::Tensor& self, int64_t dim, bool half_to_float) {
  return row_op(OpKind::LOG_SOFTMAX, "aten::_log_softmax", self, dim, half_to_float,
                [&] { return fall_back<at::_ops::_log_softmax>("", half_to_float ? self.to(at::kFloat) : self, dim, false); });
}

namespace {

at::Tensor reduce_last(OpKind kind, const char* name, const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim,
                       std::optional<at::ScalarType> dtype, const std::function<at::Tensor()>& fallback) {
  const bool all_dims = !dims.has_value() || dims->empty();
  const at::ScalarType result_type = dtype.value_or(self.scalar_type());
  // The kernels sum in f32, so a sum or mean of bf16 or f16 may also stay in f32 (sum(dtype=torch.float32)).
  const bool sum_or_mean = kind == OpKind::SUM || kind == OpKind::MEAN;
  const bool dtype_ok = result_type == self.scalar_type() ||
                        (sum_or_mean && result_type == at::kFloat && (self.scalar_type() == at::kBFloat16 || self.scalar_type() == at::kHalf));
  if (self.dim() == 0 && on_npu(self) && dtype_ok && (sum_or_mean || kind == OpKind::AMAX || kind == OpKind::AMIN)) {
    // One element is its own sum, mean, maximum and minimum (a scalar loss summed again).
    return self.to(result_type, /*non_blocking=*/false, /*copy=*/true);
  }
  if (all_dims && self.dim() >= 1 && self.numel() > 0 && dtype_ok && (!self.is_contiguous() || keepdim)) {
    // Every element, in any order: a dense tensor's dims permuted into memory order (a view), another
    // one copied dense on the chip first; then the contiguous case below, and keepdim's shape.
    at::Tensor flat;
    if (self.is_non_overlapping_and_dense()) {
      std::vector<int64_t> order(size_t(self.dim()));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return self.stride(x) > self.stride(y); });
      flat = self.permute(order);
    }
    flat = flat.defined() && flat.is_contiguous() ? flat.view({-1}) : self.contiguous().view({-1});
    const at::Tensor result = reduce_last(kind, name, flat, dims, false, dtype, fallback);
    return keepdim ? result.reshape(std::vector<int64_t>(size_t(self.dim()), 1)) : result;
  }
  if (all_dims && self.dim() >= 1 && self.is_contiguous() && !keepdim && dtype_ok) {
    // Every element: a contiguous tensor is one row, which one core would walk. A long one is cut
    // into rows for all the cores first, whose results (sums and means in f32) one more launch reduces.
    const int64_t n = self.numel();
    for (const int64_t parts : {256, 64, 16, 4}) {
      if (n % parts != 0 || n / parts < 4096) continue;
      const at::Tensor rows = self.view({parts, n / parts});
      at::Tensor partial = new_npu({parts}, sum_or_mean ? at::kFloat : self.scalar_type());
      if (!try_run([&] { return OpDesc(kind, {describe(rows)}, describe(partial)); }, {rows}, partial)) break;
      const at::Tensor row = partial.view({1, parts});
      at::Tensor out = new_npu({}, partial.scalar_type());
      if (!try_run([&] { return OpDesc(kind, {describe(row)}, describe(out)); }, {row}, out)) break;
      return out.scalar_type() == result_type ? out : out.to(result_type);  // rounded once, as the CPU does
    }
    const at::Tensor row = self.view({1, n});
    at::Tensor out = new_npu({}, result_type);
    if (try_run([&] { return OpDesc(kind, {describe(row)}, describe(out)); }, {row}, out)) return out;
  }
  // One dim: moved last as a view; the result's elements are then in the order of the other dims.
  if (self.dim() > 0 && dims.has_value() && dims->size() == 1 && dtype_ok) {
    const int64_t d = at::maybe_wrap_dim((*dims)[0], self.dim());
    std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end());
    if (keepdim) shape[size_t(d)] = 1;
    else shape.erase(shape.begin() + d);
    at::Tensor out = new_npu(shape, result_type);
    const at::Tensor x = self.movedim(d, -1);
    if (try_run([&] { return OpDesc(kind, {describe(x)}, describe(out)); }, {x}, out)) return out;
    // Rows the kernel cannot walk (a middle dim moved last): made dense by the copy kernel first.
    if (!x.is_contiguous()) {
      const at::Tensor dense = x.contiguous();
      if (try_run([&] { return OpDesc(kind, {describe(dense)}, describe(out)); }, {dense}, out)) return out;
    }
  }
  // Several dims: trailing dims of a contiguous tensor merge into one row; others are
  // reduced one at a time (sums and means through f32, rounded once at the end).
  if (self.dim() > 0 && dims.has_value() && dims->size() > 1 && dtype_ok &&
      (at::isFloatingType(self.scalar_type()) || kind == OpKind::AMAX || kind == OpKind::AMIN)) {
    std::vector<int64_t> order;
    for (const int64_t d : *dims) order.push_back(at::maybe_wrap_dim(d, self.dim()));
    std::sort(order.begin(), order.end());
    if (std::adjacent_find(order.begin(), order.end()) == order.end()) {
      const bool widen = (kind == OpKind::SUM || kind == OpKind::MEAN) && self.scalar_type() != at::kFloat;
      // One step on the CPU fallback, should the chip decline it.
      const auto step = [&](const at::Tensor& t, int64_t d, bool keep, std::optional<at::ScalarType> step_dtype) {
        const std::vector<int64_t> one = {d};
        return reduce_last(kind, name, t, one, keep, step_dtype, [&] {
          const at::OptionalIntArrayRef dim_list(one);
          return kind == OpKind::SUM    ? fall_back<at::_ops::sum_dim_IntList>("", t, dim_list, keep, step_dtype)
               : kind == OpKind::MEAN   ? fall_back<at::_ops::mean_dim>("", t, dim_list, keep, step_dtype)
               : kind == OpKind::AMAX   ? fall_back<at::_ops::amax>("", t, at::IntArrayRef(one), keep)
                                        : fall_back<at::_ops::amin>("", t, at::IntArrayRef(one), keep);
        });
      };
      std::vector<int64_t> kept;  // the result's shape without keepdim
      for (int64_t d = 0; d < self.dim(); ++d)
        if (!std::binary_search(order.begin(), order.end(), d)) kept.push_back(self.size(d));
      at::Tensor result;
      if (self.is_contiguous() && order.back() == self.dim() - 1 && order.back() - order.front() + 1 == int64_t(order.size())) {
        // Trailing dims: one row each, one kernel, which sums in f32 and rounds once to the result's dtype
        // (a global average pool's mean over H and W reads the bf16 activation once, with no f32 copy).
        std::vector<int64_t> merged(self.sizes().begin(), self.sizes().begin() + order.front());
        merged.push_back(-1);
        result = step(self.view(merged), int64_t(merged.size()) - 1, false, widen ? std::optional<at::ScalarType>(result_type) : std::nullopt);
      } else {
        result = widen ? self.to(at::kFloat) : self;
        for (auto d = order.rbegin(); d != order.rend(); ++d) result = step(result, *d, true, std::nullopt);
      }
      std::vector<int64_t> shape = kept;
      if (keepdim) {
        shape.assign(self.sizes().begin(), self.sizes().end());
        for (const int64_t d : order) shape[size_t(d)] = 1;
      }
      result = result.reshape(shape);
      return result.scalar_type() == result_type ? result : result.to(result_type);
    }
  }
  return fallback();
}
}  // namespace

// any over one dim: the maximum of the values as f32 (a cast, a row maximum), compared with 0.
at::Tensor NpuNativeFunctions::any(const at::Tensor& self, int64_t dim, bool keepdim) {
  if (self.dim() == 0 || self.numel() == 0 || self.scalar_type() == at::kLong || self.scalar_type() == at::kDouble)
    return fall_back<at::_ops::any_dim>("", self, dim, keepdim);
  const at::Tensor magnitude = self.scalar_type() == at::kFloat ? at::abs(self) : at::abs(self.to(at::kFloat));
  return at::ne(at::amax(magnitude, {dim}, keepdim), 0);
}

// any over several dims (none: every element; an empty list: no reduction, x != 0).
at::Tensor NpuNativeFunctions::any(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim) {
  if (!dims.has_value()) {
    const at::Tensor flat = self.reshape({-1});
    at::Tensor result = self.numel() == 0 ? fall_back<at::_ops::any>("an empty tensor", self) : NpuNativeFunctions::any(flat, 0, false);
    if (keepdim) result = result.reshape(std::vector<int64_t>(size_t(self.dim()), 1));
    return result;
  }
  if (dims->empty()) return at::ne(self, 0);
  std::vector<int64_t> order;
  for (const int64_t d : *dims) order.push_back(at::maybe_wrap_dim(d, std::max<int64_t>(self.dim(), 1)));
  std::sort(order.rbegin(), order.rend());
  order.erase(std::unique(order.begin(), order.end()), order.end());
  at::Tensor result = self;
  for (const int64_t d : order) result = NpuNativeFunctions::any(result, d, keepdim);
  return result;
}

// all: not any of the negation (PyTorch's safe softmax asks whether a row is entirely -inf).
at::Tensor NpuNativeFunctions::all(const at::Tensor& self, int64_t dim, bool keepdim) {
  return NpuNativeFunctions::logical_not(NpuNativeFunctions::any(NpuNativeFunctions::logical_not(self), dim, keepdim));
}
at::Tensor NpuNativeFunctions::all(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim) {
  return NpuNativeFunctions::logical_not(NpuNativeFunctions::any(NpuNativeFunctions::logical_not(self), dims, keepdim));
}
// any() and all() of a whole tensor.
at::Tensor NpuNativeFunctions::any(const at::Tensor& self) { return NpuNativeFunctions::any(self, std::nullopt, false); }
at::Tensor NpuNativeFunctions::all(const at::Tensor& self) { return NpuNativeFunctions::all(self, std::nullopt, false); }
// torch.equal: same shape and every element equal (NaN equals nothing, as on the CPU); one value read back.
bool NpuNativeFunctions::equal(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || !on_npu(a) || !on_npu(b))
    return fall_back<at::_ops::equal>("operands of two dtypes or devices", a, b);
  if (a.sizes() != b.sizes()) return false;
  if (a.numel() == 0) return true;
  return NpuNativeFunctions::all(at::eq(a, b), std::nullopt, false).cpu().item<bool>();
}
// count_nonzero: a sum of x != 0 (bools into int64).
at::Tensor NpuNativeFunctions::count_nonzero(const at::Tensor& self, c10::IntArrayRef dims) {
  return at::sum(at::ne(self, 0), dims.empty() ? at::OptionalIntArrayRef() : at::OptionalIntArrayRef(dims), false, at::kLong);
}
// trace: the sum of the diagonal (a strided view).
at::Tensor NpuNativeFunctions::trace(const at::Tensor& self) {
  TORCH_CHECK(self.dim() == 2, "trace: expected a matrix, but got tensor with dim ", self.dim());
  return at::sum(self.diagonal(), at::isIntegralType(self.scalar_type(), true) ? std::optional<at::ScalarType>(at::kLong) : std::nullopt);
}
// eye: row index == column index, from two aranges on the chip.
at::Tensor& NpuNativeFunctions::eye_out(int64_t n, int64_t m, at::Tensor& out) {
  TORCH_CHECK(n >= 0 && m >= 0, "eye: n and m must be greater or equal to 0, got ", n, " and ", m);
  at::native::resize_output(out, {n, m});
  if (n == 0 || m == 0) return out;
  const at::TensorOptions ints = at::TensorOptions().dtype(at::kInt).device(out.device());
  return into(at::eq(at::arange(n, ints).view({-1, 1}), at::arange(m, ints).view({1, -1})), out);
}
at::Tensor& NpuNativeFunctions::eye_out(int64_t n, at::Tensor& out) { return NpuNativeFunctions::eye_out(n, n, out); }

// isneginf: a comparison with -inf for floats; nothing is -inf in an integer tensor.
at::Tensor NpuNativeFunctions::isneginf(const at::Tensor& self) {
  if (!at::isFloatingType(self.scalar_type())) return at::zeros(self.sizes(), self.options().dtype(at::kBool));
  return at::eq(self, -std::numeric_limits<double>::infinity());
}

at::Tensor NpuNativeFunctions::sum(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim, std::optional<at::ScalarType> dtype) {
  // Counting (a sum of bools or bytes, into int64): in f32, exact while the count stays below 2^24.
  if ((self.scalar_type() == at::kBool || self.scalar_type() == at::kByte) && (!dtype || *dtype == at::kLong) &&
      self.numel() * (self.scalar_type() == at::kBool ? 1 : 255) < (int64_t{1} << 24))
    return NpuNativeFunctions::sum(self.to(at::kFloat), dims, keepdim, std::nullopt).to(at::kInt).to(at::kLong);
  // Integers into int64 (ATen's sum type for them), exact and wrapping: int64_arithmetic.h.
  if (on_npu(self) && at::isIntegralType(self.scalar_type(), /*includeBool=*/true) && (!dtype || *dtype == at::kLong) &&
      (chip_dtype(self.scalar_type()) || self.scalar_type() == at::kLong)) {
    const at::Tensor sums = int64_sum(self.scalar_type() == at::kLong ? self : self.to(at::kLong),
                                      dims.has_value() ? *dims : c10::IntArrayRef{}, keepdim);
    if (sums.defined()) return sums;
  }
  return reduce_last(OpKind::SUM, "aten::sum.dim_IntList", self, dims, keepdim, dtype, [&] { return fall_back<at::_ops::sum_dim_IntList>("", self, dims, keepdim, dtype); });
}
// (logsumexp sums into its result this way.)
// nansum: NaNs made zeros by the select kernel, then the sum (integers hold no NaN).
at::Tensor NpuNativeFunctions::nansum(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim,
                                      std::optional<at::ScalarType> dtype) {
  if (!at::isFloatingType(self.scalar_type())) return NpuNativeFunctions::sum(self, dims, keepdim, dtype);
  return NpuNativeFunctions::sum(at::where(at::isnan(self), at::zeros({}, self.options().device(at::kCPU)), self), dims, keepdim, dtype);
}
at::Tensor NpuNativeFunctions::mean(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim, std::optional<at::ScalarType> dtype) {
  return reduce_last(OpKind::MEAN, "aten::mean.dim", self, dims, keepdim, dtype, [&] { return fall_back<at::_ops::mean_dim>("", self, dims, keepdim, dtype); });
}
at::Tensor NpuNativeFunctions::amax(const at::Tensor& self, c10::IntArrayRef dims, bool keepdim) {
  if (self.scalar_type() == at::kLong && on_npu(self) && self.numel() > 0) return int64_reduce_extremum(true, self, dims, keepdim);
  return reduce_last(OpKind::AMAX, "aten::amax", self, dims, keepdim, std::nullopt, [&] { return fall_back<at::_ops::amax>("", self, dims, keepdim); });
}
at::Tensor NpuNativeFunctions::amin(const at::Tensor& self, c10::IntArrayRef dims, bool keepdim) {
  if (self.scalar_type() == at::kLong && on_npu(self) && self.numel() > 0) return int64_reduce_extremum(false, self, dims, keepdim);
  return reduce_last(OpKind::AMIN, "aten::amin", self, dims, keepdim, std::nullopt, [&] { return fall_back<at::_ops::amin>("", self, dims, keepdim); });
}

// Layer norm over the last dim: the output in one kernel; mean and rstd
// (which autograd saves for the backward) from the row kernels, in f32. The rest
// (several normalized dims, integer dtypes) goes to the CPU.
std::tuple<at::Tensor, at::Tensor, at::Tensor> NpuNativeFunctions::native_layer_norm(const at::Tensor& x, c10::IntArrayRef shape,
                                                                                     const std::optional<at::Tensor>& weight,
                                                                                     const std::optional<at::Tensor>& bias, double eps) {
  if (shape.size() != 1 || !at::isFloatingType(x.scalar_type()) || x.dim() < 1) {
    return fall_back<at::_ops::native_layer_norm>("several normalized dims, or not a float", x, shape, weight, bias, eps);
  }
  const at::Tensor out = layer_norm_npu(x, weight, bias, eps);
  const at::Tensor xf = x.to(at::kFloat);
  const at::Tensor mean = xf.mean(-1, true);
  const at::Tensor centered = xf - mean;
  const at::Tensor rstd = at::rsqrt((centered * centered).mean(-1, true) + eps);
  return {out, mean.to(x.scalar_type()), rstd.to(x.scalar_type())};  // in x's dtype, as the CPU gives them
}

// Its backward: with x^ = (x - mean) * rstd and g = grad * weight, grad_x = rstd * (g - mean(g) -
// x^ * mean(g * x^)) in one row kernel from the saved mean and rstd (composed from the row and
// elementwise kernels where that cannot run: rows too long for the scratchpad); grad_weight and
// grad_bias sum over the rows.
std::tuple<at::Tensor, at::Tensor, at::Tensor> NpuNativeFunctions::native_layer_norm_backward(const at::Tensor& grad, const at::Tensor& x,
                                                                                              c10::IntArrayRef shape,
                                                                                              const at::Tensor& mean,
                                                                                              const at::Tensor& rstd,
                                                                                              const std::optional<at::Tensor>& weight,
                                                                                              const std::optional<at::Tensor>& bias,
                                                                                              std::array<bool, 3> mask) {
  if (shape.size() != 1 || !at::isFloatingType(x.scalar_type())) {
    return fall_back<at::_ops::native_layer_norm_backward>("several normalized dims, or not a float", grad, x, shape, mean, rstd, weight, bias,
                                                           mask);
  }
  const bool has_weight = weight && weight->defined();
  at::Tensor grad_x, grad_weight, grad_bias;
  if (mask[0] && chip_float(grad) && chip_float(x) && chip_float(mean) && chip_float(rstd) && (!has_weight || chip_float(*weight))) {
    at::Tensor result = new_npu(x.sizes(), x.scalar_type());
    std::vector<at::Tensor> inputs = {grad, x, mean, rstd};
    if (has_weight) inputs.push_back(*weight);
    if (try_run_kind(OpKind::LAYER_NORM_BACKWARD, inputs, result)) grad_x = result;
  }
  const at::Tensor gf = grad.to(at::kFloat);
  const auto normalized = [&] { return (x.to(at::kFloat) - mean) * rstd; };
  if (mask[0] && !grad_x.defined()) {
    const at::Tensor xhat = normalized(), g = has_weight ? gf * weight->to(at::kFloat) : gf;
    grad_x = (rstd * (g - g.mean(-1, true) - xhat * (g * xhat).mean(-1, true))).to(x.scalar_type());
  }
  const at::Tensor rows = gf.reshape({-1, x.size(-1)});
  if (mask[1] && has_weight) grad_weight = (rows * normalized().reshape(rows.sizes())).sum(0).to(weight->scalar_type());
  if (mask[2] && bias && bias->defined()) grad_bias = rows.sum(0).to(bias->scalar_type());
  return {grad_x, grad_weight, grad_bias};
}

// cat: each input copied by the copy kernel into its slice of the output (any
// strides on either side). Inputs of several dtypes go to the CPU, which promotes.
at::Tensor NpuNativeFunctions::cat(const at::ITensorListRef& tensor_list, int64_t dim) {
  std::vector<at::Tensor> tensors;
  for (const at::Tensor& t : tensor_list) tensors.push_back(t);
  for (const at::Tensor& t : tensors)
    TORCH_CHECK(on_npu(t), "Expected all tensors to be on the same device, but got tensors is on ", t.device(),
                ", different from other tensors on npu:0 (when checking argument in method aten::cat)");
  // Legacy rule: 1-D empty tensors are skipped whatever their shape.
  std::vector<at::Tensor> parts;
  for (const at::Tensor& t : tensors)
    if (!(t.dim() == 1 && t.numel() == 0)) parts.push_back(t);
  if (parts.empty()) return fall_back<at::_ops::cat>("only empty inputs", tensor_list, dim);
  // Mixed dtypes: ATen's result type, each other part converted on the chip first (a ViT's f32 class token
  // with bf16 patch embeddings under autocast).
  const at::ScalarType dtype = at::native::result_type(tensors);
  bool same = true;
  for (at::Tensor& t : parts) {
    same &= on_npu(t) && t.dim() == parts[0].dim();
    if (same && t.scalar_type() != dtype) t = t.to(dtype);
  }
  if (!same) return fall_back<at::_ops::cat>("inputs on two devices or of two ranks", tensor_list, dim);
  const int64_t d = at::maybe_wrap_dim(dim, parts[0].dim());
  std::vector<int64_t> shape(parts[0].sizes().begin(), parts[0].sizes().end());
  shape[size_t(d)] = 0;
  for (const at::Tensor& t : parts) {
    for (int64_t k = 0; k < t.dim(); ++k)
      TORCH_CHECK(k == d || t.size(k) == shape[size_t(k)], "torch.cat(): Sizes of tensors must match except in dimension ", d,
                  ". Expected size ", shape[size_t(k)], " but got size ", t.size(k), " for a tensor in the list.");
    shape[size_t(d)] += t.size(d);
  }
  at::Tensor out = new_npu(shape, dtype);
  int64_t offset = 0;
  for (const at::Tensor& t : parts) {
    const at::Tensor slice = out.narrow(d, offset, t.size(d));
    offset += t.size(d);
    if (t.numel() == 0) continue;
    if (!copy_on_chip(t, slice)) return fall_back<at::_ops::cat>("", tensor_list, dim);
  }
  return out;
}

// where(cond, a, b): the select kernel, every operand broadcast; a Python number or a 0-dim CPU
// tensor is moved to the device as a 0-dim tensor (the kernel expands it once per core).
at::Tensor NpuNativeFunctions::where(const at::Tensor& cond, const at::Tensor& a_in, const at::Tensor& b_in) {
  for (const at::Tensor* t : {&cond, &a_in, &b_in}) check_operand_device(*t, "aten::where.self");
  const at::ScalarType common = at::result_type(a_in, b_in);
  const auto prepare = [&](const at::Tensor& t) { return to_npu(t.scalar_type() == common ? t : t.to(common)); };
  const at::Tensor a = prepare(a_in), b = prepare(b_in), c = to_npu(cond.scalar_type() == at::kBool ? cond : cond.to(at::kBool));
  const std::vector<int64_t> shape = at::infer_size(at::infer_size(c.sizes(), a.sizes()), b.sizes());
  if (common == at::kLong && c.numel() > 0 && a.numel() > 0 && b.numel() > 0) {
    // int64 (the chip has none): both 32-bit words of each element selected by its condition.
    at::Tensor out = new_npu(shape, at::kLong);
    if (run_elementwise(OpKind::WHERE, {c.unsqueeze(-1), int64_words(a), int64_words(b)}, int64_words(out))) return out;
  }
  at::Tensor out = new_npu_like(shape, common, {&c, &a, &b});
  if (run_elementwise(OpKind::WHERE, {c, a, b}, out)) return out;
  return fall_back<at::_ops::where_self>("", cond, a_in, b_in);
}

// isin: each element compared with every test element (eq, then any over them), for the few test
// elements models use (generate's stop tokens); int64 compared on its words. More than 256 test
// elements: the CPU, counted.
at::Tensor NpuNativeFunctions::isin(const at::Tensor& elements, const at::Tensor& test, bool assume_unique, bool invert) {
  if (on_npu(elements) && elements.numel() > 0 && test.numel() > 0 && test.numel() <= 256) {
    const at::Tensor hit = at::any(at::eq(elements.unsqueeze(-1), to_npu(test).reshape({-1})), -1);
    return invert ? NpuNativeFunctions::logical_not(hit) : hit;
  }
  return fall_back<at::_ops::isin_Tensor_Tensor>("", elements, test, assume_unique, invert);
}

namespace {

// The chip's view of an index tensor: i32 as it is; int64 as its low 32-bit words (little-endian),
// which are the values for indices in [0, 2^31) (an index outside the table faults the launch).
npu::compiler::TensorDesc describe_index(const at::Tensor& index) {
  if (index.scalar_type() != at::kLong) return describe(index);
  npu::compiler::TensorDesc desc;
  desc.dtype = npu::isa::DType::I32;
  for (int64_t d = 0; d < index.dim(); ++d) desc.shape.push_back(index.size(d)), desc.strides.push_back(2 * index.stride(d));
  desc.storage_offset = 2 * index.storage_offset();
  return desc;
}

}  // namespace

// index_select along dim 0 (what embedding does): rows gathered from the table in DRAM. Along another
// dim d of x [A, V, B] (x made contiguous on the chip first): x as a table of A * V rows of B, and
// row a * V + index[j] for out[a, j].
at::Tensor NpuNativeFunctions::index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  const bool integer_index = on_npu(index) && (index.scalar_type() == at::kLong || index.scalar_type() == at::kInt);
  if (d > 0 && integer_index && index.dim() <= 1 && index.numel() > 0 && self.numel() > 0 && self.numel() < (int64_t{1} << 31)) {
    check_index_range(index, self.size(d), "index_select");
    const int64_t outer = c10::multiply_integers(self.sizes().slice(0, size_t(d)));
    const int64_t inner = c10::multiply_integers(self.sizes().slice(size_t(d) + 1));
    const at::Tensor starts = to_npu(at::arange(outer, at::TensorOptions().dtype(at::kInt)).mul_(self.size(d)).view({outer, 1}));
    const at::Tensor rows = at::add(starts, index_words(index).reshape({1, -1}));
    std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end());
    shape[size_t(d)] = index.numel();
    const at::Tensor table = self.contiguous().view({outer * self.size(d), inner});
    return NpuNativeFunctions::index_select(table, 0, rows.reshape({-1})).view(shape);
  }
  if (d == 0 && self.dim() >= 1 && on_npu(index) && (index.scalar_type() == at::kLong || index.scalar_type() == at::kInt)) {
    std::vector<int64_t> shape = {index.numel()};
    shape.insert(shape.end(), self.sizes().begin() + 1, self.sizes().end());
    at::Tensor out = new_npu(shape, self.scalar_type());
    const at::Tensor flat = index.reshape({-1});
    // int64 and f64 tables (position and token-type buffers) move as pairs of 32-bit words.
    const bool words = self.dtype().itemsize() == 8;
    const auto make_op = [&] {
      return OpDesc(OpKind::EMBEDDING, {words ? describe_as_words(self) : describe(self), describe_index(flat)},
                    words ? describe_as_words(out) : describe(out));
    };
    if (try_run(make_op, {self, flat}, out)) return out;
  }
  return fall_back<at::_ops::index_select>("", self, dim, index);
}

// x[i0, i1, ...]: integer index tensors (broadcast together) on the leading dims. The flat row
// index sum_d i_d * (size of the dims after d) is computed on the chip in i32 (int64 indices as
// their low words, negative ones wrapped), then the rows are gathered (index_select). Dims before
// the indexed ones (x[..., i, :], x[:, i]) are moved after them first. Other indexing (indices
// apart, bool masks not over the leading dims, more than 2^31 rows) goes to the CPU.
at::Tensor NpuNativeFunctions::index(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& given) {
  const c10::List<std::optional<at::Tensor>> indices = on_npu(self) ? indices_on_npu(given) : given;
  const int64_t k = int64_t(indices.size());
  // x[mask] with a bool mask over the leading dims: the rows where it holds (a data-dependent count, read back).
  if (const std::optional<at::Tensor> mask = k == 1 ? indices.get(0) : std::nullopt;
      mask && mask->defined() && on_npu(*mask) && mask->scalar_type() == at::kBool && mask->dim() >= 1 && mask->dim() <= self.dim() &&
      mask->sizes() == self.sizes().slice(0, size_t(mask->dim()))) {
    if (const at::Tensor rows = nonzero_positions(*mask); rows.defined()) {
      std::vector<int64_t> table_shape = {mask->numel()};
      table_shape.insert(table_shape.end(), self.sizes().begin() + mask->dim(), self.sizes().end());
      return NpuNativeFunctions::index_select(self.reshape(table_shape), 0, rows);
    }
  }
  if (const std::optional<LeadingSlices> moved = leading_slices(self, indices)) {
    // x[..., i, :]: the indexed dims moved first, indexed as below, and the index's dims moved back.
    const at::Tensor result = NpuNativeFunctions::index(moved->self, moved->block);
    const int64_t index_dims = result.dim() - (self.dim() - int64_t(moved->block.size()));
    std::vector<int64_t> from(static_cast<size_t>(index_dims)), to(static_cast<size_t>(index_dims));
    for (int64_t d = 0; d < index_dims; ++d) from[size_t(d)] = d, to[size_t(d)] = moved->leading + d;
    return result.movedim(from, to).contiguous();
  }
  bool supported = k >= 1 && k <= self.dim() && self.numel() > 0;
  int64_t rows = 1;
  for (int64_t d = 0; supported && d < k; ++d) {
    const std::optional<at::Tensor> i = indices.get(size_t(d));
    supported = i && i->defined() && on_npu(*i) && (i->scalar_type() == at::kLong || i->scalar_type() == at::kInt);
    rows *= self.size(d);
  }
  if (!supported || rows >= (int64_t{1} << 31))
    return fall_back<at::_ops::index_Tensor>("indices apart, masks not over the leading dims, or 2^31 rows or more", self, given);
  at::Tensor flat;
  for (int64_t d = 0; d < k; ++d) {
    const at::Tensor i = *indices.get(size_t(d));
    at::Tensor i32 = i.scalar_type() == at::kInt ? i : int64_words(i).select(-1, 0);
    i32 = at::where(at::lt(i32, 0), at::add(i32, self.size(d)), i32);
    flat = d == 0 ? i32 : at::add(at::mul(flat, self.size(d)), i32);
  }
  std::vector<int64_t> table_shape = {rows}, shape(flat.sizes().begin(), flat.sizes().end());
  table_shape.insert(table_shape.end(), self.sizes().begin() + k, self.sizes().end());
  shape.insert(shape.end(), self.sizes().begin() + k, self.sizes().end());
  // (The gather reads whole rows: a table whose rows are not contiguous, as a moved view, is copied on the chip first.)
  return NpuNativeFunctions::index_select(self.reshape(table_shape).contiguous(), 0, flat.reshape({-1})).reshape(shape);
}

// x << n and x >> n (Python's operators reach these, not bitwise_*_shift).
at::Tensor NpuNativeFunctions::__lshift__(const at::Tensor& self, const at::Tensor& count) { return at::bitwise_left_shift(self, count); }
at::Tensor NpuNativeFunctions::__rshift__(const at::Tensor& self, const at::Tensor& count) { return at::bitwise_right_shift(self, count); }
at::Tensor NpuNativeFunctions::__lshift__(const at::Tensor& self, const at::Scalar& count) {
  return at::bitwise_left_shift(self, at::scalar_tensor(count, self.options().device(at::kCPU)));
}
at::Tensor NpuNativeFunctions::__rshift__(const at::Tensor& self, const at::Scalar& count) {
  return at::bitwise_right_shift(self, at::scalar_tensor(count, self.options().device(at::kCPU)));
}

// gather along any dim: out[i] = x[i with index[i] along dim], the element's flat position in x
// (made contiguous) computed on the chip in i32, index[i] * stride(dim) + the other dims' positions
// times their strides, then the elements gathered as rows of one.
at::Tensor NpuNativeFunctions::gather(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad) {
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  bool supported = on_npu(index) && (index.scalar_type() == at::kLong || index.scalar_type() == at::kInt) && self.dim() >= 1 &&
                   index.dim() == self.dim() && index.numel() > 0 && self.numel() < (int64_t{1} << 31);
  for (int64_t k = 0; supported && k < self.dim(); ++k) supported = k == d || index.size(k) <= self.size(k);
  if (supported) {
    check_index_range(index, self.size(d), "gather");
    const at::Tensor x = self.contiguous();
    at::Tensor flat = at::mul(index_words(index), x.stride(d));
    for (int64_t k = 0; k < self.dim(); ++k) {
      if (k == d || index.size(k) == 1) continue;
      std::vector<int64_t> shape(size_t(self.dim()), 1);
      shape[size_t(k)] = index.size(k);
      flat = at::add(flat, to_npu(at::arange(index.size(k), at::TensorOptions().dtype(at::kInt)).mul_(x.stride(k)).view(shape)));
    }
    return NpuNativeFunctions::index_select(x.view({x.numel(), 1}), 0, flat.reshape({-1})).view(index.sizes());
  }
  return fall_back<at::_ops::gather>("", self, dim, index, sparse_grad);
}

// relu's backward: grad where self > threshold, else 0 (a comparison and a select on the chip).
at::Tensor NpuNativeFunctions::threshold_backward(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& threshold) {
  return NpuNativeFunctions::where(at::gt(self, threshold), grad, at::zeros({}, grad.options().device(at::kCPU)));
}

// Whether `from`'s data may replace `self`'s in place (param.data = ...). PyTorch's own
// answer lists its backends only, so Module.to("npu") would make new Parameters and
// untie tied weights (GPT-2's lm_head and embedding); dense CPU and npu tensors are compatible.
bool NpuNativeFunctions::_has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  const auto dense = [](const at::Tensor& t) { return t.layout() == at::kStrided && (t.device().is_cpu() || on_npu(t)); };
  return dense(self) && dense(from);
}

// out= variants (which in-place ops such as add_ and the optimizers' updates
// reach): the functional result, copied into `out` on the device (into()).
// any() / all() of every element.
at::Tensor& NpuNativeFunctions::clamp_out(const at::Tensor& self, const std::optional<at::Scalar>& min,
                                          const std::optional<at::Scalar>& max, at::Tensor& out) {
  return into(npusim::clamp(self, min, max), out);
}
// ~x: logical_not of bools (masks), x ^ -1 of integers (int64's words each).
at::Tensor& NpuNativeFunctions::bitwise_not_out(const at::Tensor& self, at::Tensor& out) {
  if (self.scalar_type() == at::kBool) return into(NpuNativeFunctions::logical_not(self), out);
  if (at::isIntegralType(self.scalar_type(), false))
    return into(at::bitwise_xor(self, at::scalar_tensor(-1, self.options().device(at::kCPU))), out);
  return fall_back<at::_ops::bitwise_not_out>("not bool or integer", self, out);
}
// masked_fill_: the select kernel (value where mask holds, else self), copied back into self.
at::Tensor& NpuNativeFunctions::masked_fill_(at::Tensor& self, const at::Tensor& mask, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with ", value.dim(), " dimension(s).");
  TORCH_CHECK(at::infer_size(mask.sizes(), self.sizes()) == self.sizes(), "masked_fill_: the mask ", mask.sizes(),
              " does not broadcast to ", self.sizes());
  NpuNativeFunctions::_copy_from(NpuNativeFunctions::where(mask, value.scalar_type() == self.scalar_type() ? value : value.to(self.scalar_type()), self), self, false);
  return self;
}
at::Tensor& NpuNativeFunctions::masked_fill_(at::Tensor& self, const at::Tensor& mask, const at::Scalar& value) {
  return NpuNativeFunctions::masked_fill_(self, mask, at::scalar_tensor(value, self.options().device(at::kCPU)));
}

namespace {
// Adam's updates: self + value * t1 * t2 and self + value * t1 / t2, as three kernels in f32
// (bf16 and f16 widened first and rounded once at the end, as the CPU computes them).
at::Tensor addc(bool divide, const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2, const at::Scalar& value) {
  const at::ScalarType dtype = at::promote_types(at::result_type(self, t1), t2.scalar_type());
  const bool widen = dtype == at::kBFloat16 || dtype == at::kHalf;
  const auto wide = [&](const at::Tensor& t) { return widen && on_npu(t) ? t.to(at::kFloat) : t; };
  const at::Tensor a = wide(t1), b = wide(t2);
  const at::Tensor result = NpuNativeFunctions::add(wide(self), scaled(divide ? NpuNativeFunctions::div(a, b) : npusim::mul(a, b), value), 1);
  return widen ? result.to(dtype) : result;
}
}  // namespace

at::Tensor& NpuNativeFunctions::addcmul_out(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2, const at::Scalar& value,
                                            at::Tensor& out) {
  return into(addc(false, self, t1, t2, value), out);
}
at::Tensor& NpuNativeFunctions::addcdiv_out(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2, const at::Scalar& value,
                                            at::Tensor& out) {
  return into(addc(true, self, t1, t2, value), out);
}

// lerp with a scalar weight (Adam's first moment), in ATen's form: self + w * (end - self) for
// |w| < 0.5, else end - (end - self) * (1 - w), which keeps lerp(a, b, 1) == b exact.
at::Tensor& NpuNativeFunctions::lerp_out(const at::Tensor& self, const at::Tensor& end, const at::Scalar& weight, at::Tensor& out) {
  const double w = weight.toDouble();
  const at::Tensor diff = NpuNativeFunctions::sub(end, self, 1);
  if (std::abs(w) < 0.5) return into(NpuNativeFunctions::add(self, scaled(diff, w), 1), out);
  return into(NpuNativeFunctions::sub(end, scaled(diff, 1.0 - w), 1), out);
}

at::Tensor& NpuNativeFunctions::fill_(at::Tensor& self, const at::Scalar& value) {
  // Computed on the host and copied in: exact for every dtype.
  at::Tensor host = at::empty(self.sizes(), self.options().device(at::kCPU)).fill_(value);
  NpuNativeFunctions::_copy_from(host, self, false);
  return self;
}
at::Tensor& NpuNativeFunctions::zero_(at::Tensor& self) { return NpuNativeFunctions::fill_(self, 0); }

namespace {

// ---- the fallback -------------------------------------------------------------

}  // namespace

at::Tensor& into(const at::Tensor& result, at::Tensor& out) {
  at::native::resize_output(out, result.sizes());
  NpuNativeFunctions::_copy_from(result, out, false);
  return out;
}

// An index tensor as i32 on the chip: int64 as its low words.
at::Tensor index_words(const at::Tensor& index) { return index.scalar_type() == at::kInt ? index : int64_words(index).select(-1, 0); }

// PyTorch refuses an index outside [0, size) along a dim; once flattened with the other dims it
// could land inside the table (the kernel only checks the table's bounds), so it is checked first,
// on the chip, and reported as the CPU reports it.
void check_index_range(const at::Tensor& index, int64_t size, const char* op) {
  const at::Tensor i = index_words(index);
  if (Runtime::get().capturing()) {
    // A package replays without the host: the chip checks instead. The gather kernel faults the launch on
    // an index outside its table ("gather index 7 out of range (0..4)"), so gathering the indices from a
    // table of `size` one-byte rows (their contents unused) is the check.
    (void)at::index_select(new_npu({size, 1}, at::kByte), 0, i.reshape({-1}));
    return;
  }
  const bool outside = NpuNativeFunctions::any(npusim::maximum(at::lt(i, 0), at::ge(i, size)), std::nullopt, false).cpu().item<bool>();
  TORCH_CHECK_INDEX(!outside, op, "(): index out of range in self (the dim has ", size, " elements)");
}

// Views: ATen's own kernels (strides only, nothing to run; Tensor.repeat uses unfold).
at::Tensor NpuNativeFunctions::as_strided(const at::Tensor& self, at::IntArrayRef size, at::IntArrayRef stride,
                                          std::optional<int64_t> storage_offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}
at::Tensor NpuNativeFunctions::view(const at::Tensor& self, at::IntArrayRef size) { return at::native::view(self, size); }
at::Tensor NpuNativeFunctions::unfold(const at::Tensor& self, int64_t dimension, int64_t size, int64_t step) {
  return at::native::unfold(self, dimension, size, step);
}
at::Tensor NpuNativeFunctions::_reshape_alias(const at::Tensor& self, at::IntArrayRef size, at::IntArrayRef stride) {
  return at::native::_reshape_alias(self, size, stride);
}

}  // namespace npusim
