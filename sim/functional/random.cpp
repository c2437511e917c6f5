// v.rand: a counter-based generator, so that any element of any launch can be
// recomputed from (seed, counter) alone: the driver side only keeps a seed
// and an offset, as PyTorch's CUDA generator does.
#include <cstring>

#include "functional/kernels.h"
#include "functional/support.h"
#include "npusim/isa/dtype.h"

namespace npu::sim::functional {
namespace {

constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;    // Philox multipliers
constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;  // key schedule (golden ratio, sqrt(3) - 1)

struct Words {
  uint32_t w[4];
};

Words philox4x32_10(uint32_t k0, uint32_t k1, Words c) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) k0 += kWeyl0, k1 += kWeyl1;
    const uint64_t p0 = uint64_t{kMul0} * c.w[0], p1 = uint64_t{kMul1} * c.w[2];
    c = Words{{static_cast<uint32_t>(p1 >> 32) ^ c.w[1] ^ k0, static_cast<uint32_t>(p1), static_cast<uint32_t>(p0 >> 32) ^ c.w[3] ^ k1,
               static_cast<uint32_t>(p0)}};
  }
  return c;
}

}  // namespace

uint32_t philox4x32_10_word0(uint64_t key, uint64_t counter) {
  const Words c{{static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32), 0, 0}};
  return philox4x32_10(static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32), c).w[0];
}

void vector_rand(isa::DType dtype, uint8_t* dst, uint64_t seed, uint64_t ctr, uint64_t rows, uint64_t cols) {
  const uint64_t count = rows * cols;
  const size_t size = isa::dtype_size_bytes(dtype);
  const bool is_float = isa::dtype_is_float(dtype);
  // The uniform float's bits: as many as the format holds exactly in [0, 1).
  const int digits = dtype == isa::DType::F32 ? 24 : dtype == isa::DType::F16 ? 11 : 8;
  const float unit = 1.0f / static_cast<float>(uint32_t{1} << digits);
  for (uint64_t i = 0; i < count; ++i) {
    const uint32_t bits = philox4x32_10_word0(seed, ctr + i);
    uint8_t element[4];
    if (is_float)
      store_f32(dtype, element, static_cast<float>(bits >> (32 - digits)) * unit);  // exact: no rounding happens
    else
      store_int(dtype, element, static_cast<int64_t>(static_cast<int32_t>(bits)));
    std::memcpy(dst + i * size, element, size);
  }
}

}  // namespace npu::sim::functional
