// tc.mm. Summation order, which fixes the rounding of float results:
//
//   sum = ((0 + a[i][0]*b[0][j]) + a[i][1]*b[1][j]) + ... + a[i][k-1]*b[k-1][j]
//   acc[i][j] = flag acc ? acc[i][j] + sum : sum
//
// with every product and every addition rounded to f32 (no fused
// multiply-add: the library builds with -ffp-contract=off). Products of bf16
// or f16 inputs are exact in f32. For i8 inputs the result is the exact
// integer sum wrapped to i32, plus acc with wrapping.
//
// The loop structure is the usual packed GEMM: A and B are converted to f32
// once, into panels laid out in the order the micro-kernel reads them; the
// kernel keeps a kMr x kNr tile of sums in registers while it walks a block
// of k. Blocking over k changes nothing in the order above: the tile goes to
// the sum buffer and comes back between blocks, and every sum sees k ascend.
#include <algorithm>
#include <cstring>
#include <vector>

#include "functional/elements.h"
#include "functional/kernels.h"
#include "npusim/isa/dtype.h"

namespace npu::sim::functional {
namespace {

using isa::DType;

// Four lanes (SSE2, which every x86-64 has), four rows: 8 accumulators plus
// operands fit the 16 vector registers without spilling.
typedef float F32x4 __attribute__((vector_size(16)));
constexpr size_t kLanes = 4;
constexpr size_t kMr = 4;           // rows of the register tile
constexpr size_t kNr = 2 * kLanes;  // columns of the register tile
constexpr size_t kKc = 256;         // k block: a kKc x kNr panel of B stays in L1
constexpr size_t kMc = 32 * kMr;    // rows per block: a kMc x kKc block of A stays in L2

// i8 runs on the f32 kernel one k block at a time: products are at most 2^14
// in magnitude and a block's partial sums at most kKc * 2^14, so while that
// stays within 2^24 every f32 operation is exact.
static_assert(kKc * 128 * 128 <= (1u << 24), "i8 block sums must stay exact in f32");

// A logical outer x depth matrix X (A is m x k; B^T is n x k) repacked into
// panels of `width` outer indices: element X(o, p) goes to
//   packed[(o / width) * depth * width + p * width + o % width],
// with zeros padding the last panel. outer_major says whether the stored
// matrix has X's rows as its rows (A without ta, B with tb) or as its columns.
template <size_t width>
std::vector<float> pack_panels(DType dtype, const uint8_t* stored, size_t outer, size_t depth, bool outer_major) {
  const size_t panels = (outer + width - 1) / width;
  std::vector<float> packed(panels * depth * width, 0.0f);
  const size_t stored_rows = outer_major ? outer : depth;
  const size_t stored_cols = outer_major ? depth : outer;
  const size_t row_bytes = stored_cols * isa::dtype_size_bytes(dtype);
  std::vector<float> row(stored_cols);
  for (size_t s = 0; s < stored_rows; ++s) {
    load_f32_n(dtype, stored + s * row_bytes, stored_cols, row.data());
    for (size_t e = 0; e < stored_cols; ++e) {
      const size_t o = outer_major ? s : e;
      const size_t p = outer_major ? e : s;
      packed[(o / width) * depth * width + p * width + o % width] = row[e];
    }
  }
  return packed;
}

// c[kMr x kNr] (row stride ldc) += A panel * B panel over kc steps of k.
void micro_kernel(size_t kc, const float* a, const float* b, float* c, size_t ldc) {
  F32x4 sums[kMr][2];
  for (size_t r = 0; r < kMr; ++r) {
    std::memcpy(&sums[r][0], c + r * ldc, sizeof(F32x4));
    std::memcpy(&sums[r][1], c + r * ldc + kLanes, sizeof(F32x4));
  }
  for (size_t p = 0; p < kc; ++p) {
    F32x4 b0, b1;
    std::memcpy(&b0, b + p * kNr, sizeof(F32x4));
    std::memcpy(&b1, b + p * kNr + kLanes, sizeof(F32x4));
    for (size_t r = 0; r < kMr; ++r) {
      const float x = a[p * kMr + r];
      const F32x4 a_r = {x, x, x, x};
      sums[r][0] += a_r * b0;
      sums[r][1] += a_r * b1;
    }
  }
  for (size_t r = 0; r < kMr; ++r) {
    std::memcpy(c + r * ldc, &sums[r][0], sizeof(F32x4));
    std::memcpy(c + r * ldc + kLanes, &sums[r][1], sizeof(F32x4));
  }
}

// Edge tiles run the same kernel on a full-size copy, so padding lanes never
// touch the sum buffer.
void edge_kernel(size_t kc, const float* a, const float* b, float* c, size_t ldc, size_t tile_rows, size_t tile_cols) {
  float tile[kMr * kNr] = {};
  for (size_t r = 0; r < tile_rows; ++r) std::copy_n(c + r * ldc, tile_cols, tile + r * kNr);
  micro_kernel(kc, a, b, tile, kNr);
  for (size_t r = 0; r < tile_rows; ++r) std::copy_n(tile + r * kNr, tile_cols, c + r * ldc);
}

struct Problem {
  size_t m, n, k;
  std::vector<float> a_panels, b_panels;
};

Problem pack(DType dtype, uint32_t flags, const uint8_t* a, const uint8_t* b, size_t m, size_t n, size_t k) {
  return {m, n, k, pack_panels<kMr>(dtype, a, m, k, (flags & isa::kTcTransposeA) == 0),
          pack_panels<kNr>(dtype, b, n, k, (flags & isa::kTcTransposeB) != 0)};
}

// sums (m x n, row-major) += the products of k block [pc, pc + kc), k ascending.
void multiply_block(const Problem& p, size_t pc, size_t kc, float* sums) {
  for (size_t ic = 0; ic < p.m; ic += kMc) {
    const size_t i_end = std::min(p.m, ic + kMc);
    for (size_t j = 0; j < p.n; j += kNr) {
      const float* b_panel = p.b_panels.data() + (j / kNr) * p.k * kNr + pc * kNr;
      for (size_t i = ic; i < i_end; i += kMr) {
        const float* a_panel = p.a_panels.data() + (i / kMr) * p.k * kMr + pc * kMr;
        const size_t tile_rows = std::min(kMr, p.m - i);
        const size_t tile_cols = std::min(kNr, p.n - j);
        if (tile_rows == kMr && tile_cols == kNr)
          micro_kernel(kc, a_panel, b_panel, sums + i * p.n + j, p.n);
        else
          edge_kernel(kc, a_panel, b_panel, sums + i * p.n + j, p.n, tile_rows, tile_cols);
      }
    }
  }
}

std::vector<float> float_sums(const Problem& p) {
  std::vector<float> sums(p.m * p.n, 0.0f);
  for (size_t pc = 0; pc < p.k; pc += kKc) multiply_block(p, pc, std::min(kKc, p.k - pc), sums.data());
  return sums;
}

// Each k block's exact f32 sums, added up in i32 arithmetic (modulo 2^32).
std::vector<uint32_t> int8_sums(const Problem& p) {
  std::vector<uint32_t> sums(p.m * p.n, 0);
  std::vector<float> block(p.m * p.n);
  for (size_t pc = 0; pc < p.k; pc += kKc) {
    std::fill(block.begin(), block.end(), 0.0f);
    multiply_block(p, pc, std::min(kKc, p.k - pc), block.data());
    for (size_t e = 0; e < sums.size(); ++e) sums[e] += static_cast<uint32_t>(static_cast<int32_t>(block[e]));
  }
  return sums;
}

// acc = (flag acc ? acc : 0) + sums, elementwise; T (float or uint32_t) has
// the layout of the f32 or i32 accumulator.
template <typename T>
void accumulate(uint32_t flags, uint8_t* acc, const std::vector<T>& sums) {
  if ((flags & isa::kTcAcc) == 0) {
    if (!sums.empty()) std::memcpy(acc, sums.data(), sums.size() * sizeof(T));
    return;
  }
  for (size_t i = 0; i < sums.size(); ++i) {
    T old;
    std::memcpy(&old, acc + i * sizeof(T), sizeof(T));
    const T result = old + sums[i];
    std::memcpy(acc + i * sizeof(T), &result, sizeof(T));
  }
}

}  // namespace

KernelError tensor_matmul(DType dtype, uint32_t flags, uint8_t* acc, const uint8_t* a, const uint8_t* b, uint64_t m, uint64_t n,
                          uint64_t k) {
  // A and B are fully packed before acc is written, so acc may alias them.
  switch (dtype) {
    case DType::F32:
    case DType::BF16:
    case DType::F16: accumulate(flags, acc, float_sums(pack(dtype, flags, a, b, m, n, k))); break;
    case DType::I8: accumulate(flags, acc, int8_sums(pack(dtype, flags, a, b, m, n, k))); break;
    default: return "tc.mm does not support " + std::string(isa::dtype_name(dtype));
  }
  return std::nullopt;
}

}  // namespace npu::sim::functional
