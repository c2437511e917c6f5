// Indexed writes on the npu: x[mask] = v, x[i, j] = v and x[i] += v (index_put_, which
// torch.Tensor.__setitem__ and index_put reach), and index_copy along any dim (the dim moved
// first as a view). Every output element is written once, in place:
//   a bool mask over x's leading dims with one value    where(mask, v, x)
//   integer index tensors on the leading dims           the flat row f[j] of each indexed element
//     (broadcast together, negatives wrapped, each checked against its dim: an IndexError as on
//     the CPU); then each row r of x viewed as [R, rest] takes the values of the last j with
//     f[j] == r (a row maximum of (j + 1) where they are equal, an [R, n] comparison: i32,
//     exact), gathered by the gather kernel, so a repeated index writes its last value as the
//     CPU's loop does; with accumulate, index_add of the values' rows (f32 sums, rounded once)
// Built on them:
//   index_fill(dim, index, v)    where(position along dim is among the indices, v, x): an [size, n]
//                                comparison and a row any, exact
//   masked_scatter(mask, source) the mask's flat positions (nonzero.h: its count read back), then
//                                x.view(-1)[positions] = source's first count elements, as above
// Dims before the indexed ones (x[..., i, :] = v, and so x[..., i, :]'s gradient) are moved after
// them in a view of x first (leading_slices.h). Beyond 2^24 comparisons (R x n), other index forms
// (None or slices between indices, masks with several values) and dtypes the kernels do not take:
// the CPU, counted.
#include <ATen/ExpandUtils.h>
#include <ATen/Functions.h>
#include <c10/util/accumulate.h>
#include <torch/library.h>

#include <vector>

#include "PrivateUse1NativeFunctions.h"
#include "cpu_fallback.h"
#include "kernel_launch.h"
#include "leading_slices.h"
#include "nonzero.h"

namespace npusim {
namespace {

constexpr int64_t kMaxComparisons = int64_t{1} << 24;

// The one bool (or uint8) mask over x's leading dims, where that is the index.
std::optional<at::Tensor> leading_mask(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices) {
  if (indices.size() != 1) return std::nullopt;
  const std::optional<at::Tensor> mask = indices.get(0);
  if (!mask || !mask->defined() || !on_npu(*mask) || (mask->scalar_type() != at::kBool && mask->scalar_type() != at::kByte)) return std::nullopt;
  if (mask->dim() > self.dim() || mask->sizes() != self.sizes().slice(0, size_t(mask->dim()))) return std::nullopt;
  return mask;
}

}  // namespace

at::Tensor& NpuNativeFunctions::_index_put_impl_(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& given,
                                                 const at::Tensor& values, bool accumulate, bool unsafe) {
  if (!on_npu(self) || self.numel() == 0 || !(chip_dtype(self.scalar_type()) || self.scalar_type() == at::kLong))
    return fall_back<at::_ops::_index_put_impl_>("not a non-empty tensor of a chip dtype or int64 on the npu", self, given, values, accumulate, unsafe);
  const c10::List<std::optional<at::Tensor>> indices = indices_on_npu(given);
  if (const std::optional<at::Tensor> mask = leading_mask(self, indices); mask && !accumulate && values.numel() == 1) {
    std::vector<int64_t> shape(mask->sizes().begin(), mask->sizes().end());
    shape.resize(size_t(self.dim()), 1);  // over the trailing dims too
    const at::Tensor value = values.reshape({}).to(self.scalar_type());
    self.copy_(at::where(mask->to(at::kBool).view(shape), on_npu(value) ? value : to_npu(value), self));
    return self;
  }
  if (const std::optional<LeadingSlices> moved = leading_slices(self, indices)) {
    // x[..., i, :] = v (and the gradient of x[..., i, :]): the indexed dims moved first in a view of x,
    // the values' index dims with them.
    std::vector<int64_t> index_shape;
    for (const std::optional<at::Tensor>& i : moved->block) index_shape = at::infer_size(index_shape, i->sizes());
    std::vector<int64_t> full(self.sizes().begin(), self.sizes().begin() + moved->leading);
    full.insert(full.end(), index_shape.begin(), index_shape.end());
    full.insert(full.end(), self.sizes().begin() + moved->leading + int64_t(moved->block.size()), self.sizes().end());
    if (at::is_expandable_to(values.sizes(), full)) {
      const int64_t index_dims = int64_t(index_shape.size());
      std::vector<int64_t> from(static_cast<size_t>(index_dims)), to(static_cast<size_t>(index_dims));
      for (int64_t d = 0; d < index_dims; ++d) from[size_t(d)] = moved->leading + d, to[size_t(d)] = d;
      at::Tensor target = moved->self;
      NpuNativeFunctions::_index_put_impl_(target, moved->block, to_npu(values).expand(full).movedim(from, to), accumulate, unsafe);
      return self;
    }
  }
  // Integer index tensors on the leading dims, none missing.
  const int64_t k = int64_t(indices.size());
  bool supported = k >= 1 && k <= self.dim() && self.numel() < (int64_t{1} << 31);
  std::vector<at::Tensor> index;
  for (int64_t d = 0; supported && d < k; ++d) {
    const std::optional<at::Tensor> i = indices.get(size_t(d));
    supported = i && i->defined() && on_npu(*i) && (i->scalar_type() == at::kLong || i->scalar_type() == at::kInt) && i->numel() > 0;
    if (supported) index.push_back(*i);
  }
  if (!supported)
    return fall_back<at::_ops::_index_put_impl_>("indices not integer npu tensors on the leading dims", self, given, values, accumulate, unsafe);
  std::vector<int64_t> index_shape = index[0].sizes().vec();
  for (const at::Tensor& i : index) index_shape = at::infer_size(index_shape, i.sizes());
  const int64_t n = c10::multiply_integers(index_shape), rows = c10::multiply_integers(self.sizes().slice(0, size_t(k)));
  const std::vector<int64_t> rest(self.sizes().begin() + k, self.sizes().end());
  std::vector<int64_t> values_shape = index_shape;
  values_shape.insert(values_shape.end(), rest.begin(), rest.end());
  const bool values_fit = at::is_expandable_to(values.sizes(), values_shape);
  if (!values_fit || rows * n > kMaxComparisons || (accumulate && !chip_float(self)))
    return fall_back<at::_ops::_index_put_impl_>("values not expandable to the indexed rows, beyond 2^24 comparisons, or accumulating into a non-float",
                                                 self, given, values, accumulate, unsafe);

  // The flat row of each indexed element, in i32.
  at::Tensor flat;
  for (int64_t d = 0; d < k; ++d) {
    at::Tensor i = index_words(index[size_t(d)]);
    i = at::where(at::lt(i, 0), at::add(i, self.size(d)), i);
    check_index_range(i, self.size(d), "index_put_");
    flat = d == 0 ? i : at::add(at::mul(flat, self.size(d)), i);
  }
  flat = flat.expand(index_shape).reshape({n});
  std::vector<int64_t> row_shape = {n};
  row_shape.insert(row_shape.end(), rest.begin(), rest.end());
  const at::Tensor source = to_npu(values).to(self.scalar_type()).expand(values_shape).contiguous().view(row_shape);
  std::vector<int64_t> table_shape = {rows};
  table_shape.insert(table_shape.end(), rest.begin(), rest.end());
  if (accumulate) {
    self.copy_(at::index_add(self.reshape(table_shape), 0, flat, source).view(self.sizes()));
    return self;
  }
  const at::TensorOptions ints = at::TensorOptions().dtype(at::kInt);
  const at::Tensor positions = to_npu(at::arange(rows, ints)).view({rows, 1}), order = to_npu(at::arange(1, n + 1, ints)).view({1, n});
  const at::Tensor last = at::amax(at::where(at::eq(flat.view({1, n}), positions), order, at::zeros({}, ints)), {1});  // [R]: j + 1, or 0
  const at::Tensor picked = at::index_select(source, 0, at::relu(at::sub(last, 1)));
  std::vector<int64_t> written_shape(table_shape.size(), 1);
  written_shape[0] = rows;
  self.copy_(at::where(at::gt(last, 0).view(written_shape), picked, self.reshape(table_shape)).view(self.sizes()));
  return self;
}

// index_copy (so index_copy_: a static KV cache's writes): the indexed dim moved first as a view,
// then the write above, into out (self's copy unless out is self).
at::Tensor& NpuNativeFunctions::index_copy_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                                               at::Tensor& out) {
  if (!out.is_same(self)) into(self, out);
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_copy_(): Index should have dimension 1 or 0 (got ", index.dim(), ")");
  TORCH_CHECK(source.dim() == 0 || source.size(source.dim() == self.dim() ? d : 0) == index.numel(),
              "index_copy_(): Number of indices (", index.numel(), ") should be equal to source.size(dim)");
  at::Tensor target = self.dim() == 0 ? out.view({1}) : out.movedim(d, 0);
  const at::Tensor rows = source.dim() == self.dim() && self.dim() > 0 ? source.movedim(d, 0) : source;
  c10::List<std::optional<at::Tensor>> indices;
  indices.push_back(index.reshape({-1}));
  NpuNativeFunctions::_index_put_impl_(target, indices, rows, false, false);
  return out;
}

// index_fill: out (self's copy unless out is self) with the value where the position along dim is indexed.
at::Tensor& NpuNativeFunctions::index_fill_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& value,
                                               at::Tensor& out) {
  TORCH_CHECK(value.dim() == 0, "index_fill_ only supports a 0-dimensional value tensor, but got tensor with ", value.dim(), " dimension(s).");
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_fill_(): Index is supposed to be a vector");
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  const int64_t size = self.dim() == 0 ? 1 : self.size(d), n = index.numel();
  const bool supported = on_npu(self) && on_npu(index) && (chip_dtype(self.scalar_type()) || self.scalar_type() == at::kLong) &&
                         (index.scalar_type() == at::kLong || index.scalar_type() == at::kInt) && size * n <= kMaxComparisons;
  if (!supported) {
    return fall_back<at::_ops::index_fill_int_Tensor_out>("not chip dtypes on the npu, or beyond 2^24 comparisons", self, dim, index, value, out);
  }
  if (!out.is_same(self)) into(self, out);
  if (n == 0 || self.numel() == 0) return out;
  at::Tensor i = index_words(index.reshape({n}));
  i = at::where(at::lt(i, 0), at::add(i, size), i);
  check_index_range(i, size, "index_fill_");
  const at::Tensor positions = to_npu(at::arange(size, at::TensorOptions().dtype(at::kInt))).view({size, 1});
  std::vector<int64_t> shape(size_t(std::max<int64_t>(self.dim(), 1)), 1);
  shape[size_t(d)] = size;
  const at::Tensor filled = at::any(at::eq(positions, i.view({1, n})), 1).view(shape);
  const at::Tensor v = to_npu(value.to(self.scalar_type()));
  out.copy_(at::where(self.dim() == 0 ? filled.view(c10::IntArrayRef{}) : filled, v, out));
  return out;
}
at::Tensor& NpuNativeFunctions::index_fill_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Scalar& value,
                                               at::Tensor& out) {
  return NpuNativeFunctions::index_fill_out(self, dim, index, at::scalar_tensor(value, at::TensorOptions().dtype(self.scalar_type())), out);
}
at::Tensor NpuNativeFunctions::index_fill(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& value) {
  at::Tensor out = new_npu(self.sizes(), self.scalar_type());
  return NpuNativeFunctions::index_fill_out(self, dim, index, value, out);
}
at::Tensor NpuNativeFunctions::index_fill(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Scalar& value) {
  at::Tensor out = new_npu(self.sizes(), self.scalar_type());
  return NpuNativeFunctions::index_fill_out(self, dim, index, value, out);
}
at::Tensor& NpuNativeFunctions::index_fill_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& value) {
  return NpuNativeFunctions::index_fill_out(self, dim, index, value, self);
}
at::Tensor& NpuNativeFunctions::index_fill_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Scalar& value) {
  return NpuNativeFunctions::index_fill_out(self, dim, index, value, self);
}

// masked_scatter_: self's elements where the mask (broadcast to self) holds take source's elements in order.
at::Tensor& NpuNativeFunctions::masked_scatter_(at::Tensor& self, const at::Tensor& mask, const at::Tensor& source) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_scatter_ only supports boolean masks, but got mask with dtype ", mask.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), "masked_scatter_: expected self and source to have same dtypes but got ",
              self.scalar_type(), " and ", source.scalar_type());
  if (self.numel() == 0) return self;
  at::Tensor positions;
  if (on_npu(self) && on_npu(mask) && on_npu(source) && (chip_dtype(self.scalar_type()) || self.scalar_type() == at::kLong))
    positions = nonzero_positions(mask.expand(self.sizes()));
  if (!positions.defined()) {
    return fall_back<at::_ops::masked_scatter_>("not chip dtypes on the npu, or beyond 2^24 element-rounds", self, mask, source);
  }
  const int64_t count = positions.numel();
  TORCH_CHECK(count <= source.numel(), "masked_scatter: expected source to have at least ", count, " elements, but got ", source.numel());
  if (count == 0) return self;
  at::Tensor flat = self.is_contiguous() ? self.view({-1}) : self.contiguous().view({-1});
  c10::List<std::optional<at::Tensor>> indices;
  indices.push_back(positions);
  NpuNativeFunctions::_index_put_impl_(flat, indices, source.reshape({-1}).narrow(0, 0, count), false, false);
  if (!self.is_contiguous()) self.copy_(flat.view(self.sizes()));
  return self;
}
at::Tensor NpuNativeFunctions::masked_scatter(const at::Tensor& self, const at::Tensor& mask, const at::Tensor& source) {
  at::Tensor result = new_npu(at::infer_size(self.sizes(), mask.sizes()), self.scalar_type());
  result.copy_(self);
  return NpuNativeFunctions::masked_scatter_(result, mask, source);
}

}  // namespace npusim
