// Complex tensors on the npu (complex64; the chip has no complex dtype): stored as pairs of f32, the real
// part first, and computed on those pairs (complex_ops.cpp).
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

#include "npusim/compiler/op.h"

namespace npusim {

// The elementwise ops that have a complex form here (neg, abs; add, sub, mul, div), on complex64 npu tensors
// (a real operand, or a number, joins as complex): the result, or nullopt where the op or an operand is
// not one of those (the caller then runs the op on the CPU, counted).
std::optional<at::Tensor> complex_unary(npu::compiler::OpKind kind, const at::Tensor& self);
std::optional<at::Tensor> complex_binary(npu::compiler::OpKind kind, const at::Tensor& a, const at::Tensor& b);
// A copy from or into complex64 on the npu (complex to complex, a chip float into complex): false where not one.
bool copy_complex_on_chip(const at::Tensor& self, const at::Tensor& dst);

}  // namespace npusim
