// Advanced indexing after dims taken whole (x[..., i, :], x[:, i], and their index_put_): the
// indexed block of dims moved first as a view, so that the kernels for indices on the leading dims
// apply. PyTorch keeps the index's dims where the block was, which the caller restores.
#pragma once

#include <ATen/core/List.h>
#include <ATen/core/Tensor.h>

#include <optional>
#include <vector>

namespace npusim {

struct LeadingSlices {
  LeadingSlices(const at::Tensor& x, int64_t first, int64_t end, const c10::List<std::optional<at::Tensor>>& indices);
  at::Tensor self;                                  // x with dims [first, end) moved first (a view)
  c10::List<std::optional<at::Tensor>> block;       // their index tensors
  int64_t leading;                                  // how many dims came before them
};

// The index tensors with those on the CPU moved to the npu (as a CUDA tensor may be indexed with CPU ones:
// a relative position index built in forward, BEiT's).
c10::List<std::optional<at::Tensor>> indices_on_npu(const c10::List<std::optional<at::Tensor>>& indices);

// Where indices are absent for the first dims, given (integer tensors) for a block after them and absent after it.
std::optional<LeadingSlices> leading_slices(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices);

}  // namespace npusim
