// Fused scaled-dot-product attention compiled for the chip and run through
// the driver, against a reference in double, on tiny and base.
//
// Bound for an output element o = sum_j w_j v_j (w the exact softmax weights
// of the scores s_j = scale * q . k_j, masked keys left out), with
// W = sum_j w_j |v_j| and A = max_j |scale| sum_d |q_d k_jd|:
//  - a score: D exact products summed in f32, times the scale (rounded to
//    f32), rounded: off by (D + 2) 2^-24 A; subtracting the running max
//    rounds (2^-24 * 2A), exp rounds (2^-23), and each of at most S
//    rescales exp(m - m') adds as much again. Moving every weight's exponent
//    by at most eps moves o by at most (e^(2 eps) - 1) W <= 2.01 eps W, with
//    eps = (D + 4 + 2S) 2^-24 A + (4 + 4S) 2^-24.
//  - P rounded to the tensor core's dtype before P V while l sums it
//    unrounded: 2^-8 W for bf16, 2^-11 W for f16 (0 for f32).
//  - P V and l summed in f32 over S terms: (2S + 8) 2^-24 W (f32 inputs: the
//    products round too, S 2^-24 W more).
//  - the output rounds once: 2^-8 (bf16), 2^-11 (f16) or 2^-24 (f32) of its magnitude.
//  - f32 on a tensor core without f32 (base): q, k, v and P in bf16 parts, and the
//    products of those parts that matter (f32_split.h), each product off by at most
//    the split's relative error (as in matmul_test.cpp): 2^-21 with 3 parts ("highest"),
//    2^-14 with 2, 2^-7 with 1, of A for a score and of W for P V.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "kernel_runner.h"
#include "npusim/sim/simulator.h"

namespace npu::compiler {
namespace {

using isa::DType;

// Element values in and out of a dtype's bytes: the shared helpers, and f16.
double load(DType dtype, const uint8_t* p) {
  if (dtype != DType::F16) return testing::load(dtype, p);
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return isa::f16_to_f32(bits);
}
void store(DType dtype, double value, uint8_t* p) {
  if (dtype != DType::F16) return testing::store(dtype, value, p);
  const uint16_t bits = isa::f32_to_f16(float(value));
  std::memcpy(p, &bits, 2);
}
// The rounding unit of a float dtype: half its ulp, relative.
double unit_roundoff(DType dtype) { return std::ldexp(1.0, dtype == DType::F32 ? -24 : dtype == DType::F16 ? -11 : -8); }

TensorDesc contiguous(DType dtype, std::vector<int64_t> shape) { return TensorDesc::contiguous(dtype, std::move(shape)); }

std::vector<int64_t> with(std::vector<int64_t> batch, int64_t rows, int64_t cols) {
  batch.push_back(rows), batch.push_back(cols);
  return batch;
}

OpDesc sdpa(DType dt, const std::vector<int64_t>& batch, int64_t l, int64_t s, int64_t d, int64_t dv, bool causal) {
  OpDesc op{OpKind::ATTENTION, {contiguous(dt, with(batch, l, d)), contiguous(dt, with(batch, s, d)), contiguous(dt, with(batch, s, dv))},
            contiguous(dt, with(batch, l, dv))};
  op.scale = 1.0 / std::sqrt(double(d));
  op.is_causal = causal;
  return op;
}

OpDesc with_mask(OpDesc op, const TensorDesc& mask) {
  op.inputs.push_back(mask);
  return op;
}

class Attention : public testing::KernelTest {
 protected:
  // Element (batch index, i, j) of an operand's view, broadcast over the output's batch dims by size.
  static int64_t offset_of(const TensorDesc& t, const std::vector<int64_t>& out_batch, int64_t i, int64_t j) {
    const size_t r = t.shape.size();
    int64_t off = t.storage_offset + (t.shape[r - 1] == 1 ? 0 : j) * t.strides[r - 1] + (t.shape[r - 2] == 1 ? 0 : i) * t.strides[r - 2];
    for (size_t dim = 0; dim + 2 < r; ++dim) {
      const size_t od = out_batch.size() - (r - 2) + dim;
      off += (t.shape[dim] == 1 ? 0 : out_batch[od]) * t.strides[dim];
    }
    return off;
  }

  void check(const OpDesc& op, uint32_t seed = 1) {
    SCOPED_TRACE(op.key());
    std::mt19937 rng(seed);
    // q and k in [-2, 2] give scores of a few units: the weights differ, so a wrong key shows.
    std::uniform_real_distribution<double> qk_values(-2, 2), v_values(-1, 1);
    const testing::KernelRun run = run_op(op, [&](size_t input) {
      return input == 3 && mask_value_ ? mask_value_() : input < 2 ? qk_values(rng) : v_values(rng);
    });
    SCOPED_TRACE(run.kernel->plan);
    const TensorDesc &q = op.inputs[0], &k = op.inputs[1], &v = op.inputs[2], &out = op.output;
    const size_t e = isa::dtype_size_bytes(q.dtype);
    const auto element = [&](size_t input, const TensorDesc& t, const std::vector<int64_t>& batch, int64_t i, int64_t j) {
      return load(t.dtype, &run.inputs[input][size_t(offset_of(t, batch, i, j)) * isa::dtype_size_bytes(t.dtype)]);
    };
    const bool masked = op.inputs.size() == 4;
    const int64_t l = q.shape[q.shape.size() - 2], d = q.shape.back(), s = k.shape[k.shape.size() - 2], dv = v.shape.back();
    const double u = std::ldexp(1.0, -24);
    const bool f32 = q.dtype == DType::F32;
    const double rho_p = f32 ? 0 : unit_roundoff(q.dtype), rho_out = unit_roundoff(out.dtype), split = split_error(op);
    std::vector<int64_t> batch(out.shape.begin(), out.shape.end() - 2), index(batch.size(), 0);
    int64_t batches = 1;
    for (const int64_t b : batch) batches *= b;
    int mismatches = 0;
    for (int64_t bi = 0; bi < batches; ++bi) {
      for (int64_t i = 0; i < l; ++i) {
        const int64_t keys = op.is_causal ? std::min(s, i + 1) : s;  // top-left aligned: key j <= query i
        std::vector<double> score(size_t(keys), 0.0), weight(size_t(keys), 0.0);
        double max = -INFINITY, a_max = 0, z = 0;
        for (int64_t j = 0; j < keys; ++j) {
          double dot = 0, magnitude = 0;
          for (int64_t c = 0; c < d; ++c) {
            const double product = element(0, q, index, i, c) * element(1, k, index, j, c);
            dot += product, magnitude += std::fabs(product);
          }
          score[size_t(j)] = op.scale * dot;
          if (masked) {  // the mask adds in f32: one more rounding of the sum
            const double m = element(3, op.inputs[3], index, i, j);
            score[size_t(j)] += m;
            if (std::isfinite(m)) magnitude += std::fabs(m) / std::fabs(op.scale);
          }
          max = std::max(max, score[size_t(j)]), a_max = std::max(a_max, std::fabs(op.scale) * magnitude);
        }
        for (int64_t j = 0; j < keys; ++j) z += weight[size_t(j)] = max == -INFINITY ? 0.0 : std::exp(score[size_t(j)] - max);
        const double eps = (double(d) + 6 + 2 * double(s)) * u * a_max + (4 + 4 * double(s)) * u + split * a_max;
        const double rho = rho_p + 2.01 * eps + (2 * double(s) + 8 + (f32 ? double(s) : 0)) * u + split;
        for (int64_t c = 0; c < dv; ++c) {
          double want = 0, weighted = 0;
          for (int64_t j = 0; j < keys; ++j) {
            const double value = element(2, v, index, j, c), w = weight[size_t(j)] / z;
            want += w * value, weighted += w * std::fabs(value);
          }
          double bound = rho * weighted;
          bound += rho_out * (std::fabs(want) + bound) + 1e-12;
          int64_t at = out.storage_offset + i * out.strides[out.shape.size() - 2] + c * out.strides.back();
          for (size_t dim = 0; dim < batch.size(); ++dim) at += index[dim] * out.strides[dim];
          const double got = load(out.dtype, &run.output[size_t(at) * e]);
          // every key masked: zeros, as PyTorch's attention gives (its safe softmax), where softmax alone gives NaN
          if (z == 0) want = 0, bound = 0;
          if (!(std::fabs(got - want) <= bound) && ++mismatches <= 5)
            ADD_FAILURE() << "out[" << bi << "][" << i << "][" << c << "] = " << got << ", want " << want << " +- " << bound;
        }
      }
      for (size_t dim = batch.size(); dim-- > 0;) {
        if (++index[dim] < batch[dim]) break;
        index[dim] = 0;
      }
    }
    EXPECT_EQ(mismatches, 0);
  }

  DType dtype() const { return GetParam() == "tiny" ? DType::F32 : DType::BF16; }  // base's tensor core takes no f32
  double split_error(const OpDesc& op) const { return testing::f32_split_error(op, GetParam()); }

  std::function<double()> mask_value_;  // a mask's elements, in storage order

  // KernelTest::run with f16 too: compiles `op`, runs it on the chip with
  // inputs from value(input), returns the inputs' and the output's storage.
  testing::KernelRun run_op(const OpDesc& op, const std::function<double(size_t input)>& value) {
    testing::KernelRun run;
    run.kernel = compiler_.compile(op);
    const Program program = Program::load(device_, run.kernel->program);
    std::vector<Buffer> buffers;
    std::vector<Binding> bindings;
    for (size_t n = 0; n < op.inputs.size(); ++n) {
      const TensorDesc& t = op.inputs[n];
      const size_t e = isa::dtype_size_bytes(t.dtype);
      std::vector<uint8_t> bytes(size_t(std::max<int64_t>(t.storage_extent(), 1)) * e);
      for (size_t i = 0; i < bytes.size(); i += e) store(t.dtype, value(n), &bytes[i]);
      buffers.push_back(device_->allocate(bytes.size()));
      device_->copy_to_device(buffers.back(), 0, bytes.data(), bytes.size());
      run.inputs.push_back(std::move(bytes));
    }
    buffers.push_back(device_->allocate(size_t(std::max<int64_t>(op.output.storage_extent(), 1)) * isa::dtype_size_bytes(op.output.dtype)));
    for (size_t n = 0; n < op.inputs.size(); ++n) bindings.push_back({"in" + std::to_string(n), &buffers[n]});
    bindings.push_back({"out", &buffers.back()});
    device_->queue(0).launch(program, bindings, run.kernel->core_mask()).wait(std::chrono::seconds(10));
    run.output.resize(buffers.back().size());
    device_->copy_from_device(buffers.back(), 0, run.output.data(), run.output.size());
    return run;
  }

  // DRAM bytes read and written so far, from the chip's own counters.
  uint64_t dram_bytes() {
    uint64_t bytes = 0;
    static_cast<SimulatorLink&>(device_->link()).call([&](sim::Simulator& chip) {
      for (const sim::DramChannelStats& channel : chip.stats().dram_channels) bytes += channel.read_bytes + channel.write_bytes;
    });
    return bytes;
  }
};

TEST_P(Attention, ShapesIncludingOnesPrimesAndNonMultiplesOfTheTiles) {
  // (L, S, D, Dv)
  for (const auto& [l, s, d, dv] : std::vector<std::array<int64_t, 4>>{{1, 1, 1, 1}, {7, 13, 5, 3}, {33, 65, 16, 24}, {1, 300, 64, 64}, {130, 3, 32, 17}})
    check(sdpa(dtype(), {}, l, s, d, dv, false));
  check(sdpa(DType::BF16, {}, 150, 100, 64, 64, false));
  OpDesc unscaled = sdpa(dtype(), {}, 19, 23, 8, 8, false), negative = unscaled, negative_power_of_two = unscaled;
  unscaled.scale = 1.0;  // no scaling pass at all
  negative.scale = -0.3;
  negative_power_of_two.scale = -0.5;
  check(unscaled), check(negative), check(negative_power_of_two);
}

// f16 rounds P to f16; its scale always applies to the scores (q * 2^-k may be subnormal in f16).
TEST_P(Attention, F16) {
  check(sdpa(DType::F16, {2}, 45, 70, 64, 32, false));
  check(sdpa(DType::F16, {}, 90, 90, 16, 16, true));
}

// f32 on base, whose tensor core takes bf16 and not f32: q, k, v and P as bf16 parts, the products
// of the parts that matter accumulated in f32, at each of torch.set_float32_matmul_precision's levels
// (the bound above has each level's error). On tiny the tensor core takes f32 itself.
TEST_P(Attention, F32RunsAsBf16PartsOnATensorCoreWithoutF32) {
  const bool split = GetParam() == "base";
  for (const F32MatmulPrecision precision : {F32MatmulPrecision::Highest, F32MatmulPrecision::High, F32MatmulPrecision::Medium}) {
    for (const auto& [l, s, d, dv] : std::vector<std::array<int64_t, 4>>{{1, 1, 1, 1}, {7, 13, 5, 3}, {130, 300, 64, 48}}) {
      OpDesc op = sdpa(DType::F32, {2}, l, s, d, dv, false);
      op.f32_precision = precision;
      check(op);
    }
    OpDesc causal = sdpa(DType::F32, {3}, 300, 700, 16, 16, true), scaled = sdpa(DType::F32, {}, 40, 90, 32, 32, false);
    causal.f32_precision = scaled.f32_precision = precision;
    scaled.scale = 0.1;  // applied to the scores, not to Q
    check(causal), check(scaled);
  }
  OpDesc many_keys = sdpa(DType::F32, {2}, 130, 1100, 32, 32, false);  // several key steps: the three-slot rings wrap
  check(many_keys);
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> mask_values(-2, 0);
  mask_value_ = [&]() { return rng() % 5 == 0 ? -INFINITY : mask_values(rng); };
  check(with_mask(sdpa(DType::F32, {2, 3}, 20, 300, 16, 8, false), contiguous(DType::F32, {2, 1, 20, 300})));
  mask_value_ = nullptr;
  const auto kernel = compiler_.compile(many_keys);
  EXPECT_EQ(kernel->plan.find("as 3 bf16 parts (6 tensor-core products") != std::string::npos, split) << kernel->plan;
  EXPECT_EQ(Compiler::listing(*kernel).find("tc.mm bf16") != std::string::npos, split);
  OpDesc high = many_keys;
  high.f32_precision = F32MatmulPrecision::High;
  EXPECT_EQ(many_keys.key() != high.key(), true);  // the precision changes the code, so the key
}

// The bound above is loose where scores are many or large; with two keys, one head dim and
// v = [0, x], out_i = x sigmoid(q_i (k1 - k0)) with scores of 6 to 16 shows the parts' own
// precision: f32's roundings (a few 2^-24) with three parts ("highest").
TEST_P(Attention, F32PartsKeepF32sPrecision) {
  const int64_t l = 64;
  for (const F32MatmulPrecision precision : {F32MatmulPrecision::Highest, F32MatmulPrecision::High, F32MatmulPrecision::Medium}) {
    OpDesc op = sdpa(DType::F32, {}, l, 2, 1, 1, false);
    op.scale = 1.0, op.f32_precision = precision;
    std::mt19937 rng(5);
    std::uniform_real_distribution<double> q_values(4, 8), k_values(1.5, 2), x_values(0.5, 1);
    int64_t n = 0;
    const testing::KernelRun run = run_op(op, [&](size_t input) {
      if (input == 0) return q_values(rng);
      if (input == 1) return k_values(rng);
      return n++ == 0 ? 0.0 : x_values(rng);
    });
    const auto value = [&](size_t input, int64_t i) { return double(testing::load(DType::F32, &run.inputs[input][size_t(i) * 4])); };
    double worst = 0;
    for (int64_t i = 0; i < l; ++i) {
      const double want = value(2, 1) / (1 + std::exp(-value(0, i) * (value(1, 1) - value(1, 0))));
      worst = std::max(worst, std::fabs(double(testing::load(DType::F32, &run.output[size_t(i) * 4])) - want));
    }
    // Measured: 2^-22.8 on tiny (f32 itself) and with three parts on base; 2^-16.2 with two, 2^-7.6
    // with one. Without one of the six products of Q K^T or of P V, or without P's third part: 2^-19.
    const bool split = GetParam() == "base";
    const int level = !split || precision == F32MatmulPrecision::Highest ? 0 : precision == F32MatmulPrecision::High ? 1 : 2;
    const double limits[] = {std::ldexp(1.0, -21), std::ldexp(1.0, -14), std::ldexp(1.0, -6)};
    EXPECT_LE(worst, limits[level]) << "precision " << int(precision);
    if (level > 0) {
      EXPECT_GT(worst, limits[level - 1]) << "precision " << int(precision);  // the level applies
    }
  }
}

TEST_P(Attention, CausalIsTheTopLeftLowerTriangle) {
  for (const auto& [l, s, d, dv] : std::vector<std::array<int64_t, 4>>{{1, 1, 4, 4}, {37, 37, 16, 16}, {50, 20, 8, 8}, {20, 50, 8, 8}, {97, 131, 32, 24}})
    check(sdpa(dtype(), {}, l, s, d, dv, true));
  check(sdpa(DType::BF16, {}, 130, 130, 64, 64, true));
}

TEST_P(Attention, SeveralKeyTilesOnEveryCore) {
  check(sdpa(DType::BF16, {2}, 520, 520, 64, 64, false));
  check(sdpa(DType::BF16, {2}, 520, 520, 64, 64, true));
  check(sdpa(dtype(), {3}, 300, 700, 16, 16, true));
  check(sdpa(dtype(), {2}, 130, 1100, 32, 32, false));  // more keys than any key tile holds (1024)
}

TEST_P(Attention, BatchAndHeadsFlattenAndBroadcast) {
  const DType dt = dtype();
  check(sdpa(dt, {3, 2}, 20, 30, 16, 8, false));
  check(sdpa(dt, {2, 3}, 21, 21, 8, 16, true));
  // Multi-query attention: one k and v for every head (broadcast over the batch).
  OpDesc mqa{OpKind::ATTENTION, {contiguous(dt, {4, 24, 16}), contiguous(dt, {1, 40, 16}), contiguous(dt, {40, 12})},
             contiguous(dt, {4, 24, 12})};
  mqa.scale = 0.25;
  check(mqa);
}

TEST_P(Attention, HeadsAreReadInPlaceFromAPackedQkvTensor) {
  // qkv [L, 3, H, D] as a linear layer leaves it; q, k, v are [H, L, D] views
  // (batch stride D, row stride 3HD), the output an [H, L, D] view of [L, H, D].
  const DType dt = dtype();
  const int64_t l = 45, h = 3, d = 16;
  TensorDesc q = contiguous(dt, {h, l, d});
  q.strides = {d, 3 * h * d, 1};
  TensorDesc k = q, v = q;
  k.storage_offset = h * d, v.storage_offset = 2 * h * d;
  TensorDesc out = contiguous(dt, {h, l, d});
  out.strides = {d, h * d, 1};
  OpDesc op{OpKind::ATTENTION, {q, k, v}, out};
  op.scale = 0.25;
  op.is_causal = true;
  check(op);
}

// A power-of-two scale multiplies each Q tile once (exact); any other scale every score tile, in f32.
TEST_P(Attention, APowerOfTwoScaleIsAppliedToQ) {
  OpDesc op = sdpa(DType::BF16, {}, 64, 64, 64, 64, false);
  const std::string power_of_two = Compiler::listing(*compiler_.compile(op));
  op.scale = 0.1;
  const std::string other = Compiler::listing(*compiler_.compile(op));
  EXPECT_NE(power_of_two.find("v.mul bf16, scalar"), std::string::npos) << power_of_two;
  EXPECT_EQ(power_of_two.find("v.mul f32, scalar"), std::string::npos);
  EXPECT_EQ(other.find("v.mul bf16, scalar"), std::string::npos);
  EXPECT_NE(other.find("v.mul f32, scalar"), std::string::npos) << other;
}

TEST_P(Attention, TheTilesFollowTheChip) {
  const auto kernel = compiler_.compile(sdpa(DType::BF16, {1}, 2048, 2048, 64, 64, true));
  EXPECT_EQ(kernel->cores, device_->info().num_cores);
  EXPECT_NE(Compiler::listing(*kernel).find("tc.mm bf16, tb"), std::string::npos);
  std::printf("%s", kernel->plan.c_str());
}

// The point of fusing: the scores and probabilities never go to DRAM, so the
// fused kernel moves fewer DRAM bytes than matmul, softmax, matmul through
// DRAM (counted by the chip, between two idle points of the queue).
TEST_P(Attention, FusedMovesFewerDramBytesThanMatmulSoftmaxMatmul) {
  const DType dt = DType::BF16;
  const int64_t b = 2, l = 256, s = 256, d = 64, e = 2;
  const OpDesc fused = sdpa(dt, {b}, l, s, d, d, false);
  TensorDesc k_transposed = contiguous(dt, {b, d, s});
  k_transposed.strides = {s * d, 1, d};
  OpDesc scores{OpKind::MATMUL, {fused.inputs[0], k_transposed}, contiguous(dt, {b, l, s})};
  scores.alpha = fused.scale;
  const OpDesc softmax{OpKind::SOFTMAX, {contiguous(dt, {b, l, s})}, contiguous(dt, {b, l, s})};
  const OpDesc weighted{OpKind::MATMUL, {contiguous(dt, {b, l, s}), fused.inputs[2]}, contiguous(dt, {b, l, d})};

  const auto allocate = [&](int64_t elements) { return device_->allocate(uint64_t(elements * e)); };
  Buffer q = allocate(b * l * d), k = allocate(b * s * d), v = allocate(b * s * d), out = allocate(b * l * d);
  Buffer score_buffer = allocate(b * l * s), probs = allocate(b * l * s), out_unfused = allocate(b * l * d);
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> values(-1, 1);
  for (Buffer* buffer : {&q, &k, &v}) {
    std::vector<uint8_t> bytes(buffer->size());
    for (size_t i = 0; i < bytes.size(); i += 2) store(dt, values(rng), &bytes[i]);
    device_->copy_to_device(*buffer, 0, bytes.data(), bytes.size());
  }
  struct Launch {
    OpDesc op;
    std::vector<const Buffer*> buffers;  // in0, in1, ..., out
  };
  struct Measured {
    uint64_t cycles, dram_bytes;
  };
  const auto measure = [&](const std::vector<Launch>& launches) {
    std::vector<std::pair<Program, std::shared_ptr<const Kernel>>> programs;  // loaded before counting
    for (const Launch& launch : launches) {
      const auto kernel = compiler_.compile(launch.op);
      programs.emplace_back(Program::load(device_, kernel->program), kernel);
    }
    Queue queue = device_->queue(0);
    queue.synchronize();
    const uint64_t bytes_before = dram_bytes();
    const Event start = queue.record_event();
    for (size_t n = 0; n < launches.size(); ++n) {
      std::vector<Binding> bindings;
      for (size_t i = 0; i + 1 < launches[n].buffers.size(); ++i) bindings.push_back({"in" + std::to_string(i), launches[n].buffers[i]});
      bindings.push_back({"out", launches[n].buffers.back()});
      queue.launch(programs[n].first, bindings, programs[n].second->core_mask());
    }
    const Event end = queue.record_event();
    end.fence().wait(std::chrono::seconds(10));
    return Measured{Event::elapsed_cycles(start, end), dram_bytes() - bytes_before};
  };
  const Measured one = measure({{fused, {&q, &k, &v, &out}}});
  const Measured three = measure({{scores, {&q, &k, &score_buffer}}, {softmax, {&score_buffer, &probs}}, {weighted, {&probs, &v, &out_unfused}}});
  std::printf("%s: [%lld x %lld x %lld] x %lld heads: fused %llu cycles, %llu DRAM bytes; matmul + softmax + matmul %llu cycles, %llu DRAM bytes\n",
              GetParam().c_str(), (long long)l, (long long)s, (long long)d, (long long)b, (unsigned long long)one.cycles,
              (unsigned long long)one.dram_bytes, (unsigned long long)three.cycles, (unsigned long long)three.dram_bytes);
  const uint64_t qkvo_bytes = uint64_t(b * (2 * l * d + 2 * s * d) * e), score_bytes = uint64_t(b * l * s * e);
  EXPECT_GE(one.dram_bytes, qkvo_bytes);  // everything read or written at least once
  EXPECT_LT(one.dram_bytes, three.dram_bytes);
  // The unfused ops write and read back the scores and the probabilities.
  EXPECT_GE(three.dram_bytes, qkvo_bytes + 4 * score_bytes);
}

TEST_P(Attention, AnEmptyOutputGivesAProgramThatHalts) {
  for (const auto& [l, dv] : std::vector<std::pair<int64_t, int64_t>>{{0, 5}, {4, 0}}) {
    const auto kernel = compiler_.compile(sdpa(DType::BF16, {}, l, 6, 8, dv, false));
    EXPECT_EQ(kernel->program.code.at(0).words.size(), 1u);
  }
  EXPECT_EQ(compiler_.compile(sdpa(DType::BF16, {0}, 4, 6, 8, 8, true))->program.code.at(0).words.size(), 1u);
}

TEST_P(Attention, WhatItCannotDoIsSaidSo) {
  EXPECT_THROW(compiler_.compile(sdpa(DType::I8, {}, 4, 4, 4, 4, false)), UnsupportedOp);
  EXPECT_THROW(compiler_.compile(sdpa(DType::BF16, {}, 4, 0, 4, 4, false)), UnsupportedOp);  // no keys
  OpDesc strided = sdpa(DType::BF16, {}, 4, 4, 4, 4, false);
  strided.inputs[1].strides = {8, 2};  // every other element of the head dim
  EXPECT_THROW(compiler_.compile(strided), UnsupportedOp);
  // Three batch dims that do not merge: [B, H, G, L, D] with the sequence between them.
  OpDesc three = sdpa(DType::BF16, {2, 3, 2}, 5, 5, 4, 4, false);
  for (TensorDesc& t : three.inputs) t.strides = {120, 4, 60, 12, 1};  // laid out [B, G, L, H, D]
  EXPECT_THROW(compiler_.compile(three), UnsupportedOp);
  OpDesc mask_and_causal = with_mask(sdpa(DType::BF16, {}, 4, 5, 4, 4, true), contiguous(DType::F32, {4, 5}));
  EXPECT_THROW(compiler_.compile(mask_and_causal), std::invalid_argument);
  EXPECT_THROW(compiler_.compile(with_mask(sdpa(DType::BF16, {}, 4, 5, 4, 4, false), contiguous(DType::I32, {4, 5}))), std::invalid_argument);
  EXPECT_THROW(compiler_.compile(with_mask(sdpa(DType::BF16, {}, 4, 5, 4, 4, false), contiguous(DType::F32, {3, 5}))), std::invalid_argument);
  TensorDesc keys_strided = contiguous(DType::F32, {4, 5});
  keys_strided.strides = {1, 4};
  EXPECT_THROW(compiler_.compile(with_mask(sdpa(DType::BF16, {}, 4, 5, 4, 4, false), keys_strided)), UnsupportedOp);
  OpDesc wrong = sdpa(DType::BF16, {}, 4, 5, 4, 4, false);
  wrong.inputs[2] = contiguous(DType::BF16, {6, 4});  // v has another key count than k
  EXPECT_THROW(compiler_.compile(wrong), std::invalid_argument);
  OpDesc mixed = sdpa(DType::BF16, {}, 4, 5, 4, 4, false);
  mixed.output.dtype = DType::F32;
  EXPECT_THROW(compiler_.compile(mixed), std::invalid_argument);
  // A head dim no tile fits: one row of q and k alone overflows tiny's scratchpad.
  if (GetParam() == "tiny") {
    EXPECT_THROW(compiler_.compile(sdpa(DType::BF16, {}, 2, 2, 40000, 8, false)), UnsupportedOp);
  }
}

// [B, H, L, D] views of [B, L, H, D] (a linear layer's output split into heads): B and H do not
// merge into one stride, so the kernel walks them as two batch dims, reading in place.
TEST_P(Attention, HeadsLaidOutBetweenTheSequenceAreTwoBatchDims) {
  OpDesc heads = sdpa(dtype(), {2, 3}, 5, 7, 4, 4, false);
  for (TensorDesc& t : heads.inputs) t.strides = {t.shape[2] * 3 * 4, 4, 3 * 4, 1};
  check(heads);
  heads.is_causal = true;
  check(heads);
}

TEST_P(Attention, AnAdditiveMaskAddsToTheScaledScores) {
  const DType dt = dtype();
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> mask_values(-2, 0);
  mask_value_ = [&]() { return rng() % 5 == 0 ? -INFINITY : mask_values(rng); };
  // Per batch and head [B, H, L, S]; per batch broadcast over the heads [B, 1, L, S] (two batch dims);
  // one [L, S] for all; a padding mask [B, 1, 1, S] (one row per key tile) in q's dtype.
  check(with_mask(sdpa(dt, {2, 3}, 20, 30, 16, 8, false), contiguous(DType::F32, {2, 3, 20, 30})));
  check(with_mask(sdpa(dt, {2, 3}, 21, 33, 8, 16, false), contiguous(DType::F32, {2, 1, 21, 33})));
  check(with_mask(sdpa(dt, {3}, 17, 19, 8, 8, false), contiguous(DType::F32, {17, 19})));
  check(with_mask(sdpa(dt, {2, 2}, 25, 40, 16, 16, false), contiguous(dt, {2, 1, 1, 40})));
  OpDesc scaled = with_mask(sdpa(DType::BF16, {2}, 64, 64, 64, 64, false), contiguous(DType::BF16, {2, 64, 64}));
  scaled.scale = 0.1;  // not a power of two: the scores are scaled, then masked
  check(scaled);
  // More keys than a key tile holds, the first 600 hidden: rows see nothing in their first tile.
  mask_value_ = [&, n = int64_t{0}]() mutable { return n++ % 1100 < 600 ? -INFINITY : mask_values(rng); };
  check(with_mask(sdpa(DType::BF16, {2}, 40, 1100, 32, 32, false), contiguous(DType::F32, {2, 1, 1100})));
  // Every key hidden: zeros, as PyTorch gives.
  mask_value_ = []() { return -INFINITY; };
  check(with_mask(sdpa(dt, {}, 9, 12, 8, 8, false), contiguous(DType::F32, {9, 12})));
  mask_value_ = nullptr;
}

TEST_P(Attention, AMaskRowIsReadOncePerKeyTile) {
  const OpDesc padded = with_mask(sdpa(DType::BF16, {4, 2}, 128, 128, 64, 64, false), contiguous(DType::F32, {4, 1, 1, 128}));
  const std::string listing = Compiler::listing(*compiler_.compile(padded));
  EXPECT_NE(listing.find("+ a mask row"), std::string::npos) << listing;
  EXPECT_NE(listing.find("v.add f32, row"), std::string::npos) << listing;
}

TEST_P(Attention, TheKeyHoldsTheScaleAndTheMask) {
  const OpDesc plain = sdpa(DType::BF16, {}, 8, 8, 8, 8, false);
  OpDesc causal = plain, scaled = plain;
  causal.is_causal = true;
  scaled.scale = 0.5;
  EXPECT_NE(plain.key(), causal.key());
  EXPECT_NE(plain.key(), scaled.key());
  OpKind kind;
  ASSERT_TRUE(find_op("scaled_dot_product_attention", &kind));
  EXPECT_EQ(kind, OpKind::ATTENTION);
  EXPECT_FALSE(is_elementwise(OpKind::ATTENTION));
  EXPECT_FALSE(is_row_op(OpKind::ATTENTION));
  EXPECT_EQ(op_arity(OpKind::ATTENTION), 4u);  // q, k, v and a mask
  EXPECT_NE(plain.key(), with_mask(plain, contiguous(DType::F32, {8, 8})).key());
}

INSTANTIATE_TEST_SUITE_P(Presets, Attention, ::testing::Values("tiny", "base"), testing::preset_name);

}  // namespace
}  // namespace npu::compiler
