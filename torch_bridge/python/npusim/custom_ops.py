"""The npusim:: custom ops' Python half: fake kernels (shapes for torch.compile
and torch.export), autograd, and friendly wrappers.

The ops themselves (schemas, npu and CPU kernels) are in torch_bridge/csrc/aten/custom_ops.cpp:
    torch.ops.npusim.gemm(a, b, bias, alpha, beta, epilogue, residual)
                                                                epilogue(alpha * a @ b + beta * bias + residual),
                                                                one kernel
    torch.ops.npusim.layer_norm(x, weight, bias, eps, dtype)    layer norm over the last dim, one kernel
    torch.ops.npusim.rms_norm(x, weight, eps, dtype)            RMS norm over the last dim, one kernel
                                                                (dtype: the result's, x's or float32: the
                                                                norm of x.float() without a conversion first)
    torch.ops.npusim.attention(q, k, v, is_causal, scale)      softmax(scale q k^T (+ causal mask)) v, the
                                                                flash-attention kernel (scores never in DRAM)
    torch.ops.npusim.conv2d(x, w, bias, stride, padding, dilation, groups, epilogue, scale, residual)
                                                                epilogue(conv2d(x, w) * scale + bias + residual),
                                                                scale and bias per output channel (an eval
                                                                batch norm), the residual the output's shape
                                                                (a skip connection): im2col and one matmul,
                                                                the rest on its tiles in the accumulator
    torch.ops.npusim.max_pool2d(x, kernel, stride, padding, dilation, ceil_mode)
                                                                max pooling's values without its indices
    torch.ops.npusim.elementwise_chain(inputs, chain, dtype)    elementwise ops of one dtype in one kernel,
                                                                e.g. "mul(in0, 0.5); tanh(%0); add(%1, in1)"
                                                                (torch_bridge/csrc/aten/elementwise_chain.cpp);
                                                                with a dtype, computed in f32 over inputs
                                                                of any float dtypes, rounded once to it
elementwise_chain rounds every step to the dtype, as the ops one by one do; it is what
the torch.compile backend fuses elementwise nodes into after autograd, so it has no
autograd formula of its own. The others compute in f32 and round once to the inputs' dtype (attention rounds its
probabilities to the inputs' dtype before multiplying by v, as FlashAttention does).
torch.nn.functional.scaled_dot_product_attention reaches the same kernel on the
npu (without a mask or dropout) through PyTorch's overrideable SDPA backend.
"""

from typing import Optional, Sequence

import torch

__all__ = ["gemm", "layer_norm", "attention", "conv2d", "max_pool2d", "elementwise_chain", "EPILOGUES"]

# The activations a gemm can apply after its product (and bias), in f32.
EPILOGUES = ("relu", "gelu", "gelu_tanh", "silu", "tanh", "sigmoid")


def gemm(a: torch.Tensor, b: torch.Tensor, bias: Optional[torch.Tensor] = None, alpha: float = 1.0, beta: float = 1.0,
         epilogue: Sequence[str] = (), residual: Optional[torch.Tensor] = None) -> torch.Tensor:
    """epilogue(alpha * a @ b + beta * bias + residual) in one kernel; a [..., M, K], b [..., K, N], bias and
    residual broadcast to [..., M, N] (the bias the same for every batch element)."""
    return torch.ops.npusim.gemm(a, b, bias, float(alpha), float(beta), list(epilogue), residual)


def layer_norm(x: torch.Tensor, weight: Optional[torch.Tensor] = None, bias: Optional[torch.Tensor] = None,
               eps: float = 1e-5, dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """torch.nn.functional.layer_norm over the last dim, in one kernel; the result in dtype (x's or float32)."""
    return torch.ops.npusim.layer_norm(x, weight, bias, float(eps), dtype)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False,
              scale: Optional[float] = None) -> torch.Tensor:
    """softmax(scale * q @ k^T (+ causal mask)) @ v in one kernel; q [..., L, D], k [..., S, D], v [..., S, Dv]."""
    return torch.ops.npusim.attention(q, k, v, is_causal, scale)


def conv2d(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None, stride=(1, 1), padding=(0, 0),
           dilation=(1, 1), groups: int = 1, epilogue: Sequence[str] = (), scale: Optional[torch.Tensor] = None,
           residual: Optional[torch.Tensor] = None) -> torch.Tensor:
    """epilogue(torch.nn.functional.conv2d(x, weight) * scale + bias + residual) in one matmul: scale and bias
    per output channel (a scale needs a bias), the residual of the output's shape, the activations applied in
    the matmul's epilogue."""
    pair = lambda v: [int(v), int(v)] if isinstance(v, int) else [int(e) for e in v]  # noqa: E731
    return torch.ops.npusim.conv2d(x, weight, bias, pair(stride), pair(padding), pair(dilation), int(groups), list(epilogue), scale,
                                   residual)


def max_pool2d(x: torch.Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False) -> torch.Tensor:
    """torch.nn.functional.max_pool2d's values (no indices): im2col and one row max on the npu."""
    pair = lambda v: [int(v), int(v)] if isinstance(v, int) else [int(e) for e in v]  # noqa: E731
    return torch.ops.npusim.max_pool2d(x, pair(kernel_size), pair(stride if stride is not None else kernel_size), pair(padding),
                                       pair(dilation), bool(ceil_mode))


def elementwise_chain(inputs: Sequence[torch.Tensor], chain: str, dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """The steps of `chain` (compiler/ops.def's text form: `NAME(ARG[, ARG]); ...` with ARG `inK`, `%I` for
    step I's result, or a number) on `inputs`, broadcast to one shape, in one kernel; each step rounds to
    the inputs' dtype. With a dtype, the inputs may be of any float dtypes: each step is computed in f32
    and the result rounded once to dtype."""
    return torch.ops.npusim.elementwise_chain(list(inputs), chain, dtype)


# ---- fake kernels ------------------------------------------------------------------


@torch.library.register_fake("npusim::gemm")
def _gemm_fake(a, b, bias, alpha, beta, epilogue, residual=None):
    torch._check(a.dim() >= 2 and b.dim() >= 2, lambda: "npusim::gemm: a is [..., M, K] and b [..., K, N]")
    torch._check(a.shape[-1] == b.shape[-2], lambda: "npusim::gemm: K differs")
    torch._check(a.dtype == b.dtype, lambda: "npusim::gemm: a and b have one dtype")
    for name in epilogue:
        torch._check(name in EPILOGUES, lambda: f"npusim::gemm: epilogue '{name}' is not one of {', '.join(EPILOGUES)}")
    shape = (*torch.broadcast_shapes(a.shape[:-2], b.shape[:-2]), a.shape[-2], b.shape[-1])
    if residual is not None:
        torch._check(torch.broadcast_shapes(residual.shape, shape) == torch.Size(shape),
                     lambda: f"npusim::gemm: the residual {tuple(residual.shape)} does not broadcast to {shape}")
    return a.new_empty(shape)


def _norm_fake(name, x, dtype):
    torch._check(x.dim() >= 1, lambda: f"npusim::{name}: x has at least one dim")
    torch._check(dtype in (None, x.dtype, torch.float32), lambda: f"npusim::{name}: dtype is x's or float32, got {dtype}")
    return torch.empty_like(x, dtype=dtype or x.dtype, memory_format=torch.contiguous_format)


@torch.library.register_fake("npusim::layer_norm")
def _layer_norm_fake(x, weight=None, bias=None, eps=1e-5, dtype=None):
    return _norm_fake("layer_norm", x, dtype)


@torch.library.register_fake("npusim::rms_norm")
def _rms_norm_fake(x, weight=None, eps=1.1920928955078125e-07, dtype=None):
    return _norm_fake("rms_norm", x, dtype)


@torch.library.register_fake("npusim::conv2d")
def _conv2d_fake(x, weight, bias, stride, padding, dilation, groups, epilogue, scale=None, residual=None):
    torch._check(scale is None or bias is not None, lambda: "npusim::conv2d: a scale comes with a bias")
    torch._check(x.dim() == 4 and weight.dim() == 4, lambda: "npusim::conv2d: x is [N, C, H, W] and weight [Cout, C/groups, KH, KW]")
    torch._check(x.dtype == weight.dtype, lambda: "npusim::conv2d: x and weight have one dtype")
    torch._check(x.shape[1] == weight.shape[1] * groups, lambda: "npusim::conv2d: C differs from weight's C/groups * groups")
    for name in epilogue:
        torch._check(name in EPILOGUES, lambda: f"npusim: epilogue '{name}' is not one of {', '.join(EPILOGUES)}")
    size = [(x.shape[2 + d] + 2 * padding[d] - dilation[d] * (weight.shape[2 + d] - 1) - 1) // stride[d] + 1 for d in range(2)]
    shape = (x.shape[0], weight.shape[0], *size)
    torch._check(residual is None or tuple(residual.shape) == shape, lambda: f"npusim::conv2d: the residual is not {shape}")
    return x.new_empty(shape)


@torch.library.register_fake("npusim::max_pool2d")
def _max_pool2d_fake(x, kernel_size, stride, padding, dilation, ceil_mode):
    values, _ = torch.ops.aten.max_pool2d_with_indices.default(x, kernel_size, stride, padding, dilation, ceil_mode)
    return torch.empty_like(values)


@torch.library.register_fake("npusim::attention")
def _attention_fake(q, k, v, is_causal, scale):
    torch._check(q.dim() >= 2 and k.dim() >= 2 and v.dim() >= 2, lambda: "attention: q, k and v have at least 2 dims")
    torch._check(q.shape[-1] == k.shape[-1] and k.shape[-2] == v.shape[-2], lambda: "attention: q, k, v shapes do not match")
    return q.new_empty((*q.shape[:-1], v.shape[-1]))


@torch.library.register_fake("npusim::elementwise_chain")
def _elementwise_chain_fake(inputs, chain, dtype=None):
    torch._check(len(inputs) > 0, lambda: "npusim::elementwise_chain: no inputs")
    if dtype is None:
        torch._check(all(t.dtype == inputs[0].dtype for t in inputs), lambda: "npusim::elementwise_chain: the inputs have one dtype")
    else:
        floats = (torch.float32, torch.bfloat16, torch.float16)
        torch._check(dtype in floats and all(t.dtype in floats for t in inputs),
                     lambda: "npusim::elementwise_chain: a chain in f32 reads and writes float32, bfloat16 or float16")
    return inputs[0].new_empty(torch.broadcast_shapes(*(t.shape for t in inputs)), dtype=dtype or inputs[0].dtype)


# ---- autograd ----------------------------------------------------------------------


def _activation(name: str, z: torch.Tensor) -> torch.Tensor:
    if name == "gelu_tanh":
        return torch.nn.functional.gelu(z, approximate="tanh")
    return getattr(torch.nn.functional, name)(z) if name != "tanh" and name != "sigmoid" else getattr(torch, name)(z)


def _activation_backward(name: str, grad: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """The gradient through activation `name` at its input z."""
    aten = torch.ops.aten
    if name == "relu":
        return aten.threshold_backward(grad, z, 0)
    if name in ("gelu", "gelu_tanh"):
        return aten.gelu_backward(grad, z, approximate="tanh" if name == "gelu_tanh" else "none")
    if name == "silu":
        return aten.silu_backward(grad, z)
    if name == "tanh":
        return aten.tanh_backward(grad, torch.tanh(z))
    return aten.sigmoid_backward(grad, torch.sigmoid(z))


def _sum_to(t: torch.Tensor, shape) -> torch.Tensor:
    """t summed over the dims that broadcasting added or expanded to reach t's shape from `shape`."""
    lead = t.dim() - len(shape)
    if lead > 0:
        t = t.sum(dim=tuple(range(lead)))
    dims = tuple(i for i, size in enumerate(shape) if size == 1 and t.shape[i] != 1)
    return t.sum(dim=dims, keepdim=True) if dims else t


def _gemm_setup_context(ctx, inputs, output):
    a, b, bias, alpha, beta, epilogue, residual = inputs
    ctx.alpha, ctx.beta, ctx.epilogue = alpha, beta, list(epilogue)
    ctx.bias_shape = None if bias is None else bias.shape
    ctx.residual_shape = None if residual is None else residual.shape
    ctx.save_for_backward(a, b, bias, residual if epilogue else None)


def _gemm_backward(ctx, grad):
    a, b, bias, residual = ctx.saved_tensors
    g = grad
    if ctx.epilogue:
        # The activations' inputs, recomputed: the forward kept only its output.
        z = torch.ops.npusim.gemm(a, b, bias, ctx.alpha, ctx.beta, [], residual)
        inputs = [z]
        for name in ctx.epilogue[:-1]:
            inputs.append(_activation(name, inputs[-1]))
        for name, z_in in reversed(list(zip(ctx.epilogue, inputs))):
            g = _activation_backward(name, g, z_in)
    grad_a = grad_b = grad_bias = None
    if ctx.needs_input_grad[0]:
        grad_a = _sum_to(torch.ops.npusim.gemm(g, b.mT, None, ctx.alpha, 1.0, []), a.shape)
    if ctx.needs_input_grad[1]:
        grad_b = _sum_to(torch.ops.npusim.gemm(a.mT, g, None, ctx.alpha, 1.0, []), b.shape)
    if bias is not None and ctx.needs_input_grad[2]:
        grad_bias = _sum_to(g * ctx.beta if ctx.beta != 1.0 else g, ctx.bias_shape).to(bias.dtype)
    grad_residual = None
    if ctx.residual_shape is not None and ctx.needs_input_grad[6]:
        grad_residual = _sum_to(g, ctx.residual_shape)
    return grad_a, grad_b, grad_bias, None, None, None, grad_residual


torch.library.register_autograd("npusim::gemm", _gemm_backward, setup_context=_gemm_setup_context)


def _layer_norm_setup_context(ctx, inputs, output):
    x, weight, bias, eps, _ = inputs
    ctx.eps = eps
    ctx.has_bias = bias is not None
    ctx.save_for_backward(x, weight)


def _layer_norm_backward(ctx, grad):
    x, weight = ctx.saved_tensors
    mean = x.mean(-1, keepdim=True)
    centered = x - mean
    rstd = torch.rsqrt((centered * centered).mean(-1, keepdim=True) + ctx.eps)
    normalized = centered * rstd
    g = grad * weight if weight is not None else grad
    grad_x = rstd * (g - g.mean(-1, keepdim=True) - normalized * (g * normalized).mean(-1, keepdim=True))
    rows = grad.reshape(-1, grad.shape[-1])
    grad_weight = (rows * normalized.reshape(rows.shape)).sum(0) if weight is not None and ctx.needs_input_grad[1] else None
    grad_bias = rows.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
    return grad_x.to(x.dtype), grad_weight, grad_bias, None, None


torch.library.register_autograd("npusim::layer_norm", _layer_norm_backward, setup_context=_layer_norm_setup_context)


def _rms_norm_setup_context(ctx, inputs, output):
    x, weight, eps, _ = inputs
    ctx.eps = eps
    ctx.save_for_backward(x, weight)


def _rms_norm_backward(ctx, grad):
    # In f32, each gradient rounded once to its tensor's dtype (as the forward computes).
    x, weight = ctx.saved_tensors
    xf, gf = x.float(), grad.float()
    rstd = torch.rsqrt((xf * xf).mean(-1, keepdim=True) + ctx.eps)
    normalized = xf * rstd
    g = gf * weight.float() if weight is not None else gf
    grad_x = (rstd * (g - normalized * (g * normalized).mean(-1, keepdim=True))).to(x.dtype)
    rows = gf.reshape(-1, grad.shape[-1])
    grad_weight = None
    if weight is not None and ctx.needs_input_grad[1]:
        grad_weight = (rows * normalized.reshape(rows.shape)).sum(0).to(weight.dtype)
    return grad_x, grad_weight, None, None


torch.library.register_autograd("npusim::rms_norm", _rms_norm_backward, setup_context=_rms_norm_setup_context)


def _attention_setup_context(ctx, inputs, output):
    q, k, v, is_causal, scale = inputs
    ctx.is_causal = is_causal
    ctx.scale = scale if scale is not None else q.shape[-1] ** -0.5
    ctx.save_for_backward(q, k, v)


def _attention_backward(ctx, grad):
    """From the probabilities, recomputed: P = softmax(S), S = scale q k^T (+ mask);
    dV = P^T dO, dP = dO V^T, dS = P * (dP - rowsum(dP * P)), dQ = scale dS K, dK = scale dS^T Q."""
    q, k, v = ctx.saved_tensors
    mask = None
    if ctx.is_causal:  # made on the host, added to the scores as the gemm's bias
        above = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).triu(1)
        mask = torch.zeros(above.shape).masked_fill(above, float("-inf")).to(q.device)
    p = torch.softmax(torch.ops.npusim.gemm(q, k.transpose(-2, -1), mask, ctx.scale, 1.0, []), -1)
    dp = torch.ops.npusim.gemm(grad, v.transpose(-2, -1), None, 1.0, 1.0, [])
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = torch.ops.npusim.gemm(ds, k, None, ctx.scale, 1.0, []) if ctx.needs_input_grad[0] else None
    dk = torch.ops.npusim.gemm(ds.transpose(-2, -1), q, None, ctx.scale, 1.0, []) if ctx.needs_input_grad[1] else None
    dv = torch.ops.npusim.gemm(p.transpose(-2, -1), grad, None, 1.0, 1.0, []) if ctx.needs_input_grad[2] else None
    return dq, dk, dv, None, None


torch.library.register_autograd("npusim::attention", _attention_backward, setup_context=_attention_setup_context)


def _conv2d_setup_context(ctx, inputs, output):
    x, weight, bias, stride, padding, dilation, groups, epilogue, scale, residual = inputs
    ctx.geometry = (list(stride), list(padding), list(dilation), groups)
    ctx.epilogue = list(epilogue)
    ctx.has_bias = bias is not None
    ctx.has_residual = residual is not None
    ctx.save_for_backward(x, weight, bias, scale, residual if epilogue else None)


def _conv2d_backward(ctx, grad):
    """z = conv(x, w) * scale + bias + residual, y = epilogue(z): through the activations at their
    inputs (recomputed), then the residual, the scale and bias per channel, then the convolution's
    own backward."""
    x, weight, bias, scale, residual = ctx.saved_tensors
    stride, padding, dilation, groups = ctx.geometry
    conv = torch.ops.npusim.conv2d(x, weight, None, stride, padding, dilation, groups, []) if scale is not None else None
    g = grad
    if ctx.epilogue:
        inputs = [torch.ops.npusim.conv2d(x, weight, bias, stride, padding, dilation, groups, [], scale, residual)]
        for name in ctx.epilogue[:-1]:
            inputs.append(_activation(name, inputs[-1]))
        for name, z_in in reversed(list(zip(ctx.epilogue, inputs))):
            g = _activation_backward(name, g, z_in)
    per_channel = lambda t: t.float().sum((0, 2, 3))  # noqa: E731
    grad_bias = per_channel(g).to(bias.dtype) if ctx.has_bias and ctx.needs_input_grad[2] else None
    grad_scale = per_channel(g * conv).to(scale.dtype) if scale is not None and ctx.needs_input_grad[8] else None
    grad_residual = g if ctx.has_residual and ctx.needs_input_grad[9] else None
    if scale is not None:
        g = g * scale.view(1, -1, 1, 1).to(g.dtype)
    mask = [ctx.needs_input_grad[0], ctx.needs_input_grad[1], False]
    grad_x, grad_weight, _ = torch.ops.aten.convolution_backward(
        g, x, weight, [weight.shape[0]], stride, padding, dilation, False, [0, 0], groups, mask)
    return grad_x, grad_weight, grad_bias, None, None, None, None, None, grad_scale, grad_residual


torch.library.register_autograd("npusim::conv2d", _conv2d_backward, setup_context=_conv2d_setup_context)


def _max_pool2d_setup_context(ctx, inputs, output):
    x, *geometry = inputs
    ctx.geometry = geometry
    ctx.save_for_backward(x)


def _max_pool2d_backward(ctx, grad):
    """Through the indices of the maximum, recomputed (the forward kept none)."""
    (x,) = ctx.saved_tensors
    _, indices = torch.ops.aten.max_pool2d_with_indices.default(x, *ctx.geometry)
    return torch.ops.aten.max_pool2d_with_indices_backward.default(grad, x, *ctx.geometry, indices), None, None, None, None, None


torch.library.register_autograd("npusim::max_pool2d", _max_pool2d_backward, setup_context=_max_pool2d_setup_context)
