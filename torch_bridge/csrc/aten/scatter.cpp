// Scatters on the npu (scatter_add, so gather's backward; index_add; scatter). The
// chip has no atomic add, and cores adding into the same row would race, so
// each is made of kernels that write every output element once:
//   scatter_add  with the dim moved last, x [..., V], index and src [..., k]:
//                out[..., v] = x[..., v] + sum over j of (index[..., j] == v ?
//                src[..., j] : 0), the [..., V, k] products by a comparison and
//                a select, their sum by a row kernel, in f32
//   index_add    one index [k] for every row: the one-hot [k, V] of the index
//                (0 / 1, exact in every dtype), and out = x + alpha * src @
//                one-hot on the tensor core, summed in f32
// rounded once to x's dtype (the CPU adds in x's dtype one source element at a
// time: equal where no index repeats, within rounding where one does).
//   scatter      (a value or a source, no reduction; so F.one_hot) the same
//                [..., V, k] comparisons: with a value, any hit along k selects
//                it; with a source, the last hit's position j (a row maximum of
//                (j + 1) where hit, 0 where not: i32, exact) picks src[..., j]
//                by the gather kernel, so a repeated index takes the last of its
//                sources, as the CPU's sequential loop does. Exact in every
//                dtype the select kernel takes (int64 values: their words).
// The
// one-hot terms cost k x V per row: beyond 2^24 of them (a scatter of a whole
// vocabulary-sized dim onto itself) the CPU does it, counted. An index outside
// [0, V) raises an IndexError, as on the CPU (checked on the chip first).
#include <ATen/Functions.h>
#include <torch/library.h>

#include "PrivateUse1NativeFunctions.h"
#include "cpu_fallback.h"
#include "kernel_launch.h"

namespace npusim {
namespace {

constexpr int64_t kMaxOneHotTerms = int64_t{1} << 24;

at::Tensor positions(int64_t count) { return to_npu(at::arange(count, at::TensorOptions().dtype(at::kInt))); }

bool integer_index(const at::Tensor& index) { return on_npu(index) && (index.scalar_type() == at::kLong || index.scalar_type() == at::kInt); }

}  // namespace

at::Tensor& NpuNativeFunctions::scatter_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                                                at::Tensor& out) {
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  // Along the other dims the index covers all of x (gather's backward: the index has the gradient's
  // shape); src may be larger than the index (only the index's part of it is read, as on the CPU).
  bool supported = chip_float(self) && chip_float(src) && src.scalar_type() == self.scalar_type() && integer_index(index) &&
                   self.dim() >= 1 && index.dim() == self.dim() && src.dim() == self.dim() && index.numel() > 0;
  for (int64_t k = 0; supported && k < self.dim(); ++k)
    supported = (k == d || index.size(k) == self.size(k)) && index.size(k) <= src.size(k);
  supported = supported && index.numel() <= kMaxOneHotTerms / std::max<int64_t>(self.size(d), 1);
  if (!supported) {
    return fall_back<at::_ops::scatter_add_out>("not chip floats of one dtype with an integer index, or beyond 2^24 one-hot terms", self, dim,
                                                index, src, out);
  }
  check_index_range(index, self.size(d), "scatter_add");
  at::Tensor part = src;
  for (int64_t k = 0; k < self.dim(); ++k) part = part.narrow(k, 0, index.size(k));
  // [..., 1, k] against [V, 1]: the products [..., V, k], summed along k (the last dim: rows).
  const at::Tensor i = index_words(index).movedim(d, -1).unsqueeze(-2);
  const at::Tensor values = as_f32(part).movedim(d, -1).unsqueeze(-2);
  const at::Tensor hits = at::eq(i, positions(self.size(d)).view({-1, 1}));
  const at::Tensor sums = at::where(hits, values, at::zeros({}, values.options())).sum(-1);
  const at::Tensor result = at::add(as_f32(self).movedim(d, -1), sums).movedim(-1, d);
  return into(result.scalar_type() == self.scalar_type() ? result : result.to(self.scalar_type()), out);
}

at::Tensor& NpuNativeFunctions::index_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                                              const at::Scalar& alpha, at::Tensor& out) {
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  const int64_t count = index.numel();
  const bool supported = chip_float(self) && chip_float(source) && source.scalar_type() == self.scalar_type() && integer_index(index) &&
                         index.dim() <= 1 && self.dim() >= 1 && source.dim() == self.dim() && count > 0 && source.size(d) == count &&
                         count <= kMaxOneHotTerms / std::max<int64_t>(self.size(d), 1);
  if (!supported) {
    return fall_back<at::_ops::index_add_out>("not chip floats of one dtype with a 1-D integer index, or beyond 2^24 one-hot terms", self,
                                              dim, index, source, alpha, out);
  }
  check_index_range(index, self.size(d), "index_add");
  // one_hot[j, v] = (index[j] == v), in the source's dtype (0 and 1 are exact).
  const at::Tensor one_hot = at::eq(index_words(index).reshape({count, 1}), positions(self.size(d)).view({1, -1})).to(source.scalar_type());
  const at::Tensor added = at::matmul(source.movedim(d, -1), one_hot);  // [..., V]: each column the sum of its sources
  const at::Tensor result = at::add(as_f32(self), as_f32(added).movedim(-1, d), alpha);
  return into(result.scalar_type() == self.scalar_type() ? result : result.to(self.scalar_type()), out);
}

namespace {

// Where scatter's chip path applies: the index covers self along every other dim (as for scatter_add).
bool scatter_on_chip(const at::Tensor& self, int64_t d, const at::Tensor& index, const at::Tensor* src) {
  bool supported = on_npu(self) && integer_index(index) && self.dim() >= 1 && index.dim() == self.dim() && index.numel() > 0 &&
                   (chip_dtype(self.scalar_type()) || (self.scalar_type() == at::kLong && !src)) &&
                   index.numel() <= kMaxOneHotTerms / std::max<int64_t>(self.size(d), 1);
  if (src) supported = supported && on_npu(*src) && src->scalar_type() == self.scalar_type() && src->dim() == self.dim();
  for (int64_t k = 0; supported && k < self.dim(); ++k)
    supported = (k == d || index.size(k) == self.size(k)) && (!src || index.size(k) <= src->size(k));
  return supported;
}

// Whether each position v along the (last) dim is hit: [..., V, k], index [..., 1, k] against v.
at::Tensor hits_of(const at::Tensor& index, int64_t d, int64_t size) {
  return at::eq(index_words(index).movedim(d, -1).unsqueeze(-2), positions(size).view({-1, 1}));
}

}  // namespace

at::Tensor NpuNativeFunctions::scatter(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Scalar& value) {
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  if (!scatter_on_chip(self, d, index, nullptr)) {
    return fall_back<at::_ops::scatter_value>("", self, dim, index, value);
  }
  check_index_range(index, self.size(d), "scatter");
  const at::Tensor hit = at::any(hits_of(index, d, self.size(d)), -1).movedim(-1, d);
  return at::where(hit, at::scalar_tensor(value, self.options().device(at::kCPU)), self);
}

at::Tensor NpuNativeFunctions::scatter(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src) {
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  if (!scatter_on_chip(self, d, index, &src)) {
    return fall_back<at::_ops::scatter_src>("", self, dim, index, src);
  }
  check_index_range(index, self.size(d), "scatter");
  const int64_t k = index.size(d);
  // The last source position j hitting each v, as j + 1 (0: none).
  const at::Tensor order = at::add(positions(k), 1);
  const at::Tensor last = at::amax(at::where(hits_of(index, d, self.size(d)), order, at::zeros({}, at::TensorOptions().dtype(at::kInt))), {-1});
  at::Tensor part = src;
  for (int64_t i = 0; i < self.dim(); ++i) part = part.narrow(i, 0, index.size(i));
  const at::Tensor picked = at::gather(part.movedim(d, -1), -1, at::relu(at::sub(last, 1)));
  return at::where(at::gt(last, 0), picked, self.movedim(d, -1)).movedim(-1, d);
}

}  // namespace npusim
