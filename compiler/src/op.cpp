#include "npusim/compiler/op.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace npu::compiler {
namespace {

struct OpInfo {
  const char* name;
  unsigned arity;
};

const OpInfo kOps[] = {
#define NPU_ELEMENTWISE_OP(ID, NAME, ARITY, OPCODE, RESULT, DTYPES) {NAME, ARITY},
#define NPU_MATMUL_OP(ID, NAME, MIN_INPUTS, MAX_INPUTS) {NAME, MAX_INPUTS},
#define NPU_ROW_OP(ID, NAME, MAX_INPUTS) {NAME, MAX_INPUTS},
#define NPU_ATTENTION_OP(ID, NAME, INPUTS) {NAME, INPUTS},
#define NPU_SELECT_OP(ID, NAME, INPUTS) {NAME, INPUTS},
#define NPU_GATHER_OP(ID, NAME, INPUTS) {NAME, INPUTS},
#define NPU_WINDOW_OP(ID, NAME, INPUTS) {NAME, INPUTS},
#define NPU_DEPTHWISE_OP(ID, NAME, MAX_INPUTS) {NAME, MAX_INPUTS},
#define NPU_CONV_OP(ID, NAME, MAX_INPUTS) {NAME, MAX_INPUTS},
#define NPU_RANDOM_OP(ID, NAME, INPUTS) {NAME, INPUTS},
#define NPU_RANGE_OP(ID, NAME, INPUTS) {NAME, INPUTS},
#define NPU_CHAIN_OP(ID, NAME, MAX_INPUTS) {NAME, MAX_INPUTS},
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
#define NPU_ELEMENTWISE_OP(ID, NAME, ARITY, OPCODE, RESULT, DTYPES) case OpKind::ID:
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
    if (schedule != MatmulSchedule::Auto)
      key += schedule == MatmulSchedule::OwnTiles           ? " own-tiles"
             : schedule == MatmulSchedule::SharedB          ? " shared-b"
             : schedule == MatmulSchedule::SharedBStreamedA ? " shared-b-streamed-a"
                                                            : " shared-ab";
  }
  if (kind == OpKind::ATTENTION) {
    char attributes[64];
    std::snprintf(attributes, sizeof attributes, " scale %.17g causal %d", scale, is_causal ? 1 : 0);
    key += attributes;
    // f32 attention's products run as bf16 parts on a tensor core without f32.
    if (!inputs.empty() && inputs[0].dtype == isa::DType::F32) key += " f32-precision " + std::to_string(static_cast<int>(f32_precision));
  }
  if (kind == OpKind::IM2COL || kind == OpKind::DEPTHWISE_CONV || kind == OpKind::CONV2D) {
    char attributes[160];
    std::snprintf(attributes, sizeof attributes, " stride %lld %lld padding %lld %lld dilation %lld %lld flip %d pad %.17g",
                  static_cast<long long>(window.stride[0]), static_cast<long long>(window.stride[1]), static_cast<long long>(window.padding[0]),
                  static_cast<long long>(window.padding[1]), static_cast<long long>(window.dilation[0]),
                  static_cast<long long>(window.dilation[1]), window.flip ? 1 : 0, pad_value);
    key += attributes;
    if (kind == OpKind::DEPTHWISE_CONV || kind == OpKind::CONV2D)
      for (const OpKind e : epilogue) key += std::string(" then ") + op_name(e);
    if (kind == OpKind::CONV2D && residual) key += " residual";
  }
  if (is_random_op(kind) || kind == OpKind::ARANGE) {
    char params[64];
    std::snprintf(params, sizeof params, " params %.17g %.17g", random_params[0], random_params[1]);
    key += params;
  }
  if (kind == OpKind::ELEMENTWISE_CHAIN) key += " chain " + chain_to_string(chain) + (chain_in_f32 ? " in f32" : "");
  if (kind == OpKind::VAR || kind == OpKind::STD) {
    char text[40];
    std::snprintf(text, sizeof text, " correction %.17g", correction);
    key += text;
  }
  if (kind == OpKind::TOPK) key += largest ? " largest" : " smallest";
  if (kind == OpKind::LAYER_NORM || kind == OpKind::RMS_NORM) {
    char eps[40];
    std::snprintf(eps, sizeof eps, " epsilon %.17g", epsilon);
    key += eps;
  }
  return key;
}

namespace {

// An elementwise op whose result has its inputs' dtype (not a comparison or a cast).
bool keeps_dtype(OpKind kind) {
  switch (kind) {
#define NPU_ELEMENTWISE_OP(ID, NAME, ARITY, OPCODE, RESULT, DTYPES) \
  case OpKind::ID: return std::string_view(#RESULT) == "Same";
#include "ops.def"
    default: return false;
  }
}

std::string trimmed(const std::string& s) {
  size_t begin = 0, end = s.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(s[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(s[end - 1]))) --end;
  return s.substr(begin, end - begin);
}

}  // namespace

std::vector<ChainStep> parse_chain(const std::string& text, size_t inputs) {
  std::vector<ChainStep> chain;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t end = std::min(text.find(';', at), text.size());
    const std::string step_text = trimmed(text.substr(at, end - at));
    at = end + 1;
    const std::string where = "elementwise chain step " + std::to_string(chain.size()) + " '" + step_text + "': ";
    const size_t open = step_text.find('('), close = step_text.rfind(')');
    if (open == std::string::npos || close != step_text.size() - 1 || close < open)
      throw std::invalid_argument(where + "not NAME(ARG) or NAME(ARG, ARG)");
    ChainStep step;
    const std::string name = trimmed(step_text.substr(0, open));
    if (!find_op(name, &step.kind) || !is_elementwise(step.kind) || !keeps_dtype(step.kind))
      throw std::invalid_argument(where + "'" + name + "' is not an elementwise op whose result has its inputs' dtype");
    std::vector<std::string> args;
    const std::string list = step_text.substr(open + 1, close - open - 1);
    for (size_t from = 0; from <= list.size();) {
      const size_t comma = std::min(list.find(',', from), list.size());
      args.push_back(trimmed(list.substr(from, comma - from)));
      from = comma + 1;
    }
    if (args.size() != op_arity(step.kind))
      throw std::invalid_argument(where + name + " takes " + std::to_string(op_arity(step.kind)) + " argument(s)");
    bool has_constant = false;
    for (size_t a = 0; a < args.size(); ++a) {
      const std::string& arg = args[a];
      char* rest = nullptr;
      if (arg.size() > 2 && arg.compare(0, 2, "in") == 0 && std::isdigit(static_cast<unsigned char>(arg[2]))) {
        const long k = std::strtol(arg.c_str() + 2, &rest, 10);
        if (*rest != '\0' || k < 0 || static_cast<size_t>(k) >= inputs)
          throw std::invalid_argument(where + "'" + arg + "': the chain has " + std::to_string(inputs) + " inputs");
        step.args[a] = {ChainValue::Kind::Input, static_cast<int32_t>(k)};
      } else if (arg.size() > 1 && arg[0] == '%') {
        const long i = std::strtol(arg.c_str() + 1, &rest, 10);
        if (*rest != '\0' || i < 0 || static_cast<size_t>(i) >= chain.size())
          throw std::invalid_argument(where + "'" + arg + "' is not an earlier step's result");
        step.args[a] = {ChainValue::Kind::Step, static_cast<int32_t>(i)};
      } else {
        const double value = std::strtod(arg.c_str(), &rest);
        if (arg.empty() || *rest != '\0') throw std::invalid_argument(where + "'" + arg + "' is not inK, %I or a number");
        if (has_constant) throw std::invalid_argument(where + "at most one constant per step");
        has_constant = true;
        step.args[a] = {ChainValue::Kind::Constant, 0};
        step.constant = value;
      }
    }
    if (op_arity(step.kind) == 1 && has_constant) throw std::invalid_argument(where + "a unary op of a constant (fold it first)");
    chain.push_back(step);
  }
  return chain;
}

std::string chain_to_string(const std::vector<ChainStep>& chain) {
  std::string text;
  for (const ChainStep& step : chain) {
    text += (text.empty() ? "" : "; ") + std::string(op_name(step.kind)) + "(";
    for (unsigned a = 0; a < op_arity(step.kind); ++a) {
      const ChainValue& value = step.args[a];
      if (a) text += ", ";
      if (value.kind == ChainValue::Kind::Constant) {
        char number[32];
        std::snprintf(number, sizeof number, "%.17g", step.constant);
        text += number;
      } else {
        text += (value.kind == ChainValue::Kind::Input ? "in" : "%") + std::to_string(value.index);
      }
    }
    text += ")";
  }
  return text;
}

}  // namespace npu::compiler
