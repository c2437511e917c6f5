// int64 arithmetic on the chip, which has no 64-bit integers: an int64 tensor
// is its [..., 2] i32 words (int64_words: low, high), and each op here is a few
// i32 kernels on them, exact and wrapping as the CPU's int64 is. Operands are
// int64 npu tensors that broadcast to each other, none empty.
#pragma once

#include <ATen/core/Tensor.h>

#include "npusim/compiler/op.h"

namespace npusim {

// An int64 npu tensor's low and high 32-bit words (i32 views of its storage, in its shape).
at::Tensor int64_low_word(const at::Tensor& t);
at::Tensor int64_high_word(const at::Tensor& t);

// a + b or a - b: the low words' sum and its carry into the high words'.
at::Tensor int64_add(const at::Tensor& a, const at::Tensor& b, bool subtract);
// a * b modulo 2^64: the low words' full 64-bit product (from 16-bit halves) plus the cross products.
at::Tensor int64_mul(const at::Tensor& a, const at::Tensor& b);
// a & b, a | b, a ^ b (kind BITWISE_AND, _OR, _XOR): each word on its own, one kernel.
at::Tensor int64_bitwise(npu::compiler::OpKind kind, const at::Tensor& a, const at::Tensor& b);
// a < b, <=, >, >= (kind LT, LE, GT, GE) as bools: the high words signed, then the low words unsigned.
at::Tensor int64_compare(npu::compiler::OpKind kind, const at::Tensor& a, const at::Tensor& b);
// The larger (or smaller) of a and b, elementwise.
at::Tensor int64_extremum(bool maximum, const at::Tensor& a, const at::Tensor& b);
// The largest (or smallest) element along dims (every dim where dims is empty): the high words'
// extremum, then the low words' (as unsigned) among the elements whose high word reaches it.
at::Tensor int64_reduce_extremum(bool maximum, const at::Tensor& self, c10::IntArrayRef dims, bool keepdim);

// The sum along dims (every dim where dims is empty), modulo 2^64 as the CPU's: per row the wrapping
// i32 sums of the high words and exact ones of the low words' 16-bit halves (rows of at most 4096,
// longer ones summed in chunks first), put together with int64_add. Undefined where the chip declines.
at::Tensor int64_sum(const at::Tensor& self, c10::IntArrayRef dims, bool keepdim);

}  // namespace npusim
