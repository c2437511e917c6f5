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
// kernel keeps a kMr x nr tile of sums in registers while it walks a block
// of k. Blocking over k changes nothing in the order above: the tile goes to
// the sum buffer and comes back between blocks, and every sum sees k ascend.
// Neither do the vector width (each lane is one column's own sum: AVX-512,
// AVX2 or SSE2, whichever the host has) nor the threads (each takes whole
// rows of the result): results are the same on every x86-64 host.
//
// Where every product is exact in f32 (bf16 or f16 inputs whose nonzero
// products all lie in f32's normal range, and no infinity or NaN among them)
// a fused multiply-add rounds exactly as a product then a sum does, and the
// kernel uses the host's FMA: the same bits in half the instructions.
//
// bf16 inputs can go further, on hosts with AVX512-BF16: VDPBF16PS adds the
// products of a pair of k steps to a sum, as two fused multiply-adds in a
// fixed order (the pair's upper half first), but with denormal inputs read
// as zero and denormal results flushed to zero. Packed with k in the upper
// half and k + 1 in the lower, a pair is exactly two of the steps above. The
// flushing changes nothing when no input is denormal and every product is a
// multiple of 2^-126 (its exponents add up to at least -126 + 14): then every
// partial sum is too (rounding to f32 keeps that), so it is 0 or normal. The
// kernel runs only on such problems, and only where a check of the host's
// instruction at first use finds that order (bf16_pairs_round_in_order).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <thread>
#include <vector>

#include "functional/elements.h"
#include "functional/kernels.h"
#include "npusim/isa/dtype.h"

namespace npu::sim::functional {
namespace {

using isa::DType;

constexpr size_t kMr = 4;       // rows of the register tile
constexpr size_t kMaxLanes = 16;  // columns of the register tile: 2 vectors of up to 16 lanes
constexpr size_t kKc = 256;     // k block: a kKc x nr panel of B stays in L1
constexpr size_t kMc = 32 * kMr;  // rows per block: a kMc x kKc block of A stays in L2

// i8 runs on the f32 kernel one k block at a time: products are at most 2^14
// in magnitude and a block's partial sums at most kKc * 2^14, so while that
// stays within 2^24 every f32 operation is exact.
static_assert(kKc * 128 * 128 <= (1u << 24), "i8 block sums must stay exact in f32");
static_assert(kKc % 2 == 0, "the bf16 pair kernel's k blocks must hold whole pairs");

// n bf16 values as f32, 8 at a time (SSE2: every x86-64 host).
void widen_bf16(const uint8_t* src, size_t n, float* out) {
  const __m128i zero = _mm_setzero_si128();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm_unpacklo_epi16(zero, v));  // (the bits, 16 places up)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i + 4), _mm_unpackhi_epi16(zero, v));
  }
  for (; i < n; ++i) {
    uint16_t bits;
    std::memcpy(&bits, src + 2 * i, 2);
    out[i] = isa::bf16_to_f32(bits);
  }
}

// Eight bf16 values at `src` as f32.
__attribute__((target("avx2"))) inline __m256 widen_bf16x8(const uint8_t* src) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src))), 16));
}

// pack_panels for width 4 from bf16 rows (A without ta), on AVX2 hosts: each
// 4 x 8 block transposed in registers instead of stored one strided element
// at a time.
__attribute__((target("avx2"))) void pack_bf16_rows_by_4(const uint8_t* stored, size_t outer, size_t depth, float* packed) {
  const std::vector<uint8_t> zero_row(outer % 4 != 0 ? depth * 2 : 0);  // the padding rows of the last panel
  for (size_t panel = 0; panel * 4 < outer; ++panel) {
    const uint8_t* rows[4];
    for (size_t r = 0; r < 4; ++r) rows[r] = panel * 4 + r < outer ? stored + (panel * 4 + r) * depth * 2 : zero_row.data();
    float* out = packed + panel * depth * 4;
    size_t p = 0;
    for (; p + 8 <= depth; p += 8) {
      const __m256 r0 = widen_bf16x8(rows[0] + 2 * p), r1 = widen_bf16x8(rows[1] + 2 * p);
      const __m256 r2 = widen_bf16x8(rows[2] + 2 * p), r3 = widen_bf16x8(rows[3] + 2 * p);
      // Within each 128-bit half: t0 = r0[0] r1[0] r0[1] r1[1], t1 = r0[2] r1[2] r0[3] r1[3], ...
      const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
      const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
      // Columns p + c of the four rows: c = 0 | 4, 1 | 5, 2 | 6, 3 | 7 (low | high half).
      const __m256 c04 = _mm256_shuffle_ps(t0, t2, 0x44), c15 = _mm256_shuffle_ps(t0, t2, 0xee);
      const __m256 c26 = _mm256_shuffle_ps(t1, t3, 0x44), c37 = _mm256_shuffle_ps(t1, t3, 0xee);
      _mm256_storeu_ps(out + 4 * p, _mm256_permute2f128_ps(c04, c15, 0x20));
      _mm256_storeu_ps(out + 4 * p + 8, _mm256_permute2f128_ps(c26, c37, 0x20));
      _mm256_storeu_ps(out + 4 * p + 16, _mm256_permute2f128_ps(c04, c15, 0x31));
      _mm256_storeu_ps(out + 4 * p + 24, _mm256_permute2f128_ps(c26, c37, 0x31));
    }
    for (; p < depth; ++p)
      for (size_t r = 0; r < 4; ++r) {
        uint16_t bits;
        std::memcpy(&bits, rows[r] + 2 * p, 2);
        out[4 * p + r] = isa::bf16_to_f32(bits);
      }
  }
}

// pack_panels from bf16 columns (B without tb) into panels of a width that is
// a multiple of 8, on AVX2 hosts: 8 values at a time, straight into the panels.
__attribute__((target("avx2"))) void pack_bf16_columns_by_8s(size_t width, const uint8_t* stored, size_t outer, size_t depth, float* packed) {
  for (size_t s = 0; s < depth; ++s) {
    const uint8_t* row = stored + s * outer * 2;
    size_t o = 0;
    for (; o + 8 <= outer; o += 8) _mm256_storeu_ps(packed + (o / width) * depth * width + s * width + o % width, widen_bf16x8(row + 2 * o));
    if (o == outer) {
      if (outer % width != 0) std::fill_n(packed + (o / width) * depth * width + s * width + o % width, width - o % width, 0.0f);
      continue;
    }
    float* out = packed + (o / width) * depth * width + s * width;  // the last, partial run: o % width == a multiple of 8
    const size_t start = o % width;
    widen_bf16(row + 2 * o, outer - o, out + start);
    std::fill(out + start + (outer - o), out + width, 0.0f);
  }
}

// A logical outer x depth matrix X (A is m x k; B^T is n x k) repacked into
// panels of `width` outer indices: element X(o, p) goes to
//   packed[(o / width) * depth * width + p * width + o % width],
// with zeros padding the last panel. outer_major says whether the stored
// matrix has X's rows as its rows (A without ta, B with tb) or as its columns.
// `packed` is resized and every element written (padding too), so that a
// buffer can be reused without being cleared first.
void pack_panels(size_t width, DType dtype, const uint8_t* stored, size_t outer, size_t depth, bool outer_major, std::vector<float>& packed) {
  const size_t panels = (outer + width - 1) / width;
  packed.resize(panels * depth * width);
  if (packed.empty()) return;  // k = 0 or nothing to pack: no pointer into an empty vector
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (dtype == DType::BF16 && avx2 && outer_major && width == 4) return pack_bf16_rows_by_4(stored, outer, depth, packed.data());
  if (dtype == DType::BF16 && avx2 && !outer_major && width % 8 == 0) return pack_bf16_columns_by_8s(width, stored, outer, depth, packed.data());
  const size_t stored_rows = outer_major ? outer : depth;
  const size_t stored_cols = outer_major ? depth : outer;
  const size_t row_bytes = stored_cols * isa::dtype_size_bytes(dtype);
  std::vector<float> row(stored_cols);
  for (size_t s = 0; s < stored_rows; ++s) {
    if (outer_major) {  // row s is X(o = s, all p): a strided column of its panel
      load_f32_n(dtype, stored + s * row_bytes, stored_cols, row.data());
      float* out = packed.data() + (s / width) * depth * width + s % width;
      for (size_t p = 0; p < depth; ++p) out[p * width] = row[p];
    } else {  // row s is X(all o, p = s): contiguous runs of `width` in each panel
      for (size_t o = 0; o < stored_cols; o += width) {
        const size_t count = std::min(width, stored_cols - o);
        float* out = packed.data() + (o / width) * depth * width + s * width;
        if (dtype == DType::BF16)
          widen_bf16(stored + s * row_bytes + 2 * o, count, out);
        else
          load_f32_n(dtype, stored + s * row_bytes + o * isa::dtype_size_bytes(dtype), count, out);
        std::fill(out + count, out + width, 0.0f);
      }
    }
  }
  if (outer_major)  // the padding columns of the last panel
    for (size_t o = outer; o < panels * width; ++o) {
      float* out = packed.data() + (o / width) * depth * width + o % width;
      for (size_t p = 0; p < depth; ++p) out[p * width] = 0.0f;
    }
}

// c[kMr x 2L] (row stride ldc) += A panel * B panel over kc steps of k, with
// Vec a vector of L floats. Always inlined, so that it compiles for the
// instruction set of the wrapper that calls it.
template <typename Vec, size_t L>
[[gnu::always_inline]] inline void micro_kernel_body(size_t kc, const float* a, const float* b, float* c, size_t ldc) {
  Vec sums[kMr][2];
  for (size_t r = 0; r < kMr; ++r) {
    std::memcpy(&sums[r][0], c + r * ldc, sizeof(Vec));
    std::memcpy(&sums[r][1], c + r * ldc + L, sizeof(Vec));
  }
  for (size_t p = 0; p < kc; ++p) {
    Vec b0, b1;
    std::memcpy(&b0, b + p * 2 * L, sizeof(Vec));
    std::memcpy(&b1, b + p * 2 * L + L, sizeof(Vec));
    for (size_t r = 0; r < kMr; ++r) {
      const float x = a[p * kMr + r];  // broadcast over the lanes
      sums[r][0] += x * b0;
      sums[r][1] += x * b1;
    }
  }
  for (size_t r = 0; r < kMr; ++r) {
    std::memcpy(c + r * ldc, &sums[r][0], sizeof(Vec));
    std::memcpy(c + r * ldc + L, &sums[r][1], sizeof(Vec));
  }
}

// The same over bf16 pairs (see the top): a holds kMr pairs per step, b nr.
__attribute__((target("avx512f,avx512bf16"))) void micro_kernel_avx512_bf16_pairs(size_t pairs, const uint32_t* a, const uint32_t* b,
                                                                                  float* c, size_t ldc) {
  __m512 sums[kMr][2];
  for (size_t r = 0; r < kMr; ++r) sums[r][0] = _mm512_loadu_ps(c + r * ldc), sums[r][1] = _mm512_loadu_ps(c + r * ldc + 16);
  for (size_t q = 0; q < pairs; ++q) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b + q * 32), b1 = (__m512bh)_mm512_loadu_si512(b + q * 32 + 16);
    for (size_t r = 0; r < kMr; ++r) {
      const __m512bh x = (__m512bh)_mm512_set1_epi32(int32_t(a[q * kMr + r]));
      sums[r][0] = _mm512_dpbf16_ps(sums[r][0], x, b0);
      sums[r][1] = _mm512_dpbf16_ps(sums[r][1], x, b1);
    }
  }
  for (size_t r = 0; r < kMr; ++r) _mm512_storeu_ps(c + r * ldc, sums[r][0]), _mm512_storeu_ps(c + r * ldc + 16, sums[r][1]);
}

// Whether this host's VDPBF16PS adds a pair as (sum + upper product) + lower
// product, each rounded to nearest even: on a few thousand pairs of normal
// bf16 values whose two orders, or one fused rounding, would give other bits.
__attribute__((target("avx512f,avx512bf16"))) bool bf16_pairs_round_in_order() {
  uint32_t state = 12345;
  const auto next = [&state] { return state = state * 1664525u + 1013904223u; };
  const auto bf16 = [&next] {  // a random normal bf16 with an exponent in [-20, 20]
    const uint32_t r = next();
    return uint16_t(((r >> 31) << 15) | ((107 + (r >> 8) % 41) << 7) | ((r >> 16) & 0x7f));
  };
  const auto widen = [](uint16_t h) { return isa::f32_from_bits(uint32_t(h) << 16); };
  for (int trial = 0; trial < 4096; ++trial) {
    const uint16_t a_upper = bf16(), a_lower = bf16(), b_upper = bf16(), b_lower = bf16();
    const float sum = widen(bf16()) * widen(bf16());
    const __m512bh a = (__m512bh)_mm512_set1_epi32(int32_t((uint32_t(a_upper) << 16) | a_lower));
    const __m512bh b = (__m512bh)_mm512_set1_epi32(int32_t((uint32_t(b_upper) << 16) | b_lower));
    float got[16];
    _mm512_storeu_ps(got, _mm512_dpbf16_ps(_mm512_set1_ps(sum), a, b));
    volatile float upper = widen(a_upper) * widen(b_upper), lower = widen(a_lower) * widen(b_lower);
    const float expected = (sum + upper) + lower;
    if (isa::f32_bits(got[0]) != isa::f32_bits(expected)) return false;
  }
  return true;
}

typedef float F32x4 __attribute__((vector_size(16)));
typedef float F32x8 __attribute__((vector_size(32)));
typedef float F32x16 __attribute__((vector_size(64)));

void micro_kernel_sse2(size_t kc, const float* a, const float* b, float* c, size_t ldc) { micro_kernel_body<F32x4, 4>(kc, a, b, c, ldc); }
__attribute__((target("avx2"))) void micro_kernel_avx2(size_t kc, const float* a, const float* b, float* c, size_t ldc) {
  micro_kernel_body<F32x8, 8>(kc, a, b, c, ldc);
}
__attribute__((target("avx512f"))) void micro_kernel_avx512(size_t kc, const float* a, const float* b, float* c, size_t ldc) {
  micro_kernel_body<F32x16, 16>(kc, a, b, c, ldc);
}

// The same with a fused multiply-add: only for products that are exact (see the top).
__attribute__((target("avx512f"))) void micro_kernel_avx512_fma(size_t kc, const float* a, const float* b, float* c, size_t ldc) {
  __m512 sums[kMr][2];
  for (size_t r = 0; r < kMr; ++r) sums[r][0] = _mm512_loadu_ps(c + r * ldc), sums[r][1] = _mm512_loadu_ps(c + r * ldc + 16);
  for (size_t p = 0; p < kc; ++p) {
    const __m512 b0 = _mm512_loadu_ps(b + p * 32), b1 = _mm512_loadu_ps(b + p * 32 + 16);
    for (size_t r = 0; r < kMr; ++r) {
      const __m512 x = _mm512_set1_ps(a[p * kMr + r]);
      sums[r][0] = _mm512_fmadd_ps(x, b0, sums[r][0]);
      sums[r][1] = _mm512_fmadd_ps(x, b1, sums[r][1]);
    }
  }
  for (size_t r = 0; r < kMr; ++r) _mm512_storeu_ps(c + r * ldc, sums[r][0]), _mm512_storeu_ps(c + r * ldc + 16, sums[r][1]);
}
__attribute__((target("avx2,fma"))) void micro_kernel_avx2_fma(size_t kc, const float* a, const float* b, float* c, size_t ldc) {
  __m256 sums[kMr][2];
  for (size_t r = 0; r < kMr; ++r) sums[r][0] = _mm256_loadu_ps(c + r * ldc), sums[r][1] = _mm256_loadu_ps(c + r * ldc + 8);
  for (size_t p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_loadu_ps(b + p * 16), b1 = _mm256_loadu_ps(b + p * 16 + 8);
    for (size_t r = 0; r < kMr; ++r) {
      const __m256 x = _mm256_set1_ps(a[p * kMr + r]);
      sums[r][0] = _mm256_fmadd_ps(x, b0, sums[r][0]);
      sums[r][1] = _mm256_fmadd_ps(x, b1, sums[r][1]);
    }
  }
  for (size_t r = 0; r < kMr; ++r) _mm256_storeu_ps(c + r * ldc, sums[r][0]), _mm256_storeu_ps(c + r * ldc + 8, sums[r][1]);
}

using KernelFunction = void (*)(size_t kc, const float* a, const float* b, float* c, size_t ldc);
using PairKernelFunction = void (*)(size_t pairs, const uint32_t* a, const uint32_t* b, float* c, size_t ldc);
struct MicroKernel {
  size_t nr;  // columns of its register tile: two vectors
  KernelFunction run;
  KernelFunction exact_products;  // for problems whose products are all exact: FMA where the host has it
  PairKernelFunction bf16_pairs = nullptr;  // for bf16 problems whose partial sums all stay normal (see the top)
};
MicroKernel kernel_for(MatmulIsa isa) {
  switch (isa) {
    case MatmulIsa::Avx512Bf16: return {32, micro_kernel_avx512, micro_kernel_avx512_fma, micro_kernel_avx512_bf16_pairs};
    case MatmulIsa::Avx512: return {32, micro_kernel_avx512, micro_kernel_avx512_fma};
    case MatmulIsa::Avx2: return {16, micro_kernel_avx2, __builtin_cpu_supports("fma") ? micro_kernel_avx2_fma : micro_kernel_avx2};
    default: return {8, micro_kernel_sse2, micro_kernel_sse2};
  }
}
bool host_has(MatmulIsa isa) {
  switch (isa) {
    case MatmulIsa::Avx512Bf16: {
      static const bool usable = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16") && bf16_pairs_round_in_order();
      return usable;
    }
    case MatmulIsa::Avx512: return __builtin_cpu_supports("avx512f");
    case MatmulIsa::Avx2: return __builtin_cpu_supports("avx2");
    default: return true;
  }
}
// The widest kernel this host runs, unless use_matmul_isa chose another.
MicroKernel& current_kernel() {
  static MicroKernel kernel = kernel_for(host_has(MatmulIsa::Avx512Bf16) ? MatmulIsa::Avx512Bf16
                                         : host_has(MatmulIsa::Avx512)   ? MatmulIsa::Avx512
                                         : host_has(MatmulIsa::Avx2)     ? MatmulIsa::Avx2
                                                                         : MatmulIsa::Sse2);
  return kernel;
}
const MicroKernel& micro_kernel() { return current_kernel(); }

// Edge tiles run the same kernel on a full-size copy, so padding lanes never
// touch the sum buffer.
template <typename Function, typename Element>
void edge_kernel(Function run, size_t nr, size_t kc, const Element* a, const Element* b, float* c, size_t ldc, size_t tile_rows,
                 size_t tile_cols) {
  float tile[kMr * 2 * kMaxLanes] = {};
  for (size_t r = 0; r < tile_rows; ++r) std::copy_n(c + r * ldc, tile_cols, tile + r * nr);
  run(kc, a, b, tile, nr);
  for (size_t r = 0; r < tile_rows; ++r) std::copy_n(tile + r * nr, tile_cols, c + r * ldc);
}

// The largest magnitude and the smallest nonzero one among an operand's
// values, as f32 bit patterns with the sign cleared (their signed order is the
// magnitudes'); lowest is 0x7fffffff where none is nonzero.
struct MagnitudeBits {
  int32_t lowest = 0x7fffffff, highest = 0;
};

}  // namespace

// The operands of one tc.mm, packed for the host's micro-kernel (pack_matmul).
struct PackedMatmul {
  DType dtype = DType::F32;
  uint32_t flags = 0;
  size_t m = 0, n = 0, k = 0;
  std::vector<float> a_panels, b_panels;
  // Found while packing (bf16, from the stored bits), or else by float_sums from the panels.
  bool magnitudes_known = false;
  MagnitudeBits a_magnitudes, b_magnitudes;
  bool exact_products = false;  // every product of an A and a B value is exact in f32
  // Instead of the float panels, for the bf16 pair kernel: pairs of k steps, k in the upper half.
  std::vector<uint32_t> a_pairs, b_pairs;
  bool bf16_pairs = false;
  // The sums of the products (sum_packed), in f32 or, for i8, in i32; empty until done.
  bool summed = false;
  std::vector<float> float_sums;
  std::vector<uint32_t> int_sums;
};

namespace {

using Problem = PackedMatmul;

// pack_panels' layout over pairs of k steps of a bf16 matrix, k in the upper
// half and k + 1 (or a zero after the last) in the lower.
std::vector<uint32_t> pack_pairs(size_t width, const uint8_t* stored, size_t outer, size_t depth, bool outer_major) {
  const size_t pairs = (depth + 1) / 2, whole_pairs = depth / 2;
  const size_t panels = (outer + width - 1) / width;
  std::vector<uint32_t> packed(panels * pairs * width, 0);
  const auto element = [stored](size_t index) {
    uint16_t bits;
    std::memcpy(&bits, stored + 2 * index, 2);
    return uint32_t{bits};
  };
  for (size_t panel = 0; panel < panels; ++panel) {
    uint32_t* out = packed.data() + panel * pairs * width;
    const size_t first = panel * width, count = std::min(width, outer - first);
    if (outer_major) {  // X(o, p) at o * depth + p: a pair is one 32-bit word, halves swapped
      for (size_t o = 0; o < count; ++o) {
        const uint8_t* row = stored + (first + o) * depth * 2;
        for (size_t q = 0; q < whole_pairs; ++q) {
          uint32_t word;
          std::memcpy(&word, row + 4 * q, 4);
          out[q * width + o] = (word << 16) | (word >> 16);
        }
        if (depth % 2) out[whole_pairs * width + o] = element((first + o) * depth + depth - 1) << 16;
      }
    } else {  // X(o, p) at p * outer + o: two rows of the stored matrix make a row of pairs
      for (size_t q = 0; q < pairs; ++q) {
        const uint8_t* upper = stored + (2 * q * outer + first) * 2;
        const uint8_t* lower = upper + outer * 2;
        const bool has_lower = 2 * q + 1 < depth;
        uint32_t* row = out + q * width;
        for (size_t o = 0; o < count; ++o) {
          uint16_t hi, lo = 0;
          std::memcpy(&hi, upper + 2 * o, 2);
          if (has_lower) std::memcpy(&lo, lower + 2 * o, 2);
          row[o] = (uint32_t{hi} << 16) | lo;
        }
      }
    }
  }
  return packed;
}

// The smallest nonzero and the largest magnitude among count bf16 values, as
// bit patterns with the sign cleared (whose order is the magnitudes'; 0x7fff
// where none is nonzero); 16 at a time where the host has AVX2 (intrinsics:
// GCC's code for a generic vector of 32 took longer than packing the values).
void bf16_magnitudes_scalar(const uint8_t* values, size_t count, uint16_t* smallest, uint16_t* largest) {
  uint16_t lowest = 0x7fff, highest = 0;
  for (size_t i = 0; i < count; ++i) {
    uint16_t bits;
    std::memcpy(&bits, values + 2 * i, 2);
    bits &= 0x7fff;
    highest = std::max(highest, bits);
    if (bits != 0) lowest = std::min(lowest, bits);
  }
  *smallest = lowest, *largest = highest;
}
__attribute__((target("avx2"))) void bf16_magnitudes_avx2(const uint8_t* values, size_t count, uint16_t* smallest, uint16_t* largest) {
  const __m256i mask = _mm256_set1_epi16(0x7fff), zero = _mm256_setzero_si256();
  __m256i lo = mask, hi = zero;
  size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    const __m256i v = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(values + 2 * i)), mask);
    hi = _mm256_max_epu16(hi, v);
    lo = _mm256_min_epu16(lo, _mm256_or_si256(v, _mm256_and_si256(_mm256_cmpeq_epi16(v, zero), mask)));  // a zero counts as none
  }
  uint16_t lanes_lo[16], lanes_hi[16];
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes_lo), lo);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes_hi), hi);
  uint16_t tail_lo, tail_hi;
  bf16_magnitudes_scalar(values + 2 * i, count - i, &tail_lo, &tail_hi);
  for (size_t lane = 0; lane < 16; ++lane) tail_lo = std::min(tail_lo, lanes_lo[lane]), tail_hi = std::max(tail_hi, lanes_hi[lane]);
  *smallest = tail_lo, *largest = tail_hi;
}
void bf16_magnitudes(const uint8_t* values, size_t count, uint16_t* smallest, uint16_t* largest) {
  static const auto scan = __builtin_cpu_supports("avx2") ? bf16_magnitudes_avx2 : bf16_magnitudes_scalar;
  scan(values, count, smallest, largest);
}

// Whether the bf16 pair kernel gives the documented bits for A (m x k values)
// and B (k x n): no infinity, NaN or denormal among them, no product beyond
// f32's range, and every product a multiple of 2^-126 (see the top).
bool pairs_stay_normal(const uint8_t* a, size_t a_count, const uint8_t* b, size_t b_count) {
  uint16_t a_lo, a_hi, b_lo, b_hi;
  bf16_magnitudes(a, a_count, &a_lo, &a_hi);
  bf16_magnitudes(b, b_count, &b_lo, &b_hi);
  if (a_hi >= 0x7f80 || b_hi >= 0x7f80) return false;  // an infinity or a NaN
  if (a_hi == 0 || b_hi == 0) return true;              // every product is an exact zero
  if (a_lo < 0x0080 || b_lo < 0x0080) return false;     // a denormal input
  const auto widen = [](uint16_t h) { return double(isa::f32_from_bits(uint32_t(h) << 16)); };
  // The exponents of the smallest magnitudes; a bf16 value is a multiple of 2^(exponent - 7).
  const int a_exponent = (a_lo >> 7) - 127, b_exponent = (b_lo >> 7) - 127;
  return widen(a_hi) * widen(b_hi) < std::ldexp(1.0, 127) && a_exponent + b_exponent - 14 >= -126;
}

// The largest magnitude and the smallest nonzero one among count f32 values, as bit patterns with the
// sign cleared (their signed order is the magnitudes'; 0x7fffffff where none is nonzero). The scan runs
// over both operands of every tc.mm: 8 lanes at a time where the host has AVX2 (written with its
// intrinsics: GCC's code for a generic vector of 16 ints took longer here than the multiply itself).
void magnitude_bits_scalar(const float* values, size_t count, int32_t* lowest, int32_t* highest) {
  int32_t lo = 0x7fffffff, hi = 0;
  for (size_t i = 0; i < count; ++i) {
    const int32_t magnitude = int32_t(isa::f32_bits(values[i]) & 0x7fffffffu);
    hi = std::max(hi, magnitude);
    if (magnitude != 0) lo = std::min(lo, magnitude);
  }
  *lowest = lo, *highest = hi;
}
__attribute__((target("avx2"))) void magnitude_bits_avx2(const float* values, size_t count, int32_t* lowest, int32_t* highest) {
  const __m256i mask = _mm256_set1_epi32(0x7fffffff), zero = _mm256_setzero_si256();
  __m256i lo = mask, hi = zero;
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256i v = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(values + i)), mask);
    hi = _mm256_max_epi32(hi, v);
    lo = _mm256_min_epi32(lo, _mm256_or_si256(v, _mm256_and_si256(_mm256_cmpeq_epi32(v, zero), mask)));  // a zero counts as none
  }
  int32_t lanes_lo[8], lanes_hi[8];
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes_lo), lo);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes_hi), hi);
  int32_t tail_lo, tail_hi;
  magnitude_bits_scalar(values + i, count - i, &tail_lo, &tail_hi);
  for (size_t lane = 0; lane < 8; ++lane) tail_lo = std::min(tail_lo, lanes_lo[lane]), tail_hi = std::max(tail_hi, lanes_hi[lane]);
  *lowest = tail_lo, *highest = tail_hi;
}

MagnitudeBits magnitudes(const std::vector<float>& values) {
  static const auto scan = __builtin_cpu_supports("avx2") ? magnitude_bits_avx2 : magnitude_bits_scalar;
  MagnitudeBits bits;
  scan(values.data(), values.size(), &bits.lowest, &bits.highest);
  return bits;
}

// The same for count bf16 values: their f32 bits are theirs 16 places up.
MagnitudeBits bf16_magnitude_bits(const uint8_t* values, size_t count) {
  uint16_t lowest, highest;
  bf16_magnitudes(values, count, &lowest, &highest);
  MagnitudeBits bits;
  bits.highest = int32_t(highest) << 16;
  if (highest != 0) bits.lowest = int32_t(lowest) << 16;  // (else none is nonzero)
  return bits;
}

// Products of bf16 or f16 values carry at most 22 significant bits: exact in f32
// unless they leave its normal range (overflow, or underflow into subnormals).
bool products_exact(DType dtype, MagnitudeBits a, MagnitudeBits b) {
  if (dtype != DType::BF16 && dtype != DType::F16) return false;
  if (a.highest >= 0x7f800000 || b.highest >= 0x7f800000) return false;  // an infinity or a NaN
  if (a.highest == 0 || b.highest == 0) return true;  // every product is an exact zero
  const auto value = [](int32_t bits) { return double(isa::f32_from_bits(uint32_t(bits))); };
  return value(a.highest) * value(b.highest) < std::ldexp(1.0, 127) && value(a.lowest) * value(b.lowest) >= std::ldexp(1.0, -126);
}

// Whether the products of p's panels are exact is left to float_sums: pack
// runs where the simulator reads the scratchpad, the rest may run on another thread.
void pack(Problem& p, const uint8_t* a, const uint8_t* b) {
  const bool a_outer_major = (p.flags & isa::kTcTransposeA) == 0, b_outer_major = (p.flags & isa::kTcTransposeB) != 0;
  p.bf16_pairs = false, p.magnitudes_known = false;
  if (p.dtype == DType::BF16 && micro_kernel().bf16_pairs != nullptr && pairs_stay_normal(a, p.m * p.k, b, p.k * p.n)) {
    p.a_pairs = pack_pairs(kMr, a, p.m, p.k, a_outer_major);
    p.b_pairs = pack_pairs(micro_kernel().nr, b, p.n, p.k, b_outer_major);
    p.bf16_pairs = true;
    return;
  }
  pack_panels(kMr, p.dtype, a, p.m, p.k, a_outer_major, p.a_panels);
  pack_panels(micro_kernel().nr, p.dtype, b, p.n, p.k, b_outer_major, p.b_panels);
  if (p.dtype == DType::BF16) {  // (a scan of the bytes just read: cheaper than of the panels, later)
    p.a_magnitudes = bf16_magnitude_bits(a, p.m * p.k), p.b_magnitudes = bf16_magnitude_bits(b, p.k * p.n);
    p.magnitudes_known = true;
  }
}

// sums (m x n, row-major) += the products of k block [pc, pc + kc), k ascending,
// for the rows of row blocks [first_block, end_block) of kMc rows.
void multiply_rows(const Problem& p, size_t pc, size_t kc, float* sums, size_t first_block, size_t end_block) {
  const MicroKernel& kernel = micro_kernel();
  const size_t nr = kernel.nr;
  const KernelFunction run = p.exact_products ? kernel.exact_products : kernel.run;
  // The pair kernel takes k two steps at a time (kKc is even: only the last block can end in half a pair).
  const size_t depth = p.bf16_pairs ? (p.k + 1) / 2 : p.k, start = p.bf16_pairs ? pc / 2 : pc, steps = p.bf16_pairs ? (kc + 1) / 2 : kc;
  for (size_t ic = first_block * kMc; ic < std::min(p.m, end_block * kMc); ic += kMc) {
    const size_t i_end = std::min(p.m, ic + kMc);
    for (size_t j = 0; j < p.n; j += nr) {
      const size_t b_offset = (j / nr) * depth * nr + start * nr;
      for (size_t i = ic; i < i_end; i += kMr) {
        const size_t a_offset = (i / kMr) * depth * kMr + start * kMr;
        const size_t tile_rows = std::min(kMr, p.m - i);
        const size_t tile_cols = std::min(nr, p.n - j);
        float* c = sums + i * p.n + j;
        if (p.bf16_pairs) {
          const uint32_t *a_panel = p.a_pairs.data() + a_offset, *b_panel = p.b_pairs.data() + b_offset;
          if (tile_rows == kMr && tile_cols == nr)
            kernel.bf16_pairs(steps, a_panel, b_panel, c, p.n);
          else
            edge_kernel(kernel.bf16_pairs, nr, steps, a_panel, b_panel, c, p.n, tile_rows, tile_cols);
        } else {
          const float *a_panel = p.a_panels.data() + a_offset, *b_panel = p.b_panels.data() + b_offset;
          if (tile_rows == kMr && tile_cols == nr)
            run(kc, a_panel, b_panel, c, p.n);
          else
            edge_kernel(run, nr, kc, a_panel, b_panel, c, p.n, tile_rows, tile_cols);
        }
      }
    }
  }
}

// The same for all rows, on a second host thread too when the product is large
// enough to pay for one (each thread owns whole rows: the sums do not change).
void multiply_block(const Problem& p, size_t pc, size_t kc, float* sums) {
  const size_t blocks = (p.m + kMc - 1) / kMc;
  constexpr double kMacsPerThread = 4e6;
  if (blocks < 2 || double(p.m) * double(p.n) * double(kc) < 2 * kMacsPerThread || std::thread::hardware_concurrency() < 2) {
    multiply_rows(p, pc, kc, sums, 0, blocks);
    return;
  }
  const size_t half = blocks / 2;
  std::thread helper([&] { multiply_rows(p, pc, kc, sums, half, blocks); });
  multiply_rows(p, pc, kc, sums, 0, half);
  helper.join();
}

thread_local MatmulPath last_path = MatmulPath::ProductThenSum;

std::vector<float> float_sums(Problem& p) {
  if (!p.bf16_pairs && !p.magnitudes_known) p.a_magnitudes = magnitudes(p.a_panels), p.b_magnitudes = magnitudes(p.b_panels);
  p.exact_products = !p.bf16_pairs && products_exact(p.dtype, p.a_magnitudes, p.b_magnitudes);
  last_path = p.bf16_pairs ? MatmulPath::Bf16Pairs
              : p.exact_products && micro_kernel().exact_products != micro_kernel().run ? MatmulPath::FusedMultiplyAdd
                                                                                          : MatmulPath::ProductThenSum;
  std::vector<float> sums(p.m * p.n, 0.0f);
  for (size_t pc = 0; pc < p.k; pc += kKc) multiply_block(p, pc, std::min(kKc, p.k - pc), sums.data());
  return sums;
}

// Each k block's exact f32 sums, added up in i32 arithmetic (modulo 2^32).
std::vector<uint32_t> int8_sums(const Problem& p) {
  last_path = MatmulPath::ProductThenSum;  // (exact: the block sums stay within f32's integers)
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

MatmulPath last_matmul_path() { return last_path; }

bool use_matmul_isa(MatmulIsa isa) {
  const bool supported = host_has(isa);
  if (supported) current_kernel() = kernel_for(isa);
  return supported;
}

namespace {

// Packed operands are reused, from any thread: a product's panels are often as
// large as glibc's threshold for mapping fresh pages, and mapping and zeroing
// them for every tc.mm took longer than packing them.
std::shared_ptr<PackedMatmul> reused_packed_matmul() {
  static std::mutex* const mutex = new std::mutex;  // (never destroyed: a packing may outlive static destructors)
  static auto* const unused = new std::vector<std::unique_ptr<PackedMatmul>>;
  constexpr size_t kMaxUnused = 32, kMaxKeptBytes = size_t{1} << 22;
  std::unique_ptr<PackedMatmul> packed;
  {
    std::lock_guard<std::mutex> lock(*mutex);
    if (!unused->empty()) packed = std::move(unused->back()), unused->pop_back();
  }
  if (!packed) packed = std::make_unique<PackedMatmul>();
  return std::shared_ptr<PackedMatmul>(packed.release(), [](PackedMatmul* done) {
    const size_t bytes = (done->a_panels.capacity() + done->b_panels.capacity()) * sizeof(float) +
                         (done->a_pairs.capacity() + done->b_pairs.capacity()) * sizeof(uint32_t) +
                         done->float_sums.capacity() * sizeof(float) + done->int_sums.capacity() * sizeof(uint32_t);
    std::unique_ptr<PackedMatmul> owned(done);
    std::lock_guard<std::mutex> lock(*mutex);
    if (unused->size() < kMaxUnused && bytes <= kMaxKeptBytes) unused->push_back(std::move(owned));
  });
}

}  // namespace

KernelError pack_matmul(DType dtype, uint32_t flags, const uint8_t* a, const uint8_t* b, uint64_t m, uint64_t n, uint64_t k,
                        std::shared_ptr<PackedMatmul>* packed) {
  if (dtype != DType::F32 && dtype != DType::BF16 && dtype != DType::F16 && dtype != DType::I8)
    return "tc.mm does not support " + std::string(isa::dtype_name(dtype));
  std::shared_ptr<PackedMatmul> problem = reused_packed_matmul();
  problem->dtype = dtype, problem->flags = flags, problem->m = m, problem->n = n, problem->k = k;
  problem->summed = false;
  pack(*problem, a, b);
  *packed = std::move(problem);
  return std::nullopt;
}

void sum_packed(PackedMatmul& packed) {
  if (packed.summed) return;
  if (packed.dtype == DType::I8)
    packed.int_sums = int8_sums(packed);
  else
    packed.float_sums = float_sums(packed);
  packed.summed = true;
}

void multiply_packed(PackedMatmul& packed, uint8_t* acc) {
  sum_packed(packed);
  if (packed.dtype == DType::I8)
    accumulate(packed.flags, acc, packed.int_sums);
  else
    accumulate(packed.flags, acc, packed.float_sums);
}

KernelError tensor_matmul(DType dtype, uint32_t flags, uint8_t* acc, const uint8_t* a, const uint8_t* b, uint64_t m, uint64_t n,
                          uint64_t k) {
  // A and B are fully packed before acc is written, so acc may alias them.
  std::shared_ptr<PackedMatmul> packed;
  if (auto error = pack_matmul(dtype, flags, a, b, m, n, k, &packed)) return error;
  multiply_packed(*packed, acc);
  return std::nullopt;
}

}  // namespace npu::sim::functional
