// v.rsum, v.rmax, v.rmin, v.argmax, v.argmin. Every output folds its
// elements in index order; results go to a buffer first, so dst may alias src.
#include <cmath>
#include <type_traits>
#include <vector>

#include "functional/elements.h"
#include "functional/kernels.h"
#include "functional/support.h"
#include "npusim/isa/dtype.h"

namespace npu::sim::functional {
namespace {

using isa::Axis;
using isa::DType;
using isa::Opcode;

enum class Kind { Sum, Max, Min };

template <typename Value>
bool is_nan(Value value) {
  if constexpr (std::is_same_v<Value, float>)
    return std::isnan(value);
  else
    return false;
}

// The running result of one output. Max and Min keep the first extreme
// (strict comparison), and NaN is the extreme once seen, as in torch.argmax.
template <typename Value, Kind kind>
struct Fold {
  Value value{};
  int64_t index = 0;

  void start(Value x) {
    // Sums start from +0 like torch's (a sum of -0s is +0).
    if constexpr (kind == Kind::Sum)
      value = add(Value{}, x);
    else
      value = x;
  }

  void next(Value x, int64_t at) {
    if constexpr (kind == Kind::Sum) {
      value = add(value, x);
    } else if (!is_nan(value) && (is_nan(x) || (kind == Kind::Max ? x > value : x < value))) {
      value = x;
      index = at;
    }
  }

  // Floats round to f32 at each step; integers wrap (modulo 2^64, and the
  // store wraps to the dtype, which gives the same low bits).
  static Value add(Value a, Value b) {
    if constexpr (std::is_same_v<Value, float>)
      return a + b;
    else
      return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  }
};

template <typename Value, Kind kind>
void reduce(Opcode op, DType dtype, Axis axis, uint8_t* dst, const uint8_t* src, size_t rows, size_t cols) {
  const size_t size = isa::dtype_size_bytes(dtype);
  std::vector<Fold<Value, kind>> folds(reduce_output_elements(axis, rows, cols));
  std::vector<Value> row(cols);
  for (size_t i = 0; i < rows; ++i) {
    load_values(dtype, src + i * cols * size, cols, row.data());
    if (axis == Axis::Axis1) {
      folds[i].start(row[0]);
      for (size_t j = 1; j < cols; ++j) folds[i].next(row[j], static_cast<int64_t>(j));
    } else if (i == 0) {
      for (size_t j = 0; j < cols; ++j) folds[j].start(row[j]);
    } else {
      for (size_t j = 0; j < cols; ++j) folds[j].next(row[j], static_cast<int64_t>(i));
    }
  }

  if (op == Opcode::V_ARGMAX || op == Opcode::V_ARGMIN) {
    std::vector<int64_t> indices;
    for (const auto& fold : folds) indices.push_back(fold.index);
    store_int_n(DType::I32, dst, indices.size(), indices.data());
    return;
  }
  std::vector<Value> values;
  for (const auto& fold : folds) values.push_back(fold.value);
  store_values(dtype, dst, values.size(), values.data());
}

template <typename Value>
void reduce_as(Opcode op, DType dtype, Axis axis, uint8_t* dst, const uint8_t* src, size_t rows, size_t cols) {
  switch (op) {
    case Opcode::V_RSUM: reduce<Value, Kind::Sum>(op, dtype, axis, dst, src, rows, cols); break;
    case Opcode::V_RMAX:
    case Opcode::V_ARGMAX: reduce<Value, Kind::Max>(op, dtype, axis, dst, src, rows, cols); break;
    default: reduce<Value, Kind::Min>(op, dtype, axis, dst, src, rows, cols); break;
  }
}

}  // namespace

uint64_t reduce_output_elements(Axis axis, uint64_t rows, uint64_t cols) {
  if (rows == 0 || cols == 0) return 0;  // an empty reduction writes nothing
  return axis == Axis::Axis1 ? rows : cols;
}

KernelError vector_reduce(Opcode op, DType dtype, Axis axis, uint8_t* dst, const uint8_t* src, uint64_t rows, uint64_t cols) {
  if (op < Opcode::V_RSUM || op > Opcode::V_ARGMIN) return mnemonic(op) + " is not a reduction";
  if (rows == 0 || cols == 0) return std::nullopt;
  if (isa::dtype_is_float(dtype))
    reduce_as<float>(op, dtype, axis, dst, src, rows, cols);
  else
    reduce_as<int64_t>(op, dtype, axis, dst, src, rows, cols);
  return std::nullopt;
}

}  // namespace npu::sim::functional
