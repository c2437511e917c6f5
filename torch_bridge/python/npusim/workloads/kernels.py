"""The compiler's kernel-efficiency suite: the standard kernels of models (GEMMs, convolutions, layout
changes, attention, norms, reductions, elementwise chains, gathers), each a function and its CPU
arguments, and the simple roofline bound of each on a chip:

    bound = max(MACs / peak MACs per cycle,
                compulsory DRAM bytes / DRAM bytes per cycle,
                vector elements / (vector lanes x cores))

bench/roofline.py measures them against the bound; npusim.workloads names each as a workload
("kernel:mm 4096^3 bf16"). An f32 product counts the bf16 products the chip does for it at PyTorch's
float32 matmul precision; compulsory bytes are each input read once and the output written once;
vector elements are the larger of the inputs' and the output's, for kernels the vector unit computes.
"""
import dataclasses
import itertools
import math
from typing import Callable, List, Optional, Sequence

import torch
import torch.nn.functional as F


@dataclasses.dataclass
class Case:
    """One kernel: `fn` applied to `args` (CPU tensors, moved to the device), and what it must do."""
    fn: Callable
    args: Sequence[torch.Tensor]
    macs: int = 0
    vector: bool = True           # computed on the vector unit (its elements count against the lanes)
    read_bytes: Optional[int] = None  # compulsory bytes read, where not every input element is read once


@dataclasses.dataclass
class Kernel:
    name: str
    family: str
    build: Callable[[bool], Case]  # small=True: a size for the functional check


KERNELS: List[Kernel] = []


def kernel(name: str, family: str):
    def register(build):
        KERNELS.append(Kernel(name, family, build))
        return build
    return register


def randn(*shape, dtype=torch.bfloat16):
    return torch.randn(*shape, dtype=torch.float32).to(dtype)


# ---- GEMMs ----------------------------------------------------------------------------------

def gemm(name, m, n, k, dtype=torch.bfloat16, small=(64, 48, 80)):
    @kernel(name, "gemm")
    def build(s, m=m, n=n, k=k, dtype=dtype):
        if s:
            m, n, k = small
        if dtype == torch.int8:
            a = torch.randint(-8, 8, (m, k), dtype=torch.int8)
            b = torch.randint(-8, 8, (k, n), dtype=torch.int8)
            return Case(torch._int_mm, (a, b), macs=m * n * k, vector=False)
        return Case(torch.matmul, (randn(m, k, dtype=dtype), randn(k, n, dtype=dtype)), macs=m * n * k, vector=False)


for size in (256, 512, 1024, 2048, 4096, 8192):
    gemm(f"mm {size}^3 bf16", size, size, size)
gemm("mm 4096x4096x1024 bf16", 4096, 4096, 1024)
gemm("mm 2048^3 f16", 2048, 2048, 2048, torch.float16)
gemm("mm 1024^3 f32", 1024, 1024, 1024, torch.float32)
gemm("mm 2048^3 i8 (_int_mm)", 2048, 2048, 2048, torch.int8, small=(64, 48, 80))
for m in (1, 8, 16):
    gemm(f"decode mm {m}x4096 @ 4096x11008", m, 11008, 4096, small=(m, 96, 64))
gemm("K-heavy mm 256x256x16384", 256, 256, 16384, small=(32, 32, 512))
gemm("N-heavy mm 256x16384x1024", 256, 16384, 1024, small=(32, 512, 64))
gemm("odd mm 1000x1000x1000", 1000, 1000, 1000, small=(37, 53, 71))
gemm("odd mm 777x3001x513", 777, 3001, 513, small=(29, 61, 47))


@kernel("bmm q @ k^T 12x512x64", "gemm")
def _(s):
    b, l, d = (2, 40, 16) if s else (12, 512, 64)
    return Case(lambda q, k: q @ k.transpose(-2, -1), (randn(b, l, d), randn(b, l, d)), macs=b * l * l * d, vector=False)


@kernel("bmm p @ v 12x512x512x64", "gemm")
def _(s):
    b, l, d = (2, 40, 16) if s else (12, 512, 64)
    return Case(torch.matmul, (randn(b, l, l), randn(b, l, d)), macs=b * l * l * d, vector=False)


@kernel("bmm a^T @ b 16x1024x256x1024", "gemm")
def _(s):
    b, m, n, k = (2, 24, 40, 32) if s else (16, 1024, 256, 1024)
    return Case(lambda a, w: a.transpose(-2, -1) @ w, (randn(b, k, m), randn(b, k, n)), macs=b * m * n * k, vector=False)


# ---- convolutions ---------------------------------------------------------------------------

def conv(name, n, c, h, w, o, k, stride=1, groups=1, channels_last=False, small=None):
    @kernel(name, "conv")
    def build(s, n=n, c=c, h=h, w=w, o=o):
        if s:
            n, c, h, w, o = small or (1, max(groups, 8) if groups == 1 else groups, 12, 12, max(groups, 8) if groups == 1 else groups)
        x = randn(n, c, h, w)
        weight = randn(o, c // groups, k, k)
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        pad = k // 2
        oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
        return Case(lambda x, weight: F.conv2d(x, weight, stride=stride, padding=pad, groups=groups), (x, weight),
                    macs=n * o * oh * ow * (c // groups) * k * k, vector=False)


conv("conv 7x7/2 ResNet stem 1x3x224x224 -> 64", 1, 3, 224, 224, 64, 7, stride=2, small=(1, 3, 20, 20, 8))
conv("conv 3x3 ResNet 1x64x56x56 -> 64", 1, 64, 56, 56, 64, 3)
conv("conv 3x3 8x128x28x28 -> 128", 8, 128, 28, 28, 128, 3)
conv("conv 3x3/2 32x128x28x28 -> 256", 32, 128, 28, 28, 256, 3, stride=2)
conv("conv 3x3 channels_last 8x128x28x28 -> 128", 8, 128, 28, 28, 128, 3, channels_last=True)
conv("conv 1x1 8x256x14x14 -> 1024", 8, 256, 14, 14, 1024, 1)
conv("conv 1x1 channels_last 32x256x14x14 -> 1024", 32, 256, 14, 14, 1024, 1, channels_last=True)
conv("conv 1x1/2 1x512x28x28 -> 1024", 1, 512, 28, 28, 1024, 1, stride=2)
conv("depthwise 3x3 8x96x56x56", 8, 96, 56, 56, 96, 3, groups=96)
conv("depthwise 3x3/2 1x144x56x56", 1, 144, 56, 56, 144, 3, stride=2, groups=144)
conv("grouped 3x3 g=32 8x256x28x28 -> 256", 8, 256, 28, 28, 256, 3, groups=32)


@kernel("conv_transpose 2x2/2 8x256x28x28 -> 128", "conv")
def _(s):
    n, c, h, w, o = (1, 8, 6, 6, 8) if s else (8, 256, 28, 28, 128)
    return Case(lambda x, weight: F.conv_transpose2d(x, weight, stride=2), (randn(n, c, h, w), randn(c, o, 2, 2)),
                macs=n * c * h * w * o * 4, vector=False)


# ---- layout changes -------------------------------------------------------------------------

@kernel("transpose(1, 2) 12x512x512 bf16", "layout")
def _(s):
    return Case(lambda x: x.transpose(1, 2).contiguous(), (randn(*((2, 40, 24) if s else (12, 512, 512))),))


@kernel("NCHW -> NHWC 8x64x56x56", "layout")
def _(s):
    return Case(lambda x: x.permute(0, 2, 3, 1).contiguous(), (randn(*((2, 8, 6, 5) if s else (8, 64, 56, 56))),))


@kernel("NHWC -> NCHW 8x56x56x64", "layout")
def _(s):
    return Case(lambda x: x.permute(0, 3, 1, 2).contiguous(), (randn(*((2, 6, 5, 8) if s else (8, 56, 56, 64))),))


@kernel("transpose 4096x4096 f32", "layout")
def _(s):
    return Case(lambda x: x.t().contiguous(), (randn(*((40, 56) if s else (4096, 4096)), dtype=torch.float32),))


def permutation(shape, small, perm):
    @kernel(f"permute{perm} {'x'.join(map(str, shape))}", "layout")
    def build(s):
        return Case(lambda x: x.permute(*perm).contiguous(), (randn(*(small if s else shape)),))


for perm in itertools.permutations(range(3)):
    if perm != (0, 1, 2):
        permutation((64, 128, 256), (6, 10, 12), perm)
for perm in itertools.permutations(range(4)):
    if perm != (0, 1, 2, 3):
        permutation((16, 32, 64, 64), (3, 4, 6, 10), perm)


@kernel("cat dim 1 of 3 x 8x256x28x28 bf16", "layout")
def _(s):
    shape = (2, 8, 6, 6) if s else (8, 256, 28, 28)
    return Case(lambda a, b, c: torch.cat([a, b, c], dim=1), (randn(*shape), randn(*shape), randn(*shape)))


@kernel("strided slice x[:, ::2] 4096x4096", "layout")
def _(s):
    shape = (40, 64) if s else (4096, 4096)
    # (Compulsory bytes: all of x. DRAM moves whole bursts, and every burst of x holds elements of the slice.)
    return Case(lambda x: x[:, ::2].contiguous(), (randn(*shape),))


# ---- attention ------------------------------------------------------------------------------

def sdpa(name, b, h, l, s_kv, d, hkv=None, causal=False, mask=False, small=(1, 2, 24, 40, 16)):
    @kernel(name, "attention")
    def build(s, b=b, h=h, l=l, s_kv=s_kv, d=d, hkv=hkv):
        if s:
            b, h, l, s_kv, d = small
            hkv = h // 2 if hkv else None
        kv = hkv or h
        args = [randn(b, h, l, d), randn(b, kv, s_kv, d), randn(b, kv, s_kv, d)]
        if mask:
            args.append(torch.randn(b, 1, l, s_kv).to(torch.bfloat16))
        fn = (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m)) if mask else \
            (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=hkv is not None))
        return Case(fn, args, macs=2 * b * h * l * s_kv * d, vector=False)


sdpa("sdpa 1x12x512x64", 1, 12, 512, 512, 64)
sdpa("sdpa causal 1x12x1024x64", 1, 12, 1024, 1024, 64, causal=True, small=(1, 2, 40, 40, 16))
sdpa("sdpa masked 4x12x512x64", 4, 12, 512, 512, 64, mask=True)
sdpa("sdpa GQA 32q/8kv 1x2048x128", 1, 32, 2048, 2048, 128, hkv=8, small=(1, 4, 24, 40, 16))
for kv_len in (128, 1024, 8192):
    sdpa(f"decode attention 32 heads, KV cache {kv_len}", 1, 32, 1, kv_len, 128, small=(1, 2, 1, 40, 16))


@kernel("unfused attention with transposes 12x512x64", "attention")
def _(s):
    b, l, d = (2, 24, 16) if s else (12, 512, 64)

    def attention(q, k, v):
        p = torch.softmax(k @ q.transpose(-2, -1) / math.sqrt(d), dim=-2)
        return v.transpose(-1, -2) @ p
    return Case(attention, (randn(b, l, d), randn(b, l, d), randn(b, l, d)), macs=2 * b * l * l * d, vector=False)


# ---- norms and reductions -------------------------------------------------------------------

def rowwise(name, fn, shape, small, dtype=torch.float32, weights=0):
    @kernel(name, "norm/reduce")
    def build(s):
        x = randn(*(small if s else shape), dtype=dtype)
        return Case(fn, (x,) + tuple(randn(x.shape[-1], dtype=dtype) for _ in range(weights)))


rowwise("softmax(dim=-1) 4096x4096 f32", lambda x: torch.softmax(x, -1), (4096, 4096), (40, 72))
rowwise("softmax(dim=0) 4096x4096 f32", lambda x: torch.softmax(x, 0), (4096, 4096), (40, 72))
rowwise("softmax(dim=1) 32x1024x256 bf16", lambda x: torch.softmax(x, 1), (32, 1024, 256), (3, 20, 24), torch.bfloat16)
rowwise("log_softmax(dim=-1) 8x512x50257 bf16", lambda x: torch.log_softmax(x, -1), (8, 64, 50257), (2, 3, 300), torch.bfloat16)
rowwise("layer_norm 8192x768 bf16", lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b), (8192, 768), (40, 96), torch.bfloat16, 2)
rowwise("layer_norm 4096x4096 f32", lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b), (4096, 4096), (40, 72), torch.float32, 2)
rowwise("rms_norm 8192x4096 bf16", lambda x, w: F.rms_norm(x, (x.shape[-1],), w), (8192, 4096), (40, 72), torch.bfloat16, 1)
rowwise("sum(dim=-1) 4096x4096 f32", lambda x: x.sum(-1), (4096, 4096), (40, 72))
rowwise("sum(dim=0) 4096x4096 f32", lambda x: x.sum(0), (4096, 4096), (40, 72))
rowwise("mean(dim=1) 32x1024x768 bf16", lambda x: x.mean(1), (32, 1024, 768), (3, 20, 24), torch.bfloat16)
rowwise("amax(dim=-1) 4096x4096 bf16", lambda x: x.amax(-1), (4096, 4096), (40, 72), torch.bfloat16)
rowwise("global average pool 32x2048x7x7 bf16", lambda x: x.mean((2, 3)), (32, 2048, 7, 7), (2, 8, 7, 7), torch.bfloat16)


# ---- elementwise and gathers ----------------------------------------------------------------

@kernel("add 16M bf16", "elementwise")
def _(s):
    shape = (64, 96) if s else (4096, 4096)
    return Case(torch.add, (randn(*shape), randn(*shape)))


@kernel("bias + gelu chain 8192x3072 bf16", "elementwise")
def _(s):
    shape = (40, 96) if s else (8192, 3072)
    return Case(lambda x, b: F.gelu(x + b, approximate="tanh"), (randn(*shape), randn(shape[-1])))


@kernel("silu(a) * b (SwiGLU) 8192x11008 bf16", "elementwise")
def _(s):
    shape = (40, 96) if s else (4096, 11008)
    return Case(lambda a, b: F.silu(a) * b, (randn(*shape), randn(*shape)))


@kernel("cast f32 -> bf16 4096x4096", "elementwise")
def _(s):
    return Case(lambda x: x.to(torch.bfloat16), (randn(*((40, 72) if s else (4096, 4096)), dtype=torch.float32),))


@kernel("embedding 50257x768 bf16, 8x512 tokens", "gather")
def _(s):
    v, d, shape = (300, 64, (2, 10)) if s else (50257, 768, (8, 512))
    ids = torch.randint(0, v, shape)
    n = ids.numel()
    return Case(F.embedding, (ids, randn(v, d)), vector=False, read_bytes=n * d * 2 + n * 8)


# ---- the bound ------------------------------------------------------------------------------

def chip_peaks(npusim):
    info = npusim._C.chip_info()
    return {key: info[key] for key in ("macs_per_cycle", "dram_bytes_per_cycle", "vector_elements_per_cycle")}


# bf16 products per f32 MAC at each torch.set_float32_matmul_precision (compiler/src/f32_split.h).
F32_PRODUCTS = {"highest": 6, "high": 3, "medium": 1}


def roofline(case: Case, out: torch.Tensor, peaks: dict):
    macs = case.macs
    if case.args and case.args[0].dtype == torch.float32:
        macs *= F32_PRODUCTS[torch.get_float32_matmul_precision()]
    read = case.read_bytes if case.read_bytes is not None else sum(t.numel() * t.element_size() for t in case.args)
    traffic = read + out.numel() * out.element_size()
    elements = max([out.numel()] + [t.numel() for t in case.args]) if case.vector else 0
    bounds = {"mac": macs / peaks["macs_per_cycle"], "dram": traffic / peaks["dram_bytes_per_cycle"],
              "vector": elements / peaks["vector_elements_per_cycle"]}
    binding = max(bounds, key=bounds.get)
    return bounds[binding], binding, traffic
