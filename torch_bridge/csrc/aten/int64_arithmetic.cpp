#include "int64_arithmetic.h"

#include <ATen/ExpandUtils.h>
#include <ATen/Functions.h>
#include <ATen/WrapDimUtils.h>

#include <limits>

#include "kernel_launch.h"

namespace npusim {
namespace {

using npu::compiler::OpKind;

constexpr int32_t kInt32Min = std::numeric_limits<int32_t>::min();
constexpr int32_t kInt32Max = std::numeric_limits<int32_t>::max();

// An i32 word moved by 2^31 (wrapping), so that signed comparisons order words as unsigned ones;
// applied twice it gives the word back.
at::Tensor unsigned_order(const at::Tensor& word) { return at::add(word, kInt32Min); }

at::Tensor int32_scalar(int32_t value) { return at::scalar_tensor(value, at::TensorOptions().dtype(at::kInt)); }

// A new int64 tensor of `shape` made of its low and high words (each broadcast to it).
at::Tensor from_words(c10::IntArrayRef shape, const at::Tensor& low, const at::Tensor& high) {
  at::Tensor out = new_npu(shape, at::kLong);
  const at::Tensor words = int64_words(out);
  words.select(-1, 0).copy_(low.expand(shape));
  words.select(-1, 1).copy_(high.expand(shape));
  return out;
}

}  // namespace

at::Tensor int64_low_word(const at::Tensor& t) { return int64_words(t).select(-1, 0); }
at::Tensor int64_high_word(const at::Tensor& t) { return int64_words(t).select(-1, 1); }

at::Tensor int64_add(const at::Tensor& a, const at::Tensor& b, bool subtract) {
  const at::Tensor a_low = int64_low_word(a), a_high = int64_high_word(a), b_low = int64_low_word(b), b_high = int64_high_word(b);
  const at::Tensor low = subtract ? at::sub(a_low, b_low) : at::add(a_low, b_low);
  // The carry (borrow): the low sum wrapped below an addend, as unsigned words.
  const at::Tensor carry =
      (subtract ? at::lt(unsigned_order(a_low), unsigned_order(b_low)) : at::lt(unsigned_order(low), unsigned_order(a_low))).to(at::kInt);
  const at::Tensor high = subtract ? at::sub(at::sub(a_high, b_high), carry) : at::add(at::add(a_high, b_high), carry);
  return from_words(at::infer_size(a.sizes(), b.sizes()), low, high);
}

at::Tensor int64_mul(const at::Tensor& a, const at::Tensor& b) {
  // (ah 2^32 + al)(bh 2^32 + bl) mod 2^64: low word al bl (i32 multiplication wraps to it); high word
  // the high half of the unsigned al bl, plus al bh + ah bl (wrapping). The unsigned high half from
  // 16-bit halves x1 2^16 + x0, whose products fit 32 bits: with masks and shifts on i32,
  //   mid = (x0 y0 >> 16) + lo16(x0 y1) + lo16(x1 y0)            (below 3 * 2^16)
  //   hi  = x1 y1 + (x0 y1 >> 16) + (x1 y0 >> 16) + (mid >> 16)
  // (">> 16" of a product: logical, an arithmetic shift then a 16-bit mask). One kernel:
  // in0 = al, in1 = ah, in2 = bl, in3 = bh.
  static const std::string high_chain =
      "bitwise_and(in0, 65535); bitwise_right_shift(in0, 16); bitwise_and(%1, 65535); "  // %0 x0, %2 x1
      "bitwise_and(in2, 65535); bitwise_right_shift(in2, 16); bitwise_and(%4, 65535); "  // %3 y0, %5 y1
      "mul(%0, %3); mul(%0, %5); mul(%2, %3); mul(%2, %5); "                              // %6 p00, %7 p01, %8 p10, %9 p11
      "bitwise_right_shift(%6, 16); bitwise_and(%10, 65535); "                           // %11 p00 >> 16
      "bitwise_and(%7, 65535); bitwise_and(%8, 65535); add(%11, %12); add(%14, %13); "    // %15 mid
      "bitwise_right_shift(%15, 16); "                                                   // %16 mid >> 16
      "bitwise_right_shift(%7, 16); bitwise_and(%17, 65535); "                           // %18 p01 >> 16
      "bitwise_right_shift(%8, 16); bitwise_and(%19, 65535); "                           // %20 p10 >> 16
      "add(%9, %18); add(%21, %20); add(%22, %16); "                                     // %23 the high half of al bl
      "mul(in0, in3); mul(in1, in2); add(%23, %24); add(%26, %25)";
  const at::Tensor a_low = int64_low_word(a), b_low = int64_low_word(b);
  const at::Tensor high = elementwise_chain({a_low, int64_high_word(a), b_low, int64_high_word(b)}, high_chain);
  return from_words(at::infer_size(a.sizes(), b.sizes()), at::mul(a_low, b_low), high);
}

at::Tensor int64_bitwise(OpKind kind, const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor a_words = int64_words(a), b_words = int64_words(b);
  const at::Tensor words = kind == OpKind::BITWISE_AND  ? at::bitwise_and(a_words, b_words)
                           : kind == OpKind::BITWISE_OR ? at::bitwise_or(a_words, b_words)
                                                        : at::bitwise_xor(a_words, b_words);
  return from_words(at::infer_size(a.sizes(), b.sizes()), words.select(-1, 0), words.select(-1, 1));
}

at::Tensor int64_compare(OpKind kind, const at::Tensor& a, const at::Tensor& b) {
  // a > b is b < a; a >= b is b <= a.
  const bool swap = kind == OpKind::GT || kind == OpKind::GE, strict = kind == OpKind::LT || kind == OpKind::GT;
  const at::Tensor& x = swap ? b : a;
  const at::Tensor& y = swap ? a : b;
  const at::Tensor x_high = int64_high_word(x), y_high = int64_high_word(y);
  const at::Tensor x_low = unsigned_order(int64_low_word(x)), y_low = unsigned_order(int64_low_word(y));
  const at::Tensor low_holds = strict ? at::lt(x_low, y_low) : at::le(x_low, y_low);
  return at::logical_or(at::lt(x_high, y_high), at::logical_and(at::eq(x_high, y_high), low_holds));
}

at::Tensor int64_extremum(bool maximum, const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor a_below = int64_compare(OpKind::LT, a, b);
  return maximum ? at::where(a_below, b, a) : at::where(a_below, a, b);
}

at::Tensor int64_reduce_extremum(bool maximum, const at::Tensor& self, c10::IntArrayRef dims, bool keepdim) {
  if (self.dim() == 0) return self.clone();
  std::vector<int64_t> reduced;
  if (dims.empty()) {
    for (int64_t d = 0; d < self.dim(); ++d) reduced.push_back(d);
  } else {
    for (const int64_t d : dims) reduced.push_back(at::maybe_wrap_dim(d, self.dim()));
  }
  const auto extremum = [&](const at::Tensor& t, bool keep) { return maximum ? at::amax(t, reduced, keep) : at::amin(t, reduced, keep); };
  const at::Tensor high = int64_high_word(self);
  const at::Tensor best_high = extremum(high, true);
  // The low words (as unsigned) of the elements whose high word is the extremum; the others can win no tie.
  const at::Tensor candidates = at::where(at::eq(high, best_high), unsigned_order(int64_low_word(self)), int32_scalar(maximum ? kInt32Min : kInt32Max));
  const at::Tensor best_low = unsigned_order(extremum(candidates, keepdim));
  at::Tensor result_high = best_high;
  if (!keepdim) {
    std::sort(reduced.rbegin(), reduced.rend());
    for (const int64_t d : reduced) result_high = result_high.squeeze(d);
  }
  return from_words(best_low.sizes(), best_low, result_high);
}

namespace {

// Rows of at most this many 16-bit halves sum exactly in i32: 4096 * 65535 < 2^31.
constexpr int64_t kSumChunk = 4096;

// The wrapping i32 sum of each row of x [rows, n] by the row kernel, or undefined.
at::Tensor i32_row_sums(const at::Tensor& x) {
  at::Tensor out = new_npu({x.size(0)}, at::kInt);
  return try_run_kind(OpKind::SUM, {dense(x)}, out) ? out : at::Tensor();
}

// The int64 sum of each row of x [rows, n] (int64), or undefined.
at::Tensor int64_row_sums(const at::Tensor& x) {
  const int64_t rows = x.size(0), n = x.size(1);
  if (n == 0 || rows == 0) return at::zeros({rows}, x.options());
  if (n > kSumChunk) {  // chunks of kSumChunk (zeros padding the last), then the chunks' sums
    const int64_t chunks = (n + kSumChunk - 1) / kSumChunk;
    const at::Tensor padded = chunks * kSumChunk == n ? x : at::cat({x, at::zeros({rows, chunks * kSumChunk - n}, x.options())}, 1);
    const at::Tensor partial = int64_row_sums(padded.reshape({rows * chunks, kSumChunk}));
    return partial.defined() ? int64_row_sums(partial.view({rows, chunks})) : partial;
  }
  const at::Tensor low = int64_low_word(x);
  const at::Tensor s_low = i32_row_sums(elementwise_chain({low}, "bitwise_and(in0, 65535)"));
  const at::Tensor s_mid = i32_row_sums(elementwise_chain({low}, "bitwise_right_shift(in0, 16); bitwise_and(%0, 65535)"));
  const at::Tensor s_high = i32_row_sums(int64_high_word(x));
  if (!s_low.defined() || !s_mid.defined() || !s_high.defined()) return at::Tensor();
  // s_high * 2^32 + s_mid * 2^16 as words (s_mid < 2^28: its shifts lose nothing), then + s_low with its carry.
  const at::Tensor upper = from_words({rows}, elementwise_chain({s_mid}, "bitwise_left_shift(in0, 16)"),
                                      elementwise_chain({s_mid, s_high}, "bitwise_right_shift(in0, 16); add(%0, in1)"));
  return int64_add(upper, from_words({rows}, s_low, at::zeros_like(s_low)), false);
}

}  // namespace

at::Tensor int64_sum(const at::Tensor& self, c10::IntArrayRef dims, bool keepdim) {
  if (self.dim() == 0) return self.clone();
  std::vector<bool> is_reduced(size_t(self.dim()), dims.empty());
  for (const int64_t d : dims) is_reduced[size_t(at::maybe_wrap_dim(d, self.dim()))] = true;
  std::vector<int64_t> order, shape;  // kept dims first, then the reduced ones; the result's shape
  int64_t rows = 1, n = 1;
  for (int64_t d = 0; d < self.dim(); ++d)
    if (!is_reduced[size_t(d)]) order.push_back(d), shape.push_back(self.size(d)), rows *= self.size(d);
    else if (keepdim) shape.push_back(1);
  for (int64_t d = 0; d < self.dim(); ++d)
    if (is_reduced[size_t(d)]) order.push_back(d), n *= self.size(d);
  const at::Tensor sums = int64_row_sums(self.permute(order).reshape({rows, n}));
  return sums.defined() ? sums.view(shape) : sums;
}

}  // namespace npusim
