// What the compiler is asked for: an op on tensors with concrete shapes,
// strides and dtypes. The op list is compiler/ops.def.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "npusim/isa/dtype.h"

namespace npu::compiler {

// A tensor view of device memory, in elements: element (i0, i1, ...) is at
// storage_offset + sum(ik * strides[k]) from the start of its buffer.
// A stride may be 0 (broadcast) or anything else (transposes, slices).
struct TensorDesc {
  isa::DType dtype = isa::DType::F32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  int64_t storage_offset = 0;

  int64_t numel() const;
  // Elements of storage the view reaches: 1 + the largest offset (0 if empty).
  int64_t storage_extent() const;
  std::string to_string() const;  // "bf16[4,8] strides [8,1] offset 0"
  static TensorDesc contiguous(isa::DType dtype, std::vector<int64_t> shape);
};

enum class OpKind : uint8_t {
#define NPU_ELEMENTWISE_OP(ID, NAME, ARITY, OPCODE, RESULT, DTYPES) ID,
#define NPU_MATMUL_OP(ID, NAME, MIN_INPUTS, MAX_INPUTS) ID,
#define NPU_ROW_OP(ID, NAME, MAX_INPUTS) ID,
#define NPU_ATTENTION_OP(ID, NAME, INPUTS) ID,
#define NPU_SELECT_OP(ID, NAME, INPUTS) ID,
#define NPU_GATHER_OP(ID, NAME, INPUTS) ID,
#define NPU_WINDOW_OP(ID, NAME, INPUTS) ID,
#define NPU_DEPTHWISE_OP(ID, NAME, MAX_INPUTS) ID,
#define NPU_CONV_OP(ID, NAME, MAX_INPUTS) ID,
#define NPU_RANDOM_OP(ID, NAME, INPUTS) ID,
#define NPU_RANGE_OP(ID, NAME, INPUTS) ID,
#define NPU_CHAIN_OP(ID, NAME, MAX_INPUTS) ID,
#include "ops.def"
};

// The op named like aten::NAME; false if the compiler does not know it.
bool find_op(const std::string& name, OpKind* kind);
const char* op_name(OpKind kind);
unsigned op_arity(OpKind kind);  // the most inputs it takes
bool is_elementwise(OpKind kind);
bool is_row_op(OpKind kind);
bool is_random_op(OpKind kind);

// How an f32 matmul runs on a tensor core that does not take f32: its
// operands are split into bf16 parts (x = hi + mid + lo) and the products of
// the parts that matter are accumulated in f32, the way
// torch.set_float32_matmul_precision describes it.
enum class F32MatmulPrecision : uint8_t {
  Highest,  // 3 parts, 6 products: about f32's own precision
  High,     // 2 parts, 3 products: about 16 significant bits
  Medium,   // 1 part, 1 product: bf16 inputs
};

// How a matmul's work is laid on the cores (docs/compiler.md, "Matmul"): the
// compiler's choice by its estimate of time, or one of the two schedules.
enum class MatmulSchedule : uint8_t {
  Auto,
  OwnTiles,  // every core loads the A and B tiles of its own output tiles
  SharedB,   // the cores of a group share B's tiles over the NoC (where it applies)
  SharedBStreamedA,  // SharedB with A streamed a tile per K step, not resident as a panel
  SharedAB,          // SharedB with A shared too: the cores of one member index in every group share A's tiles
};

// The sliding window of im2col (compiler/ops.def), per spatial dim (rows, cols).
struct Window {
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> padding{0, 0};  // before the first row / column; negative crops
  std::array<int64_t, 2> dilation{1, 1};
  bool flip = false;  // read the kernel rotated by 180 degrees
};

// A value an elementwise chain step reads: input k, step i's result, or the
// step's constant.
struct ChainValue {
  enum class Kind : uint8_t { Input, Step, Constant };
  Kind kind = Kind::Input;
  int32_t index = 0;  // the input's or the step's
};

// One step of an elementwise chain (OpDesc::chain): a unary or binary
// elementwise op of compiler/ops.def whose result has its inputs' dtype.
struct ChainStep {
  OpKind kind{};
  std::array<ChainValue, 2> args{};  // args[1] only for binary ops
  double constant = 0.0;             // at most one arg is the constant
};

struct OpDesc {
  OpDesc() = default;
  OpDesc(OpKind op_kind, std::vector<TensorDesc> op_inputs, TensorDesc op_output)
      : kind(op_kind), inputs(std::move(op_inputs)), output(std::move(op_output)) {}

  OpKind kind = OpKind::ADD;
  std::vector<TensorDesc> inputs;  // binary ops: the second is broadcast to the output's shape
  TensorDesc output;
  // Matmul only: out = epilogue(alpha * A @ B * scale + beta * bias + residual).
  double alpha = 1.0;
  double beta = 1.0;
  // Matmul: the last input is a residual, added after the bias (and, unlike
  // the bias and the scale, it may vary over the batch).
  bool residual = false;
  std::vector<OpKind> epilogue;  // unary elementwise ops, in order
  F32MatmulPrecision f32_precision = F32MatmulPrecision::Highest;  // f32 matmul and attention on a tensor core without f32
  MatmulSchedule schedule = MatmulSchedule::Auto;  // for tuning and tests: Auto unless a schedule is asked for
  // layer_norm and rms_norm: added to the variance (mean square) before its rsqrt.
  double epsilon = 1e-5;
  // var and std: the sum of squared deviations is divided by max(0, N - correction) (PyTorch's correction; 1 is Bessel's).
  double correction = 1.0;
  // topk: the k largest elements of each row (false: the k smallest).
  bool largest = true;
  // scaled_dot_product_attention: softmax(scale * q @ k^T) @ v. The caller
  // sets the scale (PyTorch's default is 1 / sqrt(D)); is_causal masks keys
  // j > query i (the top-left aligned lower triangle, as PyTorch's is_causal).
  double scale = 1.0;
  bool is_causal = false;
  // im2col and depthwise_conv2d: the window; im2col: the value of positions outside
  // the input (0 for a convolution, -inf for a max pooling). (depthwise_conv2d's
  // epilogue is `epilogue`, as the matmul's.)
  Window window;
  double pad_value = 0.0;
  // elementwise_chain: the steps; the last one's result is the output.
  std::vector<ChainStep> chain;
  // elementwise_chain in f32: inputs of bf16, f16 or f32 (they may mix), the half ones converted to f32
  // on the chip, every step computed in f32 and the result rounded once to the output's float dtype, as
  // ATen's CPU kernels compute half-precision ops (in their opmath type); a cast of a half tensor to
  // f32 (x.float() * scale) or of an f32 result to half costs no kernel of its own.
  bool chain_in_f32 = false;
  // uniform: (from, to); normal: (mean, std); bernoulli: (p, unused).
  std::array<double, 2> random_params{0.0, 1.0};

  // Everything that changes the generated code, for the program cache.
  std::string key() const;
};

// The text form of a chain, one step per `;`: `NAME(ARG)` or `NAME(ARG, ARG)`
// with ARG `inK` (input K), `%I` (step I's result) or a number (the step's
// constant), e.g. "mul(in0, 0.5); tanh(%0); add(%1, in1)". parse_chain
// throws std::invalid_argument naming the step that is wrong; it checks that
// every value exists when it is read (with `inputs` inputs) and that each
// step is an elementwise op with its inputs' dtype as its result.
std::vector<ChainStep> parse_chain(const std::string& text, size_t inputs);
std::string chain_to_string(const std::vector<ChainStep>& chain);

// How many generator counters one launch of a random op uses (its offset
// advances by that much between launches): numel, twice that for normal.
uint64_t random_counters(const OpDesc& op);

}  // namespace npu::compiler
