// Convolutions on the npu: the compiler's im2col and matmul kernels.
//
//   forward       out[n] = W [Cout, C*KH*KW] @ cols[n] [C*KH*KW, OH*OW] (+ bias):
//                 one matmul over the batch, W shared (a stride-0 batch)
//   input grad    the rotated kernel over the output gradient: zeros put between
//                 its elements for strides > 1, im2col with padding
//                 dilation*(K-1) - padding and Window::flip, then
//                 W^T [C, Cout*KH*KW] @ cols
//   weight grad   grad [Cout, N*OH*OW] @ cols^T, im2col writing cols as
//                 [C*KH*KW, N*OH*OW] (its output strides): one matmul whose
//                 depth is the batch and the positions
//   bias grad     sums over the positions, then over the batch
// A depthwise forward is the compiler's depthwise kernel (windows in the
// scratchpad, on the vector unit) where it applies. A forward's groups are
// one batched matmul (a batch dim beside the images'); the gradients' take
// one matmul per group. A transposed convolution's forward is a
// convolution's input gradient, its backward a convolution forward and a
// weight gradient. 1-D convolutions are 2-D ones of height 1; 3-D ones sums of
// 2-D ones over the kernel's depth (conv3d.cpp); transposed 3-D ones and
// integer dtypes go to the CPU, counted.
#include <ATen/Functions.h>
#include <torch/library.h>

#include <array>
#include <cstdlib>
#include <list>
#include <mutex>

#include "PrivateUse1NativeFunctions.h"
#include "conv3d.h"
#include "custom_ops.h"
#include "cpu_fallback.h"
#include "kernel_launch.h"
#include "runtime/runtime.h"

namespace npusim {
namespace {

// A convolution's weights w [Cout, C/G, KH, KW] in the implicit-im2col kernel's layout, its G groups in
// blocks of `per_block`: [G / per_block, per_block * C/G, KH, KW, per_block * Cout/G], each block
// block-diagonal (the weights of input channels of one group to output channels of another are zero),
// so that a block is one dense convolution. Groups 1: [1, C, KH, KW, Cout].
//
// Made once per weight tensor, version and blocking: an inference's weights do not change, and the
// transposed copies cost ResNet-18 in bf16 a fifth of its cycles when made at every call. An entry
// holds the weight tensor itself, so that no other tensor takes its place (its identity is the key)
// while it is cached; the 64 most recently used are kept. Inference tensors have no version counter:
// made every time.
at::Tensor weights_in_blocks(const at::Tensor& w, int64_t groups, int64_t per_block) {
  const auto make = [&] {
    const int64_t cout = w.size(0), c_g = w.size(1), kh = w.size(2), kw = w.size(3), cout_g = cout / groups, blocks = groups / per_block;
    if (groups == 1) return w.permute({1, 2, 3, 0}).contiguous().unsqueeze(0);
    // [block, gi, c_g, KH, KW, go, cout_g]: w's group go of the block for every input group gi, kept where gi = go.
    const at::Tensor spread = w.view({blocks, per_block, cout_g, c_g, kh, kw}).permute({0, 3, 4, 5, 1, 2}).unsqueeze(1).expand(
        {blocks, per_block, c_g, kh, kw, per_block, cout_g});
    const at::Tensor diagonal = at::eye(per_block, at::kFloat).to(w.options()).view({1, per_block, 1, 1, 1, per_block, 1});
    // Written into a contiguous tensor of that shape (a product of the views would take spread's permuted
    // layout, as ATen lays out elementwise results, and its reshape would copy it again).
    at::Tensor blocked = at::empty(spread.sizes(), w.options());
    blocked.copy_(spread).mul_(diagonal);
    return blocked.view({blocks, per_block * c_g, kh, kw, per_block * cout_g});
  };
  if (w.is_inference()) return make();
  struct Entry {
    at::Tensor weight, made;
    uint32_t version;
    int64_t groups, per_block;
  };
  static std::mutex mutex;
  static auto* entries = new std::list<Entry>();  // (never destroyed: its tensors would outlive the device at exit)
  const uint32_t version = w.unsafeGetTensorImpl()->version_counter().current_version();
  {
    const std::lock_guard<std::mutex> lock(mutex);
    for (auto it = entries->begin(); it != entries->end(); ++it)
      if (it->weight.is_same(w) && it->version == version && it->groups == groups && it->per_block == per_block) {
        entries->splice(entries->begin(), *entries, it);
        return it->made;
      }
  }
  // In DRAM: a cached copy would hold its place in a core's SRAM pool (graph mode's) past the graph.
  struct DramPlacement {
    const bool sram = Runtime::set_sram_placement(false);
    ~DramPlacement() { Runtime::set_sram_placement(sram); }
  };
  at::Tensor made;
  {
    const DramPlacement dram;
    made = make();
  }
  const std::lock_guard<std::mutex> lock(mutex);
  entries->push_front({w, made, version, groups, per_block});
  if (entries->size() > 64) entries->pop_back();
  return made;
}

using npu::compiler::Window;

struct Geometry {
  std::array<int64_t, 2> stride{1, 1}, padding{0, 0}, dilation{1, 1};
  int64_t groups = 1;
  Window window() const {
    Window w;
    w.stride = stride, w.padding = padding, w.dilation = dilation;
    return w;
  }
  int64_t out_size(int d, int64_t in, int64_t kernel) const {
    return (in + 2 * padding[size_t(d)] - dilation[size_t(d)] * (kernel - 1) - 1) / stride[size_t(d)] + 1;
  }
};

// A convolution kernel of the compiler (`kind`: depthwise, implicit im2col) on x and its weights, then
// the optional bias, scale and residual, with the geometry's window and the epilogue; false where it
// declines (try_run remembers why).
bool run_windowed(npu::compiler::OpKind kind, std::vector<at::Tensor> inputs, const at::Tensor* bias, const at::Tensor* scale,
                  const at::Tensor* residual, const at::Tensor& out, const Geometry& g, const std::vector<npu::compiler::OpKind>& epilogue) {
  for (const at::Tensor* t : {bias, scale, residual})
    if (t) inputs.push_back(*t);
  const auto make_op = [&] {
    std::vector<npu::compiler::TensorDesc> described;
    for (const at::Tensor& t : inputs) described.push_back(describe(t));
    npu::compiler::OpDesc op(kind, described, describe(out));
    op.window = g.window();
    op.epilogue = epilogue;
    op.residual = residual != nullptr;
    return op;
  };
  return try_run(make_op, inputs, out);
}

// x [N, C, H, W], w [Cout, C/G, KH, KW] -> [N, Cout, OH, OW].
// With `scale` (per output channel, with a bias) and `residual` ([N, Cout, OH, OW]):
// epilogue(conv(x, w) * scale + bias + residual), in the matmul's epilogue.
at::Tensor conv_forward(const at::Tensor& x, const at::Tensor& w, const at::Tensor* bias, const Geometry& g,
                        const std::vector<npu::compiler::OpKind>& epilogue = {}, const at::Tensor* scale = nullptr,
                        const at::Tensor* residual = nullptr) {
  const int64_t n = x.size(0), c = x.size(1), cout = w.size(0), kh = w.size(2), kw = w.size(3);
  const int64_t oh = g.out_size(0, x.size(2), kh), ow = g.out_size(1, x.size(3), kw), positions = oh * ow;
  const int64_t groups = g.groups, cout_g = cout / groups, depth = (c / groups) * kh * kw;
  at::Tensor out = new_npu({n, cout, oh, ow}, x.scalar_type());
  if (out.numel() == 0) return out;
  if (groups == c && cout == c && !residual && g.dilation == std::array<int64_t, 2>{1, 1}) {
    // Depthwise: the vector unit's kernel, its windows formed in the scratchpad (the matmul below would
    // do one row of the array per fold). It declines what it cannot do (a plane too large, stride 3).
    if (run_windowed(npu::compiler::OpKind::DEPTHWISE_CONV, {x, dense(w)}, bias, scale, nullptr, out, g, epilogue)) return out;
  }
  const bool pointwise_kernel = kh == 1 && kw == 1;
  // NPUSIM_CONV=im2col (docs/torch.md): im2col and a matmul for every convolution, to compare the lowerings.
  const char* conv_env = std::getenv("NPUSIM_CONV");
  const std::string conv_lowering = conv_env ? conv_env : "auto";
  TORCH_CHECK(conv_lowering == "auto" || conv_lowering == "im2col", "npusim: NPUSIM_CONV is auto or im2col, not '", conv_lowering, "'");
  // Groups in blocks of as many as fill the array's rows (a block-diagonal dense convolution each, its
  // zero products the price of one launch per block instead of im2col through DRAM).
  const int64_t c_g = c / groups, array_rows = Runtime::get().chip().core.tensor_core.rows;
  int64_t per_block = 1;
  for (int64_t k = 1; k <= groups; ++k)
    if (groups % k == 0 && k * std::max(c_g, cout_g) <= std::max<int64_t>(array_rows, std::max(c_g, cout_g))) per_block = k;
  if (conv_lowering == "auto" && !pointwise_kernel && g.dilation == std::array<int64_t, 2>{1, 1} && (groups == 1 || c_g >= 4) &&
      (x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kHalf) &&
      npu::compiler::conv2d_takes_channels(per_block * c_g, Runtime::get().chip())) {
    // Implicit im2col: the tensor core's kernel forms the windows in the scratchpad (no im2col matrix
    // in DRAM), its weights as [C, KH, KW, Cout] (a transpose on the chip). It declines what it
    // cannot do (padding past K - 1, a stride past 4, a band of one row that does not fit; under 16
    // channels, an RGB stem, a packed operand that does not fit; conv2d_takes_channels says which
    // channel counts it may take before the weights are laid out for it). A 1 x 1 kernel is a matmul
    // of the input itself (stride 1) or of its gathered pixels (im2col): a 1 x 1 / 2 band's rows of 56
    // bytes bound the implicit kernel at half that speed.
    const at::Tensor rows = x.stride(3) == 1 ? x : x.contiguous(), blocks = weights_in_blocks(w, groups, per_block);
    const int64_t block_c = per_block * c_g, block_cout = per_block * cout_g;
    bool ran = true;  // (every block has the shapes of the first: all run, or the first declines)
    for (int64_t k = 0; k < blocks.size(0) && ran; ++k) {
      const auto part = [&](const at::Tensor* t, int64_t dim) { return t ? t->narrow(dim, k * block_cout, block_cout) : at::Tensor(); };
      const at::Tensor bias_k = part(bias, 0), scale_k = part(scale, 0), residual_k = part(residual, 1);
      ran = run_windowed(npu::compiler::OpKind::CONV2D, {rows.narrow(1, k * block_c, block_c), blocks[k]}, bias ? &bias_k : nullptr,
                         scale ? &scale_k : nullptr, residual ? &residual_k : nullptr, out.narrow(1, k * block_cout, block_cout), g, epilogue);
    }
    if (ran) return out;
  }
  at::Tensor cols;  // [N, C*KH*KW, OH*OW]
  const bool pointwise = kh == 1 && kw == 1 && g.stride == std::array<int64_t, 2>{1, 1} && g.padding == std::array<int64_t, 2>{0, 0};
  if (pointwise && (x.is_contiguous() || x.is_contiguous(at::MemoryFormat::ChannelsLast))) {
    // The input itself: channels_last gives [N, C, H*W] with unit channel stride, read by the matmul as a
    // transposed operand.
    cols = x.view({n, c, positions});
  } else {
    // im2col reads rows of the image in runs: a channels_last input is made NCHW on the chip first.
    at::Tensor windows = new_npu({n, c, kh, kw, oh, ow}, x.scalar_type());
    require(im2col_into(x.is_contiguous(at::MemoryFormat::ChannelsLast) && !x.is_contiguous() ? x.contiguous() : x, windows, g.window(), 0.0));
    cols = windows.view({n, c * kh * kw, positions});
  }
  const at::Tensor weights = dense(w).view({cout, depth}), out3 = out.view({n, cout, positions});
  const at::Tensor bias_col = bias ? bias->view({cout, 1}) : at::Tensor(), scale_col = scale ? scale->view({cout, 1}) : at::Tensor();
  // The residual [N, Cout, OH, OW] as the output's matrices: read through its strides
  // where its positions merge into one dim, else from a dense copy.
  at::Tensor residual3;
  if (residual) {
    TORCH_CHECK(residual->sizes() == out.sizes(), "npusim::conv2d: the residual is ", residual->sizes(), ", the output ", out.sizes());
    residual3 = oh == 1 || residual->stride(2) == residual->stride(3) * ow
                    ? residual->as_strided({n, cout, positions}, {residual->stride(0), residual->stride(1), residual->stride(3)}, residual->storage_offset())
                    : dense(*residual).view({n, cout, positions});
  }
  if (groups > 1) {
    // Every group in one matmul, the groups a batch dim beside the images': [N, G, Cout/G, depth] (the
    // weights a stride-0 batch over N) @ [N, G, depth, positions]. (A depthwise convolution's groups are
    // its channels: one launch instead of one per channel.)
    const auto by_group = [&](const at::Tensor& t, int64_t dim) { return t.unflatten(dim, {groups, t.size(dim) / groups}); };
    const at::Tensor bias_g = bias ? by_group(bias_col, 0) : at::Tensor(), scale_g = scale ? by_group(scale_col, 0) : at::Tensor();
    const at::Tensor residual_g = residual ? by_group(residual3, 1) : at::Tensor();
    if (gemm_into(by_group(weights, 0).expand({n, groups, cout_g, depth}), by_group(cols, 1), bias ? &bias_g : nullptr, by_group(out3, 1),
                  epilogue, scale ? &scale_g : nullptr, residual ? &residual_g : nullptr))
      return out;
  }
  for (int64_t group = 0; group < groups; ++group) {
    const at::Tensor a = weights.narrow(0, group * cout_g, cout_g).expand({n, cout_g, depth});
    const at::Tensor bias_part = bias ? bias_col.narrow(0, group * cout_g, cout_g) : at::Tensor();
    const at::Tensor scale_part = scale ? scale_col.narrow(0, group * cout_g, cout_g) : at::Tensor();
    const at::Tensor residual_part = residual ? residual3.narrow(1, group * cout_g, cout_g) : at::Tensor();
    require(gemm_into(a, cols.narrow(1, group * depth, depth), bias ? &bias_part : nullptr, out3.narrow(1, group * cout_g, cout_g), epilogue,
                      scale ? &scale_part : nullptr, residual ? &residual_part : nullptr));
  }
  return out;
}

// The gradient of a convolution's input [N, C, H, W] from grad [N, Cout, OH, OW].
at::Tensor conv_input_grad(const at::Tensor& grad, const at::Tensor& w, int64_t height, int64_t width, const Geometry& g) {
  const int64_t n = grad.size(0), cout = grad.size(1), oh = grad.size(2), ow = grad.size(3);
  const int64_t groups = g.groups, cout_g = cout / groups, c_g = w.size(1), c = c_g * groups, kh = w.size(2), kw = w.size(3);
  at::Tensor out = new_npu({n, c, height, width}, grad.scalar_type());
  if (out.numel() == 0) return out;
  // Windows that tile the output without overlap (a 2 x 2 / 2 transposed convolution, a patch
  // embedding's gradient): each output element is one product, grad^T [OH*OW, Cout] @ W [Cout, C*KH*KW]
  // per image, whose [OH, OW, C, KH, KW] is then laid out as [C, OH, KH, OW, KW] (a layout copy).
  if (groups == 1 && g.stride == std::array<int64_t, 2>{kh, kw} && g.padding == std::array<int64_t, 2>{0, 0} &&
      g.dilation == std::array<int64_t, 2>{1, 1} && height == oh * kh &&
      width == ow * kw && kw * grad.element_size() <= 4) {
    at::Tensor products = new_npu({n, oh * ow, c * kh * kw}, grad.scalar_type());
    require(gemm_into(dense(grad).view({n, cout, oh * ow}).transpose(1, 2), dense(w).view({cout, c * kh * kw}).expand({n, cout, c * kh * kw}), nullptr,
                      products));
    out.view({n, c, oh, kh, ow, kw}).copy_(products.view({n, oh, ow, c, kh, kw}).permute({0, 3, 1, 4, 2, 5}));
    return out;
  }
  at::Tensor spread = grad;
  if (g.stride != std::array<int64_t, 2>{1, 1}) {
    spread = at::zeros({n, cout, (oh - 1) * g.stride[0] + 1, (ow - 1) * g.stride[1] + 1}, grad.options());
    spread.slice(2, 0, std::nullopt, g.stride[0]).slice(3, 0, std::nullopt, g.stride[1]).copy_(grad);
  }
  Window rotated;
  rotated.padding = {g.dilation[0] * (kh - 1) - g.padding[0], g.dilation[1] * (kw - 1) - g.padding[1]};
  rotated.dilation = g.dilation;
  rotated.flip = true;
  at::Tensor windows = new_npu({n, cout, kh, kw, height, width}, grad.scalar_type());
  require(im2col_into(spread, windows, rotated, 0.0));
  const int64_t depth = cout_g * kh * kw;
  const at::Tensor cols = windows.view({n, cout * kh * kw, height * width}), out3 = out.view({n, c, height * width});
  for (int64_t group = 0; group < groups; ++group) {
    const at::Tensor transposed = dense(w.narrow(0, group * cout_g, cout_g).permute({1, 0, 2, 3})).view({c_g, depth});
    require(gemm_into(transposed.expand({n, c_g, depth}), cols.narrow(1, group * depth, depth), nullptr, out3.narrow(1, group * c_g, c_g)));
  }
  return out;
}

// The gradient of a convolution's weight [Cout, C/G, KH, KW] from its input x and grad [N, Cout, OH, OW].
at::Tensor conv_weight_grad(const at::Tensor& x, const at::Tensor& grad, int64_t kh, int64_t kw, const Geometry& g, at::ScalarType dtype) {
  const int64_t n = x.size(0), c = x.size(1), cout = grad.size(1), oh = grad.size(2), ow = grad.size(3);
  const int64_t groups = g.groups, c_g = c / groups, cout_g = cout / groups, depth = c_g * kh * kw, positions = n * oh * ow;
  at::Tensor out = new_npu({cout, c_g, kh, kw}, dtype);
  if (out.numel() == 0) return out;
  if (positions == 0) return out.zero_();
  at::Tensor windows = new_npu({c, kh, kw, n, oh, ow}, x.scalar_type());
  require(im2col_into(x, windows.permute({3, 0, 1, 2, 4, 5}), g.window(), 0.0));
  const at::Tensor cols = windows.view({c * kh * kw, positions});
  const at::Tensor rows = n == 1 ? dense(grad).view({cout, positions}) : dense(grad.permute({1, 0, 2, 3})).view({cout, positions});
  const at::Tensor out2 = out.view({cout, depth});
  for (int64_t group = 0; group < groups; ++group)
    require(gemm_into(rows.narrow(0, group * cout_g, cout_g), cols.narrow(0, group * depth, depth).t(), nullptr,
                      out2.narrow(0, group * cout_g, cout_g)));
  return out;
}

// Summed in f32 (two row reductions) and rounded once, as the CPU does.
at::Tensor bias_grad(const at::Tensor& grad) {
  const at::Tensor g = as_f32(dense(grad));
  return at::sum(at::sum(g.view({grad.size(0), grad.size(1), -1}), {2}), {0}).to(grad.scalar_type());
}

// 1-D and 2-D convolutions of one float dtype on the npu, as 2-D: the geometry and whether it is 1-D.
bool chip_geometry(const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride, c10::IntArrayRef padding,
                   c10::IntArrayRef dilation, int64_t groups, Geometry* g, bool* one_d) {
  if ((input.dim() != 3 && input.dim() != 4) || weight.dim() != input.dim() || !on_npu(input) || !on_npu(weight)) return false;
  if (!chip_float(input) || !chip_float(weight) || weight.scalar_type() != input.scalar_type()) return false;
  const size_t dims = size_t(input.dim() - 2);
  if (stride.size() != dims || padding.size() != dims || dilation.size() != dims || groups < 1) return false;
  *one_d = dims == 1;
  for (size_t d = 0; d < dims; ++d) {
    const size_t at = *one_d ? 1 : d;
    g->stride[at] = stride[d], g->padding[at] = padding[d], g->dilation[at] = dilation[d];
  }
  g->groups = groups;
  return true;
}

at::Tensor as_2d(const at::Tensor& t, bool one_d) { return one_d ? t.unsqueeze(2) : t; }
at::Tensor from_2d(const at::Tensor& t, bool one_d) { return one_d && t.defined() ? t.squeeze(2) : t; }

}  // namespace

at::Tensor NpuNativeFunctions::convolution_overrideable(const at::Tensor& input, const at::Tensor& weight,
                                                        const std::optional<at::Tensor>& bias, c10::IntArrayRef stride,
                                                        c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
                                                        c10::IntArrayRef output_padding, int64_t groups) {
  Geometry g;
  bool one_d = false;
  const bool has_bias = bias && bias->defined();
  if (input.dim() == 5 && !transposed && (!has_bias || chip_float(*bias))) {
    if (const at::Tensor out = conv3d_forward(input, weight, bias, stride, padding, dilation, groups); out.defined()) return out;
  }
  if (chip_geometry(input, weight, stride, padding, dilation, groups, &g, &one_d) && (!has_bias || chip_float(*bias))) {
    try {
      const at::Tensor x = as_2d(input, one_d), w = as_2d(weight, one_d);
      at::Tensor out;
      if (!transposed) {
        out = conv_forward(x, w, has_bias ? &*bias : nullptr, g);
      } else {
        std::array<int64_t, 2> extra{0, 0};
        for (size_t d = 0; d < output_padding.size(); ++d) extra[one_d ? 1 : d] = output_padding[d];
        const auto size = [&](int d, int64_t in, int64_t kernel) {
          return (in - 1) * g.stride[size_t(d)] - 2 * g.padding[size_t(d)] + g.dilation[size_t(d)] * (kernel - 1) + extra[size_t(d)] + 1;
        };
        out = conv_input_grad(x, w, size(0, x.size(2), w.size(2)), size(1, x.size(3), w.size(3)), g);
        if (has_bias) out = at::add(out, bias->view({1, -1, 1, 1}));
      }
      return from_2d(out, one_d);
    } catch (const OffChip&) {
    }
  }
  return fall_back<at::_ops::convolution>("", input, weight, bias, stride, padding, dilation, transposed, output_padding, groups);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> NpuNativeFunctions::convolution_backward_overrideable(const at::Tensor& grad,
                                                                                                     const at::Tensor& input,
                                                                                                     const at::Tensor& weight,
                                                                                                     c10::IntArrayRef stride,
                                                                                                     c10::IntArrayRef padding,
                                                                                                     c10::IntArrayRef dilation,
                                                                                                     bool transposed,
                                                                                                     c10::IntArrayRef output_padding,
                                                                                                     int64_t groups,
                                                                                                     std::array<bool, 3> mask) {
  Geometry g;
  bool one_d = false;
  std::tuple<at::Tensor, at::Tensor, at::Tensor> gradients;
  if (input.dim() == 5 && !transposed && grad.scalar_type() == input.scalar_type() &&
      conv3d_backward(grad, input, weight, stride, padding, dilation, groups, mask, &gradients))
    return gradients;
  if (chip_geometry(input, weight, stride, padding, dilation, groups, &g, &one_d) && on_npu(grad) && grad.scalar_type() == input.scalar_type()) {
    try {
      const at::Tensor x = as_2d(input, one_d), w = as_2d(weight, one_d), dy = as_2d(grad, one_d);
      at::Tensor gi, gw, gb;
      if (!transposed) {
        if (mask[0]) gi = conv_input_grad(dy, w, x.size(2), x.size(3), g);
        if (mask[1]) gw = conv_weight_grad(x, dy, w.size(2), w.size(3), g, weight.scalar_type());
      } else {
        // y = the input gradient of a convolution with weight w taking y to x.
        if (mask[0]) gi = conv_forward(dy, w, nullptr, g);
        if (mask[1]) gw = conv_weight_grad(dy, x, w.size(2), w.size(3), g, weight.scalar_type());
      }
      if (mask[2]) gb = bias_grad(dy);
      return {from_2d(gi, one_d), from_2d(gw, one_d), gb};
    } catch (const OffChip&) {
    }
  }
  // The bias, when asked for, is a vector of the output's channels.
  const std::vector<int64_t> bias_sizes = {transposed ? weight.size(1) * groups : weight.size(0)};
  return fall_back<at::_ops::convolution_backward>("", grad, input, weight, std::optional<at::IntArrayRef>(bias_sizes), stride, padding,
                                                   dilation, transposed, output_padding, groups, mask);
}

at::Tensor conv2d_npu(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias, c10::IntArrayRef stride,
                      c10::IntArrayRef padding, c10::IntArrayRef dilation, int64_t groups, const std::vector<std::string>& epilogue,
                      const std::optional<at::Tensor>& scale, const std::optional<at::Tensor>& residual) {
  TORCH_CHECK(x.dim() == 4 && weight.dim() == 4, "npusim::conv2d: x is [N, C, H, W] and weight [Cout, C/groups, KH, KW]");
  std::vector<npu::compiler::OpKind> steps;
  for (const std::string& name : epilogue) steps.push_back(epilogue_kind(name));
  const bool has_bias = bias && bias->defined(), has_scale = scale && scale->defined(), has_residual = residual && residual->defined();
  Geometry g;
  bool one_d = false;
  if (chip_geometry(x, weight, stride, padding, dilation, groups, &g, &one_d) && (!has_bias || chip_float(*bias)) &&
      (!has_scale || (has_bias && chip_float(*scale))) &&
      (!has_residual || (chip_float(*residual) && on_npu(*residual) && residual->dim() == 4))) {
    try {
      return conv_forward(x, weight, has_bias ? &*bias : nullptr, g, steps, has_scale ? &*scale : nullptr, has_residual ? &*residual : nullptr);
    } catch (const OffChip&) {
    }
  }
  return fall_back_by_name<decltype(conv2d_npu)>("npusim::conv2d", "", x, weight, bias, stride, padding, dilation, groups, epilogue, scale,
                                                 residual);
}

// PyTorch routes other backends' convolutions to the *_overrideable ops.

}  // namespace npusim
