#include "leading_slices.h"

#include <ATen/Functions.h>

#include "kernel_launch.h"

namespace npusim {

LeadingSlices::LeadingSlices(const at::Tensor& x, int64_t first, int64_t end, const c10::List<std::optional<at::Tensor>>& indices)
    : leading(first) {
  std::vector<int64_t> from, to;
  for (int64_t d = first; d < end; ++d) from.push_back(d), to.push_back(d - first), block.push_back(indices.get(size_t(d)));
  self = x.movedim(from, to);
}

c10::List<std::optional<at::Tensor>> indices_on_npu(const c10::List<std::optional<at::Tensor>>& indices) {
  c10::List<std::optional<at::Tensor>> moved;
  for (const std::optional<at::Tensor>& i : indices)
    moved.push_back(i && i->defined() && !on_npu(*i) ? std::optional<at::Tensor>(to_npu(*i)) : i);
  return moved;
}

std::optional<LeadingSlices> leading_slices(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices) {
  const int64_t k = int64_t(indices.size());
  const auto given = [&](int64_t d) {
    const std::optional<at::Tensor> i = indices.get(size_t(d));
    return i && i->defined();
  };
  int64_t first = 0;
  while (first < k && !given(first)) ++first;
  int64_t end = first;
  while (end < k && given(end)) ++end;
  for (int64_t d = end; d < k; ++d)
    if (given(d)) return std::nullopt;  // indices apart: their dims go first in the result (the CPU's)
  if (first == 0 || end == first || end > self.dim()) return std::nullopt;
  for (int64_t d = first; d < end; ++d) {  // (a bool mask indexes as many dims as it has: not one per entry)
    const at::ScalarType t = indices.get(size_t(d))->scalar_type();
    if (t != at::kLong && t != at::kInt) return std::nullopt;
  }
  return LeadingSlices(self, first, end, indices);
}

}  // namespace npusim
