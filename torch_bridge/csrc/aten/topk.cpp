// topk and sort on the npu, from the topk row kernel: the i32 positions of each
// row's k largest (or smallest) elements along the dim (moved last); the values
// picked from x by the gather kernel (x as rows of one element, row r's
// position p at r * L + p); the positions widened to int64. Equal values come
// in order of position and NaN ranks above +inf: what the CPU's stable sort
// gives, and its topk in practice (PyTorch leaves topk's order among equal
// values unspecified). sort is topk with k the dim's size, so stable either way.
// The kernel takes k rounds over a row: beyond k x L = 2^24 element-rounds per
// row (a sort of more than 4096, a top-500 of a 50k vocabulary) the CPU runs it,
// counted, with that reason. Integer sorts (a mixture of experts' routing, argsort of
// permutations) are radix sorts of float keys (sort_integers below); integer topk runs on the CPU.
#include <ATen/Functions.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "PrivateUse1NativeFunctions.h"
#include "int64_arithmetic.h"
#include "cpu_fallback.h"
#include "kernel_launch.h"
#include "runtime/runtime.h"

namespace npusim {
namespace {

using npu::compiler::OpDesc;
using npu::compiler::OpKind;

constexpr int64_t kMaxElementRounds = int64_t{1} << 24;

// (values, indices) with k along dim, or nothing where the chip cannot (the caller runs the CPU's).
std::optional<std::tuple<at::Tensor, at::Tensor>> top(const at::Tensor& self, int64_t k, int64_t dim, bool largest, std::string* reason) {
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  const int64_t length = self.dim() == 0 ? 1 : self.size(d);
  TORCH_CHECK(k >= 0 && k <= length, "selected index k out of range");
  if (!chip_float(self)) return std::nullopt;
  if (k * length > kMaxElementRounds) {
    *reason = "k x L = " + std::to_string(k * length) + " element-rounds per row, above 2^24";
    return std::nullopt;
  }
  if (self.numel() >= (int64_t{1} << 31)) return std::nullopt;
  at::Tensor x = self.dim() == 0 ? self.view({1}) : self.movedim(d, -1);
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = k;
  at::Tensor values = new_npu(shape, self.scalar_type()), indices;
  if (k == 0 || x.numel() == 0) {
    indices = new_npu(shape, at::kLong);
  } else {
    const at::Tensor positions = new_npu(shape, at::kInt);
    const auto make = [&] {
      OpDesc op(OpKind::TOPK, {describe(x)}, describe(positions));
      op.largest = largest;
      return op;
    };
    // Leading dims that do not merge into one row stride (a middle dim moved last): x copied dense first.
    if (!try_run(make, {x}, positions) && (x.is_contiguous() || !try_run(make, {x = x.contiguous()}, positions))) return std::nullopt;
    const int64_t rows = x.numel() / length;
    const at::Tensor row_starts = to_npu(at::arange(0, rows * length, length, at::TensorOptions().dtype(at::kInt)).view({rows, 1}));
    const at::Tensor flat = at::add(positions.view({rows, k}), row_starts).view({rows * k});
    const at::Tensor table = x.contiguous().view({x.numel(), 1});
    const at::Tensor picked = values.view({rows * k, 1});
    if (!try_run_kind(OpKind::EMBEDDING, {table, flat}, picked)) return std::nullopt;
    indices = positions.to(at::kLong);
  }
  if (self.dim() == 0) return std::make_tuple(values.view(c10::IntArrayRef{}), indices.view(c10::IntArrayRef{}));
  return std::make_tuple(values.movedim(-1, d).contiguous(), indices.movedim(-1, d).contiguous());
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> NpuNativeFunctions::topk(const at::Tensor& self, int64_t k, int64_t dim, bool largest, bool sorted) {
  std::string reason;
  if (auto result = top(self, k, dim, largest, &reason)) return *result;  // (sorted or not: sorted)
  return fall_back<at::_ops::topk>(reason, self, k, dim, largest, sorted);
}

std::tuple<at::Tensor&, at::Tensor&> NpuNativeFunctions::topk_out(const at::Tensor& self, int64_t k, int64_t dim, bool largest, bool sorted,
                                                                  at::Tensor& values, at::Tensor& indices) {
  auto [v, i] = NpuNativeFunctions::topk(self, k, dim, largest, sorted);
  return {into(v, values), into(i, indices)};
}

namespace {

// Integers: a stable sort by keys exact in f32, least significant first (LSD radix), each pass the
// float sort of one key gathered in the order so far. Values within +-2^24 are one key (themselves);
// others are 16-bit digits of the 32-bit words, the top one signed: two passes for int32, four for
// int64. The range is read back (two values) to choose.
std::optional<std::tuple<at::Tensor, at::Tensor>> sort_integers(const at::Tensor& self, int64_t dim, bool descending, std::string* reason) {
  const at::ScalarType t = self.scalar_type();
  const bool integer = t == at::kLong || t == at::kInt || t == at::kChar || t == at::kByte;
  if (!on_npu(self) || !integer || self.dim() == 0 || self.numel() == 0) return std::nullopt;
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  const bool narrow = t == at::kChar || t == at::kByte;
  const int64_t smallest = narrow ? 0 : at::min(self).cpu().item<int64_t>(), largest = narrow ? 0 : at::max(self).cpu().item<int64_t>();
  constexpr int64_t kExact = int64_t{1} << 24;
  std::vector<at::Tensor> keys;  // least significant first
  if (smallest >= -kExact && largest <= kExact) {
    keys.push_back(self.to(at::kFloat));
  } else {
    const bool words = t == at::kLong;
    const at::Tensor low = words ? int64_low_word(self) : self.to(at::kInt);
    keys.push_back(at::bitwise_and(low, 65535));
    keys.push_back(at::bitwise_right_shift(low, 16));  // signed: the top digit of an int32
    if (words && (smallest < INT32_MIN || largest > INT32_MAX)) {
      const at::Tensor high = int64_high_word(self);
      keys.back() = at::bitwise_and(keys.back(), 65535);
      keys.push_back(at::bitwise_and(high, 65535));
      keys.push_back(at::bitwise_right_shift(high, 16));
    }
  }
  at::Tensor order;  // positions along d, int64: the permutation so far
  for (const at::Tensor& key : keys) {
    at::Tensor k = key.to(at::kFloat);
    if (order.defined()) k = at::gather(k, d, order);
    auto sorted = top(k, self.size(d), d, descending, reason);
    if (!sorted) return std::nullopt;
    const at::Tensor positions = std::get<1>(*sorted);
    order = order.defined() ? at::gather(order, d, positions) : positions;
  }
  return std::make_tuple(at::gather(self, d, order), order);
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> NpuNativeFunctions::sort(const at::Tensor& self, std::optional<bool> stable, int64_t dim, bool descending) {
  std::string reason;
  const int64_t length = self.dim() == 0 ? 1 : self.size(at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1)));
  if (auto result = top(self, length, dim, descending, &reason)) return *result;
  if (auto result = sort_integers(self, dim, descending, &reason)) return *result;
  return fall_back<at::_ops::sort_stable>(reason, self, stable, dim, descending);
}

std::tuple<at::Tensor&, at::Tensor&> NpuNativeFunctions::sort_out(const at::Tensor& self, std::optional<bool> stable, int64_t dim,
                                                                  bool descending, at::Tensor& values, at::Tensor& indices) {
  auto [v, i] = NpuNativeFunctions::sort(self, stable, dim, descending);
  return {into(v, values), into(i, indices)};
}

}  // namespace npusim
