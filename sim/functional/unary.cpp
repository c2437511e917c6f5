// v.mov .. v.cos. Float math uses the float overloads of <cmath> and the same
// formulas as PyTorch's CPU kernels, so results agree to a few ulps.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "functional/elements.h"
#include "functional/kernels.h"
#include "functional/support.h"
#include "npusim/isa/dtype.h"

namespace npu::sim::functional {
namespace {

using isa::DType;
using isa::Opcode;

template <typename Value, typename F>
void map_chunks(DType dtype, uint8_t* dst, const uint8_t* src, size_t count, F f) {
  const size_t size = isa::dtype_size_bytes(dtype);
  Value values[kChunk];
  for (size_t start = 0; start < count; start += kChunk) {
    const size_t n = std::min(kChunk, count - start);
    load_values(dtype, src + start * size, n, values);
    for (size_t i = 0; i < n; ++i) values[i] = f(values[i]);
    store_values(dtype, dst + start * size, n, values);
  }
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

float gelu_tanh(float x) {
  const float beta = 0.7978845608028654f;  // sqrt(2 / pi)
  const float kappa = 0.044715f;
  const float cube = x * x * x;
  return 0.5f * x * (1.0f + std::tanh(beta * (x + kappa * cube)));
}

void float_unary(Opcode op, DType dtype, uint8_t* dst, const uint8_t* src, size_t count) {
  auto map = [&](auto f) { map_chunks<float>(dtype, dst, src, count, f); };
  switch (op) {
    case Opcode::V_NEG: map([](float x) { return -x; }); break;
    case Opcode::V_ABS: map([](float x) { return std::fabs(x); }); break;
    case Opcode::V_EXP: map([](float x) { return std::exp(x); }); break;
    case Opcode::V_LOG: map([](float x) { return std::log(x); }); break;
    case Opcode::V_SQRT: map([](float x) { return std::sqrt(x); }); break;
    case Opcode::V_RSQRT: map([](float x) { return 1.0f / std::sqrt(x); }); break;
    case Opcode::V_RECIP: map([](float x) { return 1.0f / x; }); break;
    case Opcode::V_TANH: map([](float x) { return std::tanh(x); }); break;
    case Opcode::V_SIGMOID: map(sigmoid); break;
    // Written so that NaN and -0 pass through unchanged, as torch.relu does.
    case Opcode::V_RELU: map([](float x) { return x < 0.0f ? 0.0f : x; }); break;
    case Opcode::V_GELU: map([](float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678f)); }); break;
    case Opcode::V_GELUT: map(gelu_tanh); break;
    case Opcode::V_SILU: map([](float x) { return x / (1.0f + std::exp(-x)); }); break;
    case Opcode::V_SIN: map([](float x) { return std::sin(x); }); break;
    case Opcode::V_COS: map([](float x) { return std::cos(x); }); break;
    case Opcode::V_ERF: map([](float x) { return std::erf(x); }); break;
    default: break;
  }
}

// False when op has no integer form. Values are in range for the dtype, so
// the int64 results cannot overflow; storing wraps them (abs(-128) stays -128).
bool int_unary(Opcode op, DType dtype, uint8_t* dst, const uint8_t* src, size_t count) {
  auto map = [&](auto f) { map_chunks<int64_t>(dtype, dst, src, count, f); };
  switch (op) {
    case Opcode::V_NEG: map([](int64_t x) { return -x; }); break;
    case Opcode::V_ABS: map([](int64_t x) { return x < 0 ? -x : x; }); break;
    case Opcode::V_RELU: map([](int64_t x) { return std::max<int64_t>(x, 0); }); break;
    default: return false;
  }
  return true;
}

// isa.def numbers the unary instructions contiguously, v.mov first, v.erf last.
bool is_unary(Opcode op) { return op >= Opcode::V_MOV && op <= Opcode::V_ERF; }

}  // namespace

KernelError vector_unary(Opcode op, DType dtype, uint8_t* dst, const uint8_t* src, uint64_t rows, uint64_t cols) {
  if (!is_unary(op)) return mnemonic(op) + " is not a unary vector instruction";
  const size_t count = rows * cols;
  if (op == Opcode::V_MOV) {
    // A bit copy: moves keep NaN payloads.
    if (dst != src) std::memmove(dst, src, count * isa::dtype_size_bytes(dtype));
    return std::nullopt;
  }
  if (isa::dtype_is_float(dtype)) {
    float_unary(op, dtype, dst, src, count);
    return std::nullopt;
  }
  if (!int_unary(op, dtype, dst, src, count))
    return mnemonic(op) + " needs a float dtype, got " + std::string(isa::dtype_name(dtype));
  return std::nullopt;
}

KernelError vector_expsum(DType dtype, uint8_t* dst, const uint8_t* src, const uint8_t* m, uint8_t* sum, uint64_t rows, uint64_t cols) {
  if (!isa::dtype_is_float(dtype)) return "v.expsum needs a float dtype, got " + std::string(isa::dtype_name(dtype));
  // The exponent and the sum as v.sub (col), v.exp and v.rsum (axis1) compute them in f32, so that the
  // fused instruction gives the same bits as the three. Row by row, each read before it is written:
  // dst may be src, sum may be m.
  std::vector<float> row(cols);
  for (uint64_t i = 0; i < rows; ++i) {
    const float max = load_f32(DType::F32, m + i * 4);
    load_values(DType::F32, src + i * cols * 4, cols, row.data());
    float total = 0.0f;
    for (uint64_t j = 0; j < cols; ++j) {
      row[j] = std::exp(row[j] - max);
      total = j == 0 ? 0.0f + row[j] : total + row[j];
    }
    store_values(dtype, dst + i * cols * isa::dtype_size_bytes(dtype), cols, row.data());
    store_f32(DType::F32, sum + i * 4, total);
  }
  return std::nullopt;
}

}  // namespace npu::sim::functional
