// v.add .. v.pow, the comparisons v.eq .. v.ge and the bitwise v.and .. v.shr, with b broadcast; v.fma.
#include <algorithm>
#include <cmath>
#include <vector>

#include "functional/elements.h"
#include "functional/kernels.h"
#include "functional/support.h"
#include "npusim/isa/dtype.h"

namespace npu::sim::functional {
namespace {

using isa::Bcast;
using isa::DType;
using isa::Opcode;

struct Operands {
  DType dtype;
  Bcast bcast;
  uint8_t* dst;
  const uint8_t* a;
  const uint8_t* b;
  size_t rows;
  size_t cols;
};

// dst[i] = f(a[i], b[i broadcast]) written as out_dtype, chunk by chunk in
// index order. Each chunk of a and b is read before the same positions of dst
// are written, and dst elements are never wider than a's, so dst == a is safe.
template <typename Value, typename Out, typename F>
void map_binary(const Operands& o, DType out_dtype, F f) {
  const size_t size = isa::dtype_size_bytes(o.dtype);
  const size_t out_size = isa::dtype_size_bytes(out_dtype);
  // A broadcast b is small; reading it up front keeps it intact even if dst
  // overlaps it.
  std::vector<Value> b_small;
  if (o.bcast != Bcast::Full) {
    b_small.resize(bcast_operand_elements(o.bcast, o.rows, o.cols));
    load_values(o.dtype, o.b, b_small.size(), b_small.data());
  }
  // Full and Scalar are one flat run; Row and Col go row by row.
  const bool by_row = o.bcast == Bcast::Row || o.bcast == Bcast::Col;
  const size_t runs = by_row ? o.rows : 1;
  const size_t run_length = by_row ? o.cols : o.rows * o.cols;

  Value a_values[kChunk], b_values[kChunk];
  Out out[kChunk];
  for (size_t run = 0; run < runs; ++run) {
    for (size_t start = 0; start < run_length; start += kChunk) {
      const size_t n = std::min(kChunk, run_length - start);
      const size_t first = run * run_length + start;
      load_values(o.dtype, o.a + first * size, n, a_values);
      switch (o.bcast) {
        case Bcast::Full: load_values(o.dtype, o.b + first * size, n, b_values); break;
        case Bcast::Row: std::copy_n(b_small.begin() + static_cast<ptrdiff_t>(start), n, b_values); break;
        case Bcast::Col: std::fill_n(b_values, n, b_small[run]); break;
        case Bcast::Scalar: std::fill_n(b_values, n, b_small[0]); break;
      }
      for (size_t i = 0; i < n; ++i) out[i] = f(a_values[i], b_values[i]);
      store_values(out_dtype, o.dst + first * out_size, n, out);
    }
  }
}

// Writes u8 0/1; NaN compares unordered (only != holds).
template <typename Value>
void compare(Opcode op, const Operands& o) {
  auto map = [&](auto f) { map_binary<Value, int64_t>(o, DType::U8, f); };
  switch (op) {
    case Opcode::V_EQ: map([](Value x, Value y) { return int64_t{x == y}; }); break;
    case Opcode::V_NE: map([](Value x, Value y) { return int64_t{x != y}; }); break;
    case Opcode::V_LT: map([](Value x, Value y) { return int64_t{x < y}; }); break;
    case Opcode::V_LE: map([](Value x, Value y) { return int64_t{x <= y}; }); break;
    case Opcode::V_GT: map([](Value x, Value y) { return int64_t{x > y}; }); break;
    case Opcode::V_GE: map([](Value x, Value y) { return int64_t{x >= y}; }); break;
    default: break;
  }
}

// max/min propagate NaN like torch.maximum; between equal values (-0 and +0)
// they return b, as torch's vectorized CPU kernels do.
float nan_max(float x, float y) { return std::isnan(x) || std::isnan(y) ? x + y : (x > y ? x : y); }
float nan_min(float x, float y) { return std::isnan(x) || std::isnan(y) ? x + y : (x < y ? x : y); }

void float_arithmetic(Opcode op, const Operands& o) {
  auto map = [&](auto f) { map_binary<float, float>(o, o.dtype, f); };
  switch (op) {
    case Opcode::V_ADD: map([](float x, float y) { return x + y; }); break;
    case Opcode::V_SUB: map([](float x, float y) { return x - y; }); break;
    case Opcode::V_MUL: map([](float x, float y) { return x * y; }); break;
    case Opcode::V_DIV: map([](float x, float y) { return x / y; }); break;
    case Opcode::V_MAX: map(nan_max); break;
    case Opcode::V_MIN: map(nan_min); break;
    case Opcode::V_POW: map([](float x, float y) { return std::pow(x, y); }); break;
    default: break;
  }
}

// Modular exponentiation by squaring: the low bits are the wrapped power.
int64_t wrapping_pow(int64_t base, int64_t exponent) {
  uint64_t result = 1;
  uint64_t factor = static_cast<uint64_t>(base);
  for (auto e = static_cast<uint64_t>(exponent); e != 0; e >>= 1) {
    if (e & 1) result *= factor;
    factor *= factor;
  }
  return static_cast<int64_t>(result);
}

// An error when some element of b makes op fail; checked before anything is
// written so that a faulting instruction leaves dst untouched.
KernelError check_int_divisors(Opcode op, const Operands& o) {
  if (op != Opcode::V_DIV && op != Opcode::V_POW) return std::nullopt;
  const size_t count = bcast_operand_elements(o.bcast, o.rows, o.cols);
  const size_t size = isa::dtype_size_bytes(o.dtype);
  int64_t values[kChunk];
  for (size_t start = 0; start < count; start += kChunk) {
    const size_t n = std::min(kChunk, count - start);
    load_int_n(o.dtype, o.b + start * size, n, values);
    for (size_t i = 0; i < n; ++i) {
      if (op == Opcode::V_DIV && values[i] == 0) return "integer division by zero";
      if (op == Opcode::V_POW && values[i] < 0) return "integer to a negative power";
    }
  }
  return std::nullopt;
}

// Operands are in range for a dtype of at most 32 bits, so no int64 result
// overflows (not even INT32_MIN / -1); storing wraps them to the dtype.
void int_arithmetic(Opcode op, const Operands& o) {
  auto map = [&](auto f) { map_binary<int64_t, int64_t>(o, o.dtype, f); };
  switch (op) {
    case Opcode::V_ADD: map([](int64_t x, int64_t y) { return x + y; }); break;
    case Opcode::V_SUB: map([](int64_t x, int64_t y) { return x - y; }); break;
    case Opcode::V_MUL: map([](int64_t x, int64_t y) { return x * y; }); break;
    case Opcode::V_DIV: map([](int64_t x, int64_t y) { return x / y; }); break;
    case Opcode::V_MAX: map([](int64_t x, int64_t y) { return std::max(x, y); }); break;
    case Opcode::V_MIN: map([](int64_t x, int64_t y) { return std::min(x, y); }); break;
    case Opcode::V_POW: map(wrapping_pow); break;
    default: break;
  }
}

// Bitwise ops and shifts on the dtype's bit pattern: values load sign- or
// zero-extended to int64 by their dtype (so `& mask` gives the pattern back) and
// store as the dtype's low bits.
void int_bitwise(Opcode op, const Operands& o) {
  const int64_t bits = int64_t{8} * isa::dtype_size_bytes(o.dtype);  // at most 32
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  const bool is_signed = o.dtype != DType::U8;
  auto map = [&](auto f) { map_binary<int64_t, int64_t>(o, o.dtype, f); };
  switch (op) {
    case Opcode::V_AND: map([](int64_t x, int64_t y) { return x & y; }); break;
    case Opcode::V_OR: map([](int64_t x, int64_t y) { return x | y; }); break;
    case Opcode::V_XOR: map([](int64_t x, int64_t y) { return x ^ y; }); break;
    case Opcode::V_SHL:
      map([&](int64_t x, int64_t y) { return y < 0 || y >= bits ? int64_t{0} : static_cast<int64_t>((static_cast<uint64_t>(x) & mask) << y); });
      break;
    case Opcode::V_SHR:
      map([&](int64_t x, int64_t y) {
        if (y < 0 || y >= bits) return is_signed && x < 0 ? int64_t{-1} : int64_t{0};
        return is_signed ? x >> y : static_cast<int64_t>((static_cast<uint64_t>(x) & mask) >> y);
      });
      break;
    default: break;
  }
}

}  // namespace

// isa.def numbers v.add .. v.pow, v.eq .. v.ge and v.and .. v.shr contiguously.
bool is_vector_comparison(Opcode op) { return op >= Opcode::V_EQ && op <= Opcode::V_GE; }
bool is_vector_bitwise(Opcode op) { return op >= Opcode::V_AND && op <= Opcode::V_SHR; }
bool is_vector_binary(Opcode op) { return (op >= Opcode::V_ADD && op <= Opcode::V_POW) || is_vector_comparison(op) || is_vector_bitwise(op); }

uint64_t bcast_operand_elements(isa::Bcast bcast, uint64_t rows, uint64_t cols) {
  if (rows == 0 || cols == 0) return 0;  // nothing is read
  switch (bcast) {
    case Bcast::Full: return rows * cols;
    case Bcast::Row: return cols;
    case Bcast::Col: return rows;
    case Bcast::Scalar: return 1;
  }
  return 0;
}

KernelError vector_binary(Opcode op, DType dtype, Bcast bcast, uint8_t* dst, const uint8_t* a, const uint8_t* b, uint64_t rows,
                          uint64_t cols) {
  if (!is_vector_binary(op)) return mnemonic(op) + " is not a binary vector instruction";
  const bool is_float = isa::dtype_is_float(dtype);
  if (is_vector_bitwise(op) && is_float) return mnemonic(op) + " needs an integer dtype, got " + std::string(isa::dtype_name(dtype));
  if (rows == 0 || cols == 0) return std::nullopt;
  const Operands operands{dtype, bcast, dst, a, b, rows, cols};
  if (is_vector_bitwise(op)) {
    int_bitwise(op, operands);
    return std::nullopt;
  }
  if (is_vector_comparison(op)) {
    if (is_float)
      compare<float>(op, operands);
    else
      compare<int64_t>(op, operands);
    return std::nullopt;
  }
  if (is_float) {
    float_arithmetic(op, operands);
    return std::nullopt;
  }
  if (KernelError error = check_int_divisors(op, operands)) return error;
  int_arithmetic(op, operands);
  return std::nullopt;
}

}  // namespace npu::sim::functional

namespace npu::sim::functional {

namespace {

// dst = f(a, b broadcast, c) over Value (float or int64), every operand read before dst is written.
template <typename Value, typename F>
void map_ternary(DType dtype, Bcast bcast, uint8_t* dst, const uint8_t* a, const uint8_t* b, const uint8_t* c, uint64_t rows, uint64_t cols,
                 F f) {
  const size_t n = rows * cols, b_count = bcast_operand_elements(bcast, rows, cols);
  std::vector<Value> av(n), bv(b_count), cv(n);
  load_values(dtype, a, n, av.data()), load_values(dtype, b, b_count, bv.data()), load_values(dtype, c, n, cv.data());
  for (size_t i = 0; i < n; ++i) {
    const size_t k = bcast == Bcast::Full ? i : bcast == Bcast::Row ? i % cols : bcast == Bcast::Col ? i / cols : 0;
    av[i] = f(av[i], bv[k], cv[i]);
  }
  store_values(dtype, dst, n, av.data());
}

}  // namespace

void vector_fma(DType dtype, Bcast bcast, uint8_t* dst, const uint8_t* a, const uint8_t* b, const uint8_t* c, uint64_t rows, uint64_t cols) {
  if (rows == 0 || cols == 0) return;
  if (isa::dtype_is_float(dtype))
    map_ternary<float>(dtype, bcast, dst, a, b, c, rows, cols, [](float x, float y, float z) { return std::fma(x, y, z); });
  else  // (operands of at most 32 bits: the int64 product and sum do not overflow; storing wraps)
    map_ternary<int64_t>(dtype, bcast, dst, a, b, c, rows, cols, [](int64_t x, int64_t y, int64_t z) { return x * y + z; });
}

}  // namespace npu::sim::functional
