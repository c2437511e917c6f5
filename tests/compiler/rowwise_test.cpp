// Row ops (softmax, log_softmax, layer_norm, rms_norm, last-dim sum / mean /
// amax / amin) compiled for the chip and run through the driver, against a
// reference in double, on tiny and base. Bounds: the device works in f32
// and sums a row of L terms in order, so a sum is within L * 2^-24 * sum|x|
// and every derived value within (L + 8) * 2^-24 relative to the
// magnitudes it is made of (plus 1e-6 absolute for the transcendentals);
// bf16 outputs add half a bf16 ulp (rtol 2^-8). amax and amin are exact.
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <random>

#include "kernel_runner.h"

namespace npu::compiler {
namespace {

using isa::DType;
using testing::load;

class RowOps : public testing::KernelTest {
 protected:
  void check(const OpDesc& op, uint32_t seed = 1) {
    SCOPED_TRACE(op.key());
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> values(-3, 3);
    // x in [-3, 3]; weights and biases in [-2, 4] (away from 0 on average)
    const testing::KernelRun run = KernelTest::run(op, [&](size_t k, size_t) { return values(rng) + (k == 0 ? 0.0 : 1.0); });
    SCOPED_TRACE(run.kernel->plan);
    const std::vector<std::vector<uint8_t>>& storage = run.inputs;
    const std::vector<uint8_t>& result = run.output;
    const TensorDesc& out = op.output;
    const size_t oe = isa::dtype_size_bytes(out.dtype);
    const TensorDesc& x = op.inputs[0];
    const int64_t length = x.shape.back(), rows = x.numel() / length;
    const size_t xe = isa::dtype_size_bytes(x.dtype);
    const double u = std::ldexp(1.0, -24) * double(length + 8);
    const double out_rtol = out.dtype == DType::BF16 ? std::ldexp(1.0, -8) : 0;
    // Element (r, j) of a [..., L] view: r indexes the leading dims in order.
    const auto offset = [](const TensorDesc& t, int64_t r, int64_t j) {
      int64_t off = t.storage_offset + j * t.strides.back();
      for (size_t d = t.shape.size() - 1; d-- > 0;) {
        off += (r % t.shape[d]) * t.strides[d];
        r /= t.shape[d];
      }
      return off;
    };
    int mismatches = 0;
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<double> v(static_cast<size_t>(length));
      double sum = 0, abs_sum = 0, max = -INFINITY, min = INFINITY;
      for (int64_t j = 0; j < length; ++j) {
        v[size_t(j)] = load(x.dtype, &storage[0][size_t(offset(x, r, j)) * xe]);
        sum += v[size_t(j)], abs_sum += std::fabs(v[size_t(j)]);
        max = std::max(max, v[size_t(j)]), min = std::min(min, v[size_t(j)]);
      }
      const auto expect = [&](int64_t index, double want, double bound) {
        const double got = load(out.dtype, &result[size_t(index) * oe]);
        bound += out_rtol * std::fabs(want);
        if (!(std::fabs(got - want) <= bound) && ++mismatches <= 5)
          ADD_FAILURE() << "row " << r << " element " << index << ": got " << got << ", want " << want << " +- " << bound;
      };
      switch (op.kind) {
        case OpKind::SUM: expect(r, sum, u * abs_sum); break;
        case OpKind::MEAN: expect(r, sum / double(length), u * abs_sum / double(length) + 1e-7 * std::fabs(sum / double(length))); break;
        case OpKind::AMAX: expect(r, max, 0); break;
        case OpKind::AMIN: expect(r, min, 0); break;
        case OpKind::ARGMAX:
        case OpKind::ARGMIN: {
          const double target = op.kind == OpKind::ARGMAX ? max : min;
          expect(r, double(std::find(v.begin(), v.end(), target) - v.begin()), 0);  // the first of equal extrema
          break;
        }
        case OpKind::VAR:
        case OpKind::STD: {
          const double mean = sum / double(length);
          double squares = 0, abs_squares = 0;
          for (const double a : v) squares += (a - mean) * (a - mean), abs_squares += a * a;
          const double var = squares / std::max(0.0, double(length) - op.correction);
          // The deviations carry the mean's error (u relative to sum |x|); squared and summed: 4 u of sum x^2 (as a variance).
          const double var_bound = 4 * u * (abs_squares + abs_sum * abs_sum / double(length)) / std::max(1.0, double(length) - op.correction);
          if (op.kind == OpKind::VAR) expect(r, var, var_bound + 1e-7 * var);
          else expect(r, std::sqrt(var), var_bound / std::max(std::sqrt(var), 1e-3) + 1e-7 * std::sqrt(var));
          break;
        }
        case OpKind::SOFTMAX:
        case OpKind::LOG_SOFTMAX: {
          double z = 0;
          for (const double a : v) z += std::exp(a - max);
          for (int64_t j = 0; j < length; ++j) {
            const double y = op.kind == OpKind::SOFTMAX ? std::exp(v[size_t(j)] - max) / z : v[size_t(j)] - max - std::log(z);
            expect(offset(out, r, j), y, 4 * u * std::fabs(y) + 1e-6 + (op.kind == OpKind::LOG_SOFTMAX ? 4 * u * (std::fabs(max) + 1) : 0));
          }
          break;
        }
        default: {  // layer_norm, rms_norm
          const double mean = op.kind == OpKind::LAYER_NORM ? sum / double(length) : 0;
          double var = 0;
          for (const double a : v) var += (a - mean) * (a - mean);
          var /= double(length);
          const double rstd = 1 / std::sqrt(var + op.epsilon);
          for (int64_t j = 0; j < length; ++j) {
            double y = (v[size_t(j)] - mean) * rstd, scale = 1;
            if (op.inputs.size() >= 2) scale = load(op.inputs[1].dtype, &storage[1][size_t(j) * isa::dtype_size_bytes(op.inputs[1].dtype)]);
            y *= scale;
            if (op.inputs.size() == 3) y += load(op.inputs[2].dtype, &storage[2][size_t(j) * isa::dtype_size_bytes(op.inputs[2].dtype)]);
            expect(offset(out, r, j), y, 8 * u * (std::fabs(y) + std::fabs(scale) * (std::fabs(v[size_t(j)] - mean) + std::fabs(mean)) * rstd) + 1e-6);
          }
        }
      }
    }
    EXPECT_EQ(mismatches, 0);
  }

};

TEST_P(RowOps, SoftmaxAndLogSoftmax) {
  for (const auto& shape : std::vector<std::vector<int64_t>>{{1, 1}, {7, 13}, {33, 1000}, {4, 5, 67}, {1000}})
    for (const OpKind kind : {OpKind::SOFTMAX, OpKind::LOG_SOFTMAX}) check(OpDesc(kind, {t(DType::F32, shape)}, t(DType::F32, shape)));
  check(OpDesc(OpKind::SOFTMAX, {t(DType::BF16, {64, 300})}, t(DType::BF16, {64, 300})));
}

TEST_P(RowOps, SoftmaxOverAStridedLastDim) {
  TensorDesc x = t(DType::F32, {40, 24});
  x.strides = {1, 40};  // the transpose of a contiguous [24, 40]
  check(OpDesc(OpKind::SOFTMAX, {x}, t(DType::F32, {40, 24})));
}

// softmax and log_softmax along a dim that is not innermost in memory, into an output of the same layout
// (the bridge's x.movedim(d, -1)): read in runs along the contiguous dim, all of the dim in one chunk
// (read once) or, for a dim too long for the scratchpad, in chunks (read twice).
TEST_P(RowOps, SoftmaxAlongADimThatIsNotInnermostReadsRuns) {
  const auto view = [](DType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides) {
    TensorDesc x = t(dtype, shape);
    x.strides = std::move(strides);
    return x;
  };
  for (const OpKind kind : {OpKind::SOFTMAX, OpKind::LOG_SOFTMAX}) {
    // (The last two: several column tiles per outer index, each outer's taken from another block on
    // per core, one partial.)
    for (const TensorDesc& x : {view(DType::F32, {40, 24}, {1, 40}), view(DType::F32, {3, 70, 40}, {2800, 1, 70}),
                                view(DType::BF16, {300, 2600}, {1, 300}), view(DType::F32, {6, 600, 20}, {12000, 1, 600}),
                                view(DType::BF16, {5, 1300, 30}, {39000, 1, 1300})})
      check(OpDesc(kind, {x}, x));
  }
  const TensorDesc small = view(DType::F32, {3, 70, 40}, {2800, 1, 70}), long_dim = view(DType::BF16, {300, 2600}, {1, 300});
  EXPECT_NE(compiler_.compile(OpDesc(OpKind::SOFTMAX, {small}, small))->plan.find("x read once"), std::string::npos);
  EXPECT_NE(compiler_.compile(OpDesc(OpKind::SOFTMAX, {long_dim}, long_dim))->plan.find("x read twice"), std::string::npos)
      << compiler_.compile(OpDesc(OpKind::SOFTMAX, {long_dim}, long_dim))->plan;
  // Where all of L is one chunk, one raw slot; softmax takes its exps in place of x - m: 10 bytes of
  // scratchpad per bf16 element, log_softmax 14. On a 2 MiB scratchpad 1536 rows of 128 columns fit one
  // chunk for softmax, not for log_softmax.
  if (sim::load_chip_config(GetParam()).core.scratchpad.size_bytes == 2 << 20) {
    const TensorDesc tall = view(DType::BF16, {4, 128, 1536}, {196608, 1, 128});
    const std::string soft = compiler_.compile(OpDesc(OpKind::SOFTMAX, {tall}, tall))->plan;
    const std::string log = compiler_.compile(OpDesc(OpKind::LOG_SOFTMAX, {tall}, tall))->plan;
    EXPECT_NE(soft.find("tiles of 128 columns"), std::string::npos) << soft;
    EXPECT_NE(soft.find("x read once"), std::string::npos) << soft;
    EXPECT_NE(log.find("x read twice"), std::string::npos) << log;
  }
}

TEST_P(RowOps, LayerNormAndRmsNorm) {
  OpDesc plain(OpKind::LAYER_NORM, {t(DType::F32, {9, 77})}, t(DType::F32, {9, 77}));
  check(plain);
  OpDesc affine(OpKind::LAYER_NORM, {t(DType::F32, {3, 11, 64}), t(DType::F32, {64}), t(DType::F32, {64})}, t(DType::F32, {3, 11, 64}));
  affine.epsilon = 1e-6;
  check(affine);
  check(OpDesc(OpKind::LAYER_NORM, {t(DType::BF16, {50, 128}), t(DType::BF16, {128}), t(DType::BF16, {128})}, t(DType::BF16, {50, 128})));
  check(OpDesc(OpKind::RMS_NORM, {t(DType::F32, {21, 96}), t(DType::F32, {96})}, t(DType::F32, {21, 96})));
  // A half-precision x with an f32 result (a norm of x.float()): converted on the chip, not rounded at the end.
  check(OpDesc(OpKind::LAYER_NORM, {t(DType::BF16, {50, 128}), t(DType::F32, {128}), t(DType::F32, {128})}, t(DType::F32, {50, 128})));
  check(OpDesc(OpKind::RMS_NORM, {t(DType::F16, {21, 96}), t(DType::F32, {96})}, t(DType::F32, {21, 96})));
  check(OpDesc(OpKind::SOFTMAX, {t(DType::BF16, {64, 300})}, t(DType::F32, {64, 300})));  // softmax(half_to_float=True)
}

TEST_P(RowOps, LastDimReductions) {
  for (const OpKind kind : {OpKind::SUM, OpKind::MEAN, OpKind::AMAX, OpKind::AMIN}) {
    check(OpDesc(kind, {t(DType::F32, {37, 53})}, t(DType::F32, {37})));
    check(OpDesc(kind, {t(DType::F32, {2, 6, 129})}, t(DType::F32, {2, 6, 1})));  // keepdim
  }
  check(OpDesc(OpKind::SUM, {t(DType::BF16, {16, 200})}, t(DType::BF16, {16})));
}

// Reductions along a dim that is not innermost in memory (x's last dim strided, its leading dims ending
// in a contiguous run): a matrix's dim 0, the middle dim of a 3-D tensor, over several tiles and chunks
// of the reduced dim, each read in runs along the contiguous dim.
TEST_P(RowOps, ReductionsAlongADimThatIsNotInnermostReadRuns) {
  const auto view = [](DType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides) {
    TensorDesc x = t(dtype, shape);
    x.strides = std::move(strides);
    return x;
  };
  for (const OpKind kind : {OpKind::SUM, OpKind::MEAN, OpKind::AMAX, OpKind::AMIN}) {
    check(OpDesc(kind, {view(DType::F32, {53, 37}, {1, 53})}, t(DType::F32, {53})));                 // dim 0 of [37, 53]
    check(OpDesc(kind, {view(DType::F32, {3, 70, 40}, {2800, 1, 70})}, t(DType::F32, {3, 70})));     // dim 1 of [3, 40, 70]
    check(OpDesc(kind, {view(DType::BF16, {700, 1100}, {1, 700})}, t(DType::BF16, {700})));         // dim 0 of [1100, 700]
    check(OpDesc(kind, {view(DType::F32, {6, 600, 20}, {12000, 1, 600})}, t(DType::F32, {6, 600})));  // column tiles per outer
  }
  check(OpDesc(OpKind::SUM, {view(DType::BF16, {2, 300, 90}, {27000, 1, 300})}, t(DType::F32, {2, 300})));  // kept in f32
  check(OpDesc(OpKind::AMAX, {view(DType::I32, {130, 77}, {1, 130})}, t(DType::I32, {130})));
  const OpDesc column(OpKind::SUM, {view(DType::F32, {53, 37}, {1, 53})}, t(DType::F32, {53}));
  EXPECT_NE(compiler_.compile(column)->plan.find("reduced along its last dim (stride 53)"), std::string::npos) << compiler_.compile(column)->plan;
}

// i32 (int64's words) compared as integers: values that differ below f32's precision, both signs.
TEST_P(RowOps, AmaxAminAndSumOfI32AreExact) {
  const auto value = [](size_t i) { return double(int64_t((uint64_t(i) * 2654435761u) % 4294967296u) - 2147483648); };
  for (const OpKind kind : {OpKind::AMAX, OpKind::AMIN, OpKind::SUM}) {
    const OpDesc op(kind, {t(DType::I32, {13, 301})}, t(DType::I32, {13}));
    SCOPED_TRACE(op.key());
    const auto result = run(op, [&](size_t, size_t i) { return value(i); });
    for (size_t r = 0; r < 13; ++r) {
      double want = value(r * 301);
      uint32_t sum = uint32_t(int32_t(want));  // wraps modulo 2^32, as the CPU's int32 arithmetic
      for (size_t j = 1; j < 301; ++j) {
        const double v = value(r * 301 + j);
        want = kind == OpKind::AMAX ? std::max(want, v) : std::min(want, v);
        sum += uint32_t(int32_t(v));
      }
      if (kind == OpKind::SUM) want = double(int32_t(sum));
      EXPECT_EQ(load(DType::I32, &result.output[r * 4]), want) << "row " << r;
    }
  }
  EXPECT_THROW(compiler_.compile(OpDesc(OpKind::AMAX, {t(DType::I32, {4, 4})}, t(DType::F32, {4}))), std::invalid_argument);
  EXPECT_THROW(compiler_.compile(OpDesc(OpKind::MEAN, {t(DType::I32, {4, 4})}, t(DType::I32, {4}))), UnsupportedOp);
}

TEST_P(RowOps, EmptyInputsGiveProgramsThatHalt) {
  for (const auto& shape : std::vector<std::vector<int64_t>>{{0, 5}, {3, 0}, {0}}) {
    const auto kernel = compiler_.compile(OpDesc(OpKind::SOFTMAX, {t(DType::F32, shape)}, t(DType::F32, shape)));
    EXPECT_EQ(kernel->program.code.at(0).words.size(), 1u);
  }
}

TEST_P(RowOps, WhatItCannotDoIsSaidSo) {
  EXPECT_THROW(compiler_.compile(OpDesc(OpKind::SOFTMAX, {t(DType::I32, {4, 4})}, t(DType::I32, {4, 4}))), UnsupportedOp);
  EXPECT_THROW(compiler_.compile(OpDesc(OpKind::AMAX, {t(DType::BF16, {4, 4})}, t(DType::F32, {4}))), std::invalid_argument);
  EXPECT_THROW(compiler_.compile(OpDesc(OpKind::SUM, {t(DType::F32, {4, 4})}, t(DType::F32, {3}))), std::invalid_argument);
}

TEST_P(RowOps, VarianceAndStandardDeviation) {
  for (const OpKind kind : {OpKind::VAR, OpKind::STD}) {
    check(OpDesc(kind, {t(DType::F32, {37, 53})}, t(DType::F32, {37})));
    OpDesc population(kind, {t(DType::F32, {2, 6, 129})}, t(DType::F32, {2, 6, 1}));
    population.correction = 0;
    check(population);
    check(OpDesc(kind, {t(DType::BF16, {16, 200})}, t(DType::BF16, {16})));
    check(OpDesc(kind, {t(DType::BF16, {16, 200})}, t(DType::F32, {16})));
  }
  TensorDesc x = t(DType::F32, {40, 24});
  x.strides = {1, 40};  // along a non-last dim of a contiguous [24, 40]
  check(OpDesc(OpKind::VAR, {x}, t(DType::F32, {40})));
}

// The backward row ops against their formulas in double, from the values the chip was given. Bound:
// the device works in f32 and sums a row of L terms, so each term is within (L + 8) * 2^-24 of the
// magnitudes it is made of; bf16 outputs add half a bf16 ulp.
class RowBackward : public testing::KernelTest {
 protected:
  void check(const OpDesc& op, uint32_t seed = 3) {
    SCOPED_TRACE(op.key());
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> unit(0, 1);
    // g in [-3, 3]; softmax's y in [0, 1], log_softmax's in [-6, 0]; x in [-3, 3], mean in [-0.5, 0.5],
    // rstd in [0.5, 2], weight in [-1, 3].
    const bool rms = op.kind == OpKind::RMS_NORM_BACKWARD;
    const size_t first_param = rms ? 3 : 4;
    const auto value = [&](size_t k, size_t) {
      const double r = unit(rng);
      if (k == 0) return 6 * r - 3;
      if (k == 1) return op.kind == OpKind::SOFTMAX_BACKWARD ? r : op.kind == OpKind::LOG_SOFTMAX_BACKWARD ? -6 * r : 6 * r - 3;
      if (k == first_param) return 4 * r - 1;
      return k == first_param - 1 ? 0.5 + 1.5 * r : r - 0.5;
    };
    const testing::KernelRun run = KernelTest::run(op, value);
    SCOPED_TRACE(run.kernel->plan);
    const TensorDesc &g = op.inputs[0], &out = op.output;
    const int64_t length = g.shape.back(), rows = g.numel() / length;
    const double u = std::ldexp(1.0, -24) * double(length + 8);
    const double out_rtol = out.dtype == DType::BF16 ? std::ldexp(1.0, -8) : 0;
    const auto at = [&](size_t k, int64_t r, int64_t j) {  // element (r, j) of input k viewed as rows x L
      const TensorDesc& t = op.inputs[k];
      int64_t off = t.storage_offset + j * t.strides.back(), rest = r;
      for (size_t d = t.shape.size() - 1; d-- > 0;) off += (rest % t.shape[d]) * t.strides[d], rest /= t.shape[d];
      return load(t.dtype, &run.inputs[k][size_t(off) * isa::dtype_size_bytes(t.dtype)]);
    };
    int mismatches = 0;
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<double> want(static_cast<size_t>(length)), scale(static_cast<size_t>(length));
      if (op.kind == OpKind::SOFTMAX_BACKWARD) {
        double dot = 0, abs_dot = 0;
        for (int64_t j = 0; j < length; ++j) dot += at(0, r, j) * at(1, r, j), abs_dot += std::fabs(at(0, r, j) * at(1, r, j));
        for (int64_t j = 0; j < length; ++j)
          want[size_t(j)] = at(1, r, j) * (at(0, r, j) - dot), scale[size_t(j)] = std::fabs(at(1, r, j)) * (std::fabs(at(0, r, j)) + abs_dot);
      } else if (op.kind == OpKind::LOG_SOFTMAX_BACKWARD) {
        double sum = 0, abs_sum = 0;
        for (int64_t j = 0; j < length; ++j) sum += at(0, r, j), abs_sum += std::fabs(at(0, r, j));
        for (int64_t j = 0; j < length; ++j)
          want[size_t(j)] = at(0, r, j) - std::exp(at(1, r, j)) * sum,
          scale[size_t(j)] = std::fabs(at(0, r, j)) + std::exp(at(1, r, j)) * abs_sum + 1e-6 / u;
      } else {  // layer_norm_backward, rms_norm_backward (whose mean is 0 and mean(h) unused)
        const auto stat = [&](size_t k) { return load(op.inputs[k].dtype, &run.inputs[k][size_t(r) * isa::dtype_size_bytes(op.inputs[k].dtype)]); };
        const double mean = rms ? 0 : stat(2), rstd = stat(first_param - 1);
        std::vector<double> h(static_cast<size_t>(length)), xhat(static_cast<size_t>(length));
        double h_mean = 0, hx_mean = 0, abs_h = 0, abs_hx = 0;
        for (int64_t j = 0; j < length; ++j) {
          const double w = op.inputs.size() > first_param
                               ? load(op.inputs[first_param].dtype, &run.inputs[first_param][size_t(j) * isa::dtype_size_bytes(op.inputs[first_param].dtype)])
                               : 1;
          h[size_t(j)] = at(0, r, j) * w, xhat[size_t(j)] = (at(1, r, j) - mean) * rstd;
          h_mean += h[size_t(j)] / double(length), hx_mean += h[size_t(j)] * xhat[size_t(j)] / double(length);
          abs_h += std::fabs(h[size_t(j)]) / double(length), abs_hx += std::fabs(h[size_t(j)] * xhat[size_t(j)]) / double(length);
        }
        if (rms) h_mean = abs_h = 0;
        for (int64_t j = 0; j < length; ++j) {
          want[size_t(j)] = rstd * (h[size_t(j)] - h_mean - xhat[size_t(j)] * hx_mean);
          scale[size_t(j)] = 2 * rstd * (std::fabs(h[size_t(j)]) + abs_h + (std::fabs(xhat[size_t(j)]) + std::fabs(mean) * rstd + 1) * abs_hx);
        }
      }
      for (int64_t j = 0; j < length; ++j) {
        int64_t off = out.storage_offset + j * out.strides.back(), rest = r;
        for (size_t d = out.shape.size() - 1; d-- > 0;) off += (rest % out.shape[d]) * out.strides[d], rest /= out.shape[d];
        const double got = load(out.dtype, &run.output[size_t(off) * isa::dtype_size_bytes(out.dtype)]);
        const double bound = 4 * u * scale[size_t(j)] + out_rtol * std::fabs(want[size_t(j)]);
        if (!(std::fabs(got - want[size_t(j)]) <= bound) && ++mismatches <= 5)
          ADD_FAILURE() << "row " << r << " element " << j << ": got " << got << ", want " << want[size_t(j)] << " +- " << bound;
      }
    }
    EXPECT_EQ(mismatches, 0);
  }
};

TEST_P(RowBackward, SoftmaxAndLogSoftmax) {
  for (const auto& shape : std::vector<std::vector<int64_t>>{{1, 1}, {7, 13}, {33, 1000}, {4, 5, 67}, {1000}})
    for (const OpKind kind : {OpKind::SOFTMAX_BACKWARD, OpKind::LOG_SOFTMAX_BACKWARD})
      check(OpDesc(kind, {t(DType::F32, shape), t(DType::F32, shape)}, t(DType::F32, shape)));
  // bf16 gradients and outputs; an f32 output of a bf16 forward's input.
  check(OpDesc(OpKind::SOFTMAX_BACKWARD, {t(DType::BF16, {64, 300}), t(DType::BF16, {64, 300})}, t(DType::BF16, {64, 300})));
  check(OpDesc(OpKind::LOG_SOFTMAX_BACKWARD, {t(DType::F32, {9, 130}), t(DType::BF16, {9, 130})}, t(DType::F32, {9, 130})));
}

TEST_P(RowBackward, AlongAStridedDim) {
  TensorDesc g = t(DType::F32, {40, 24}), y = t(DType::F32, {40, 24}), out = t(DType::F32, {40, 24});
  g.strides = {1, 40};  // softmax over dim 0 of [24, 40] tensors: the bridge moves that dim last
  out.strides = {1, 40};
  check(OpDesc(OpKind::SOFTMAX_BACKWARD, {g, y}, out));
}

TEST_P(RowBackward, LayerNorm) {
  check(OpDesc(OpKind::LAYER_NORM_BACKWARD, {t(DType::F32, {9, 77}), t(DType::F32, {9, 77}), t(DType::F32, {9, 1}), t(DType::F32, {9, 1})},
               t(DType::F32, {9, 77})));
  check(OpDesc(OpKind::LAYER_NORM_BACKWARD,
               {t(DType::F32, {3, 11, 64}), t(DType::F32, {3, 11, 64}), t(DType::F32, {3, 11, 1}), t(DType::F32, {3, 11, 1}), t(DType::F32, {64})},
               t(DType::F32, {3, 11, 64})));
  check(OpDesc(OpKind::LAYER_NORM_BACKWARD,
               {t(DType::BF16, {50, 128}), t(DType::BF16, {50, 128}), t(DType::BF16, {50, 1}), t(DType::BF16, {50, 1}), t(DType::BF16, {128})},
               t(DType::BF16, {50, 128})));
  check(OpDesc(OpKind::LAYER_NORM_BACKWARD, {t(DType::F32, {1, 1}), t(DType::F32, {1, 1}), t(DType::F32, {1}), t(DType::F32, {1})},
               t(DType::F32, {1, 1})));
}

TEST_P(RowBackward, RmsNorm) {
  check(OpDesc(OpKind::RMS_NORM_BACKWARD, {t(DType::F32, {9, 77}), t(DType::F32, {9, 77}), t(DType::F32, {9, 1})}, t(DType::F32, {9, 77})));
  check(OpDesc(OpKind::RMS_NORM_BACKWARD, {t(DType::F32, {3, 11, 64}), t(DType::F32, {3, 11, 64}), t(DType::F32, {3, 11, 1}), t(DType::F32, {64})},
               t(DType::F32, {3, 11, 64})));
  // bf16 as PyTorch's _fused_rms_norm gives it: rstd in f32.
  check(OpDesc(OpKind::RMS_NORM_BACKWARD, {t(DType::BF16, {50, 128}), t(DType::BF16, {50, 128}), t(DType::F32, {50, 1}), t(DType::BF16, {128})},
               t(DType::BF16, {50, 128})));
}

TEST_P(RowBackward, WhatItCannotDoIsSaidSo) {
  // Rows longer than the scratchpad holds (the bridge composes these from other kernels).
  const std::vector<int64_t> huge{2, int64_t(sim::load_chip_config(GetParam()).core.scratchpad.size_bytes)};
  EXPECT_THROW(compiler_.compile(OpDesc(OpKind::SOFTMAX_BACKWARD, {t(DType::F32, huge), t(DType::F32, huge)}, t(DType::F32, huge))), UnsupportedOp);
  EXPECT_THROW(compiler_.compile(OpDesc(OpKind::SOFTMAX_BACKWARD, {t(DType::F32, {4, 4}), t(DType::F32, {4, 5})}, t(DType::F32, {4, 4}))),
               std::invalid_argument);
  EXPECT_THROW(compiler_.compile(OpDesc(OpKind::LAYER_NORM_BACKWARD, {t(DType::F32, {4, 4}), t(DType::F32, {4, 4})}, t(DType::F32, {4, 4}))),
               std::invalid_argument);  // no mean and rstd
  EXPECT_THROW(compiler_.compile(OpDesc(OpKind::LAYER_NORM_BACKWARD, {t(DType::F32, {4, 4}), t(DType::F32, {4, 4}), t(DType::F32, {3}),
                                                                      t(DType::F32, {4})},
                                        t(DType::F32, {4, 4}))),
               std::invalid_argument);  // one mean per row
}

// topk: each row's k positions against a stable sort of the row (NaN above +inf, as PyTorch ranks it),
// with ties, NaNs of both signs, infinities and signed zeros among the values.
class TopK : public testing::KernelTest {
 protected:
  void check(DType dtype, std::vector<int64_t> shape, int64_t k, bool largest, uint32_t seed = 5) {
    std::vector<int64_t> out_shape = shape;
    out_shape.back() = k;
    OpDesc op(OpKind::TOPK, {t(dtype, shape)}, t(DType::I32, out_shape));
    op.largest = largest;
    SCOPED_TRACE(op.key());
    std::mt19937 rng(seed);
    const double specials[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0, -0.0, 1.0};
    const auto value = [&](size_t, size_t) {
      const uint32_t r = rng() % 16;
      if (r < 3) return specials[rng() % 7];
      return double(int(rng() % 41) - 20) / 4;  // few distinct values: many ties
    };
    const testing::KernelRun run = KernelTest::run(op, value);
    SCOPED_TRACE(run.kernel->plan);
    const int64_t length = shape.back(), rows = op.inputs[0].numel() / length;
    const auto before = [&](double a, double b) {  // a ranks before b
      if (std::isnan(a) || std::isnan(b)) return largest ? std::isnan(a) && !std::isnan(b) : !std::isnan(a) && std::isnan(b);
      return largest ? a > b : a < b;
    };
    int mismatches = 0;
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<double> v(static_cast<size_t>(length));
      for (int64_t j = 0; j < length; ++j) v[size_t(j)] = load(dtype, &run.inputs[0][size_t(r * length + j) * isa::dtype_size_bytes(dtype)]);
      std::vector<int64_t> order(static_cast<size_t>(length));
      for (int64_t j = 0; j < length; ++j) order[size_t(j)] = j;
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return before(v[size_t(a)], v[size_t(b)]); });
      for (int64_t j = 0; j < k; ++j) {
        const double got = load(DType::I32, &run.output[size_t(r * k + j) * 4]);
        if (got != double(order[size_t(j)]) && ++mismatches <= 5)
          ADD_FAILURE() << "row " << r << " rank " << j << ": got position " << got << ", want " << order[size_t(j)];
      }
    }
    EXPECT_EQ(mismatches, 0);
  }
};

TEST_P(TopK, LargestAndSmallestWithTiesNanAndInfinities) {
  for (const bool largest : {true, false}) {
    check(DType::F32, {7, 13}, 5, largest);
    check(DType::F32, {3, 4, 100}, 100, largest);  // a whole sort
    check(DType::F32, {1, 1}, 1, largest);
    check(DType::BF16, {40, 300}, 17, largest);
    check(DType::F32, {2, 5000}, 3, largest);
  }
}

TEST_P(TopK, WhatItCannotDoIsSaidSo) {
  EXPECT_THROW(compiler_.compile(OpDesc(OpKind::TOPK, {t(DType::F32, {4, 4})}, t(DType::F32, {4, 2}))), std::invalid_argument);  // i32 out
  EXPECT_THROW(compiler_.compile(OpDesc(OpKind::TOPK, {t(DType::F32, {4, 4})}, t(DType::I32, {4, 5}))), std::invalid_argument);  // k > L
  const std::vector<int64_t> huge{2, int64_t(sim::load_chip_config(GetParam()).core.scratchpad.size_bytes)};
  EXPECT_THROW(compiler_.compile(OpDesc(OpKind::TOPK, {t(DType::F32, huge)}, t(DType::I32, {2, 3}))), UnsupportedOp);
}

TEST_P(RowOps, VarianceOfTooFewElementsIsNanOrInfinity) {
  // One element, Bessel's correction: 0 / 0. Two elements, correction 2: a positive sum over 0.
  OpDesc single(OpKind::VAR, {t(DType::F32, {3, 1})}, t(DType::F32, {3}));
  const auto single_run = run(single, [](size_t, size_t i) { return double(i); });
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isnan(load(DType::F32, &single_run.output[size_t(i) * 4])));
  OpDesc pair(OpKind::STD, {t(DType::F32, {1, 2})}, t(DType::F32, {1}));
  pair.correction = 2;
  EXPECT_EQ(load(DType::F32, run(pair, [](size_t, size_t i) { return double(i); }).output.data()), INFINITY);
}

TEST_P(RowOps, ArgmaxAndArgminGiveTheFirstPosition) {
  for (const OpKind kind : {OpKind::ARGMAX, OpKind::ARGMIN}) {
    check(OpDesc(kind, {t(DType::F32, {37, 53})}, t(DType::I32, {37})));
    check(OpDesc(kind, {t(DType::BF16, {9, 1000})}, t(DType::I32, {9, 1})));
    check(OpDesc(kind, {t(DType::F32, {5, 1})}, t(DType::I32, {5})));
  }
  // Ties: integers in [0, 4) repeat; the first of each row's equal extrema is the answer.
  const OpDesc ties(OpKind::ARGMAX, {t(DType::F32, {8, 100})}, t(DType::I32, {8}));
  const auto result = run(ties, [](size_t, size_t i) { return double((i * 7 + i / 100) % 4); });
  for (int r = 0; r < 8; ++r) {
    int first = 0;
    for (int j = 0; j < 100; ++j)
      if ((size_t(r * 100 + j) * 7 + size_t(r)) % 4 == 3) { first = j; break; }
    EXPECT_EQ(load(DType::I32, &result.output[size_t(r) * 4]), first) << "row " << r;
  }
  EXPECT_THROW(compiler_.compile(OpDesc(OpKind::ARGMAX, {t(DType::F32, {4, 4})}, t(DType::F32, {4}))), std::invalid_argument);
}

TEST_P(RowOps, SumsAndMeansMayStayInF32) {
  check(OpDesc(OpKind::SUM, {t(DType::BF16, {16, 200})}, t(DType::F32, {16})));
  check(OpDesc(OpKind::MEAN, {t(DType::BF16, {5, 3, 70})}, t(DType::F32, {5, 3})));
}

TEST_P(RowOps, ARowLargerThanAnyScratchpadIsWalkedInChunks) {
  const int64_t huge = 1 << 22;
  const auto kernel = compiler_.compile(OpDesc(OpKind::SOFTMAX, {t(DType::F32, {2, huge})}, t(DType::F32, {2, huge})));
  EXPECT_NE(kernel->plan.find("each too long for the scratchpad"), std::string::npos) << kernel->plan;
  EXPECT_NE(kernel->plan.find(" 3 passes over x per row"), std::string::npos) << kernel->plan;
}

// Rows longer than the scratchpad, compiled for the preset with a 16 KiB
// scratchpad (the kernels then run on the preset's larger one): a few
// thousand elements make rows of several chunks, the last one partial.
class LongRows : public RowOps {
 protected:
  LongRows() : small_(with_small_scratchpad(sim::load_chip_config(GetParam()))) {}
  Compiler& compiler() override { return small_; }
  static sim::ChipConfig with_small_scratchpad(sim::ChipConfig config) {
    config.core.scratchpad.size_bytes = 16 * 1024;
    return config;
  }
  // The chunked kernel, not the one-tile one, is what ran.
  void check_chunked(const OpDesc& op) {
    EXPECT_NE(small_.compile(op)->plan.find("chunks of up to"), std::string::npos) << small_.compile(op)->plan;
    check(op);
  }
  Compiler small_;
};

TEST_P(LongRows, SoftmaxAndLogSoftmax) {
  for (const OpKind kind : {OpKind::SOFTMAX, OpKind::LOG_SOFTMAX}) check_chunked(OpDesc(kind, {t(DType::F32, {3, 5000})}, t(DType::F32, {3, 5000})));
  check_chunked(OpDesc(OpKind::SOFTMAX, {t(DType::BF16, {2, 4099})}, t(DType::BF16, {2, 4099})));
  TensorDesc x = t(DType::F32, {1500, 5});
  x.shape = {5, 1500}, x.strides = {1, 5};  // the transpose of a contiguous [1500, 5]: rows read an element at a time
  check_chunked(OpDesc(OpKind::LOG_SOFTMAX, {x}, t(DType::F32, {5, 1500})));
}

TEST_P(LongRows, LayerNormAndRmsNorm) {
  check_chunked(OpDesc(OpKind::LAYER_NORM, {t(DType::F32, {4, 3001})}, t(DType::F32, {4, 3001})));
  check_chunked(OpDesc(OpKind::LAYER_NORM, {t(DType::BF16, {2, 1001}), t(DType::BF16, {1001}), t(DType::BF16, {1001})},
                       t(DType::BF16, {2, 1001})));
  check_chunked(OpDesc(OpKind::LAYER_NORM, {t(DType::F32, {3, 2500}), t(DType::F32, {2500}), t(DType::BF16, {2500})},
                       t(DType::F32, {3, 2500})));
  check_chunked(OpDesc(OpKind::RMS_NORM, {t(DType::F32, {5, 2049}), t(DType::F32, {2049})}, t(DType::F32, {5, 2049})));
}

TEST_P(LongRows, Reductions) {
  for (const OpKind kind : {OpKind::SUM, OpKind::MEAN, OpKind::AMAX, OpKind::AMIN}) {
    check_chunked(OpDesc(kind, {t(DType::F32, {6, 4099})}, t(DType::F32, {6})));
    check_chunked(OpDesc(kind, {t(DType::F32, {1, 10007})}, t(DType::F32, {})));  // a whole tensor: one row, one core
  }
  check_chunked(OpDesc(OpKind::SUM, {t(DType::BF16, {3, 6000})}, t(DType::BF16, {3})));
  check_chunked(OpDesc(OpKind::MEAN, {t(DType::BF16, {3, 6000})}, t(DType::F32, {3, 1})));
  check_chunked(OpDesc(OpKind::VAR, {t(DType::F32, {4, 5000})}, t(DType::F32, {4})));
  OpDesc std_op(OpKind::STD, {t(DType::BF16, {2, 7001})}, t(DType::F32, {2}));
  std_op.correction = 0;
  check_chunked(std_op);
  for (const OpKind kind : {OpKind::ARGMAX, OpKind::ARGMIN}) {
    check_chunked(OpDesc(kind, {t(DType::F32, {5, 4099})}, t(DType::I32, {5})));
    check_chunked(OpDesc(kind, {t(DType::BF16, {2, 7001})}, t(DType::I32, {2, 1})));  // bf16: ties across chunks
  }
}

TEST_P(LongRows, ArgmaxKeepsTheFirstExtremumAndTheFirstNanAcrossChunks) {
  // Row 0: the maximum 5 in chunk 0 and again later; row 1: -inf everywhere (position 0); row 2: a NaN
  // after the maximum, then a larger value and another NaN; row 3: the maximum in the last, partial chunk.
  const int64_t length = 3000;
  const OpDesc op(OpKind::ARGMAX, {t(DType::F32, {4, length})}, t(DType::I32, {4}));
  const auto kernel = small_.compile(op);
  ASSERT_NE(kernel->plan.find("chunks of up to"), std::string::npos) << kernel->plan;
  const auto value = [&](size_t, size_t i) {
    const int64_t row = int64_t(i) / length, j = int64_t(i) % length;
    if (row == 1) return -double(INFINITY);
    if (row == 0) return j == 17 || j == 2900 ? 5.0 : 1.0;
    if (row == 2) return j == 10 ? 3.0 : j == 1500 ? double(NAN) : j == 2000 ? 9.0 : j == 2999 ? double(NAN) : 0.0;
    return j == length - 1 ? 2.0 : -1.0;
  };
  const auto result = run(op, value);
  const int32_t want[4] = {17, 0, 1500, int32_t(length - 1)};
  for (int r = 0; r < 4; ++r) EXPECT_EQ(load(DType::I32, &result.output[size_t(r) * 4]), want[r]) << "row " << r;
}

INSTANTIATE_TEST_SUITE_P(Presets, LongRows, ::testing::Values("tiny", "base"), testing::preset_name);

INSTANTIATE_TEST_SUITE_P(Presets, RowOps, ::testing::Values("tiny", "base"), testing::preset_name);
INSTANTIATE_TEST_SUITE_P(Presets, RowBackward, ::testing::Values("tiny", "base"), testing::preset_name);
INSTANTIATE_TEST_SUITE_P(Presets, TopK, ::testing::Values("tiny", "base"), testing::preset_name);

}  // namespace
}  // namespace npu::compiler
