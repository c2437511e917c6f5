"""The ops real models reach beyond matmuls and norms, each of which was a CPU fallback in one
(GPT-2's and BERT's training steps, CNNs, Llama): activation functions and their gradients,
regression losses, causal masks, flip / roll, baddbmm, log1p / expm1 / sign, whole-tensor
reductions, int64 counters. Every one against the CPU, forward and backward, in f32 and bf16,
with no CPU fallback.

Tolerances: f32 as torch.testing's defaults (rtol 1.3e-6, atol 1e-5): the chip computes ATen's
formulas in f32, with log(1 + y) and exp(y) - 1 where ATen calls log1p and expm1 (the vector unit
has neither: an absolute error of a few f32 ulps of 1); bf16 rtol 1.6e-2 and atol 1e-2 as in
test_opinfo.py (one rounding to bf16 of the f32 result, against the CPU's own bf16 kernels).
"""
import pytest
import torch
import torch.nn.functional as F

import npusim  # noqa: F401

NPU = torch.device("npu")
TOLERANCE = {torch.float32: dict(rtol=1.3e-6, atol=1e-5), torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2)}


def launched(before):
    return {name: n - before.get(name, 0) for name, n in npusim.kernel_stats().items() if n != before.get(name, 0)}


def fallbacks_since(before):
    return {name: n - before.get(name, 0) for name, n in npusim.fallback_stats().items() if n != before.get(name, 0)}


def check_forward_and_backward(f, x, dtype):
    """f on the CPU and on the npu, its output and its input's gradient compared; no fallback."""
    x_cpu = x.to(dtype).clone().requires_grad_()
    x_npu = x.to(dtype).to(NPU).detach().requires_grad_()
    before = dict(npusim.fallback_stats())
    y_cpu, y_npu = f(x_cpu), f(x_npu)
    grad = torch.randn(y_cpu.shape).to(dtype)
    y_cpu.backward(grad)
    y_npu.backward(grad.to(NPU))
    assert fallbacks_since(before) == {}
    torch.testing.assert_close(y_npu.detach().cpu(), y_cpu.detach(), **TOLERANCE[dtype])
    torch.testing.assert_close(x_npu.grad.cpu(), x_cpu.grad, **TOLERANCE[dtype])


ACTIVATIONS = {
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid,
    "hardtanh": lambda x: F.hardtanh(x, -2.5, 1.5),
    "relu6": F.relu6,
    "leaky_relu": lambda x: F.leaky_relu(x, 0.2),
    "elu": F.elu,
    "selu": F.selu,
    "celu": lambda x: F.celu(x, 0.7),
    "softplus": lambda x: F.softplus(x, beta=2.0, threshold=5.0),
    "mish": F.mish,
    "logsigmoid": F.logsigmoid,
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activations_and_their_gradients_run_on_the_chip(name, dtype):
    torch.manual_seed(0)
    x = torch.randn(3, 5, 37) * 4
    # The ends of every branch: hardswish's and hardsigmoid's +-3, relu6's 0 and 6, hardtanh's bounds,
    # and values past softplus's threshold (x * beta > 5).
    x[0, 0, :9] = torch.tensor([-3.0, 3.0, 0.0, 6.0, -2.5, 1.5, 2.5, 2.6, -20.0])
    check_forward_and_backward(ACTIVATIONS[name], x, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_leaky_relu_and_elu_are_one_kernel_and_keep_the_cpus_values_at_the_ends(dtype):
    # Branch-free forms (leaky_relu: max or min of x and x * slope; elu: max(x, 0) * scale plus the
    # negative branch of min(x, 0)): each element takes its branch's value exactly, +-inf and NaN included.
    # A slope of 0 keeps the comparison and select (+inf * 0 is NaN).
    x = torch.cat([torch.randn(200) * 4, torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1e-30, -1e-30, 90.0, -90.0])])
    x = x.to(dtype)
    cases = {
        "leaky 0.2": (lambda t: F.leaky_relu(t, 0.2), 1), "leaky -0.5": (lambda t: F.leaky_relu(t, -0.5), 1),
        "leaky 1": (lambda t: F.leaky_relu(t, 1.0), 1), "leaky 3": (lambda t: F.leaky_relu(t, 3.0), 1),
        "leaky 0": (lambda t: F.leaky_relu(t, 0.0), 3), "elu": (F.elu, 1), "selu": (F.selu, 1),
        "celu 0.7": (lambda t: F.celu(t, 0.7), 1), "elu alpha 2": (lambda t: F.elu(t, 2.0), 1),
    }
    for name, (f, kernels) in cases.items():
        before = dict(npusim.kernel_stats())
        got = f(x.to(NPU)).cpu()
        assert sum(launched(before).values()) == kernels, (name, launched(before))
        expected = f(x)
        assert torch.equal(got.isnan(), expected.isnan()), name
        if name.startswith("leaky"):  # the same f32 products, rounded once
            torch.testing.assert_close(got, expected, equal_nan=True, rtol=0, atol=0, msg=name)
        else:  # the chip's exp(y) - 1 against the CPU's expm1: a few f32 ulps of 1, which may round either way
            torch.testing.assert_close(got, expected, equal_nan=True, rtol=torch.finfo(dtype).eps, atol=1e-6, msg=name)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_an_activation_backward_is_one_kernel(dtype):
    # GPT-2's gelu_new (tanh form written out) trains through tanh's backward: g * (1 - y * y) as one
    # elementwise chain, not three kernels and not the CPU; in bf16 the chain converts its inputs to f32
    # on the chip and rounds once, as the CPU computes it (no casts around it).
    y = torch.randn(64, 64).tanh().to(dtype).to(NPU)
    grad = torch.randn(64, 64).to(dtype).to(NPU)
    before = dict(npusim.kernel_stats())
    result = torch.ops.aten.tanh_backward(grad, y)
    assert launched(before) == {"elementwise_chain": 1}
    torch.testing.assert_close(result.cpu(), torch.ops.aten.tanh_backward(grad.cpu(), y.cpu()), **TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_losses_built_on_the_new_ops_train_on_the_chip(dtype):
    torch.manual_seed(1)
    x = torch.randn(6, 33) * 3
    target = torch.randn(6, 33)
    for reduction in ("mean", "sum", "none"):
        check_forward_and_backward(lambda t: F.mse_loss(t, target.to(t.device, t.dtype), reduction=reduction), x, dtype)
    check_forward_and_backward(lambda t: F.binary_cross_entropy_with_logits(t, target.sigmoid().to(t.device, t.dtype)), x, dtype)
    check_forward_and_backward(lambda t: F.normalize(t, dim=-1), x, dtype)  # clamp_min of the norms
    check_forward_and_backward(lambda t: F.cosine_similarity(t, target.to(t.device, t.dtype)), x, dtype)
    # Both branches of the robust losses, and their boundaries exactly.
    x[0, :4] = target[0, :4] + torch.tensor([1.0, -1.0, 0.7, -0.7])
    for reduction in ("mean", "sum", "none"):
        for beta in (1.0, 0.3):
            check_forward_and_backward(lambda t: F.smooth_l1_loss(t, target.to(t.device, t.dtype), reduction=reduction, beta=beta), x, dtype)
        check_forward_and_backward(lambda t: F.huber_loss(t, target.to(t.device, t.dtype), reduction=reduction, delta=0.7), x, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.bool])
def test_tril_and_triu_run_on_the_chip_for_masks_and_values(dtype):
    x = (torch.randn(2, 3, 7, 9) * 5).to(dtype)
    before = dict(npusim.fallback_stats())
    xn = x.to(NPU)
    for diagonal in (0, 1, -2, 20, -20):
        assert torch.equal(xn.tril(diagonal).cpu(), x.tril(diagonal))
        assert torch.equal(xn.triu(diagonal).cpu(), x.triu(diagonal))
    y = xn.clone()
    y.tril_(-1)  # in place, through the out= kernel
    assert torch.equal(y.cpu(), x.tril(-1))
    # a causal mask as models make it
    causal = torch.ones(5, 5, dtype=torch.bool, device=NPU).tril()
    assert torch.equal(causal.cpu(), torch.ones(5, 5, dtype=torch.bool).tril())
    assert fallbacks_since(before) == {}


def test_whole_tensor_reductions_of_any_layout_stay_on_the_chip():
    torch.manual_seed(3)
    x = torch.randn(6, 7, 40)
    x[1, 2, 3] = float("nan")
    views = [
        lambda t: t.transpose(0, 2),  # dense, permuted: no copy
        lambda t: t[:, ::2],  # strided: copied dense on the chip first
        lambda t: t.permute(2, 0, 1)[3:],
    ]
    before = dict(npusim.fallback_stats())
    for view in views:
        host, device = view(x), view(x.to(NPU))
        torch.testing.assert_close(device.nansum().cpu(), host.nansum())
        clean_host, clean_device = host.nan_to_num(0.0), view(x.nan_to_num(0.0).to(NPU))
        torch.testing.assert_close(clean_device.sum().cpu(), clean_host.sum())
        torch.testing.assert_close(clean_device.mean().cpu(), clean_host.mean())
        assert torch.equal(clean_device.amax().cpu(), clean_host.amax())
        assert torch.equal(clean_device.amin(dim=(), keepdim=True).cpu(), clean_host.amin(dim=(), keepdim=True))
        torch.testing.assert_close(clean_device.sum(dim=(), keepdim=True).cpu(), clean_host.sum(dim=(), keepdim=True))
    assert fallbacks_since(before) == {}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_nan_to_num_and_whole_tensor_any_and_all_run_on_the_chip(dtype):
    x = torch.tensor([1.0, float("nan"), float("inf"), -float("inf"), -2.0, 0.0]).to(dtype)
    before = dict(npusim.fallback_stats())
    xn = x.to(NPU)
    for kwargs in ({}, dict(nan=1.5, posinf=7.0, neginf=-9.0)):
        assert torch.equal(xn.nan_to_num(**kwargs).cpu(), x.nan_to_num(**kwargs))  # defaults: the dtype's finite extremes
    for mask in (x > 0, x > 5, x == x, x.isnan(), torch.ones(3, 4, dtype=torch.bool).transpose(0, 1)):
        assert torch.equal(mask.to(NPU).any().cpu(), mask.any()) and torch.equal(mask.to(NPU).all().cpu(), mask.all())
    assert fallbacks_since(before) == {}


def test_int64_add_and_sub_run_exactly_on_the_words():
    # Position ids and nn.BatchNorm's num_batches_tracked += 1: int64, which the chip has no dtype for,
    # added on the 32-bit words with the carry between them; wrapping as the CPU's int64 does.
    values = torch.tensor([0, 1, -1, 2**31 - 1, 2**31, -2**31, -2**31 - 1, 2**32 - 1, 2**32, 2**62, -2**63, 2**63 - 1,
                           123456789012345, -98765432109876])
    a, b = values.view(-1, 1), values.view(1, -1)
    an, bn = a.to(NPU), b.to(NPU)
    before = dict(npusim.fallback_stats())
    assert torch.equal((an + bn).cpu(), a + b)
    assert torch.equal((an - bn).cpu(), a - b)
    assert torch.equal((an + 7).cpu(), a + 7) and torch.equal((5 - an).cpu(), 5 - a) and torch.equal((an - 2**40).cpu(), a - 2**40)
    counter = torch.zeros((), dtype=torch.long, device=NPU)
    counter.add_(1)
    counter += 1
    assert counter.item() == 2
    assert fallbacks_since(before) == {}


def test_log1p_and_expm1_keep_their_precision_near_zero_and_their_edge_values():
    # Kahan's forms on the vector unit's log and exp: the CPU's values at the edges, and a relative
    # error near zero (where log(1 + x) and exp(x) - 1 lose every digit) within a few f32 ulps.
    before = dict(npusim.fallback_stats())
    edges = torch.tensor([1e-8, -1.0, float("inf"), -2.0, 0.0, -0.0, 1e-30, -0.5, 3.0, float("nan"), -float("inf"), 100.0])
    for f in (torch.log1p, torch.expm1):
        torch.testing.assert_close(f(edges.to(NPU)).cpu(), f(edges), equal_nan=True)
        small = (torch.rand(10000) - 0.5) * 2e-3
        small = small[small != 0]
        relative = ((f(small.to(NPU)).cpu() - f(small)) / f(small)).abs().max().item()
        assert relative < 4 * 2**-23, (f, relative)
    # Near f32's largest: log1p(3e38) is 88.6 and expm1(88) 1.65e38, not inf (a product overflowed).
    for f, large in ((torch.log1p, torch.tensor([3e38, 1e30, 1.5e9])), (torch.expm1, torch.tensor([88.0, 88.7, 80.0]))):
        torch.testing.assert_close(f(large.to(NPU)).cpu(), f(large))
    check_forward_and_backward(lambda t: torch.log1p(t.abs()), torch.randn(5, 40) * 3, torch.float32)
    check_forward_and_backward(torch.expm1, torch.randn(5, 40) * 3, torch.bfloat16)
    signs = torch.tensor([float("nan"), -0.0, 0.0, 2.0, -3.0, float("inf"), -float("inf")])
    assert torch.equal(torch.sign(signs.to(NPU)).cpu(), torch.sign(signs))
    ints = torch.tensor([-3, 0, 5], dtype=torch.int32)
    assert torch.equal(torch.sign(ints.to(NPU)).cpu(), torch.sign(ints))
    check_forward_and_backward(lambda t: t.abs() * 2, torch.randn(3, 7), torch.float32)  # abs's gradient is sgn
    assert fallbacks_since(before) == {}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_flip_and_roll_move_elements_exactly(dtype):
    x = (torch.randn(3, 4, 5) * 10).to(dtype)
    xn = x.to(NPU)
    before = dict(npusim.fallback_stats())
    for dims in [(0,), (-1,), (0, 2), (1, 2, 0)]:
        assert torch.equal(xn.flip(dims).cpu(), x.flip(dims))
    for shifts, dims in [(1, 0), (-2, -1), ((1, 3), (0, 2)), (7, ()), (0, 1), (13, 1)]:
        assert torch.equal(xn.roll(shifts, dims).cpu(), x.roll(shifts, dims))
    assert fallbacks_since(before) == {}
    if dtype != torch.int64:
        check_forward_and_backward(lambda t: t.flip(1).roll(2, 0), x.float(), dtype)


@pytest.mark.parametrize("self_shape, beta, alpha, kernels", [
    ((4, 5, 7), 1, 1, {"matmul": 1}),  # self as the matmul's residual
    ((5, 7), 1, 1, {"matmul": 1}),  # self as its bias
    ((1, 5, 7), 2, 0.5, {"matmul": 1}),
    ((4, 5, 7), 0.5, 2, {"matmul": 1, "mul": 1, "add": 1}),
    ((4, 5, 7), 0, 1, {"matmul": 1}),  # self ignored
])
def test_baddbmm_takes_self_into_the_matmul(self_shape, beta, alpha, kernels):
    torch.manual_seed(5)
    a, b, s = torch.randn(4, 5, 6), torch.randn(4, 6, 7), torch.randn(self_shape)
    if beta == 0:
        s[0] = float("nan")  # not propagated, as on the CPU
    before = dict(npusim.kernel_stats())
    result = torch.baddbmm(s.to(NPU), a.to(NPU), b.to(NPU), beta=beta, alpha=alpha)
    assert launched(before) == kernels
    torch.testing.assert_close(result.cpu(), torch.baddbmm(s, a, b, beta=beta, alpha=alpha))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_round_floor_ceil_and_trunc_are_exact(dtype):
    # Ties to even, the f32 values next to a half, the edge of 2^23 (from which every f32 is an integer),
    # infinities and NaN, and a wide random spread.
    edges = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, -0.49999997, 8388607.5, -8388607.5, 8388608.0, 1e10, -1e10,
                          float("inf"), -float("inf"), float("nan"), 0.0, 3.7, -3.7, 1e-30, -1e-30, 4194303.5, 2.0**23 - 1])
    x = torch.cat([edges, torch.randn(5000) * 1000, torch.randn(500)]).to(dtype)
    before = dict(npusim.fallback_stats())
    for f in (torch.round, torch.floor, torch.ceil, torch.trunc):
        torch.testing.assert_close(f(x.to(NPU)).cpu(), f(x), rtol=0, atol=0, equal_nan=True)
    assert fallbacks_since(before) == {}


def test_int64_where_and_isin_run_on_the_chip():
    # generate()'s stopping criteria: token ids (int64) picked by masks and looked up among stop tokens.
    values = torch.tensor([0, 5, -2**40, 2**33 + 7, -1, 50256])
    cond = torch.tensor([True, False, True, False, False, True])
    other = torch.tensor([9, 9, 9, 2**40, 9, 9])
    stops = torch.tensor([50256, 2**33 + 7])
    before = dict(npusim.fallback_stats())
    assert torch.equal(torch.where(cond.to(NPU), values.to(NPU), other.to(NPU)).cpu(), torch.where(cond, values, other))
    assert torch.equal(torch.where(cond.to(NPU), values.to(NPU), 3).cpu(), torch.where(cond, values, 3))
    for invert in (False, True):
        assert torch.equal(torch.isin(values.to(NPU), stops.to(NPU), invert=invert).cpu(), torch.isin(values, stops, invert=invert))
    assert torch.equal(torch.isin(values.view(2, 3).to(NPU), stops.to(NPU)).cpu(), torch.isin(values.view(2, 3), stops))
    assert fallbacks_since(before) == {}


def test_a_llama_generates_the_cpus_tokens_with_no_cpu_fallback():
    transformers = pytest.importorskip("transformers")  # installed by scripts/setup.sh
    transformers.utils.logging.set_verbosity_error()
    config = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, vocab_size=200, max_position_embeddings=64)
    torch.manual_seed(6)
    cpu = transformers.LlamaForCausalLM(config).eval()
    npu = transformers.LlamaForCausalLM(config).eval()
    npu.load_state_dict(cpu.state_dict())
    npu = npu.to(NPU)
    prompt = torch.randint(0, 200, (2, 8))
    expected = cpu.generate(prompt, max_new_tokens=5, do_sample=False)
    before = dict(npusim.fallback_stats())
    got = npu.generate(prompt.to(NPU), max_new_tokens=5, do_sample=False)
    # All of it on the chip: grouped-query attention with q in [B, L, H, D], the stop-token lookups, masks
    # made counts, and the int64 products, maxima and bitwise ands of generate()'s sequence flags on the
    # 32-bit words (test_integer_ops.py).
    assert fallbacks_since(before) == {}
    assert torch.equal(got.cpu(), expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_exp2_log2_log10_xlogy_and_logsumexp(dtype):
    # exp2 as v.pow of 2, log2 and log10 as log times a constant, xlogy with ATen's zero and NaN rules.
    torch.manual_seed(7)
    x = (torch.randn(30, 40) * 5).to(dtype)
    p = torch.rand(30, 40).to(dtype)
    edges = torch.tensor([0.0, 1.0, float("nan"), float("inf"), -1.0, 1e-30, 127.6, -149.0]).to(dtype)
    before = dict(npusim.fallback_stats())
    for f in (torch.exp2, torch.log2, torch.log10):
        torch.testing.assert_close(f(x.to(NPU)).cpu() if f is torch.exp2 else f(p.to(NPU)).cpu(), f(x) if f is torch.exp2 else f(p),
                                   **TOLERANCE[dtype])
        torch.testing.assert_close(f(edges.to(NPU)).cpu(), f(edges), equal_nan=True, **TOLERANCE[dtype])
    zeros_and_nans = torch.tensor([0.0, 0.0, 2.0, 0.0, 1.5]).to(dtype), torch.tensor([0.0, float("nan"), 0.0, 3.0, 2.0]).to(dtype)
    torch.testing.assert_close(torch.xlogy(*(t.to(NPU) for t in zeros_and_nans)).cpu(), torch.xlogy(*zeros_and_nans), equal_nan=True)
    torch.testing.assert_close(torch.logsumexp(x.to(NPU), 1).cpu(), torch.logsumexp(x, 1), **TOLERANCE[dtype])
    assert fallbacks_since(before) == {}
    check_forward_and_backward(lambda t: F.kl_div(F.log_softmax(t, 1), F.softmax(t.detach() * 2, 1), reduction="batchmean"),
                               x.float(), dtype)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_binary_cross_entropy_and_its_gradient(reduction, dtype):
    # Probabilities at 0 and 1 (log clamped at -100, the gradient's denominator at 1e-12), with and without weights.
    torch.manual_seed(8)
    target = torch.rand(16, 10).to(dtype)
    weight = torch.rand(10).to(dtype)
    p = torch.rand(16, 10)
    p[0, :4] = torch.tensor([0.0, 1.0, 1e-8, 1 - 1e-7])
    check_forward_and_backward(lambda t: F.binary_cross_entropy(t, target.to(t.device), reduction=reduction), p, dtype)
    check_forward_and_backward(lambda t: F.binary_cross_entropy(t, target.to(t.device), weight.to(t.device), reduction=reduction), p, dtype)


def test_equal_count_nonzero_trace_and_eye():
    x = torch.randn(6, 7)
    x[0, 0], x[2] = 0, 0
    xn = x.to(NPU)
    before = dict(npusim.fallback_stats())
    assert torch.equal(xn, x.clone().to(NPU)) and not torch.equal(xn, (x + 1).to(NPU)) and not torch.equal(xn, xn[:5])
    nan = torch.tensor([float("nan")], device=NPU)
    assert not torch.equal(nan, nan)  # as on the CPU
    assert torch.equal(torch.count_nonzero(xn).cpu(), torch.count_nonzero(x))
    assert torch.equal(torch.count_nonzero(xn, dim=1).cpu(), torch.count_nonzero(x, dim=1))
    torch.testing.assert_close(torch.trace(xn[:, :6]).cpu(), torch.trace(x[:, :6]))
    for n, m, dtype in [(3, 4, torch.float32), (5, 5, torch.int64), (2, 2, torch.bool), (0, 3, torch.float32)]:
        assert torch.equal(torch.eye(n, m, device=NPU, dtype=dtype).cpu(), torch.eye(n, m, dtype=dtype))
    assert fallbacks_since(before) == {}


def test_scatter_and_one_hot_take_the_last_source_of_a_repeated_index():
    g = torch.Generator().manual_seed(9)
    x = torch.randn(5, 8, generator=g)
    index = torch.randint(0, 8, (5, 6), generator=g)  # repeats within rows
    src = torch.randn(5, 7, generator=g)
    index0, src0 = torch.randint(0, 5, (3, 8), generator=g), torch.randn(4, 8, generator=g)
    labels = torch.randint(0, 10, (37,), generator=g)
    wide = torch.randint(-2**40, 2**40, (5, 8), generator=g)
    before = dict(npusim.fallback_stats())
    assert torch.equal(x.to(NPU).scatter(1, index.to(NPU), src.to(NPU)).cpu(), x.scatter(1, index, src))
    assert torch.equal(x.to(NPU).scatter(0, index0.to(NPU), src0.to(NPU)).cpu(), x.scatter(0, index0, src0))
    assert torch.equal(x.to(NPU).scatter(1, index.to(NPU), 2.5).cpu(), x.scatter(1, index, 2.5))
    assert torch.equal(wide.to(NPU).scatter(1, index.to(NPU), 7).cpu(), wide.scatter(1, index, 7))
    in_place = x.to(NPU)
    in_place.scatter_(1, index.to(NPU), src.to(NPU))
    assert torch.equal(in_place.cpu(), x.scatter(1, index, src))
    assert torch.equal(F.one_hot(labels.to(NPU), 10).cpu(), F.one_hot(labels, 10))
    assert fallbacks_since(before) == {}
    with pytest.raises(IndexError):
        x.to(NPU).scatter(1, torch.tensor([[8]] * 5, device=NPU), 1.0)


def test_indexed_writes_run_on_the_chip():
    # x[mask] = v, x[rows] = v, x[i, j] = v and index_put_ with accumulate; repeated and negative indices.
    g = torch.Generator().manual_seed(10)
    x = torch.randn(6, 5, generator=g)
    rows = torch.tensor([4, 1, 4, -1])  # 4 twice: its last value wins, as on the CPU
    wide = torch.randint(-2**40, 2**40, (6, 3), generator=g)
    writes = [
        ("rows", x, lambda t: t.__setitem__(rows.to(t.device), torch.arange(20.0).view(4, 5).to(t.device))),
        ("rows, one value", x, lambda t: t.__setitem__(rows.to(t.device), 3.0)),
        ("elements", x, lambda t: t.__setitem__((rows.to(t.device), torch.tensor([0, 2, 0, 4], device=t.device)),
                                                 torch.tensor([1.0, 2.0, 3.0, 4.0], device=t.device))),
        ("mask", x, lambda t: t.__setitem__(t > 0, 0.0)),
        ("row mask", x, lambda t: t.__setitem__(torch.tensor([True, False, True, False, False, True], device=t.device), -1.0)),
        ("int64 rows", wide, lambda t: t.__setitem__(rows.to(t.device), torch.tensor([7, 2**35, -9], device=t.device))),
    ]
    before = dict(npusim.fallback_stats())
    for name, base, write in writes:
        on_cpu, on_npu = base.clone(), base.to(NPU)
        write(on_cpu)
        write(on_npu)
        assert torch.equal(on_npu.cpu(), on_cpu), name
    summed, summed_npu = x.clone(), x.to(NPU)
    summed.index_put_((rows,), torch.ones(4, 5), accumulate=True)
    summed_npu.index_put_((rows.to(NPU),), torch.ones(4, 5, device=NPU), accumulate=True)
    torch.testing.assert_close(summed_npu.cpu(), summed)  # a repeated row: summed in f32, rounded once
    # index_copy_ along a middle dim (a static KV cache's write of new positions).
    cache, new = torch.zeros(2, 4, 8, 3), torch.randn(2, 4, 2, 3, generator=g)
    cache_npu = cache.to(NPU)
    cache.index_copy_(2, torch.tensor([5, 1]), new)
    cache_npu.index_copy_(2, torch.tensor([5, 1], device=NPU), new.to(NPU))
    assert torch.equal(cache_npu.cpu(), cache)
    assert fallbacks_since(before) == {}
    with pytest.raises(IndexError):
        x.to(NPU)[torch.tensor([6], device=NPU)] = 1.0


def test_nonzero_and_boolean_mask_reads_run_on_the_chip():
    # Data-dependent shapes: the count is read back, the positions come from the topk kernel in order.
    g = torch.Generator().manual_seed(11)
    x = torch.randn(7, 9, 5, generator=g)
    mask = x > 0.3
    rows = torch.tensor([True, False, True, True, False, False, True])
    xn, maskn = x.to(NPU), mask.to(NPU)
    before = dict(npusim.fallback_stats())
    assert torch.equal(maskn.nonzero().cpu(), mask.nonzero())
    assert torch.equal(xn.nonzero().cpu(), x.nonzero())
    assert torch.equal(torch.tensor([0, 3, 0, 7, 0], device=NPU).nonzero().cpu(), torch.tensor([0, 3, 0, 7, 0]).nonzero())
    assert torch.equal((xn > 100).nonzero().cpu(), (x > 100).nonzero())  # none: [0, 3]
    assert torch.equal(xn[maskn].cpu(), x[mask])
    assert torch.equal(xn[rows.to(NPU)].cpu(), x[rows])
    assert torch.equal(xn.masked_select(maskn[0]).cpu(), x.masked_select(mask[0]))  # broadcast mask
    for got, want in zip(torch.where(maskn), torch.where(mask)):
        assert torch.equal(got.cpu(), want)
    assert fallbacks_since(before) == {}


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_the_transformer_fast_paths_run_on_the_chip(norm_first, activation):
    """nn.TransformerEncoderLayer and nn.MultiheadAttention in eval without grad take PyTorch's fast paths
    (torch._transformer_encoder_layer_fwd, torch._native_multi_head_attention) on the npu as on CUDA: the
    layer's arithmetic on the chip, every mask type, eager and compiled (the whole layer ran on the CPU)."""
    import copy

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, activation=activation, batch_first=True,
                                             norm_first=norm_first).eval()
    npu = copy.deepcopy(layer).to(NPU)
    x = torch.randn(2, 7, 32)
    padding = torch.zeros(2, 7, dtype=torch.bool)
    padding[1, 5:] = True
    causal = torch.nn.Transformer.generate_square_subsequent_mask(7)
    before = dict(npusim.fallback_stats())
    with torch.no_grad(), torch.profiler.profile() as prof:
        for masks in ({}, {"src_key_padding_mask": padding}, {"src_mask": causal}, {"src_mask": causal.isinf(), "src_key_padding_mask": padding}):
            got = npu(x.to(NPU), **{k: v.to(NPU) for k, v in masks.items()})
            torch.testing.assert_close(got.cpu(), layer(x, **masks), rtol=1e-5, atol=1e-5, msg=str(list(masks)))
        torch.testing.assert_close(torch.compile(npu, backend="npu")(x.to(NPU)).cpu(), layer(x), rtol=1e-5, atol=1e-5)
    assert "aten::_transformer_encoder_layer_fwd" in {e.name for e in prof.events()}  # the fast path was taken
    attention = torch.nn.MultiheadAttention(32, 4, batch_first=True).eval()
    npu_attention = copy.deepcopy(attention).to(NPU)
    q, kv = torch.randn(2, 5, 32), torch.randn(2, 6, 32)
    key_padding = torch.tensor([[False] * 6, [False] * 4 + [True] * 2])
    with torch.no_grad():
        for need_weights in (False, True):
            got = npu_attention(q.to(NPU), kv.to(NPU), kv.to(NPU), key_padding_mask=key_padding.to(NPU), need_weights=need_weights)
            want = attention(q, kv, kv, key_padding_mask=key_padding, need_weights=need_weights)
            torch.testing.assert_close(got[0].cpu(), want[0], rtol=1e-5, atol=1e-5)
            if need_weights:
                torch.testing.assert_close(got[1].cpu(), want[1], rtol=1e-5, atol=1e-5)
    assert fallbacks_since(before) == {}


@pytest.mark.parametrize("options", [dict(cls="AdamW", weight_decay=0.1), dict(cls="Adam", weight_decay=0.1),
                                     dict(cls="Adam", amsgrad=True, maximize=True), dict(cls="AdamW", lr_tensor=True)],
                         ids=["adamw", "adam", "amsgrad-maximize", "tensor-lr"])
def test_fused_adam_runs_on_the_chip_as_on_the_cpu(options):
    import copy

    options = dict(options)
    cls = getattr(torch.optim, options.pop("cls"))
    lr = torch.tensor(1e-2) if options.pop("lr_tensor", False) else 1e-2
    torch.manual_seed(0)
    cpu = torch.nn.Linear(8, 4)
    npu = copy.deepcopy(cpu).to(NPU)
    cpu_opt = cls(cpu.parameters(), lr=lr, fused=True, **options)
    npu_opt = cls(npu.parameters(), lr=lr.clone() if isinstance(lr, torch.Tensor) else lr, fused=True, **options)
    before = dict(npusim.fallback_stats())
    for _ in range(3):
        x = torch.randn(5, 8)
        for model, opt, inp in ((cpu, cpu_opt, x), (npu, npu_opt, x.to(NPU))):
            opt.zero_grad()
            model(inp).square().sum().backward()
            opt.step()
    assert fallbacks_since(before) == {}
    for p_cpu, p_npu in zip(cpu.parameters(), npu.parameters()):
        torch.testing.assert_close(p_npu.detach().cpu(), p_cpu.detach(), rtol=1e-5, atol=1e-6)


def test_grad_scaler_unscales_skips_and_rescales_on_the_chip():
    """GradScaler with a fused AdamW: the unscale check and the scale update on the chip, an overflowing step
    skipped and the scale backed off, then grown after growth_interval good steps, as on the CPU."""
    import copy

    torch.manual_seed(0)
    cpu = torch.nn.Linear(8, 4)
    npu = copy.deepcopy(cpu).to(NPU)
    scalers = torch.amp.GradScaler("cpu", init_scale=2.0**16, growth_interval=2), torch.amp.GradScaler("npu", init_scale=2.0**16, growth_interval=2)
    opts = torch.optim.AdamW(cpu.parameters(), lr=0.1, fused=True), torch.optim.AdamW(npu.parameters(), lr=0.1, fused=True)
    before = dict(npusim.fallback_stats())
    scales = []
    for step in range(5):
        x = torch.randn(5, 8) * (1e38 if step == 1 else 1)  # step 1 overflows
        for model, scaler, opt, inp in zip((cpu, npu), scalers, opts, (x, x.to(NPU))):
            opt.zero_grad()
            scaler.scale(model(inp).sum()).backward()
            scaler.step(opt)
            scaler.update()
        scales.append((scalers[0].get_scale(), scalers[1].get_scale()))
    assert all(a == b for a, b in scales) and [a for a, _ in scales] == [2.0**16, 2.0**15, 2.0**15, 2.0**16, 2.0**16], scales
    assert fallbacks_since(before) == {}
    for p_cpu, p_npu in zip(cpu.parameters(), npu.parameters()):
        torch.testing.assert_close(p_npu.detach().cpu(), p_cpu.detach(), rtol=1e-5, atol=1e-6)
    # The unscale op alone: found_inf set by an inf or a NaN in any tensor, every tensor scaled.
    grads = [torch.tensor([1.0, 2.0]), torch.tensor([float("nan"), 4.0])]
    found = torch.zeros(1)
    npu_grads, npu_found = [g.to(NPU) for g in grads], found.to(NPU)
    torch._amp_foreach_non_finite_check_and_unscale_(grads, found, torch.tensor(0.5))
    torch._amp_foreach_non_finite_check_and_unscale_(npu_grads, npu_found, torch.tensor(0.5).to(NPU))
    assert npu_found.item() == found.item() == 1.0
    for g, n in zip(grads, npu_grads):
        torch.testing.assert_close(n.cpu(), g, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_depthwise_and_grouped_convolutions_are_a_few_kernels_not_one_per_group(dtype):
    """A 96-channel depthwise convolution was 97 kernels (a matmul per group); it is one vector-unit kernel.
    A grouped one is one matmul over its groups (f32: with its im2col; bf16: the implicit kernel with its
    block-diagonal weights, made on first use and cached with the weight tensor)."""
    torch.manual_seed(0)
    x = torch.randn(2, 96, 14, 14).to(dtype)
    cases = {"depthwise": (torch.randn(96, 1, 3, 3).to(dtype), 96), "grouped": (torch.randn(96, 12, 3, 3).to(dtype), 8)}
    for name, (w, groups) in cases.items():
        x_npu, w_npu = x.to(NPU), w.to(NPU)
        F.conv2d(x_npu, w_npu, padding=1, groups=groups)  # (the blocked weights are made on first use, then cached)
        before = dict(npusim.kernel_stats())
        got = F.conv2d(x_npu, w_npu, padding=1, groups=groups)
        assert sum(launched(before).values()) <= 2, (name, launched(before))
        torch.testing.assert_close(got.cpu(), F.conv2d(x, w, padding=1, groups=groups), **(TOLERANCE[dtype] if dtype == torch.float32 else
                                                                                             dict(rtol=2e-2, atol=2e-2)), msg=name)
