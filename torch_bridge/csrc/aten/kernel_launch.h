// What the ATen kernels and the custom ops share: launching a compiled op
// when the compiler takes it, and saying why when it does not.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <functional>
#include <string>
#include <vector>

#include "npusim/compiler/op.h"

namespace npusim {

inline constexpr c10::DeviceType kNpu = c10::DeviceType::PrivateUse1;
inline bool on_npu(const at::Tensor& t) { return t.device().type() == kNpu; }

// A new contiguous tensor on the npu.
at::Tensor new_npu(c10::IntArrayRef size, at::ScalarType dtype);
at::Tensor to_npu(const at::Tensor& t);
// A new dense tensor on the npu whose dims are laid out in the order of
// `like`'s strides (largest first), as ATen lays out elementwise results and
// attention outputs: a permuted input gives a permuted output. Compiled
// graphs rely on it: their views are traced with ATen's strides.
at::Tensor new_npu_in_order_of(c10::IntArrayRef size, at::ScalarType dtype, const at::Tensor& like);
// A new dense tensor on the npu laid out as ATen lays out an elementwise op's
// result over the inputs `like` (TensorIterator's rule), so that views of it
// behave as on the CPU.
at::Tensor new_npu_like(c10::IntArrayRef size, at::ScalarType dtype, std::initializer_list<const at::Tensor*> like);

// Runs a compiled op, or returns false and remembers why (the caller then
// hands its op to the CPU fallback, fall_back in cpu_fallback.h, which gives
// that reason). The op is described inside: a tensor of a dtype the chip
// lacks is a reason too.
bool try_run(const std::function<npu::compiler::OpDesc()>& make_op, const std::vector<at::Tensor>& inputs, const at::Tensor& out,
             const std::array<uint64_t, 8>& args = {});
// An op that is its kind and its tensors (no attributes), every input described as it is.
bool try_run_kind(npu::compiler::OpKind kind, const std::vector<at::Tensor>& inputs, const at::Tensor& out);
// A row kernel whose inputs are all row tensors (softmax and its gradient): rows along the last
// dim of each input and of `out`, any strides (made contiguous on the chip first where the
// leading dims do not merge into one row stride).
bool try_run_rows(npu::compiler::OpKind kind, const std::vector<at::Tensor>& rows, const at::Tensor& out);
// Counts a CPU fallback of `op` that computes on the CPU by hand, where the boxed fallback cannot: three
// places (native_batch_norm, whose schema hides the running statistics it writes; _fused_rms_norm_backward,
// which has no CPU kernel; _copy_from between npu tensors, the copy the fallback itself relies on).
void note_cpu_fallback(const char* op);
// The same with the reason given (a case the caller declined itself).
void note_cpu_fallback(const char* op, const std::string& reason);

// out = a @ b (+ bias broadcast to out), into `out` (any view the matmul kernel
// writes): batch dims broadcast (a stride-0 batch shares one matrix).
// `scale` (with a bias only): multiplies the product before the bias is added;
// `residual` (broadcast to out, batch included): added after the bias;
// `epilogue`: unary ops applied last; all on each tile in f32 before the output rounds.
// out = a @ b with K cut into parts over the cores, where the output is small and K long
// (kernel_launch.cpp says when): false where that does not apply.
bool split_k_into(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out);
bool gemm_into(const at::Tensor& a, const at::Tensor& b, const at::Tensor* bias, const at::Tensor& out,
               const std::vector<npu::compiler::OpKind>& epilogue = {}, const at::Tensor* scale = nullptr,
               const at::Tensor* residual = nullptr);
// The windows of x [N, C, H, W] into cols [N, C, KH, KW, OH, OW] (any strides): compiler/ops.def's im2col.
bool im2col_into(const at::Tensor& x, const at::Tensor& cols, const npu::compiler::Window& window, double pad_value);

// For kernels composed of several launches (convolutions, pooling, norms):
// thrown by `require` to give up on the chip part way; the caller then runs
// the op on the CPU, counted.
struct OffChip {};
inline void require(bool ok) {
  if (!ok) throw OffChip{};
}
// A float dtype the chip computes in (f32, bf16, f16), and an npu tensor of one.
inline bool chip_float_dtype(at::ScalarType t) { return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf; }
inline bool chip_float(const at::Tensor& t) { return on_npu(t) && chip_float_dtype(t.scalar_type()); }
// Every tensor a non-empty chip float on the npu.
inline bool non_empty_chip_floats(std::initializer_list<const at::Tensor*> tensors) {
  for (const at::Tensor* t : tensors)
    if (!chip_float(*t) || t->numel() == 0) return false;
  return true;
}
// Any dtype the chip stores (no int64, f64 or complex: those move as words or go to the CPU).
inline bool chip_dtype(at::ScalarType t) {
  return chip_float_dtype(t) || t == at::kInt || t == at::kChar || t == at::kByte || t == at::kBool;
}
inline at::Tensor dense(const at::Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }
// Optional operands (a norm's weight, bias, statistics): present, on the host, all on the chip.
inline bool defined(const std::optional<at::Tensor>& t) { return t && t->defined(); }
inline std::optional<at::Tensor> on_host(const std::optional<at::Tensor>& t) { return defined(t) ? std::optional<at::Tensor>(t->cpu()) : std::nullopt; }
// x non-empty and every present operand a chip float on the npu.
inline bool chip_floats(const at::Tensor& x, std::initializer_list<const std::optional<at::Tensor>*> others) {
  if (!chip_float(x) || x.numel() == 0) return false;
  for (const std::optional<at::Tensor>* t : others)
    if (defined(*t) && !chip_float(**t)) return false;
  return true;
}
// An int64 npu tensor's storage seen as i32 words: t's shape and a last dim of 2 (low word,
// high word; little-endian), aliasing t. The chip has no int64: it computes on the words.
at::Tensor int64_words(const at::Tensor& t);
// An out= variant's result: `out` resized to it and overwritten (cast to out's dtype where it differs).
at::Tensor& into(const at::Tensor& result, at::Tensor& out);

// Elementwise ops of compiler/ops.def, with ATen's semantics around the kernel: `fallback` runs the op
// itself on the CPU fallback (fall_back, cpu_fallback.h) where the chip cannot, with its own arguments.
// unary: one input; unary_ in place. binary: two inputs broadcast, after PyTorch's type promotion
// (a 0-dim CPU tensor, a Python number, joins as a scalar; int64 on its words where the op has a word
// form); `bool_result` for comparisons; `name` for the operands' device check.
at::Tensor unary(npu::compiler::OpKind kind, const at::Tensor& self, const std::function<at::Tensor()>& fallback);
at::Tensor& unary_(npu::compiler::OpKind kind, at::Tensor& self, const std::function<at::Tensor()>& fallback);
at::Tensor binary(npu::compiler::OpKind kind, const char* name, const at::Tensor& a, const at::Tensor& b, bool bool_result,
                  const std::function<at::Tensor()>& fallback);
// A Python number as PyTorch passes one into a binary op: a wrapped 0-dim CPU tensor.
at::Tensor cpu_scalar(const at::Scalar& value);
// An index tensor as i32 on the chip: int64 as its low words.
at::Tensor index_words(const at::Tensor& index);
// Raises an IndexError, as the CPU does, when an index lies outside [0, size) (checked on the chip).
void check_index_range(const at::Tensor& index, int64_t size, const char* op);
// npusim::elementwise_chain on npu tensors: the steps of `chain` (compiler/op.h's text form, e.g.
// "mul(in0, 0.5); tanh(%0)") as one kernel over inputs of one dtype, broadcast to one shape.
at::Tensor elementwise_chain(const std::vector<at::Tensor>& inputs, const std::string& chain);
// The same over float inputs of any dtypes (bf16, f16, f32; they may mix), computed in f32 and rounded
// once to `dtype` (default: the first input's), as ATen's opmath arithmetic: one kernel that converts
// the half-precision inputs on the chip; where the compiler declines, the inputs converted first.
at::Tensor elementwise_chain_in_f32(const std::vector<at::Tensor>& inputs, const std::string& chain,
                                   std::optional<at::ScalarType> dtype = std::nullopt);
// The chain in f32 as one kernel into `out` (float inputs of any dtypes, its result rounded once to
// out's dtype); false, with the reason remembered, where the compiler declines.
bool try_chain_in_f32_into(const std::vector<at::Tensor>& inputs, const std::string& chain, const at::Tensor& out);
// A constant in a chain's text, with every digit a double has.
std::string chain_constant(double value);
inline at::Tensor as_f32(const at::Tensor& t) { return t.scalar_type() == at::kFloat ? t : t.to(at::kFloat); }

// torch.set_float32_matmul_precision, for f32 products on a tensor core without f32.
npu::compiler::F32MatmulPrecision f32_matmul_precision();

}  // namespace npusim
