// The functional model of the tensor core and vector unit: what each
// instruction computes, on dense row-major tiles in host memory. The caller
// (the core model) has already checked that every operand lies inside its
// memory; kernels only compute. Semantics are those of docs/isa.md; the
// numeric rules (shared with every layer above) are:
//   * float dtypes (f32, bf16, f16) compute in f32 and round to the
//     destination type to nearest, ties to even;
//   * integer arithmetic wraps to the width of the dtype;
//   * results match PyTorch's CPU results for the same op: bit-exact for
//     integers, within a few f32 ulps for transcendental functions.
// Every kernel is correct when dst is exactly the same region as a source
// operand (in-place); partial overlaps are undefined.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "npusim/isa/isa.h"

namespace npu::sim::functional {

// An instruction the kernels cannot execute (e.g. v.exp on i32, integer
// division by zero, a gather index out of range); the core turns it into a
// device fault with this message.
using KernelError = std::optional<std::string>;

// One element as f32 (float dtypes) or as a wrapped integer (integer dtypes).
float load_f32(isa::DType dtype, const uint8_t* element);
void store_f32(isa::DType dtype, uint8_t* element, float value);
int64_t load_int(isa::DType dtype, const uint8_t* element);
void store_int(isa::DType dtype, uint8_t* element, int64_t value);

// v.mov, v.neg, v.abs, v.exp, v.log, v.sqrt, v.rsqrt, v.recip, v.tanh,
// v.sigmoid, v.relu, v.gelu, v.gelut, v.silu, v.sin, v.cos.
KernelError vector_unary(isa::Opcode op, isa::DType dtype, uint8_t* dst, const uint8_t* src, uint64_t rows, uint64_t cols);

// v.expsum: dst (dtype) = exp(src - m[i]) per row, sum[i] = the row's sum of the f32 values; src, m
// and sum f32 (an error for an integer dtype).
KernelError vector_expsum(isa::DType dtype, uint8_t* dst, const uint8_t* src, const uint8_t* m, uint8_t* sum, uint64_t rows,
                          uint64_t cols);

// Whether op is a binary vector instruction (the signature of v.add): v.add ..
// v.pow, the comparisons v.eq .. v.ge, and the bitwise v.and .. v.shr.
bool is_vector_binary(isa::Opcode op);
bool is_vector_comparison(isa::Opcode op);
bool is_vector_bitwise(isa::Opcode op);  // integer dtypes only

// v.add .. v.pow, the comparisons v.eq .. v.ge (which write u8 0/1) and the
// bitwise v.and .. v.shr (an error for a float dtype).
// b has rows x cols (Full), 1 x cols (Row), rows x 1 (Col) or 1 element (Scalar).
KernelError vector_binary(isa::Opcode op, isa::DType dtype, isa::Bcast bcast, uint8_t* dst, const uint8_t* a, const uint8_t* b,
                          uint64_t rows, uint64_t cols);

// v.fma: dst = a * b + c, b broadcast as for the binary ops, c rows x cols; floats as one fused
// multiply-add in f32 rounded to dtype, integers wrapping. dst may be a or c.
void vector_fma(isa::DType dtype, isa::Bcast bcast, uint8_t* dst, const uint8_t* a, const uint8_t* b, const uint8_t* c, uint64_t rows,
                uint64_t cols);

// v.sel: cond is u8.
void vector_select(isa::DType dtype, uint8_t* dst, const uint8_t* cond, const uint8_t* a, const uint8_t* b, uint64_t rows, uint64_t cols);

// v.fill: for float dtypes the low 32 bits of value are an f32 bit pattern.
void vector_fill(isa::DType dtype, uint8_t* dst, uint64_t value, uint64_t rows, uint64_t cols);

// v.cvt from src_dtype to dst_dtype (element sizes may differ).
void vector_convert(isa::DType dst_dtype, isa::DType src_dtype, uint8_t* dst, const uint8_t* src, uint64_t rows, uint64_t cols);

// v.iota: i32 start + i*cols + j.
void vector_iota(uint8_t* dst, int64_t start, uint64_t rows, uint64_t cols);

// v.rand: element i*cols + j from Philox4x32-10 (Random123's philox4x32_R with
// 10 rounds) with key (seed low, seed high) and counter (ctr + index low, high,
// 0, 0), first output word; see isa.def.
void vector_rand(isa::DType dtype, uint8_t* dst, uint64_t seed, uint64_t ctr, uint64_t rows, uint64_t cols);
// The first output word of Philox4x32-10 (for tests and host references).
uint32_t philox4x32_10_word0(uint64_t key, uint64_t counter);

// v.rsum, v.rmax, v.rmin, v.argmax, v.argmin (arg* write i32).
KernelError vector_reduce(isa::Opcode op, isa::DType dtype, isa::Axis axis, uint8_t* dst, const uint8_t* src, uint64_t rows,
                          uint64_t cols);

// v.trans: dst is cols x rows.
void vector_transpose(isa::DType dtype, uint8_t* dst, const uint8_t* src, uint64_t rows, uint64_t cols);

// v.gather: row i of dst = row idx[i] of src; src has src_rows rows.
KernelError vector_gather(isa::DType dtype, uint8_t* dst, const uint8_t* src, uint64_t src_rows, const uint8_t* idx, uint64_t rows,
                          uint64_t cols);

// The host instructions tc.mm's arithmetic runs on: the widest the host has by
// default. Every choice gives the same results (tests compare them); false
// (and no change) when the host lacks it. Not thread-safe: for tests.
// Avx512Bf16 adds AVX512-BF16's pair dot product for bf16 inputs (matmul.cpp
// says when), where the host's instruction rounds in the documented order.
enum class MatmulIsa { Sse2, Avx2, Avx512, Avx512Bf16 };
bool use_matmul_isa(MatmulIsa isa);
// Which arithmetic the last tensor_matmul on this thread ran (for tests).
enum class MatmulPath { ProductThenSum, FusedMultiplyAdd, Bf16Pairs };
MatmulPath last_matmul_path();

// tc.mm: acc[m x n] (+)= A * B with the isa::TcFlag flags; acc is f32, or i32 for i8 inputs.
KernelError tensor_matmul(isa::DType dtype, uint32_t flags, uint8_t* acc, const uint8_t* a, const uint8_t* b, uint64_t m, uint64_t n,
                          uint64_t k);

// Elements of the broadcast operand b and of a reduction's output (0 when
// rows or cols is 0), so the caller can bounds-check before calling.
uint64_t bcast_operand_elements(isa::Bcast bcast, uint64_t rows, uint64_t cols);
uint64_t reduce_output_elements(isa::Axis axis, uint64_t rows, uint64_t cols);

// tensor_matmul in two halves, so that a simulator can run the arithmetic on
// another thread: pack_matmul reads A and B (and rejects a dtype tc.mm does
// not take); multiply_packed reads and writes acc, nothing else, with the
// same results. PackedMatmul is opaque: the operands converted for the host's
// kernel. sum_packed does the products of multiply_packed ahead, on any
// thread, before it (which then only adds them to acc).
struct PackedMatmul;
KernelError pack_matmul(isa::DType dtype, uint32_t flags, const uint8_t* a, const uint8_t* b, uint64_t m, uint64_t n, uint64_t k,
                        std::shared_ptr<PackedMatmul>* packed);
void sum_packed(PackedMatmul& packed);
void multiply_packed(PackedMatmul& packed, uint8_t* acc);

}  // namespace npu::sim::functional
