// nonzero and masked_select on the npu: nonzero_positions (nonzero.h), then the coordinates of each
// position by integer division on the chip (nonzero), or the elements gathered by the gather kernel
// (masked_select). Beyond 2^24 element-rounds, empty and f64 inputs: the CPU, counted.
#include "PrivateUse1NativeFunctions.h"
#include "nonzero.h"

#include <ATen/ExpandUtils.h>
#include <ATen/Functions.h>
#include <torch/library.h>

#include <vector>

#include "cpu_fallback.h"
#include "kernel_launch.h"

namespace npusim {

at::Tensor nonzero_positions(const at::Tensor& self) {
  const int64_t n = self.numel();
  if (n == 0 || n >= (int64_t{1} << 24) || !on_npu(self) || !(chip_dtype(self.scalar_type()) || self.scalar_type() == at::kLong)) return at::Tensor();
  const at::Tensor mask = at::ne(self.reshape({-1}), 0).to(at::kFloat);
  const int64_t count = at::sum(mask).cpu().item<int64_t>();  // exact: below 2^24
  if (count == 0) return at::empty({0}, self.options().dtype(at::kLong));
  if (count > (int64_t{1} << 24) / n) return at::Tensor();
  return std::get<1>(at::topk(mask, count, 0, /*largest=*/true, /*sorted=*/true));
}

at::Tensor NpuNativeFunctions::nonzero(const at::Tensor& self) {
  const at::Tensor flat = nonzero_positions(self);
  if (!flat.defined()) {
    return fall_back<at::_ops::nonzero>("more than 2^24 element-rounds, or an empty or f64 input", self);
  }
  if (self.dim() == 0 || flat.numel() == 0) return at::empty({flat.numel(), self.dim()}, flat.options());
  // Coordinates from the last dim outward: position % size, then position // size.
  std::vector<at::Tensor> coordinates(size_t(self.dim()));
  at::Tensor rest = flat;
  for (int64_t d = self.dim() - 1; d >= 0; --d) {
    coordinates[size_t(d)] = d == 0 ? rest : at::remainder(rest, self.size(d));
    if (d > 0) rest = at::floor_divide(rest, self.size(d));
  }
  return at::stack(coordinates, 1);
}

at::Tensor NpuNativeFunctions::masked_select(const at::Tensor& self, const at::Tensor& mask) {
  const std::vector<int64_t> shape = at::infer_size(self.sizes(), mask.sizes());
  const at::Tensor flat = on_npu(self) && self.numel() > 0 ? nonzero_positions(mask.expand(shape)) : at::Tensor();
  if (!flat.defined()) {
    return fall_back<at::_ops::masked_select>("more than 2^24 element-rounds, or an empty or f64 input", self, mask);
  }
  return at::index_select(self.expand(shape).reshape({-1}), 0, flat);
}

}  // namespace npusim
