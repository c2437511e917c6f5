#include "npusim/compiler/op.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace npu::compiler {
namespace {

struct OpInfo {
  const char* name;
  unsigned arity;
};

const OpInfo kOps[] = {
#define NPU_ELEMENTWISE_OP(ID, NAME, ARITY, OPCODE, RESULT, INTEGER_OK) {NAME, ARITY},
#define NPU_MATMUL_OP(ID, NAME, MIN_INPUTS, MAX_INPUTS) {NAME, MAX_INPUTS},
#define NPU_ROW_OP(ID, NAME, MAX_INPUTS) {NAME, MAX_INPUTS},
#define NPU_ATTENTION_OP(ID, NAME, INPUTS) {NAME, INPUTS},
#define NPU_SELECT_OP(ID, NAME, INPUTS) {NAME, INPUTS},
#define NPU_GATHER_OP(ID, NAME, INPUTS) {NAME, INPUTS},
#define NPU_WINDOW_OP(ID, NAME, INPUTS) {NAME, INPUTS},
#define NPU_RANDOM_OP(ID, NAME, INPUTS) {NAME, INPUTS},
#include "ops.def"
};

}  // namespace

int64_t TensorDesc::numel() const {
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  return n;
}

int64_t TensorDesc::storage_extent() const {
  if (numel() == 0) return 0;
  int64_t last = storage_offset;
  for (size_t i = 0; i < shape.size(); ++i) last += (shape[i] - 1) * strides[i];
  return last + 1;
}

std::string TensorDesc::to_string() const {
  const auto list = [](const std::vector<int64_t>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
    return s + "]";
  };
  return std::string(isa::dtype_name(dtype)) + list(shape) + " strides " + list(strides) + " offset " + std::to_string(storage_offset);
}

TensorDesc TensorDesc::contiguous(isa::DType dtype, std::vector<int64_t> shape) {
  TensorDesc t;
  t.dtype = dtype;
  t.strides.assign(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) t.strides[i - 1] = t.strides[i] * std::max<int64_t>(shape[i], 1);
  t.shape = std::move(shape);
  return t;
}

bool find_op(const std::string& name, OpKind* kind) {
  for (size_t i = 0; i < std::size(kOps); ++i)
    if (name == kOps[i].name) {
      *kind = static_cast<OpKind>(i);
      return true;
    }
  return false;
}

const char* op_name(OpKind kind) { return kOps[static_cast<size_t>(kind)].name; }
unsigned op_arity(OpKind kind) { return kOps[static_cast<size_t>(kind)].arity; }
bool is_row_op(OpKind kind) {
  switch (kind) {
#define NPU_ROW_OP(ID, NAME, MAX_INPUTS) case OpKind::ID:
#include "ops.def"
    return true;
    default: return false;
  }
}
bool is_random_op(OpKind kind) {
  switch (kind) {
#define NPU_RANDOM_OP(ID, NAME, INPUTS) case OpKind::ID:
#include "ops.def"
    return true;
    default: return false;
  }
}
uint64_t random_counters(const OpDesc& op) {
  const auto n = static_cast<uint64_t>(op.output.numel());
  return op.kind == OpKind::NORMAL ? 2 * n : n;
}
bool is_elementwise(OpKind kind) {
  switch (kind) {
#define NPU_ELEMENTWISE_OP(ID, NAME, ARITY, OPCODE, RESULT, INTEGER_OK) case OpKind::ID:
#include "ops.def"
    return true;
    default: return false;
  }
}

std::string OpDesc::key() const {
  std::string key = op_name(kind);
  for (const TensorDesc& input : inputs) key += " " + input.to_string();
  key += " -> " + output.to_string();
  if (kind == OpKind::MATMUL) {
    char scales[64];
    std::snprintf(scales, sizeof scales, " alpha %.17g beta %.17g", alpha, beta);
    key += scales;
    for (const OpKind e : epilogue) key += std::string(" then ") + op_name(e);
    key += " f32-precision " + std::to_string(static_cast<int>(f32_precision));
    if (residual) key += " residual";
  }
  if (kind == OpKind::ATTENTION) {
    char attributes[64];
    std::snprintf(attributes, sizeof attributes, " scale %.17g causal %d", scale, is_causal ? 1 : 0);
    key += attributes;
  }
  if (kind == OpKind::IM2COL) {
    char attributes[160];
    std::snprintf(attributes, sizeof attributes, " stride %lld %lld padding %lld %lld dilation %lld %lld flip %d pad %.17g",
                  static_cast<long long>(window.stride[0]), static_cast<long long>(window.stride[1]), static_cast<long long>(window.padding[0]),
                  static_cast<long long>(window.padding[1]), static_cast<long long>(window.dilation[0]),
                  static_cast<long long>(window.dilation[1]), window.flip ? 1 : 0, pad_value);
    key += attributes;
  }
  if (is_random_op(kind)) {
    char params[64];
    std::snprintf(params, sizeof params, " params %.17g %.17g", random_params[0], random_params[1]);
    key += params;
  }
  if (kind == OpKind::LAYER_NORM || kind == OpKind::RMS_NORM) {
    char eps[40];
    std::snprintf(eps, sizeof eps, " epsilon %.17g", epsilon);
    key += eps;
  }
  return key;
}

}  // namespace npu::compiler
