// Elementwise ops on the vector unit.
//
// The output's index space is collapsed to at most planes x rows x cols:
// dimensions of size 1 are dropped and neighbours merged wherever every
// operand's strides allow, so a contiguous tensor of any rank is one run
// (folded into rows of up to 2048 elements) and broadcasts stay broadcasts. Each operand then has three element
// strides (sP, sR, sC); 0 is a broadcast, anything else is read with strided
// DMA (an element at a time when sC != 1), never copied on the host.
//
// The space is cut into tiles of tr x tc sized so that two of everything fit
// in the scratchpad, numbered plane-major, and core c of P takes tiles
// [c*T/P, (c+1)*T/P). Per tile, three engines form a pipeline over two slots
// (the same protocol as examples/gemm.s):
//   dma ch0:  wait IN_FREE, load the inputs' tiles, signal IN_FULL
//   vector:   wait IN_FULL, wait OUT_FREE, compute, signal IN_FREE, OUT_FULL
//   dma chS:  wait OUT_FULL, store the output tile, signal OUT_FREE
// so the loads of tile i+1 and the store of tile i-1 overlap the compute of
// tile i. The second operand of a binary op uses the vector unit's own
// broadcast (row, column or scalar); a first operand broadcast along
// columns is made a full tile first (ones * column), exactly.
#include "elementwise.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "npusim/compiler/program_builder.h"
#include "npusim/isa/isa.h"

namespace npu::compiler {
namespace {

using isa::Opcode;

struct OpTraits {
  Opcode opcode;
  bool bool_result;
  bool integer_ok;
  bool float_ok;
  bool any_result;
};

OpTraits traits(OpKind kind) {
  switch (kind) {
#define NPU_ELEMENTWISE_OP(ID, NAME, ARITY, OPCODE, RESULT, DTYPES) \
  case OpKind::ID:                                                        \
    return {Opcode::OPCODE, std::string_view(#RESULT) == "Bool", std::string_view(#DTYPES) != "Floats", std::string_view(#DTYPES) != "Ints", \
            std::string_view(#RESULT) == "Any"};
#include "ops.def"
    default: break;  // not elementwise
  }
  return {Opcode::Invalid, false, false, false, false};
}

// Broadcast mode of the second operand, the `bcast` operand values of isa.def.
enum class Bcast : int64_t { Full = 0, Row = 1, Col = 2, Scalar = 3 };

struct Operand {
  isa::DType dtype;
  int64_t esize;
  int64_t offset;                 // storage offset, elements
  std::array<int64_t, 3> stride;  // planes, rows, cols; elements
  Bcast mode = Bcast::Full;       // how its tile is held locally
  bool materialize = false;       // first operand broadcast along columns: ones * column
  bool transposed = false;        // its rows are contiguous, its columns not: loaded as columns, turned by v.trans
  int64_t decimation = 1;         // columns at a small stride s (a strided slice): whole runs loaded, every s-th kept by v.trans
  uint16_t symbol = 0;
  int64_t tile_bytes = 0;         // local bytes per slot
  int64_t aux_bytes = 0;          // the column or scalar a materialized operand is built from
  int64_t local = 0;              // slot 0's local address; slot 1 is + slot_bytes
  int64_t aux_local = 0;
};


// v.fill's value operand for `value` in `dtype`: f32 bits for floats (v.fill rounds them to the dtype), the integer itself otherwise.
int64_t constant_bits(double value, isa::DType dtype) {
  if (!isa::dtype_is_float(dtype)) return static_cast<int64_t>(value);
  return f32_bits(value);
}

std::string mode_name(const Operand& o) {
  const char* names[] = {"full", "row", "column", "scalar"};
  std::string s = names[static_cast<int>(o.mode)];
  if (o.materialize) s += " (made full)";
  if (o.transposed) s += ", read along its contiguous rows and turned over (v.trans)";
  else if (o.decimation > 1) s += ", columns at stride " + std::to_string(o.decimation) + ": rows read whole, one element in " + std::to_string(o.decimation) + " kept (v.trans)";
  else if (o.stride[2] > 1) s += ", strided columns";
  return s;
}

// The order of the output's dims that lets a layout change read its input in
// runs: where an input's unit-stride dim is not the output's, that dim second
// to last and the output's unit-stride dim last (the others keep their order),
// so that a tile's rows are the input's contiguous runs. The identity where
// every input reads the output's last dim in runs, or none has a unit stride.
std::vector<size_t> order_for_transposed_reads(const std::vector<int64_t>& dims, const std::vector<std::vector<int64_t>>& strides) {
  std::vector<size_t> order(dims.size());
  for (size_t d = 0; d < dims.size(); ++d) order[d] = d;
  const auto unit_dim = [&](const std::vector<int64_t>& s) {
    for (size_t d = dims.size(); d-- > 0;)
      if (dims[d] > 1 && s[d] == 1) return d;
    return dims.size();
  };
  const size_t out_dim = unit_dim(strides[0]);
  if (out_dim == dims.size()) return order;
  for (size_t k = 1; k < strides.size(); ++k) {
    const size_t in_dim = unit_dim(strides[k]);
    if (strides[k][out_dim] == 0 || strides[k][out_dim] == 1 || in_dim == dims.size() || in_dim == out_dim) continue;
    order.clear();
    for (size_t d = 0; d < dims.size(); ++d)
      if (d != in_dim && d != out_dim) order.push_back(d);
    order.push_back(in_dim), order.push_back(out_dim);
    break;
  }
  return order;
}

}  // namespace

std::vector<int64_t> broadcast_strides(const std::string& op, const TensorDesc& input, const std::vector<int64_t>& shape) {
  const size_t rank = shape.size();
  if (input.shape.size() > rank || input.strides.size() != input.shape.size())
    throw std::invalid_argument(op + ": input " + input.to_string() + " does not broadcast to the output");
  std::vector<int64_t> s(rank, 0);
  for (size_t i = 0; i < input.shape.size(); ++i) {
    const size_t d = rank - input.shape.size() + i;
    if (input.shape[i] == shape[d]) s[d] = input.shape[i] == 1 ? 0 : input.strides[i];
    else if (input.shape[i] != 1) throw std::invalid_argument(op + ": input " + input.to_string() + " does not broadcast to the output");
  }
  return s;
}

IndexSpace collapse_index_space(const std::string& op, const std::vector<int64_t>& dims, const std::vector<std::vector<int64_t>>& strides) {
  for (const auto& s : strides)
    for (const int64_t v : s)
      if (v < 0) throw UnsupportedOp(op + ": negative strides");

  // Drop size-1 dims, merge neighbours every operand allows.
  std::vector<int64_t> shape;
  std::vector<std::vector<int64_t>> merged(strides.size());
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 1) continue;
    bool mergeable = !shape.empty();
    for (size_t k = 0; k < strides.size() && mergeable; ++k) mergeable = merged[k].back() == strides[k][d] * dims[d];
    if (mergeable) {
      shape.back() *= dims[d];
      for (size_t k = 0; k < strides.size(); ++k) merged[k].back() = strides[k][d];
    } else {
      shape.push_back(dims[d]);
      for (size_t k = 0; k < strides.size(); ++k) merged[k].push_back(strides[k][d]);
    }
  }
  if (shape.size() > kMaxIndexDims)
    throw UnsupportedOp(op + ": " + std::to_string(shape.size()) + " dimensions that do not merge (at most " + std::to_string(kMaxIndexDims) + ")");
  IndexSpace space;
  if (shape.size() > 3) {
    // The dims before the last two are planes: a tile's plane number is split into them on the core.
    const size_t outer = shape.size() - 2;
    space.plane_dims.assign(shape.begin(), shape.begin() + std::ptrdiff_t(outer));
    for (const auto& s : merged) space.plane_strides.emplace_back(s.begin(), s.begin() + std::ptrdiff_t(outer));
    int64_t planes = 1;
    for (const int64_t d : space.plane_dims) planes *= d;
    space.shape = {planes, shape[outer], shape[outer + 1]};
    for (const auto& s : merged) space.strides.push_back({s[outer - 1], s[outer], s[outer + 1]});
    return space;
  }
  while (shape.size() < 3) {
    shape.insert(shape.begin(), 1);
    for (auto& s : merged) s.insert(s.begin(), 0);
  }
  // One long run (a contiguous tensor) folds into rows of a power of two, so
  // that tiles are many rows deep instead of one row long.
  if (shape[0] == 1 && shape[1] == 1 && shape[2] > 4096) {
    int64_t width = 2048;
    while (width >= 64 && shape[2] % width != 0) width /= 2;
    if (width >= 64) {
      shape[1] = shape[2] / width, shape[2] = width;
      for (auto& s : merged) s[1] = s[2] * width;
    }
  }
  space.shape = {shape[0], shape[1], shape[2]};
  space.plane_dims = {shape[0]};
  for (const auto& s : merged) space.strides.push_back({s[0], s[1], s[2]}), space.plane_strides.push_back({s[0]});
  return space;
}

isa::Opcode unary_opcode(OpKind kind) {
  if (!is_elementwise(kind) || op_arity(kind) != 1) throw std::invalid_argument(std::string(op_name(kind)) + " is not a unary op");
  return traits(kind).opcode;
}

void emit_tile_dma_shape(ProgramBuilder& b, const DmaShapeRegs& r, TileRead read, const std::array<int64_t, 3>& stride, int64_t e,
                         Reg mt, Reg nt) {
  b.li(r.ds2, 0), b.li(r.ss2, 0), b.li(r.n2, 0);
  if (read == TileRead::Scalar) {
    b.li(r.n0, e), b.li(r.n1, 1), b.li(r.ds1, 0), b.li(r.ss1, 0);
  } else if (read == TileRead::Col) {
    b.li(r.n0, e), b.mov(r.n1, mt), b.li(r.ds1, e), b.li(r.ss1, stride[1] * e);
  } else if (read == TileRead::Row) {
    if (stride[2] == 1) b.muli(r.n0, nt, e), b.li(r.n1, 1), b.li(r.ds1, 0), b.li(r.ss1, 0);
    else b.li(r.n0, e), b.mov(r.n1, nt), b.li(r.ds1, e), b.li(r.ss1, stride[2] * e);
  } else if (stride[2] == 1) {
    b.muli(r.n0, nt, e), b.mov(r.n1, mt), b.muli(r.ds1, nt, e), b.li(r.ss1, stride[1] * e);
  } else {  // an element at a time along the row, rows as planes
    b.li(r.n0, e), b.mov(r.n1, nt), b.li(r.ds1, e), b.li(r.ss1, stride[2] * e);
    b.mov(r.n2, mt), b.muli(r.ds2, nt, e), b.li(r.ss2, stride[1] * e);
  }
}

namespace {
// The steps a kernel computes: a chain's, or the one op's own.
std::vector<ChainStep> steps_of(const OpDesc& op) {
  if (op.kind == OpKind::ELEMENTWISE_CHAIN) return op.chain;
  ChainStep step;
  step.kind = op.kind;
  for (unsigned a = 0; a < op_arity(op.kind); ++a) step.args[a] = {ChainValue::Kind::Input, static_cast<int32_t>(a)};
  return {step};
}
}  // namespace

Kernel lower_elementwise(const OpDesc& op, const sim::ChipConfig& config) {
  if (auto transposed = lower_transpose_copy(op, config)) return *std::move(transposed);
  const bool chain = op.kind == OpKind::ELEMENTWISE_CHAIN;
  const std::vector<ChainStep> steps = steps_of(op);
  const std::string name = op_name(op.kind);
  const size_t inputs = op.inputs.size();
  if (chain) {
    if (steps.empty()) throw std::invalid_argument("elementwise_chain: no steps");
    if (inputs < 1 || inputs > op_arity(op.kind))
      throw std::invalid_argument("elementwise_chain takes 1 to " + std::to_string(op_arity(op.kind)) + " inputs, got " + std::to_string(inputs));
  } else if (inputs != op_arity(op.kind)) {
    throw std::invalid_argument(name + " takes " + std::to_string(op_arity(op.kind)) + " inputs, got " + std::to_string(inputs));
  }
  const TensorDesc& out = op.output;
  // The inputs' dtype, and the one the steps compute in: f32 for a chain in f32 (its inputs converted
  // on the chip, its result rounded once to the output's dtype).
  const isa::DType io_dtype = op.inputs[0].dtype;
  const bool in_f32 = op.chain_in_f32;
  const auto computes_in_f32 = [](isa::DType d) { return d == isa::DType::BF16 || d == isa::DType::F16 || d == isa::DType::F32; };
  if (in_f32 && !chain) throw std::invalid_argument(name + ": only a chain computes in f32");
  const isa::DType dtype = in_f32 ? isa::DType::F32 : io_dtype;
  // In f32 the inputs may mix bf16, f16 and f32 (each converted on its own); otherwise they have one dtype.
  for (const TensorDesc& input : op.inputs)
    if (in_f32 ? !computes_in_f32(input.dtype) : input.dtype != io_dtype)
      throw std::invalid_argument(name + (in_f32 ? ": a chain in f32 reads bf16, f16 or f32 inputs" : ": inputs of different dtypes (cast first)"));
  // Which steps read each input first (or alone) and second; where each step's result is last read.
  std::vector<bool> read_first(inputs, false), read_second(inputs, false);
  std::vector<size_t> last_read(steps.size(), 0);
  for (size_t i = 0; i < steps.size(); ++i) {
    const ChainStep& step = steps[i];
    const OpTraits step_traits = traits(step.kind);
    if (step_traits.opcode == Opcode::Invalid) throw std::invalid_argument(name + ": step " + std::to_string(i) + " is not elementwise");
    if (chain && (step_traits.bool_result || step_traits.any_result))
      throw std::invalid_argument(name + ": step " + std::to_string(i) + " (" + op_name(step.kind) + ") changes the dtype");
    if (!step_traits.integer_ok && !isa::dtype_is_float(dtype))
      throw UnsupportedOp(std::string(op_name(step.kind)) + " on " + std::string(isa::dtype_name(dtype)) + ": floats only");
    if (!step_traits.float_ok && isa::dtype_is_float(dtype))
      throw UnsupportedOp(std::string(op_name(step.kind)) + " on " + std::string(isa::dtype_name(dtype)) + ": integers only");
    const unsigned arity = op_arity(step.kind);
    for (unsigned a = 0; a < arity; ++a) {
      const ChainValue& value = step.args[a];
      const bool ok = value.kind == ChainValue::Kind::Constant ? arity == 2 && step.args[1 - a].kind != ChainValue::Kind::Constant
                      : value.kind == ChainValue::Kind::Input  ? value.index >= 0 && size_t(value.index) < inputs
                                                               : value.index >= 0 && size_t(value.index) < i;
      if (!ok) throw std::invalid_argument(name + ": step " + std::to_string(i) + " reads a value it cannot");
      if (value.kind == ChainValue::Kind::Input) (a == 0 ? read_first : read_second)[size_t(value.index)] = true;
      if (value.kind == ChainValue::Kind::Step) last_read[size_t(value.index)] = i;
    }
  }
  for (size_t k = 0; k < inputs; ++k)
    if (!read_first[k] && !read_second[k]) throw std::invalid_argument(name + ": input " + std::to_string(k) + " is never read");
  const OpTraits op_traits = traits(steps.back().kind);
  if (in_f32 && !computes_in_f32(out.dtype)) throw std::invalid_argument(name + ": a chain in f32 writes bf16, f16 or f32");
  if (!in_f32 && !op_traits.any_result && out.dtype != (op_traits.bool_result ? isa::DType::U8 : io_dtype))
    throw std::invalid_argument(name + ": output dtype must be " +
                                std::string(isa::dtype_name(op_traits.bool_result ? isa::DType::U8 : io_dtype)));
  if (out.strides.size() != out.shape.size()) throw std::invalid_argument("output strides do not match its shape");

  // Every operand's strides over the output's dimensions (0 where it broadcasts).
  std::vector<std::vector<int64_t>> strides;  // [operand][dim]; operand 0 is the output
  strides.push_back(out.strides);
  for (const TensorDesc& input : op.inputs) strides.push_back(broadcast_strides(op_name(op.kind), input, out.shape));
  // (An elementwise op may walk its index space in any order.)
  const std::vector<size_t> order = order_for_transposed_reads(out.shape, strides);
  std::vector<int64_t> dims;
  for (const size_t d : order) dims.push_back(out.shape[d]);
  for (std::vector<int64_t>& s : strides) {
    std::vector<int64_t> ordered;
    for (const size_t d : order) ordered.push_back(s[d]);
    s = std::move(ordered);
  }
  const IndexSpace space = collapse_index_space(op_name(op.kind), dims, strides);
  const std::array<int64_t, 3>& shape = space.shape;
  const std::vector<std::array<int64_t, 3>>& merged = space.strides;
  const int64_t planes = shape[0], rows = shape[1], cols = shape[2];
  if (merged[0][2] == 0 && cols > 1) throw std::invalid_argument("the output overlaps itself (a broadcast stride)");

  std::vector<Operand> operands;  // 0: output, then inputs
  for (size_t k = 0; k < strides.size(); ++k) {
    const TensorDesc& tensor = k == 0 ? out : op.inputs[k - 1];
    Operand o;
    o.dtype = tensor.dtype;
    o.esize = isa::dtype_size_bytes(tensor.dtype);
    o.offset = tensor.storage_offset;
    o.stride = merged[k];
    const bool col_bcast = o.stride[2] == 0 && cols > 1, row_bcast = o.stride[1] == 0 && rows > 1;
    if (k > 0 && !read_first[k - 1]) {  // only ever a second operand: the vector unit broadcasts it
      if (col_bcast && (row_bcast || rows == 1)) o.mode = Bcast::Scalar;
      else if (col_bcast) o.mode = Bcast::Col;
      else if (row_bcast) o.mode = Bcast::Row;
    } else if (k > 0 && col_bcast) {
      o.materialize = true;
      o.mode = (row_bcast || rows == 1) ? Bcast::Scalar : Bcast::Col;
    }
    o.transposed = k > 0 && o.mode == Bcast::Full && !o.materialize && o.stride[2] != 1 && o.stride[1] == 1 && rows > 1 && cols > 1;
    // Columns a few elements apart share DRAM bursts: reading the runs whole moves at most kMaxDecimation
    // times the bytes, in runs, instead of an element per request.
    constexpr int64_t kMaxDecimation = 8;
    if (k > 0 && o.mode == Bcast::Full && !o.materialize && !o.transposed && o.stride[2] > 1 && o.stride[2] <= kMaxDecimation && cols > 1)
      o.decimation = o.stride[2];
    operands.push_back(o);
  }
  const bool any_transposed = std::any_of(operands.begin(), operands.end(), [](const Operand& o) { return o.transposed; });

  // Chain steps' results: each in a full tile (one: only the vector unit uses
  // them); a result read for the last time frees its tile, which the step's
  // own result may take (the vector unit works in place), except where the
  // step first fills its result with a constant first operand. The last step
  // writes the output's tile. Constants read as second operands: one element
  // each, filled once.
  std::vector<int> temp_of(steps.size(), -1);
  int temps = 0;
  {
    std::vector<int> free_temps;
    for (size_t i = 0; i + 1 < steps.size(); ++i) {
      const auto release_last_reads = [&] {
        const std::array<ChainValue, 2>& args = steps[i].args;
        for (unsigned a = 0; a < op_arity(steps[i].kind); ++a) {
          const bool repeated = a == 1 && args[0].kind == ChainValue::Kind::Step && args[0].index == args[1].index;  // (x * x: freed once)
          if (args[a].kind == ChainValue::Kind::Step && last_read[size_t(args[a].index)] == i && !repeated)
            free_temps.push_back(temp_of[size_t(args[a].index)]);
        }
      };
      const bool fills_result = steps[i].args[0].kind == ChainValue::Kind::Constant;
      if (!fills_result) release_last_reads();
      if (free_temps.empty()) free_temps.push_back(temps++);
      temp_of[i] = free_temps.back();
      free_temps.pop_back();
      if (fills_result) release_last_reads();
    }
  }
  std::vector<int64_t> constant_at(steps.size(), -1);  // local address of a step's constant element
  int64_t constants = 0;
  for (size_t i = 0; i < steps.size(); ++i)
    if (op_arity(steps[i].kind) == 2 && steps[i].args[1].kind == ChainValue::Kind::Constant) constant_at[i] = constants++;
  const int64_t esize = isa::dtype_size_bytes(dtype);

  // Tiles: two slots of every operand's tile, and the chain's tiles and constants, must fit in the scratchpad.
  const int64_t scratchpad = static_cast<int64_t>(config.core.scratchpad.size_bytes);
  // (An empty output still gets a program: it halts at once.)
  const bool empty = planes * rows * cols == 0;
  // A transposed read wants tiles deep enough for runs of 512 bytes along the input's rows, and rows
  // of up to 1 KiB to store (shorter stores cost most: measured on base, 4096 x 4096 f32 transposed
  // took 0.97 M cycles with stores of 256 B, 0.51 M with 512 B, 0.45 M with 1 KiB).
  const int64_t io_esize = isa::dtype_size_bytes(io_dtype);
  const int64_t min_rows = any_transposed ? std::max<int64_t>(8, 512 / io_esize) : 8;
  int64_t tc = std::max<int64_t>(1, std::min<int64_t>(cols, any_transposed ? 1024 / io_esize : 2048)), tr = empty ? 1 : 0, fit_rows = 0;
  for (; !empty; tc = std::max<int64_t>(1, tc / 2)) {
    int64_t per_row = 0, fixed = 0;  // bytes of one slot per tile row, and independent of rows
    for (const Operand& o : operands) {
      if (o.materialize) per_row += tc * o.esize + o.esize, fixed += 64 + 64;
      else if (o.transposed) per_row += 2 * tc * o.esize, fixed += 64 + 64;  // as loaded, and turned over
      else if (o.decimation > 1) per_row += 2 * o.decimation * tc * o.esize, fixed += 64 + 64;  // as loaded, and turned over
      else if (o.mode == Bcast::Full) per_row += tc * o.esize, fixed += 64;
      else if (o.mode == Bcast::Row) fixed += align64(tc * o.esize);
      else if (o.mode == Bcast::Col) per_row += o.esize, fixed += 64;
      else fixed += 64;
    }
    int64_t single_per_row = temps * tc * esize, single_fixed = (temps + constants) * 64;
    if (in_f32) {  // each bf16 or f16 input's tile converted to f32, and the last step's f32 result (unless the output is f32)
      for (size_t k = 1; k < operands.size(); ++k) {
        const Operand& o = operands[k];
        if (o.dtype == isa::DType::F32) continue;
        if (o.mode == Bcast::Full || o.materialize) single_per_row += tc * esize;
        else if (o.mode == Bcast::Row) single_fixed += align64(tc * esize);
        else if (o.mode == Bcast::Col) single_per_row += esize;
        single_fixed += 64;
      }
      if (out.dtype != isa::DType::F32) single_per_row += tc * esize, single_fixed += 64;
    }
    fit_rows = (scratchpad - 2 * fixed - single_fixed) / std::max<int64_t>(2 * per_row + single_per_row, 1);
    tr = std::min<int64_t>(rows, fit_rows);
    if (tr >= std::min<int64_t>(rows, min_rows) || tc == 1) break;
  }
  if (any_transposed && tr > 64 && tr < rows) tr -= tr % 64;  // runs that start on request boundaries
  if (tr < 1) throw UnsupportedOp("elementwise tile does not fit the scratchpad");
  // Every core gets work when there are rows enough: no tile deeper than a core's share.
  if (planes * ((cols + tc - 1) / tc) < config.num_cores) tr = std::min(tr, std::max<int64_t>(1, (rows + config.num_cores - 1) / config.num_cores));
  // Small whole planes (a head split's 32 x 64) make a tile of tp planes, consecutive in the innermost
  // plane dim, moved by 3-D DMA: one plane per tile would leave each tile's DMA latency exposed.
  const auto plane_tileable = [&](const Operand& o) {
    return o.mode == Bcast::Full && !o.materialize && (o.stride[2] == 1 || o.transposed);
  };
  int64_t tp = 1;
  if (!empty && tr == rows && tc == cols && planes > 1 && std::all_of(operands.begin(), operands.end(), plane_tileable)) {
    const int64_t inner = space.plane_dims.back();
    const int64_t limit = std::min<int64_t>(fit_rows / rows, (planes + config.num_cores - 1) / config.num_cores);
    for (int64_t d = std::min(inner, limit); d >= 1; --d)
      if (inner % d == 0) {
        tp = d;
        break;
      }
  }
  const int64_t vtr = tp * tr;  // a tile's rows on the vector unit
  int64_t slot_bytes = 0;
  for (Operand& o : operands) {
    o.tile_bytes = o.mode == Bcast::Full || o.materialize ? vtr * tc * o.esize
                   : o.mode == Bcast::Row                 ? tc * o.esize
                   : o.mode == Bcast::Col                 ? vtr * o.esize
                                                          : o.esize;
    if (o.materialize) o.tile_bytes = vtr * tc * o.esize, o.aux_bytes = (o.mode == Bcast::Col ? vtr : 1) * o.esize;
    if (o.transposed) o.aux_bytes = o.tile_bytes;
    if (o.decimation > 1) o.tile_bytes *= o.decimation, o.aux_bytes = o.tile_bytes;  // v.trans's s rows, the first the tile
    o.local = slot_bytes;
    slot_bytes += align64(o.tile_bytes);
    if (o.materialize || o.transposed || o.decimation > 1) o.aux_local = slot_bytes, slot_bytes += align64(o.aux_bytes);
  }
  const int64_t temp_bytes = align64(vtr * tc * esize), temps_local = 2 * slot_bytes;
  for (int64_t& at : constant_at)
    if (at >= 0) at = temps_local + temps * temp_bytes + at * 64;
  // In f32: each input's converted tile (by its broadcast mode), then the last step's result.
  std::vector<int64_t> converted_local(operands.size(), -1);
  int64_t result_local = -1;
  if (in_f32) {
    int64_t at = temps_local + temps * temp_bytes + constants * 64;
    for (size_t k = 1; k < operands.size(); ++k) {
      const Operand& o = operands[k];
      if (o.dtype == isa::DType::F32) continue;  // read where it is loaded
      const int64_t elements = o.mode == Bcast::Full || o.materialize ? vtr * tc : o.mode == Bcast::Row ? tc : o.mode == Bcast::Col ? vtr : 1;
      converted_local[k] = at;
      at += align64(elements * esize);
    }
    result_local = at;
  }
  const int64_t row_tiles = (rows + tr - 1) / tr, col_tiles = (cols + tc - 1) / tc;  // 0 when empty
  const int64_t tiles = planes / tp * row_tiles * col_tiles;
  const unsigned cores = static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(config.num_cores, tiles)));
  const unsigned store_channel = std::min<unsigned>(2, config.core.dma.channels - 1);

  ProgramBuilder b(name + " (generated)");
  operands[0].symbol = b.output("out", out.dtype, {static_cast<uint64_t>(std::max<int64_t>(out.storage_extent(), 1))});
  for (size_t k = 1; k < operands.size(); ++k)
    operands[k].symbol = b.input("in" + std::to_string(k - 1), op.inputs[k - 1].dtype,
                                 {static_cast<uint64_t>(std::max<int64_t>(op.inputs[k - 1].storage_extent(), 1))});

  constexpr int64_t IN_FULL = 0, IN_FREE = 1, OUT_FULL = 2, OUT_FREE = 3;
  const int64_t kDma0 = 1, kVec = 6, kStoreEngine = 1 + store_channel;
  const Label done = b.label();
  if (tiles == 0) {
    b.emit(Opcode::HALT, {});
  } else {
    // This core's tiles [t, t_end).
    const Reg t = b.reg(), t_end = b.reg();
    b.split_over_cores(tiles, t, t_end);
    b.branch(Opcode::BGE, {t.index, t_end.index}, done);
    std::vector<Reg> base;
    for (const Operand& o : operands) {
      const Reg r = b.reg();
      b.emit(Opcode::LA, {r.index, o.symbol});
      if (o.offset) b.addi(r, r, o.offset * o.esize);
      base.push_back(r);
    }
    // Two tokens in each FREE semaphore: two slots.
    for (int i = 0; i < 2; ++i) {
      b.emit(Opcode::SIGNAL, {kDma0, IN_FREE});
      b.emit(Opcode::SIGNAL, {kVec, OUT_FREE});
    }
    const Reg slot = b.reg();  // 0 or slot_bytes
    b.li(slot, 0);
    const Reg p = b.reg(), i0 = b.reg(), j0 = b.reg(), mt = b.reg(), nt = b.reg(), tmp = b.reg();
    const int64_t dt = static_cast<int64_t>(dtype);
    // The chain's second-operand constants, once per core.
    for (size_t i = 0; i < steps.size(); ++i) {
      if (constant_at[i] < 0) continue;
      b.li(tmp, constant_bits(steps[i].constant, dtype)), b.li(p, constant_at[i]), b.li(mt, 1);
      b.emit(Opcode::V_FILL, {dt, p.index, tmp.index, mt.index, mt.index});
    }
    const Reg addr = b.reg(), local = b.reg(), n0 = b.reg(), n1 = b.reg(), n2 = b.reg(), ds1 = b.reg(), ss1 = b.reg(), ds2 = b.reg(),
              ss2 = b.reg();
    const Label loop = b.label();
    b.bind(loop);
    // Tile t: plane p, rows i0 .. +mt, columns j0 .. +nt.
    b.tile_origin(t, rows, cols, tr, tc, p, i0, j0, mt, nt, tmp);
    const Reg vm = tp > 1 ? b.reg() : mt;  // the tile's rows on the vector unit
    if (tp > 1) b.muli(p, p, tp), b.muli(vm, mt, tp);
    // Planes of a tile: the third DMA dim (local planes dense, global ones at the innermost plane stride).
    const auto tile_planes = [&](size_t k) {
      if (tp == 1) return;
      b.li(n2, tp), b.li(ds2, rows * cols * operands[k].esize), b.li(ss2, space.plane_strides[k].back() * operands[k].esize);
    };

    // addr = base + (p*sP + i0*sR + j0*sC) * esize
    const auto global_address = [&](size_t k) {
      const Operand& o = operands[k];
      b.tile_address(addr, base[k], p, space.plane_dims, space.plane_strides[k], {{i0, o.stride[1]}, {j0, o.stride[2]}}, o.esize, tmp);
    };
    // The DMA shape of operand k's tile (full, row, column or scalar).
    const auto dma_shape = [&](const Operand& o, Bcast mode) {
      const TileRead read = mode == Bcast::Scalar ? TileRead::Scalar
                            : mode == Bcast::Col  ? TileRead::Col
                            : mode == Bcast::Row  ? TileRead::Row
                                                  : TileRead::Full;
      emit_tile_dma_shape(b, {n0, n1, n2, ds1, ss1, ds2, ss2}, read, o.stride, o.esize, mt, nt);
    };
    const auto dma = [&](Opcode opcode, int64_t channel, Reg dst, Reg src) {
      b.emit(opcode, {channel, dst.index, src.index, n0.index, n1.index, n2.index, ds1.index, ss1.index, ds2.index, ss2.index});
    };
    // A tile of planes whose DRAM side's plane stride is below its row stride (a permute that brings a
    // far dim next to the planes: [32, 64, 16, 64] from [16, 32, 64, 64]) walks the planes inside the
    // rows, so that its DRAM addresses run on instead of jumping a row stride every run.
    const auto planes_inside = [&](int64_t dram_row_stride, int64_t dram_plane_stride) {
      if (tp == 1 || std::abs(dram_plane_stride) >= std::abs(dram_row_stride)) return;
      for (const auto& [x, y] : {std::pair{n1, n2}, std::pair{ds1, ds2}, std::pair{ss1, ss2}}) b.mov(tmp, x), b.mov(x, y), b.mov(y, tmp);
    };

    // Loads, on dma ch0.
    b.emit(Opcode::WAIT, {kDma0, IN_FREE});
    for (size_t k = 1; k < operands.size(); ++k) {
      const Operand& o = operands[k];
      global_address(k);
      b.addi(local, slot, o.materialize || o.transposed || o.decimation > 1 ? o.aux_local : o.local);
      if (o.decimation > 1) {  // mt runs of (nt - 1) * s + 1 elements, s * nt apart here
        b.addi(n0, nt, -1), b.muli(n0, n0, o.decimation), b.addi(n0, n0, 1), b.muli(n0, n0, o.esize);
        b.mov(n1, mt), b.muli(ds1, nt, o.decimation * o.esize), b.li(ss1, o.stride[1] * o.esize);
        b.li(n2, 0), b.li(ds2, 0), b.li(ss2, 0);
      } else if (o.transposed) {  // nt runs of mt elements: the tile's columns, each a row here
        b.muli(n0, mt, o.esize), b.mov(n1, nt), b.muli(ds1, mt, o.esize), b.li(ss1, o.stride[2] * o.esize);
        b.li(n2, 0), b.li(ds2, 0), b.li(ss2, 0);
      } else {
        dma_shape(o, o.mode);  // a materialized operand loads its column or scalar here
      }
      tile_planes(k);
      if (o.decimation == 1 && (o.transposed || o.mode == Bcast::Full))
        planes_inside(o.transposed ? o.stride[2] : o.stride[1], space.plane_strides[k].back());
      dma(Opcode::DMA_LD, 0, local, addr);
    }
    b.emit(Opcode::SIGNAL, {kDma0, IN_FULL});

    // Compute, on the vector unit.
    b.emit(Opcode::WAIT, {kVec, IN_FULL});
    b.emit(Opcode::WAIT, {kVec, OUT_FREE});
    const Reg a_local = b.reg(), b_local = b.reg(), o_local = b.reg();
    for (size_t k = 1; k < operands.size(); ++k) {
      const Operand& o = operands[k];
      if (o.decimation > 1) {  // [mt * nt x s] turned over: its first row is the tile
        b.addi(a_local, slot, o.local), b.addi(local, slot, o.aux_local), b.mul(b_local, mt, nt), b.li(tmp, o.decimation);
        b.emit(Opcode::V_TRANS, {int64_t(o.dtype), a_local.index, local.index, b_local.index, tmp.index});
      }
      if (!o.transposed) continue;
      b.addi(a_local, slot, o.local), b.addi(local, slot, o.aux_local);
      if (tp > 1) b.li(b_local, tp);
      const Label plane = b.label();
      b.bind(plane);  // each plane of the tile turned over
      b.emit(Opcode::V_TRANS, {int64_t(o.dtype), a_local.index, local.index, nt.index, mt.index});
      if (tp > 1) {
        b.addi(a_local, a_local, rows * cols * o.esize), b.addi(local, local, rows * cols * o.esize);
        b.branch(Opcode::DBNZ, {b_local.index}, plane);
      }
    }
    // An input broadcast along columns that is read as a first operand becomes a full tile: ones * column.
    for (size_t k = 1; k < operands.size(); ++k) {
      const Operand& o = operands[k];
      if (!o.materialize) continue;
      b.addi(a_local, slot, o.local);
      b.li(tmp, isa::dtype_is_float(o.dtype) ? 0x3f800000 : 1);  // 1.0f or 1
      b.emit(Opcode::V_FILL, {int64_t(o.dtype), a_local.index, tmp.index, vm.index, nt.index});
      b.addi(local, slot, o.aux_local);
      b.emit(Opcode::V_MUL, {int64_t(o.dtype), static_cast<int64_t>(o.mode), a_local.index, a_local.index, local.index, vm.index, nt.index});
    }
    // In f32: every input's tile converted (a product with ones above is exact in any dtype).
    if (in_f32) {
      const Reg one = b.reg();
      b.li(one, 1);
      for (size_t k = 1; k < operands.size(); ++k) {
        const Operand& o = operands[k];
        if (converted_local[k] < 0) continue;  // (an f32 input)
        const bool full = o.mode == Bcast::Full || o.materialize;
        const Reg r = full || o.mode == Bcast::Col ? vm : one, c = full || o.mode == Bcast::Row ? nt : one;
        b.addi(a_local, slot, o.local);
        b.li(local, converted_local[k]);
        b.emit(Opcode::V_CVT, {dt, int64_t(o.dtype), local.index, a_local.index, r.index, c.index});
      }
    }
    b.addi(o_local, slot, operands[0].local);
    // Value v's local address into `reg`; returns how a second operand is broadcast.
    const auto value_address = [&](Reg reg, const ChainValue& v, size_t step) {
      if (v.kind == ChainValue::Kind::Step) return b.li(reg, temps_local + temp_of[size_t(v.index)] * temp_bytes), int64_t(Bcast::Full);
      if (v.kind == ChainValue::Kind::Constant) return b.li(reg, constant_at[step]), int64_t(Bcast::Scalar);
      const Operand& o = operands[size_t(v.index) + 1];
      if (in_f32 && converted_local[size_t(v.index) + 1] >= 0) b.li(reg, converted_local[size_t(v.index) + 1]);
      else b.addi(reg, slot, o.local);
      return o.materialize ? int64_t(Bcast::Full) : static_cast<int64_t>(o.mode);
    };
    for (size_t i = 0; i < steps.size(); ++i) {
      const ChainStep& step = steps[i];
      const bool last = i + 1 == steps.size();
      const Reg dst = last && (!in_f32 || out.dtype == dtype) ? o_local : b_local;
      if (dst.index != o_local.index) b.li(dst, last ? result_local : temps_local + temp_of[i] * temp_bytes);
      if (step.kind == OpKind::CAST) {
        value_address(a_local, step.args[0], i);
        if (out.dtype == dtype) b.emit(Opcode::V_MOV, {dt, dst.index, a_local.index, vm.index, nt.index});
        else b.emit(Opcode::V_CVT, {int64_t(out.dtype), dt, dst.index, a_local.index, vm.index, nt.index});
      } else if (op_arity(step.kind) == 1) {
        value_address(a_local, step.args[0], i);
        b.emit(traits(step.kind).opcode, {dt, dst.index, a_local.index, vm.index, nt.index});
      } else {
        Reg first = a_local;
        if (step.args[0].kind == ChainValue::Kind::Constant) {  // a constant first operand: a tile of it, in the result's own tile
          b.li(tmp, constant_bits(step.constant, dtype));
          b.emit(Opcode::V_FILL, {dt, dst.index, tmp.index, vm.index, nt.index});
          first = dst;
        } else {
          value_address(a_local, step.args[0], i);
        }
        const Reg second = first.index == a_local.index ? local : a_local;
        const int64_t mode = value_address(second, step.args[1], i);
        b.emit(traits(step.kind).opcode, {dt, mode, dst.index, first.index, second.index, vm.index, nt.index});
      }
    }
    // In f32: the result rounded once into the output's tile.
    if (in_f32 && out.dtype != dtype) b.emit(Opcode::V_CVT, {int64_t(out.dtype), dt, o_local.index, b_local.index, vm.index, nt.index});
    b.emit(Opcode::SIGNAL, {kVec, IN_FREE});
    b.emit(Opcode::SIGNAL, {kVec, OUT_FULL});

    // Store, on the store channel.
    b.emit(Opcode::WAIT, {kStoreEngine, OUT_FULL});
    global_address(0);
    dma_shape(operands[0], Bcast::Full);
    tile_planes(0);
    // A store's source is the dense local tile, its destination strided: swap the strides.
    b.mov(tmp, ds1), b.mov(ds1, ss1), b.mov(ss1, tmp);
    b.mov(tmp, ds2), b.mov(ds2, ss2), b.mov(ss2, tmp);
    planes_inside(operands[0].stride[1], space.plane_strides[0].back());
    dma(Opcode::DMA_ST, store_channel, addr, o_local);
    b.emit(Opcode::SIGNAL, {kStoreEngine, OUT_FREE});

    b.emit(Opcode::XORI, {slot.index, slot.index, slot_bytes});
    b.addi(t, t, 1);
    b.branch(Opcode::BLT, {t.index, t_end.index}, loop);
    b.bind(done);
    b.emit(Opcode::HALT, {});
  }
  if (tiles == 0) b.bind(done);

  Kernel kernel;
  kernel.program = b.finish();
  kernel.cores = cores;
  std::ostringstream plan;
  plan << name << ": " << out.to_string() << " as " << planes << " x " << rows << " x " << cols
       << " (planes x rows x cols); tiles of " << (tp > 1 ? std::to_string(tp) + " planes x " : "") << tr << " x " << tc << ", " << tiles << " tiles over " << cores << " cores; "
       << temps_local + temps * temp_bytes + constants * 64 << " bytes of scratchpad (two slots";
  if (chain) plan << ", the intermediates and constants";
  plan << "); loads on dma ch0, stores on dma ch" << store_channel << "\n";
  if (chain)
    plan << "  steps: " << chain_to_string(steps) << "; " << temps << " intermediate tile(s) of " << temp_bytes << " bytes, "
         << constants << " constant(s)\n";
  if (in_f32)
    plan << "  in f32: each bf16 or f16 input tile converted on the vector unit, the result rounded once to " << isa::dtype_name(out.dtype) << "\n";
  for (size_t k = 1; k < operands.size(); ++k)
    plan << "  in" << k - 1 << ": " << op.inputs[k - 1].to_string() << ": strides " << operands[k].stride[0] << ", " << operands[k].stride[1]
         << ", " << operands[k].stride[2] << "; " << mode_name(operands[k]) << "\n";
  kernel.plan = plan.str();
  return kernel;
}

}  // namespace npu::compiler
