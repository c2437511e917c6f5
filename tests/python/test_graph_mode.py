"""Graph mode: the npusim:: custom ops, torch.compile(backend="npu") for
inference and training, dynamic shapes, npusim.explain, and a reduced GPT-2.

Tolerances: f32 results follow torch.set_float32_matmul_precision("highest")
(f32 products as six bf16-part products, about f32's own precision), so f32
comparisons use rtol 1e-5 / atol 1e-5 on O(1) values, summed gradients 1e-4.
"""

import copy
import warnings

import pytest
import torch
import torch.nn.functional as F

import npusim
from npusim import backend
from npusim.custom_ops import attention, gemm, layer_norm

NPU = "npu"


@pytest.fixture(autouse=True)
def _quiet_and_fresh():
    warnings.simplefilter("ignore")
    backend.clear_reports()
    torch._dynamo.reset()
    yield


def _gemm_samples(device):
    torch.manual_seed(0)
    a = torch.randn(3, 5, 7, device=device, requires_grad=True)
    b = torch.randn(7, 4, device=device, requires_grad=True)
    bias = torch.randn(4, device=device, requires_grad=True)
    residual = torch.randn(3, 5, 4, device=device, requires_grad=True)
    shared = torch.randn(5, 4, device=device, requires_grad=True)  # broadcast over the batch
    return [(a, b, bias, 0.5, 2.0, ["gelu_tanh", "relu"]), (a, b, None, 1.0, 1.0, []), (a, b, bias, 1.0, 1.0, ["silu"]),
            (a[0], b, bias, 1.0, 1.0, ["sigmoid", "tanh"]), (a, b, bias, 0.5, 2.0, ["relu"], residual),
            (a, b, None, 1.0, 1.0, [], shared)]


def _layer_norm_samples(device):
    torch.manual_seed(0)
    x = torch.randn(4, 6, 32, device=device, requires_grad=True)
    w = torch.randn(32, device=device, requires_grad=True)
    b = torch.randn(32, device=device, requires_grad=True)
    return [(x, w, b, 1e-5), (x, None, None, 1e-6), (x, w, None, 1e-5)]


# PyTorch's autograd-registration check runs on CPU/CUDA/XPU only; on the npu the
# other checks run (register_autograd is device-independent, checked on the CPU).
_NPU_CHECKS = ("test_schema", "test_faketensor", "test_aot_dispatch_dynamic")


@pytest.mark.parametrize("device", ["cpu", NPU])
def test_custom_ops_pass_opcheck(device):
    checks = {} if device == "cpu" else {"test_utils": _NPU_CHECKS}
    for args in _gemm_samples(device):
        torch.library.opcheck(torch.ops.npusim.gemm.default, args, **checks)
    for args in _layer_norm_samples(device):
        torch.library.opcheck(torch.ops.npusim.layer_norm.default, args, **checks)
    for x, w, _, eps in _layer_norm_samples(device):
        torch.library.opcheck(torch.ops.npusim.rms_norm.default, (x, w, eps), **checks)
    # A bf16 x with an f32 result (what fold_float_casts asks for).
    x, w, b, eps = _layer_norm_samples(device)[0]
    xh = x.detach().to(torch.bfloat16).requires_grad_()
    torch.library.opcheck(torch.ops.npusim.layer_norm.default, (xh, w, b, eps, torch.float32), **checks)
    torch.library.opcheck(torch.ops.npusim.rms_norm.default, (xh, w, eps, torch.float32), **checks)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_float_cast_before_a_norm_or_softmax_folds_into_it(dtype):
    """x.float() read only by softmax, log_softmax or a norm: the one row kernel reads x itself and keeps
    its f32 result (no conversion kernel, no f32 copy of x in DRAM); values as the CPU's of x.float()."""
    torch.manual_seed(0)
    x, w, b = torch.randn(6, 10, 64).to(dtype), torch.randn(64), torch.randn(64)
    cases = {
        "softmax": lambda x: torch.softmax(x.float(), -1),
        "log_softmax": lambda x: torch.log_softmax(x.float(), -1),
        "softmax, dim 1": lambda x: torch.softmax(x.float(), 1),  # a column softmax
        "layer_norm": lambda x: F.layer_norm(x.float(), (64,), w.to(x.device), b.to(x.device), 1e-5),
        "rms_norm": lambda x: F.rms_norm(x.float(), (64,), w.to(x.device), 1e-6),
        "two readers": lambda x: F.rms_norm(x.float(), (64,), None, 1e-6) + torch.softmax(x.float(), -1),
    }
    for name, f in cases.items():
        torch._dynamo.reset()
        compiled = torch.compile(f, backend=NPU, fullgraph=True)
        with torch.no_grad():
            compiled(x.to(NPU))
            with npusim.profile() as prof:
                y = compiled(x.to(NPU))
        launched = [row[2] for row in prof.kernels]
        assert "to" not in launched and not sum(prof.fallbacks.values()), (name, launched)
        assert y.dtype == torch.float32
        torch.testing.assert_close(y.cpu(), f(x), rtol=1e-5, atol=1e-5, msg=name)
    # A cast something else reads too stays: the norm then reads its result.
    torch._dynamo.reset()
    with torch.no_grad():
        y, cast = torch.compile(lambda x: (F.rms_norm(x.float(), (64,)), x.float()), backend=NPU)(x.to(NPU))
    torch.testing.assert_close(y.cpu(), F.rms_norm(x.float(), (64,)), rtol=1e-5, atol=1e-5)
    assert torch.equal(cast.cpu(), x.float())


def test_softmax_half_to_float_runs_on_the_chip_and_refuses_f32():
    x = torch.randn(4, 33, 40).to(torch.bfloat16)
    for dim in (-1, 0, 1):  # along rows, and along columns (there a conversion kernel first)
        for op in (torch.ops.aten._softmax, torch.ops.aten._log_softmax):
            before = dict(npusim.fallback_stats())
            y = op(x.to(NPU), dim, True)
            assert y.dtype == torch.float32 and dict(npusim.fallback_stats()) == before
            torch.testing.assert_close(y.cpu(), op(x.float(), dim, False), rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match="bf16 and f16 inputs"):
        torch.ops.aten._softmax(x.float().to(NPU), -1, True)


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 2e-2)])
def test_rms_norm_is_one_kernel_in_inference_and_its_gradients_match_the_cpu(dtype, tol):
    """F.rms_norm in a graph is npusim::rms_norm: one row kernel (the rstd that autograd saves is dead
    code in an inference graph), and training gives the CPU's gradients."""
    torch.manual_seed(0)
    x, w = torch.randn(6, 10, 64).to(dtype), torch.randn(64).to(dtype)

    def norm(x, w):
        return F.rms_norm(x, (64,), w, 1e-6) * 2

    with torch.no_grad():
        compiled = torch.compile(norm, backend=NPU)
        compiled(x.to(NPU), w.to(NPU))
        with npusim.profile() as prof:
            y = compiled(x.to(NPU), w.to(NPU))
    launched = [row[2] for row in prof.kernels]
    assert launched.count("rms_norm") == 1 and len(launched) <= 2, launched  # the norm, and the product unless fused
    torch.testing.assert_close(y.cpu().float(), norm(x.float(), w.float()), rtol=tol, atol=tol)

    torch._dynamo.reset()
    xn, wn = x.to(NPU).requires_grad_(), w.to(NPU).requires_grad_()
    xc, wc = x.float().requires_grad_(), w.float().requires_grad_()
    torch.compile(norm, backend=NPU)(xn, wn).sum().backward()
    norm(xc, wc).sum().backward()
    torch.testing.assert_close(xn.grad.cpu().float(), xc.grad, rtol=tol, atol=tol * 10)
    torch.testing.assert_close(wn.grad.cpu().float(), wc.grad, rtol=tol, atol=tol * 60)


def _attention_samples(device):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 5, 8, device=device, requires_grad=True) for _ in range(3))
    return [(q, k, v, False, None), (q, k, v, True, 0.3), (q[:, :3], k, v, True, None)]


def _conv2d_samples(device):
    torch.manual_seed(0)
    x = torch.randn(2, 4, 9, 9, device=device, requires_grad=True)
    w = torch.randn(6, 4, 3, 3, device=device, requires_grad=True)
    wg = torch.randn(6, 2, 3, 3, device=device, requires_grad=True)
    b = torch.randn(6, device=device, requires_grad=True)
    s = torch.rand(6, device=device).add(0.5).requires_grad_()
    r = torch.randn(2, 6, 9, 9, device=device, requires_grad=True)
    return [(x, w, None, [1, 1], [1, 1], [1, 1], 1, []),
            (x, w, b, [2, 2], [0, 1], [1, 1], 1, ["relu"]),
            (x, w, b, [1, 1], [2, 2], [2, 2], 1, ["silu"], s),
            (x, wg, b, [1, 2], [1, 1], [1, 1], 2, ["gelu_tanh", "tanh"], s),
            (x, w, b, [1, 1], [1, 1], [1, 1], 1, ["relu"], s, r),  # a residual block's conv2, bn2, add, relu
            (x, wg, None, [1, 1], [1, 1], [1, 1], 2, [], None, r.transpose(2, 3))]  # a strided residual


@pytest.mark.parametrize("device", ["cpu", NPU])
def test_the_conv2d_op_passes_opcheck(device):
    checks = {} if device == "cpu" else {"test_utils": _NPU_CHECKS}
    for args in _conv2d_samples(device):
        torch.library.opcheck(torch.ops.npusim.conv2d.default, args, **checks)


def _max_pool2d_samples(device):
    torch.manual_seed(0)
    x = torch.randn(2, 3, 11, 13, device=device, requires_grad=True)
    return [(x, [3, 3], [2, 2], [1, 1], [1, 1], False), (x, [2, 3], [1, 2], [0, 1], [2, 1], True), (x[0], [2, 2], [2, 2], [0, 0], [1, 1], False)]


@pytest.mark.parametrize("device", ["cpu", NPU])
def test_the_max_pool2d_op_passes_opcheck_and_matches_the_aten_values(device):
    checks = {} if device == "cpu" else {"test_utils": _NPU_CHECKS}
    for args in _max_pool2d_samples(device):
        torch.library.opcheck(torch.ops.npusim.max_pool2d.default, args, **checks)
        x, kernel, stride, padding, dilation, ceil_mode = args
        expected = torch.nn.functional.max_pool2d(x.detach().cpu(), kernel, stride, padding, dilation, ceil_mode)
        assert torch.equal(torch.ops.npusim.max_pool2d(x.detach(), *args[1:]).cpu(), expected)


@pytest.mark.parametrize("device", ["cpu", NPU])
def test_the_attention_op_passes_opcheck(device):
    checks = {} if device == "cpu" else {"test_utils": _NPU_CHECKS}
    for args in _attention_samples(device):
        torch.library.opcheck(torch.ops.npusim.attention.default, args, **checks)


@pytest.mark.parametrize("causal", [False, True])
def test_scaled_dot_product_attention_is_one_fused_kernel_in_bf16(causal):
    torch.manual_seed(4)
    q, k, v = (torch.randn(2, 3, 37, 16, dtype=torch.bfloat16) for _ in range(3))
    expected = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    before = dict(npusim.kernel_stats())
    got = F.scaled_dot_product_attention(q.to(NPU), k.to(NPU), v.to(NPU), is_causal=causal).cpu()
    launched = {op: n - before.get(op, 0) for op, n in npusim.kernel_stats().items() if n != before.get(op, 0)}
    assert launched == {"scaled_dot_product_attention": 1}
    torch.testing.assert_close(got.float(), expected, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(attention(q.to(NPU), k.to(NPU), v.to(NPU), causal).cpu(), got)


def test_attention_writes_its_output_in_the_layout_of_q_with_no_copy():
    # q, k, v as transformers pass them: [B, L, H, D] viewed [B, H, L, D]. The output follows q's layout
    # (as PyTorch's kernels do), and the flash kernel writes it there itself: one kernel, no copy after it.
    torch.manual_seed(10)
    q, k, v = (torch.randn(2, 24, 3, 16).transpose(1, 2) for _ in range(3))
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    qn, kn, vn = (t.transpose(1, 2).contiguous().to(NPU).transpose(1, 2) for t in (q, k, v))  # the same views on the npu
    kernels = dict(npusim.kernel_stats())
    got = F.scaled_dot_product_attention(qn, kn, vn, is_causal=True)
    launched = {name: n - kernels.get(name, 0) for name, n in npusim.kernel_stats().items() if n != kernels.get(name, 0)}
    assert launched == {"scaled_dot_product_attention": 1}
    assert got.stride() == expected.stride()
    torch.testing.assert_close(got.cpu(), expected, rtol=1e-5, atol=1e-5)


def test_scaled_dot_product_attention_in_f32_and_its_gradients_stay_on_the_chip():
    # base's tensor core takes no f32: the fused kernel runs q, k, v and P as bf16 parts (at the
    # default "highest" float32 matmul precision, three parts: about f32's own precision).
    torch.manual_seed(5)
    q, k, v = (torch.randn(2, 3, 20, 16, requires_grad=True) for _ in range(3))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    grad = torch.randn_like(out)
    out.backward(grad)
    before, kernels = dict(npusim.fallback_stats()), dict(npusim.kernel_stats())
    qn, kn, vn = (t.detach().to(NPU).requires_grad_() for t in (q, k, v))
    out_npu = F.scaled_dot_product_attention(qn, kn, vn, is_causal=True)
    assert npusim.kernel_stats().get("scaled_dot_product_attention", 0) == kernels.get("scaled_dot_product_attention", 0) + 1
    out_npu.backward(grad.to(NPU))
    assert npusim.fallback_stats() == before
    torch.testing.assert_close(out_npu.cpu(), out, rtol=1e-5, atol=1e-5)
    for a, b in ((q, qn), (k, kn), (v, vn)):
        torch.testing.assert_close(b.grad.cpu(), a.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-5), (torch.bfloat16, 2e-2)])
def test_masked_attention_runs_on_the_chip_fused_in_bf16_and_fully_masked_rows_give_zeros(dtype, tol):
    torch.manual_seed(6)
    q, k, v = (torch.randn(2, 3, 9, 8, dtype=dtype) for _ in range(3))
    k, v = k[:, :, :7], v[:, :, :7]  # 9 queries, 7 keys
    hidden_row = torch.ones(9, 7, dtype=torch.bool)
    hidden_row[4] = False  # query 4 sees nothing: PyTorch gives zeros there, not NaN
    additive = torch.randn(2, 1, 9, 7).to(dtype)  # per batch element, shared by the heads
    additive[1, 0, 2] = float("-inf")
    masks = [torch.rand(9, 7) > 0.4, hidden_row, additive, torch.zeros(2, 3, 9, 7, dtype=dtype).masked_fill(~hidden_row, float("-inf"))]
    for mask in masks:
        expected = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask if mask.dtype == torch.bool else mask.float())
        before, kernels = dict(npusim.fallback_stats()), dict(npusim.kernel_stats())
        # q laid out as [B, L, H, D] viewed [B, H, L, D], as transformers' models pass it
        qn = q.transpose(1, 2).contiguous().to(NPU).transpose(1, 2)
        got = F.scaled_dot_product_attention(qn, k.to(NPU), v.to(NPU), attn_mask=mask.to(NPU))
        assert got.stride() == F.scaled_dot_product_attention(q.transpose(1, 2).contiguous().transpose(1, 2), k, v, attn_mask=mask).stride()
        assert npusim.fallback_stats() == before
        launched = {name: n - kernels.get(name, 0) for name, n in npusim.kernel_stats().items() if n != kernels.get(name, 0)}
        # the flash kernel, the mask its fourth input (q read in place as two batch dims; f32 as bf16 parts on base)
        assert launched.get("scaled_dot_product_attention") == 1 and "matmul" not in launched
        torch.testing.assert_close(got.cpu().float(), expected, rtol=tol, atol=tol)
        assert not got.cpu().isnan().any()


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-4), (torch.bfloat16, 3e-2)])
def test_masked_attention_with_gradients_runs_the_npus_forward_and_backward(dtype, tol):
    # The forward on the chip with the mask (fused in bf16), the backward recomputing the probabilities with
    # it; a fully masked row gives zeros and zero gradients, as PyTorch's math does. No fallback.
    torch.manual_seed(7)
    q, k, v = (torch.randn(2, 3, 6, 8, dtype=dtype, requires_grad=True) for _ in range(3))
    bool_mask = torch.rand(6, 6) > 0.3
    bool_mask[2] = False  # a fully masked row
    additive = torch.randn(2, 1, 6, 6).to(dtype).masked_fill(~bool_mask, float("-inf"))
    for mask in (bool_mask, additive):
        for t in (q, k, v):
            t.grad = None
        reference = [t.detach().float().requires_grad_() for t in (q, k, v)]
        out = F.scaled_dot_product_attention(*reference, attn_mask=mask if mask.dtype == torch.bool else mask.float())
        grad = torch.randn_like(out)
        out.backward(grad)
        qn, kn, vn = (t.detach().to(NPU).requires_grad_() for t in (q, k, v))
        before = dict(npusim.fallback_stats())
        with npusim.profile() as prof:
            out_npu = F.scaled_dot_product_attention(qn, kn, vn, attn_mask=mask.to(NPU))
            out_npu.backward(grad.to(dtype).to(NPU))
        assert npusim.fallback_stats() == before
        assert "aten::_scaled_dot_product_fused_attention_overrideable_backward" in prof.ops
        torch.testing.assert_close(out_npu.cpu().float(), out, rtol=tol, atol=tol)
        for a, b in zip(reference, (qn, kn, vn)):
            torch.testing.assert_close(b.grad.cpu().float(), a.grad, rtol=tol, atol=tol)
        assert not qn.grad.cpu()[:, :, 2].any()  # the hidden query's gradient


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-5), (torch.bfloat16, 3e-2)])
def test_grouped_query_attention_runs_fused_with_k_and_v_never_repeated(dtype, tol):
    # enable_gqa: 8 query heads share 2 key/value heads. The forward is one flash kernel that reads each
    # k/v head in place for its group (no repeat_interleave copies); the backward's gemms treat a group's
    # query heads as rows, so k's and v's gradients come out summed over the group. No fallback.
    torch.manual_seed(9)
    hidden = torch.rand(12, 20) > 0.3
    hidden[5] = False  # a query that sees nothing: zeros, as PyTorch gives
    cases = [
        dict(is_causal=True),
        dict(attn_mask=hidden),  # one mask for all
        dict(attn_mask=torch.randn(2, 1, 12, 20).to(dtype)),  # per batch element, shared by the heads
        dict(attn_mask=torch.randn(2, 8, 12, 20).to(dtype)),  # per query head
        # q in transformers' [B, L, H, D] layout: three batch strides, one more than the kernel walks,
        # so q is copied dense first (the first version fell back to gemms that fell back to the CPU)
        dict(is_causal=True, q_layout="blhd"),
    ]
    for kwargs in cases:
        q_layout = kwargs.pop("q_layout", "bhld")
        q = torch.randn(2, 8, 12, 16, dtype=dtype, requires_grad=True)
        k, v = (torch.randn(2, 2, 20, 16, dtype=dtype, requires_grad=True) for _ in range(2))
        if kwargs.get("is_causal"):
            q = torch.randn(2, 8, 20, 16, dtype=dtype, requires_grad=True)
        if q_layout == "blhd":
            q = torch.randn(2, 20, 8, 16, dtype=dtype).transpose(1, 2).requires_grad_()
        reference = [t.detach().double().requires_grad_() for t in (q, k, v)]
        mask = kwargs.get("attn_mask")
        ref_kwargs = dict(kwargs, attn_mask=mask if mask is None or mask.dtype == torch.bool else mask.double())
        out = F.scaled_dot_product_attention(*reference, enable_gqa=True, **ref_kwargs)
        grad = torch.randn_like(out)
        out.backward(grad)
        qn, kn, vn = (t.detach().to(NPU).requires_grad_() for t in (q, k, v))
        npu_kwargs = {name: value.to(NPU) if torch.is_tensor(value) else value for name, value in kwargs.items()}
        before, kernels = dict(npusim.fallback_stats()), dict(npusim.kernel_stats())
        out_npu = F.scaled_dot_product_attention(qn, kn, vn, enable_gqa=True, **npu_kwargs)
        launched = {name: n - kernels.get(name, 0) for name, n in npusim.kernel_stats().items() if n != kernels.get(name, 0)}
        assert launched.get("scaled_dot_product_attention") == 1 and "matmul" not in launched, (kwargs.keys(), launched)
        out_npu.backward(grad.to(dtype).to(NPU))
        assert npusim.fallback_stats() == before
        torch.testing.assert_close(out_npu.cpu().double(), out, rtol=tol, atol=tol)
        for a, b in zip(reference, (qn, kn, vn)):
            assert b.grad.shape == a.shape
            torch.testing.assert_close(b.grad.cpu().double(), a.grad, rtol=tol, atol=tol)


@pytest.mark.parametrize("precision, tol", [("highest", 2e-6), ("high", 1e-4), ("medium", 2e-2)])
def test_f32_attention_follows_the_float32_matmul_precision(precision, tol):
    # base's tensor core takes no f32: the flash kernel splits q, k, v and P into 3, 2 or 1 bf16 parts,
    # as torch.set_float32_matmul_precision says (each level compiles its own kernel).
    torch.manual_seed(8)
    q, k, v = (torch.randn(2, 4, 70, 32) for _ in range(3))
    expected = F.scaled_dot_product_attention(q.double(), k.double(), v.double()).float()
    saved = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision(precision)
        got = F.scaled_dot_product_attention(q.to(NPU), k.to(NPU), v.to(NPU)).cpu()
    finally:
        torch.set_float32_matmul_precision(saved)
    error = (got - expected).abs().max().item()
    assert error <= tol
    if precision != "highest":
        assert error > tol / 100  # the lower level applies: not f32's own precision


def test_compiled_attention_keeps_the_fused_op():
    def attend(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    q, k, v = (torch.randn(1, 2, 64, 32, dtype=torch.bfloat16) for _ in range(3))
    with torch.no_grad():
        got = torch.compile(attend, backend=NPU, fullgraph=True)(q.to(NPU), k.to(NPU), v.to(NPU)).cpu()
    torch.testing.assert_close(got.float(), attend(q.float(), k.float(), v.float()), rtol=2e-2, atol=2e-2)
    assert backend.reports()[-1].ops.get("aten::_scaled_dot_product_fused_attention_overrideable") == 1


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-5), (torch.bfloat16, 2e-2)])
def test_custom_ops_on_the_chip_match_their_cpu_kernels(dtype, tol):
    torch.manual_seed(2)
    a, b, bias = torch.randn(9, 33, dtype=dtype), torch.randn(33, 17, dtype=dtype), torch.randn(17)
    kernels = npusim.kernel_stats().get("matmul", 0)
    got = gemm(a.to(NPU), b.to(NPU), bias.to(NPU), alpha=0.5, epilogue=["gelu"]).cpu()
    assert npusim.kernel_stats()["matmul"] == kernels + 1  # the epilogue is in the same kernel
    torch.testing.assert_close(got.float(), gemm(a, b, bias, alpha=0.5, epilogue=["gelu"]).float(), rtol=tol, atol=tol)
    x, w = torch.randn(5, 40, dtype=dtype), torch.randn(40, dtype=dtype)
    torch.testing.assert_close(layer_norm(x.to(NPU), w.to(NPU)).cpu().float(), F.layer_norm(x.float(), (40,), w.float()),
                               rtol=tol, atol=tol)
    with pytest.raises(RuntimeError, match="epilogue 'softplus'"):
        gemm(a.to(NPU), b.to(NPU), epilogue=["softplus"])


class Block(torch.nn.Module):
    def __init__(self, width=32):
        super().__init__()
        self.up = torch.nn.Linear(16, width)
        self.norm = torch.nn.LayerNorm(width)
        self.down = torch.nn.Linear(width, 8)

    def forward(self, x):
        h = F.gelu(self.up(x), approximate="tanh")
        return torch.relu(self.down(self.norm(h)))


def _pair(cls=Block):
    torch.manual_seed(0)
    cpu = cls()
    npu = cls()
    npu.load_state_dict(cpu.state_dict())
    return cpu, npu.to(NPU)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_embedding_backward_is_a_one_hot_matmul_on_the_chip(dtype):
    torch.manual_seed(0)
    grad = torch.randn(3, 5, 16, dtype=dtype)
    indices = torch.tensor([[3, 7, 3, 49, 0], [0, 7, 12, 2, 2], [5, 5, 5, 5, 5]])  # repeats, the first and last rows
    for padding_idx in (-1, 7):
        # The sums are in f32, rounded once (the CPU's bf16 index_put rounds after every add).
        expected = torch.ops.aten.embedding_dense_backward(grad.float(), indices, 50, padding_idx, False).to(dtype)
        before = dict(npusim.fallback_stats())
        got = torch.ops.aten.embedding_dense_backward(grad.to(NPU), indices.to(NPU), 50, padding_idx, False).cpu()
        assert npusim.fallback_stats() == before
        once = [49, 12]  # indices that appear once: their rows are the gradient itself
        assert torch.equal(got[once], expected[once])
        assert not got[torch.arange(50) != 0].isnan().any()
        torch.testing.assert_close(got, expected, rtol=1e-5 if dtype == torch.float32 else 1.6e-2, atol=1e-5)
        if padding_idx >= 0:
            assert not got[padding_idx].any()


def _elementwise_chain_samples(device):
    torch.manual_seed(0)
    x, y, c = torch.randn(5, 7, device=device), torch.randn(7, device=device), torch.randn(5, 1, device=device)
    return [([x], "exp(in0); mul(%0, 0.5)"),
            ([x, y, c], "sub(in1, in0); mul(%0, in2); div(2, %1); maximum(%2, in0)"),  # rows, columns, a constant first
            ([x.bfloat16(), y.bfloat16()], "tanh(in0); add(%0, in1); mul(%1, %1)"),
            ([x.t()], "neg(in0); relu(%0)")]  # a transposed input


@pytest.mark.parametrize("device", ["cpu", NPU])
def test_the_elementwise_chain_op_passes_opcheck_and_rounds_each_step_as_eager_does(device):
    checks = {} if device == "cpu" else {"test_utils": _NPU_CHECKS}
    for inputs, chain in _elementwise_chain_samples(device):
        torch.library.opcheck(torch.ops.npusim.elementwise_chain.default, (inputs, chain), **checks)
    # bf16: every step rounds, so the chain has the bits of the ops run one by one (on the npu, where
    # they use the same vector instructions; on the CPU, PyTorch's own kernels).
    x, y = (torch.randn(33, 65, device=device).bfloat16() for _ in range(2))
    chained = npusim.custom_ops.elementwise_chain([x, y], "mul(in0, in1); add(%0, in0); sub(%1, 0.25); mul(%2, %2)")
    z = x * y + x - 0.25
    assert torch.equal(chained.cpu(), (z * z).cpu())
    with pytest.raises(RuntimeError, match="not an earlier step"):
        torch.ops.npusim.elementwise_chain([x], "exp(%3)")


class _Chains(torch.nn.Module):
    def forward(self, x, y):
        return torch.tanh(x * 0.5 + y) * torch.sigmoid(x) - x.exp() / (1 + y * y)


def test_elementwise_ops_fuse_into_one_kernel_that_keeps_intermediates_off_dram():
    torch.manual_seed(0)
    x, y = torch.randn(64, 300), torch.randn(300)
    before = dict(npusim.fallback_stats())
    explanation = npusim.explain(_Chains(), x.to(NPU), y.to(NPU))
    (graph,) = explanation.graphs
    assert graph.fused == ["10 elementwise ops (mul, add, tanh, sigmoid, mul, exp, mul, add, div, sub) -> npusim::elementwise_chain"]
    assert explanation.fallbacks == {}
    # Ten kernels become one; only x, y and the output cross DRAM.
    eager, compiled = explanation.eager, explanation.compiled
    assert (eager["kernels"], compiled["kernels"]) == (10, 1)
    assert compiled["dram_bytes"] < eager["dram_bytes"] / 4
    assert compiled["cycles"] < eager["cycles"]
    got = torch.compile(_Chains(), backend=NPU, fullgraph=True)(x.to(NPU), y.to(NPU)).cpu()
    torch.testing.assert_close(got, _Chains()(x, y), rtol=1e-5, atol=1e-5)
    assert npusim.fallback_stats() == before


def test_a_product_scaled_by_a_number_is_one_gemm_with_that_alpha():
    """Attention written out (scores = q @ k^T / sqrt(d)): the division is the gemm's alpha, rounded once."""
    torch.manual_seed(0)
    q, k = torch.randn(3, 40, 16), torch.randn(3, 40, 16)

    def scores(q, k):
        return torch.softmax(q @ k.transpose(-2, -1) / 4.0, dim=-1)

    with torch.no_grad():
        got = torch.compile(scores, backend=NPU, fullgraph=True)(q.to(NPU), k.to(NPU)).cpu()
    (report,) = backend.reports()
    assert "bmm + scale 0.25 -> npusim::gemm" in report.fused, report.fused
    assert "aten::div.Tensor" not in report.ops, report.ops
    torch.testing.assert_close(got, scores(q, k), rtol=1e-5, atol=1e-5)


def test_clamps_fuse_into_chains_hardswish_hardsigmoid_and_relu6_are_one_kernel():
    """The clamps of hardswish's, hardsigmoid's and relu6's decompositions (one bound or both) become a
    maximum and a minimum with constants in the chain around them; NaN stays NaN, as clamp gives."""
    def activations(x):
        return F.hardswish(x) + F.hardsigmoid(x) * F.relu6(x) + torch.clamp(x, -0.5, 0.25)

    torch.manual_seed(0)
    x = torch.randn(8, 100) * 4
    x[0, :3] = torch.tensor([float("nan"), float("inf"), -float("inf")])
    with torch.no_grad():
        got = torch.compile(activations, backend=NPU, fullgraph=True)(x.to(NPU)).cpu()
    (report,) = backend.reports()
    assert report.ops == {"npusim::elementwise_chain": 1}, report.ops
    torch.testing.assert_close(got, activations(x), rtol=1e-5, atol=1e-6, equal_nan=True)


def test_inference_graph_is_fused_runs_on_the_chip_and_matches_the_cpu():
    cpu, npu = _pair()
    x = torch.randn(2, 5, 16)
    before = dict(npusim.fallback_stats())
    with torch.no_grad():
        got = torch.compile(npu, backend=NPU, fullgraph=True)(x.to(NPU)).cpu()
        torch.testing.assert_close(got, cpu(x), rtol=1e-5, atol=1e-5)
    assert npusim.fallback_stats() == before
    (report,) = backend.reports()
    assert report.kind == "inference"
    assert sorted(report.fused) == ["addmm + gelu_tanh -> npusim::gemm", "addmm + relu -> npusim::gemm",
                                    "native_layer_norm -> npusim::layer_norm"]
    # What is left: the two gemms, the layer norm and views (no separate activation, no mean/rstd).
    assert set(report.ops) <= {"npusim::gemm", "npusim::layer_norm", "aten::view", "aten::permute", "aten::t"}


def test_training_graphs_match_cpu_gradients_and_steps():
    cpu, npu = _pair()
    compiled = torch.compile(npu, backend=NPU)
    opt_cpu = torch.optim.SGD(cpu.parameters(), lr=0.1)
    opt_npu = torch.optim.SGD(npu.parameters(), lr=0.1)
    torch.manual_seed(3)
    for _ in range(3):
        x, target = torch.randn(6, 16), torch.randn(6, 8)
        for model, opt, inp, tgt in ((cpu, opt_cpu, x, target), (compiled, opt_npu, x.to(NPU), target.to(NPU))):
            opt.zero_grad()
            loss = ((model(inp) - tgt) ** 2).mean()
            loss.backward()
            opt.step()
    for (name, p_cpu), p_npu in zip(cpu.named_parameters(), npu.parameters()):
        torch.testing.assert_close(p_npu.cpu(), p_cpu, rtol=1e-4, atol=1e-4, msg=name)
    kinds = [r.kind for r in backend.reports()]
    assert kinds == ["forward", "backward"]  # compiled once, for all three steps


def test_a_marked_dynamic_dim_does_not_recompile_per_size():
    cpu, npu = _pair()
    compiled = torch.compile(npu, backend=NPU)
    with torch.no_grad():
        for rows in (4, 7, 9, 12):
            x = torch.randn(rows, 16)
            x_npu = x.to(NPU)
            torch._dynamo.mark_dynamic(x_npu, 0)
            torch.testing.assert_close(compiled(x_npu).cpu(), cpu(x), rtol=1e-5, atol=1e-5)
    assert len(backend.reports()) == 1


@pytest.mark.parametrize("mode", ["inference", "training"])
def test_a_residual_gemm_compiles_once_for_every_size_under_dynamic_shapes(mode):
    """x + linear(x) with dynamic=True: the residual's reshape to the product's [B * L, N] reads the dynamic
    sizes in the graph (it wrote the SymInts' names, s27 * s77, which no graph defines: a NameError)."""
    torch.manual_seed(0)
    linear = torch.nn.Linear(64, 64)
    npu_linear = copy.deepcopy(linear).to(NPU)
    compiled = torch.compile(lambda x: x + npu_linear(x), backend=NPU, dynamic=True)
    for length in (5, 7, 9):
        x = torch.randn(2, length, 64)
        with torch.set_grad_enabled(mode == "training"):
            x_npu = x.to(NPU).requires_grad_(mode == "training")
            y = compiled(x_npu)
            torch.testing.assert_close(y.detach().cpu(), (x + linear(x)).detach(), rtol=1e-5, atol=1e-5)
            if mode == "training":
                y.sum().backward()
    assert [r.kind for r in backend.reports()] == (["inference"] if mode == "inference" else ["forward", "backward"])
    assert any("residual add" in line for r in backend.reports() for line in r.fused)


def test_device_calls_do_not_break_the_graph():
    def step(x):
        y = torch.relu(x) * 2
        torch.npu.synchronize()
        return y + 1

    x = torch.randn(8, device=NPU)
    got = torch.compile(step, backend=NPU, fullgraph=True)(x)  # fullgraph: a graph break would raise
    torch.testing.assert_close(got.cpu(), torch.relu(x.cpu()) * 2 + 1)


def test_explain_reports_fusion_partitions_fallbacks_and_the_savings():
    _, npu = _pair(lambda: torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(approximate="tanh"),
                                               torch.nn.LayerNorm(256), torch.nn.Linear(256, 64), torch.nn.ReLU()))
    with torch.no_grad():
        e = npusim.explain(npu, torch.randn(32, 64, device=NPU))
    assert e.graph_breaks == 0 and len(e.graphs) == 1 and e.fallbacks == {}
    assert e.graphs[0].partitions == [("npu", e.graphs[0].nodes, [])]
    assert len(e.graphs[0].fused) == 3
    assert e.compiled["kernels"] == 3 and e.eager["kernels"] > 3
    assert e.compiled["dram_bytes"] < e.eager["dram_bytes"] and e.compiled["cycles"] < e.eager["cycles"]
    assert "graph 0 (inference)" in str(e)
    # The default SRAM pool holds both intermediates (the first gemm's and the layer norm's, 32 KiB each).
    assert e.graphs[0].sram_values == 2 and e.graphs[0].sram_peak_bytes == 64 << 10
    assert "memory plan: 2 intermediate(s) in the SRAM pools, at most 64 KiB at once" in str(e)

    def with_a_fallback(x):
        return torch.i0(torch.relu(x) + 1) * 2  # i0: a CPU fallback

    with torch.no_grad():
        e = npusim.explain(with_a_fallback, torch.randn(8, 4, device=NPU))
    assert [where for where, _, _ in e.graphs[0].partitions] == ["npu", "cpu", "npu"]
    assert e.graphs[0].partitions[1][2] == ["aten::i0.out"]
    assert e.fallbacks == {"aten::i0.out": 1}


@pytest.mark.parametrize("use_cache", [False, True])
def test_gpt2_compiles_whole_and_matches_the_cpu(use_cache):
    import transformers  # installed by scripts/setup.sh
    transformers.utils.logging.set_verbosity_error()
    config = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=128, n_positions=64, bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    cpu = transformers.GPT2LMHeadModel(config).eval()
    npu = transformers.GPT2LMHeadModel(config).eval()
    npu.load_state_dict(cpu.state_dict())
    npu = npu.to(NPU)
    tokens = torch.randint(0, 128, (2, 12))
    before = dict(npusim.fallback_stats())
    with torch.no_grad():
        expected = cpu(tokens, use_cache=use_cache).logits
        got = torch.compile(npu, backend=NPU, fullgraph=True)(tokens.to(NPU), use_cache=use_cache).logits.cpu()
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    assert npusim.fallback_stats() == before  # zero CPU fallbacks: embeddings, masks, attention all on the chip
    (report,) = backend.reports()
    assert report.fused.count("native_layer_norm -> npusim::layer_norm") == 2 * 2 + 1
    assert report.fused.count("gelu written out (tanh form) -> aten::gelu") == 2  # GPT-2's gelu_new, then into the gemm
    # c_fc with its gelu; attn.c_proj and mlp.c_proj with the residual stream added in their epilogues
    assert report.ops["npusim::gemm"] == 2 * 3
    assert report.fused.count("addmm + residual add -> npusim::gemm") == 2 * 2
    assert report.ops["aten::addmm"] == 2  # c_attn
    assert report.dropped_clones >= 2 * 2  # eval-mode dropouts after c_proj and mlp: copies for nothing
    assert report.folded > 0  # the attention mask, built from aranges, computed at compile time
    if not use_cache:  # the folded mask is the causal one: the attention takes is_causal instead
        assert report.fused.count("attention with a constant causal mask -> is_causal") == 2


def test_profile_times_every_kernel_by_op_and_layer():
    cpu, npu = _pair()
    compiled = torch.compile(npu, backend=NPU)
    x = torch.randn(4, 16, device=NPU)
    with torch.no_grad():
        compiled(x)  # compiled outside the profile
        with npusim.profile() as prof:
            compiled(x)
            torch.i0(x)  # a CPU fallback, counted in the profile
    ops, layers = prof.ops, prof.layers
    assert set(ops) == {"npusim::gemm", "npusim::layer_norm"} and ops["npusim::gemm"].calls == 2
    assert set(layers) == {"up", "norm", "down"}
    assert all(row[3] > 0 for row in prof.kernels)
    assert sum(row[3] for row in prof.kernels) <= prof.device_cycles
    assert prof.fallbacks == {"aten::i0.out": 1}
    assert all(0 <= u <= 1 for u in prof.utilization.values()) and prof.utilization["tensor_core"] > 0
    assert "npusim::gemm" in prof.table()


def test_a_fused_kernel_is_attributed_to_its_main_module_and_named_after_its_group():
    """conv + bn + relu is one kernel: it belongs to the convolution, named "stem.conv+bn+relu" (it was
    attributed to the relu, the group's last node); a linear with its activation module likewise."""

    class Stem(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.bn, self.relu = torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU()

        def forward(self, x):
            return self.relu(self.bn(self.conv(x)))

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stem, self.head, self.act = Stem(), torch.nn.Linear(8, 4), torch.nn.GELU()

        def forward(self, x):
            return self.act(self.head(self.stem(x).mean((2, 3))))

    net = Net().eval().to(NPU)
    compiled = torch.compile(net, backend=NPU)
    x = torch.randn(2, 3, 10, 10, device=NPU)
    with torch.no_grad():
        compiled(x)
        with npusim.profile() as prof:
            compiled(x)
    by_op = {row[1]: row[0] for row in prof.kernels}
    assert by_op["npusim::conv2d"] == "stem.conv+bn+relu" and by_op["npusim::gemm"] == "head+act", prof.kernels


def test_profile_splits_device_time_into_kernels_transfers_queue_and_round_trips():
    """The block's device cycles: those with a kernel in flight (launches included), those with a copy on the
    host link (here the matmul's result to the host and back), the driver's queue traffic and the host's
    round trips; a kernel's own cycles show none of the last three."""
    a, b = torch.randn(256, 256, device=NPU), torch.randn(256, 256, device=NPU)
    with npusim.profile() as prof:
        c = a @ b
        c = c.cpu().to(NPU)  # a round trip of the data through the host
        torch.relu(c)
    split = prof.time_split
    assert len(prof.spans) == 2 and all(end > start for start, end in prof.spans)
    assert split["kernels"] == sum(row[3] for row in prof.kernels)  # one queue: the spans do not overlap
    assert split["kernels"] + split["host transfers"] + split["queue"] + split["host round trips"] == prof.device_cycles
    assert 0 < split["launch"] < split["kernels"]
    chip = prof.chip
    assert split["launch"] == 2 * (chip["packet_cycles"] + chip["launch_cycles"])
    # The two copies of c (256 KiB each way) cross the link once each, between the kernels (a posted write's
    # last bytes may still be arriving when the next launch's timestamp is taken).
    data = [t for t in prof.host_transfers if t[4] == "data" and t[2] == 256 * 256 * 4]
    assert [t[3] for t in data] == ["to host", "to device"], prof.host_transfers
    assert all(prof.spans[0][1] <= t[0] < prof.spans[1][0] for t in data), (prof.spans, data)
    link_bytes_per_cycle = chip["host_link_bytes_per_cycle"]
    assert split["host transfers"] >= 2 * 256 * 256 * 4 / link_bytes_per_cycle
    assert split["queue"] > 0 and split["host round trips"] > 0  # packets written, fences read; register accesses
    assert prof.host_transfer_bytes >= 2 * 256 * 256 * 4
    table = prof.table()
    assert "host transfers" in table and "host round trips" in table


def test_profile_names_eager_layers_given_as_modules():
    _, npu = _pair()
    x = torch.randn(4, 16, device=NPU)
    with torch.no_grad(), npusim.profile(modules=[("up", npu.up), ("down", npu.down)]) as prof:
        npu(x)
    assert {"up", "down"} <= set(prof.layers)
    assert prof.ops["aten::addmm"].calls == 2


def test_a_gpt2_training_step_in_graph_mode_gives_the_cpu_gradients():
    import transformers  # installed by scripts/setup.sh

    transformers.utils.logging.set_verbosity_error()
    config = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=128, n_positions=64, bos_token_id=0, eos_token_id=0,
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    torch.manual_seed(0)
    cpu = transformers.GPT2LMHeadModel(config).train()
    npu = transformers.GPT2LMHeadModel(config).train()
    npu.load_state_dict(cpu.state_dict())
    npu = npu.to(NPU)
    assert npu.lm_head.weight is npu.transformer.wte.weight  # still tied on the npu

    def lm_loss(model, tokens):
        logits = model(tokens, use_cache=False).logits
        return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))

    tokens = torch.randint(0, 128, (2, 12))
    expected = lm_loss(cpu, tokens)
    expected.backward()
    before = dict(npusim.fallback_stats())
    got = torch.compile(lambda t: lm_loss(npu, t), backend=NPU, fullgraph=True)(tokens.to(NPU))
    got.backward()
    torch.testing.assert_close(got.cpu(), expected, rtol=1e-5, atol=1e-5)
    for (name, p_cpu), p_npu in zip(cpu.named_parameters(), npu.parameters()):
        scale = p_cpu.grad.abs().max().item() + 1e-12
        assert (p_npu.grad.cpu() - p_cpu.grad).abs().max().item() <= 1e-4 * scale, name
    assert npusim.fallback_stats() == before  # forward and backward wholly on the chip
    forward, backward = backend.reports()
    assert (forward.kind, backward.kind) == ("forward", "backward")
    # The embeddings' backward stays one op (a one-hot matmul), and each GELU's backward is one kernel.
    assert backward.ops["aten::embedding_dense_backward"] == 2
    assert sum(f.startswith("13 elementwise ops") for f in backward.fused) == config.n_layer


@pytest.mark.parametrize("padded", [False, True])
def test_bert_compiles_whole_and_matches_the_cpu(padded):
    import transformers  # installed by scripts/setup.sh

    transformers.utils.logging.set_verbosity_error()
    config = transformers.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
                                     vocab_size=200, max_position_embeddings=64)
    torch.manual_seed(0)
    cpu = transformers.BertModel(config, add_pooling_layer=False).eval()
    npu = transformers.BertModel(config, add_pooling_layer=False).eval()
    npu.load_state_dict(cpu.state_dict())
    npu = npu.to(NPU)
    tokens = torch.randint(0, 200, (2, 10))
    # With padding: the int64 attention mask becomes a bool mask on the chip (its words compared,
    # indexed by folded aranges, and-ed), and the masked attention runs on the chip's gemms.
    mask = torch.ones(2, 10, dtype=torch.long)
    mask[1, 7:] = 0
    inputs = dict(input_ids=tokens, attention_mask=mask) if padded else dict(input_ids=tokens)
    before = dict(npusim.fallback_stats())
    with torch.no_grad():
        got = torch.compile(npu, backend=NPU, fullgraph=True)(**{k: v.to(NPU) for k, v in inputs.items()}).last_hidden_state.cpu()
        expected = cpu(**inputs).last_hidden_state
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    (report,) = backend.reports()
    assert report.fused.count("addmm + gelu -> npusim::gemm") == 2 and report.fused.count("native_layer_norm -> npusim::layer_norm") == 5
    assert report.fused.count("addmm + residual add -> npusim::gemm") == 2 * 2  # attention output and FFN output projections
    assert npusim.fallback_stats() == before  # everything on the chip, embeddings and the mask included


def load_resnet():
    """examples/torch/resnet.py, the project's ResNet-18 (torchvision's wheel for torch 2.13.0 is a CUDA build)."""
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[2] / "examples" / "torch" / "resnet.py"
    spec = importlib.util.spec_from_file_location("resnet_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_the_resnet_example_runs_and_checks_itself(tmp_path, dtype):
    """examples/torch/resnet.py as a user runs it, small: it exits 1 if the chip's logits leave the CPU's."""
    import pathlib
    import subprocess
    import sys

    script = pathlib.Path(__file__).resolve().parents[2] / "examples" / "torch" / "resnet.py"
    trace = tmp_path / "resnet.pftrace"
    result = subprocess.run([sys.executable, str(script), "--width", "16", "--image", "32", "--classes", "10", "--dtype", dtype,
                             "--trace", str(trace)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert f"width 16, {dtype}" in result.stdout and trace.stat().st_size > 0


def test_resnet18_compiles_whole_and_matches_the_cpu():
    """ResNet-18's layers at a quarter of the width, on 32x32 images: convolutions, eval-mode batch norm,
    max pooling, residual adds, global average pooling and the classifier, all on the chip."""
    resnet = load_resnet()
    torch.manual_seed(0)
    cpu = resnet.ResNet18(num_classes=10, width=16).eval()
    resnet.randomize_batch_norm(cpu)
    npu = resnet.ResNet18(num_classes=10, width=16).eval()
    npu.load_state_dict(cpu.state_dict())
    npu = npu.to(NPU)
    images = torch.randn(2, 3, 32, 32)
    before = dict(npusim.fallback_stats())
    with torch.no_grad():
        got = torch.compile(npu, backend=NPU, fullgraph=True)(images.to(NPU)).cpu()
        expected = cpu(images)
    assert npusim.fallback_stats() == before  # zero CPU fallbacks
    # f32 convolutions as bf16 parts (Highest: about f32's precision), 20 layers deep.
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4 * expected.abs().max().item())
    (report,) = backend.reports()  # one graph (fullgraph=True: no breaks)
    # Each convolution with its batch norm (and relu) as one kernel, the norm in the matmul's epilogue.
    assert report.ops.get("npusim::conv2d") == 20 and "aten::convolution" not in report.ops
    assert sum("batch_norm" in line for line in report.fused) == 20
    # Each residual block's second convolution adds the block's input (or its downsampled
    # copy) in its epilogue, before the ReLU.
    assert report.fused.count("convolution + batch_norm + residual add + relu -> npusim::conv2d") == 8
    # No other add: the norms' scale and shift, from the parameters, are two elementwise chains per convolution.
    assert "aten::add.Tensor" not in report.ops and report.ops.get("npusim::elementwise_chain") == 2 * 20
    assert report.fused.count("3 elementwise ops (add, rsqrt, mul) -> npusim::elementwise_chain") == 20  # gamma / sqrt(var + eps)
    assert report.ops.get("npusim::max_pool2d") == 1 and "aten::max_pool2d_with_indices" not in report.ops  # nothing reads its indices
    with torch.no_grad():  # an inference graph: where the batch norms fold
        e = npusim.explain(npu, images.to(NPU))
    assert e.compiled["dram_bytes"] < e.eager["dram_bytes"] and e.compiled["cycles"] < 0.9 * e.eager["cycles"]


def test_the_demo_runs_on_a_small_chip(tmp_path):
    """README command 1's GPT-2 demo, on the tiny chip with two tokens: it checks itself against the CPU."""
    import pathlib
    import subprocess
    import sys

    script = pathlib.Path(__file__).resolve().parents[2] / "examples" / "torch" / "gpt2_generate.py"
    result = subprocess.run([sys.executable, str(script), "--config", "tiny", "--tokens", "2", "--out", str(tmp_path)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "(the same)" in result.stdout and "utilization:" in result.stdout
    assert (tmp_path / "gpt2_summary.txt").read_text().startswith("tokens on the npu")
    assert (tmp_path / "gpt2.pftrace").stat().st_size > 0


def test_profile_writes_the_trace_it_was_asked_for(tmp_path):
    import subprocess
    import sys

    code = ("import torch, npusim\n"
            f"npusim.init(trace={str(tmp_path / 'whole.json')!r})\n"
            "x = torch.randn(64, 64).to('npu')\n"
            f"with npusim.profile({str(tmp_path / 'block.pftrace')!r}) as prof:\n"
            "    torch.relu(x @ x).cpu()\n"
            "print(len(prof.kernels))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "2"
    assert b"vector unit" in (tmp_path / "block.pftrace").read_bytes()
    # The profile's file holds its block; the one chosen at init everything from the device's opening.
    import npusim.trace
    block, whole = npusim.trace.load(str(tmp_path / "block.pftrace")), npusim.trace.load(str(tmp_path / "whole.json"))
    assert len(block.kernels) == 2
    assert min(s.begin for s in whole.raw.spans) < min(s.begin for s in block.raw.spans)
    # This process chose no trace: the profile records its block's own, and leaves tracing off after.
    with npusim.profile(tmp_path / "own.pftrace") as prof:
        torch.relu(torch.randn(8, 8).to("npu")).cpu()
    assert len(npusim.trace.load(str(tmp_path / "own.pftrace")).kernels) == len(prof.kernels) == 1
    assert not npusim._C.tracing()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_casts_at_the_ends_of_f32_elementwise_ops_join_their_chain(dtype):
    """x.float() into f32 elementwise ops and their result cast back (as autocast and norms in f32 write
    them): one chain computed in f32 over x as it is, rounded once, the CPU's values."""
    torch.manual_seed(0)
    x, w = torch.randn(4, 6, 33).to(dtype), torch.randn(6, 1)
    cases = {
        "in and out": (lambda x, w: (x.float() * 2 + 1).sigmoid().to(x.dtype), dtype),
        "in, f32 out": (lambda x, w: x.float() * w + 1, torch.float32),
        "f32 in, half out": (lambda x, w: (x.float() * w).to(torch.bfloat16), torch.bfloat16),
    }
    for name, (f, result_dtype) in cases.items():
        torch._dynamo.reset()
        compiled = torch.compile(f, backend=NPU, fullgraph=True)
        with torch.no_grad():
            compiled(x.to(NPU), w.to(NPU))
            with npusim.profile() as prof:
                y = compiled(x.to(NPU), w.to(NPU))
        assert [row[2] for row in prof.kernels] == ["elementwise_chain"], (name, prof.kernels)
        assert y.dtype == result_dtype, name
        torch.testing.assert_close(y.cpu(), f(x, w), rtol=1e-6 if result_dtype == torch.float32 else 0, atol=1e-6, msg=name)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_an_eval_batch_norm_in_a_graph_is_one_pass_over_x(dtype):
    """A batch norm no convolution takes: the per-channel scale and shift (two small kernels) and one chain
    over x that takes its cast before and its activation after (f32: relu joins; bf16 rounds first)."""
    torch.manual_seed(0)
    c = 8
    x = torch.randn(3, c, 5, 7).to(dtype)
    stats = [torch.randn(c), torch.rand(c) + 0.5, torch.randn(c), torch.randn(c)]
    cases = {
        "of x.float()": lambda x, m, v, w, b: F.batch_norm(x.float(), m, v, w, b, training=False, eps=1e-5),
        "then relu": lambda x, m, v, w, b: F.relu(F.batch_norm(x, m, v, w, b, training=False, eps=1e-3)),
        "no affine": lambda x, m, v, w, b: F.batch_norm(x, m, v, None, None, training=False),
    }
    for name, f in cases.items():
        torch._dynamo.reset()
        compiled = torch.compile(f, backend=NPU, fullgraph=True)
        args = [x.to(NPU)] + [t.to(NPU) for t in stats]
        with torch.no_grad():
            compiled(*args)
            with npusim.profile() as prof:
                y = compiled(*args)
        launched = [row[2] for row in prof.kernels]
        assert not sum(prof.fallbacks.values()) and launched.count("elementwise_chain") >= 1, (name, launched)
        expected = f(x, *stats)
        assert y.dtype == expected.dtype
        # x is read by one kernel: the last chain (and a relu after it where the result is rounded to bf16).
        assert len(launched) <= (4 if name == "then relu" and dtype != torch.float32 else 3), (name, launched)
        tol = dict(rtol=1e-5, atol=1e-5) if expected.dtype == torch.float32 else dict(rtol=1e-2, atol=1e-2)
        torch.testing.assert_close(y.cpu(), expected, **tol, msg=name)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_attention_written_transposed_is_the_flash_kernel_turned_over(dtype):
    """vᵀ @ softmax(k @ qᵀ · s, dim=-2) is (softmax(q kᵀ s) v)ᵀ: the flash kernel and a copy, not two products
    and a column softmax with the scores in DRAM (the suite's lowest row); other forms stay as written."""
    import math

    torch.manual_seed(0)
    q, k, v = (torch.randn(3, 40, 16).to(dtype) for _ in range(3))
    cases = {
        "divided": (lambda q, k, v: v.transpose(-1, -2) @ torch.softmax(k @ q.transpose(-2, -1) / math.sqrt(16), dim=-2), True),
        "multiplied": (lambda q, k, v: v.transpose(-1, -2) @ torch.softmax(k @ q.transpose(-2, -1) * 0.3, dim=-2), True),
        "unscaled": (lambda q, k, v: v.transpose(-1, -2) @ torch.softmax(k @ q.transpose(-2, -1), dim=-2), True),
        "softmax over the last dim": (lambda q, k, v: v.transpose(-1, -2) @ torch.softmax(k @ q.transpose(-2, -1), dim=-1), False),
    }
    for name, (f, fused) in cases.items():
        torch._dynamo.reset()
        backend.clear_reports()
        compiled = torch.compile(f, backend=NPU, fullgraph=True)
        with torch.no_grad():
            compiled(q.to(NPU), k.to(NPU), v.to(NPU))
            with npusim.profile() as prof:
                y = compiled(q.to(NPU), k.to(NPU), v.to(NPU))
        launched = [row[2] for row in prof.kernels]
        assert (launched == ["scaled_dot_product_attention", "copy"]) == fused, (name, launched)
        # (Fused, the kernel keeps the scores in f32: against the f32 result. Unfused, bf16 scores and
        # probabilities are rounded as the CPU's bf16 ops round them: against those.)
        want = f(q.float(), k.float(), v.float()) if fused or dtype == torch.float32 else f(q, k, v).float()
        assert y.shape == want.shape and y.is_contiguous()
        tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2 if fused else 1e-1)
        torch.testing.assert_close(y.cpu().float(), want, **tol, msg=name)
