// tril and triu on the npu: the select kernel keeps the elements on the kept
// side of the diagonal (column - row <= diagonal for tril, >= for triu; the
// positions from the iota kernel, compared as i32) and writes zeros elsewhere,
// over any batch dims. Every chip dtype (bool masks included); int64 and f64
// go to the CPU, counted.
// tril_indices and triu_indices are computed on the host from the sizes alone
// (no tensor data: ATen's counting formulas) and copied to the device once.
#include <ATen/Functions.h>
#include <torch/library.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "PrivateUse1NativeFunctions.h"
#include "cpu_fallback.h"
#include "kernel_launch.h"

namespace npusim {
namespace {

at::Tensor triangle(const at::Tensor& x, int64_t diagonal, bool lower) {
  if (!on_npu(x) || x.dim() < 2 || x.numel() == 0 || !chip_dtype(x.scalar_type())) {
    const char* reason = "not a non-empty matrix of a chip dtype (int64 and f64 are not)";
    return lower ? fall_back<at::_ops::tril>(reason, x, diagonal) : fall_back<at::_ops::triu>(reason, x, diagonal);
  }
  const at::TensorOptions positions = at::TensorOptions().dtype(at::kInt).device(x.device());
  const int64_t rows = x.size(-2), cols = x.size(-1);
  const at::Tensor offset = at::sub(at::arange(cols, positions).view({1, cols}), at::arange(rows, positions).view({rows, 1}));
  // (a diagonal beyond the matrix keeps all or nothing: clamped into i32's range)
  const int64_t bound = std::clamp<int64_t>(diagonal, -cols - rows, cols + rows);
  const at::Tensor keep = lower ? at::le(offset, bound) : at::ge(offset, bound);
  return at::where(keep, x, at::zeros({}, x.options().device(at::kCPU)));
}

}  // namespace

at::Tensor NpuNativeFunctions::tril(const at::Tensor& x, int64_t diagonal) { return triangle(x, diagonal, true); }
at::Tensor NpuNativeFunctions::triu(const at::Tensor& x, int64_t diagonal) { return triangle(x, diagonal, false); }

namespace {

// The [2, K] (row, column) coordinates of the kept triangle of a rows x cols matrix, row by row.
at::Tensor triangle_indices(int64_t rows, int64_t cols, int64_t offset, bool lower, std::optional<at::ScalarType> dtype) {
  TORCH_CHECK(rows >= 0 && cols >= 0, "row and col must be non-negative");
  std::vector<int64_t> r, c;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      if (lower ? j - i <= offset : j - i >= offset) r.push_back(i), c.push_back(j);
  const int64_t k = int64_t(r.size());
  at::Tensor host = at::empty({2, k}, at::TensorOptions().dtype(at::kLong));
  std::copy(r.begin(), r.end(), host.data_ptr<int64_t>());
  std::copy(c.begin(), c.end(), host.data_ptr<int64_t>() + k);
  return to_npu(host.to(dtype.value_or(at::kLong)));
}
}  // namespace

at::Tensor NpuNativeFunctions::tril_indices(int64_t rows, int64_t cols, int64_t offset, std::optional<at::ScalarType> dtype,
                                            std::optional<at::Layout>, std::optional<at::Device>, std::optional<bool>) {
  return triangle_indices(rows, cols, offset, true, dtype);
}
at::Tensor NpuNativeFunctions::triu_indices(int64_t rows, int64_t cols, int64_t offset, std::optional<at::ScalarType> dtype,
                                            std::optional<at::Layout>, std::optional<at::Device>, std::optional<bool>) {
  return triangle_indices(rows, cols, offset, false, dtype);
}

}  // namespace npusim
