"""torch.autocast("npu") applies CUDA's policy (the op lists ATen publishes for every backend, in
ATen/autocast_mode.h): op by op, the result's dtype is the policy's, and the value is the CPU's on the
inputs cast as the policy casts them. Where the CPU's own autocast casts alike (matrix products,
convolutions, attention, mse_loss), the dtypes are also checked against it; the CPU's keeps norms and
softmax of bf16 in bf16, where CUDA's and the npu's compute them in f32.

Tolerances: lower-precision results within 2 bf16 ulps (rtol 1.6e-2) of the CPU's on the same bf16
operands; f32 results rtol 1e-5.
"""
import pytest
import torch
import torch.nn.functional as F

import npusim

NPU = torch.device("npu")
BF16, F32 = torch.bfloat16, torch.float32


def _randn(*shape, dtype=F32):
    return torch.randn(*shape).to(dtype)


# name: (function, its inputs (f32 unless said), the policy: "lower", "f32" or "promote")
CASES = {
    # lower_precision_fp
    "mm": (torch.mm, lambda: (_randn(8, 16), _randn(16, 4)), "lower"),
    "bmm": (torch.bmm, lambda: (_randn(2, 8, 16), _randn(2, 16, 4)), "lower"),
    "addmm": (torch.addmm, lambda: (_randn(4), _randn(8, 16), _randn(16, 4)), "lower"),
    "baddbmm": (torch.baddbmm, lambda: (_randn(2, 8, 4), _randn(2, 8, 16), _randn(2, 16, 4)), "lower"),
    "matmul": (torch.matmul, lambda: (_randn(3, 8, 16), _randn(16, 4)), "lower"),
    "linear": (F.linear, lambda: (_randn(8, 16), _randn(4, 16), _randn(4)), "lower"),
    "einsum": (lambda a, b: torch.einsum("ij,jk->ik", a, b), lambda: (_randn(8, 16), _randn(16, 4)), "lower"),
    "conv1d": (F.conv1d, lambda: (_randn(2, 4, 16), _randn(8, 4, 3)), "lower"),
    "conv2d": (F.conv2d, lambda: (_randn(2, 4, 10, 10), _randn(8, 4, 3, 3)), "lower"),
    "conv_transpose2d": (F.conv_transpose2d, lambda: (_randn(2, 4, 6, 6), _randn(4, 8, 2, 2)), "lower"),
    # q in f32, k and v already bf16 (a rotary embedding's output against a cache): cast together.
    "scaled_dot_product_attention": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                                     lambda: (_randn(1, 2, 8, 16), _randn(1, 2, 8, 16, dtype=BF16), _randn(1, 2, 8, 16, dtype=BF16)),
                                     "lower"),
    "prelu": (F.prelu, lambda: (_randn(2, 4, 5), _randn(4)), "lower"),
    # fp32 (bf16 inputs computed in f32)
    "exp": (torch.exp, lambda: (_randn(8, 16, dtype=BF16),), "f32"),
    "log": (torch.log, lambda: (_randn(8, 16, dtype=BF16).abs() + 0.5,), "f32"),
    "rsqrt": (torch.rsqrt, lambda: (_randn(8, 16, dtype=BF16).abs() + 0.5,), "f32"),
    "pow": (lambda x: torch.pow(x, 2.5), lambda: (_randn(8, 16, dtype=BF16).abs(),), "f32"),
    "softplus": (F.softplus, lambda: (_randn(8, 16, dtype=BF16),), "f32"),
    "layer_norm": (lambda x: F.layer_norm(x, (16,)), lambda: (_randn(8, 16, dtype=BF16),), "f32"),
    "group_norm": (lambda x: F.group_norm(x, 2), lambda: (_randn(2, 4, 5, dtype=BF16),), "f32"),
    "rms_norm": (lambda x: F.rms_norm(x, (16,)), lambda: (_randn(8, 16, dtype=BF16),), "f32"),
    "mse_loss": (F.mse_loss, lambda: (_randn(8, 16, dtype=BF16), _randn(8, 16, dtype=BF16)), "f32"),
    "binary_cross_entropy_with_logits": (F.binary_cross_entropy_with_logits,
                                         lambda: (_randn(8, 16, dtype=BF16), _randn(8, 16, dtype=BF16).sigmoid()), "f32"),
    "cosine_similarity": (F.cosine_similarity, lambda: (_randn(8, 16, dtype=BF16), _randn(8, 16, dtype=BF16)), "f32"),
    "logsumexp": (lambda x: torch.logsumexp(x, -1), lambda: (_randn(8, 16, dtype=BF16),), "f32"),
    "upsample_nearest2d": (lambda x: F.interpolate(x, scale_factor=2), lambda: (_randn(1, 2, 4, 4, dtype=BF16),), "f32"),
    "upsample_bilinear2d": (lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"), lambda: (_randn(1, 2, 4, 4, dtype=BF16),),
                            "f32"),
    # fp32_set_opt_dtype and fp32_append_dtype
    "softmax": (lambda x: torch.softmax(x, -1), lambda: (_randn(8, 16, dtype=BF16),), "f32"),
    "log_softmax": (lambda x: torch.log_softmax(x, -1), lambda: (_randn(8, 16, dtype=BF16),), "f32"),
    "sum": (lambda x: torch.sum(x, -1), lambda: (_randn(8, 16, dtype=BF16),), "f32"),
    "cumsum": (lambda x: torch.cumsum(x, -1), lambda: (_randn(8, 16, dtype=BF16),), "f32"),
    "norm": (lambda x: torch.norm(x, 2.0), lambda: (_randn(8, 16, dtype=BF16),), "f32"),
    # promote (to the widest input)
    "addcmul": (torch.addcmul, lambda: (_randn(8, 16), _randn(8, 16, dtype=BF16), _randn(8, 16, dtype=BF16)), "promote"),
    "atan2": (torch.atan2, lambda: (_randn(8, 16, dtype=BF16), _randn(8, 16)), "promote"),
    # not in any list: as the inputs are
    "relu": (torch.relu, lambda: (_randn(8, 16),), "as is"),
    "add": (torch.add, lambda: (_randn(8, 16, dtype=BF16), _randn(8, 16, dtype=BF16)), "as is"),
}


def _cast_as_the_policy_does(policy, inputs):
    floats = [t for t in inputs if t.is_floating_point()]
    if policy == "lower":
        return [t.to(BF16) if t.dtype == F32 else t for t in inputs]
    if policy == "f32":
        return [t.to(F32) for t in inputs]
    if policy == "promote":
        widest = F32 if any(t.dtype == F32 for t in floats) else floats[0].dtype
        return [t.to(widest) for t in inputs]
    return list(inputs)


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_op_follows_cudas_autocast_policy(name):
    torch.manual_seed(0)
    fn, make, policy = CASES[name]
    inputs = make()
    with torch.autocast("npu", dtype=BF16):
        got = fn(*[t.to(NPU) for t in inputs])
    expected = fn(*_cast_as_the_policy_does(policy, inputs))
    assert got.dtype == expected.dtype, f"{name}: {got.dtype}, the policy ({policy}) gives {expected.dtype}"
    tolerance = dict(rtol=1.6e-2, atol=1e-2) if got.dtype == BF16 else dict(rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got.cpu(), expected, **tolerance, msg=name)
    # Where the CPU's autocast casts the same way, the same dtype.
    with torch.autocast("cpu", dtype=BF16):
        cpu = fn(*inputs)
    if name in ("mm", "bmm", "addmm", "baddbmm", "matmul", "linear", "conv1d", "conv2d", "conv_transpose2d",
                "scaled_dot_product_attention", "mse_loss"):
        assert cpu.dtype == got.dtype, f"{name}: the CPU's autocast gives {cpu.dtype}"


def test_binary_cross_entropy_is_refused_under_autocast_as_on_cuda():
    p, target = torch.rand(4, 5).to(NPU), torch.rand(4, 5).to(NPU)
    with torch.autocast("npu", dtype=BF16), pytest.raises(RuntimeError, match="unsafe to autocast"):
        F.binary_cross_entropy(p, target)
    assert F.binary_cross_entropy(p, target).dtype == F32  # outside autocast, as ever


def test_a_rotary_llama_attention_and_a_cnn_run_under_autocast_on_the_chip():
    """The issue's two symptoms: rotary embeddings give f32 queries and keys next to bf16 values (SDPA
    refused the mixed dtypes), and convolutions stayed in f32."""
    torch.manual_seed(0)
    cnn = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.Conv2d(8, 4, 3)).eval()
    x = torch.randn(2, 3, 12, 12)
    before = dict(npusim.fallback_stats())
    with torch.no_grad(), torch.autocast("npu", dtype=BF16):
        y = cnn.to(NPU)(x.to(NPU))
    assert y.dtype == BF16 and dict(npusim.fallback_stats()) == before
    with torch.no_grad(), torch.autocast("cpu", dtype=BF16):
        want = cnn.cpu()(x)
    torch.testing.assert_close(y.cpu().float(), want.float(), rtol=5e-2, atol=5e-2)
