// v.cvt. Any conversion that involves a float goes through f32, which is exact
// for every source except i32, and i32 -> f32 -> bf16/f16 rounds twice exactly
// as torch's .to() does. Float to integer truncates and saturates (NaN gives
// 0) in store_f32_n; integer to integer wraps.
#include <algorithm>
#include <vector>

#include "functional/elements.h"
#include "functional/kernels.h"
#include "functional/support.h"
#include "npusim/isa/dtype.h"

namespace npu::sim::functional {

void vector_convert(isa::DType dst_dtype, isa::DType src_dtype, uint8_t* dst, const uint8_t* src, uint64_t rows,
                    uint64_t cols) {
  const size_t count = rows * cols;
  const size_t dst_size = isa::dtype_size_bytes(dst_dtype);
  const size_t src_size = isa::dtype_size_bytes(src_dtype);
  // Chunks run forward, so in place is safe unless a dst element reaches
  // past the source elements already read, i.e. when widening.
  std::vector<uint8_t> scratch;
  if (dst_size > src_size) src = stable_source(dst, count * dst_size, src, count * src_size, scratch);

  const bool via_float = isa::dtype_is_float(dst_dtype) || isa::dtype_is_float(src_dtype);
  float floats[kChunk];
  int64_t ints[kChunk];
  for (size_t start = 0; start < count; start += kChunk) {
    const size_t n = std::min(kChunk, count - start);
    if (via_float) {
      load_f32_n(src_dtype, src + start * src_size, n, floats);
      store_f32_n(dst_dtype, dst + start * dst_size, n, floats);
    } else {
      load_int_n(src_dtype, src + start * src_size, n, ints);
      store_int_n(dst_dtype, dst + start * dst_size, n, ints);
    }
  }
}

}  // namespace npu::sim::functional
