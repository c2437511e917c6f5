"""Ops composed of the chip's kernels (no instruction of their own), each against the CPU with no
CPU fallback: distances (torch.norm, F.pairwise_distance, hypot, cdist and its gradient), the
sigmoid family (glu, logit and their gradients), windows (F.unfold, F.fold, adaptive max pooling),
writes (index_fill, masked_scatter), buckets (bucketize, searchsorted, bincount, histc), products
(prod, cumprod), order statistics (kthvalue, median, nanmedian), linspace, the fused LSTM and GRU
cells behind nn.LSTM, nn.GRU and their cells, piecewise activations (softshrink, hardshrink,
threshold, prelu, rrelu), tensor clamps and lerp, aminmax, cummax and cummin, channel_shuffle, cross,
renorm, the triangle indices, embedding bags, pdist, logcumsumexp and 3-D average pooling.

Tolerances: f32 as torch.testing's defaults (rtol 1.3e-6, atol 1e-5), bf16 rtol 1.6e-2 and atol 1e-2
(test_model_ops.py says why). Counting, indexing and integer ops are compared exactly; so are the
order statistics' values (their indices, which PyTorch leaves open among equal values, must pick
those values).
"""
import pytest
import torch
import torch.nn.functional as F

import npusim  # noqa: F401

NPU = torch.device("npu")
TOLERANCE = {torch.float32: dict(rtol=1.3e-6, atol=1e-5), torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2)}
EXACT = dict(rtol=0, atol=0, equal_nan=True)


def fallbacks_since(before):
    return {name: n - before.get(name, 0) for name, n in npusim.fallback_stats().items() if n != before.get(name, 0)}


def on_npu(value):
    if isinstance(value, torch.device):  # a factory's device argument
        return NPU
    return value.to(NPU) if isinstance(value, torch.Tensor) else value


def run_both(f, *inputs):
    """f on the CPU inputs and on their npu copies; asserts no op fell back to the CPU."""
    before = dict(npusim.fallback_stats())
    actual = f(*[on_npu(i) for i in inputs])
    assert fallbacks_since(before) == {}
    expected = f(*inputs)
    as_tuple = lambda r: tuple(r) if isinstance(r, (tuple, list)) else (r,)  # noqa: E731
    return [a.cpu() for a in as_tuple(actual)], list(as_tuple(expected))


def check(f, *inputs, **tolerance):
    compare = {**TOLERANCE[torch.float32], "equal_nan": True, **tolerance}
    for actual, expected in zip(*run_both(f, *inputs)):
        torch.testing.assert_close(actual, expected, **compare)


def check_gradients(f, inputs, dtype=torch.float32, gradient_tolerance=None, reference_dtype=None):
    """f's output and every input's gradient, on the npu against the CPU; no fallback. With reference_dtype
    the CPU computes in that dtype (float64 where its own result in dtype is not reliable), rounded to dtype."""
    on_cpu = reference_dtype or dtype
    cpu = [i.to(on_cpu).clone().requires_grad_() for i in inputs]
    npu = [i.to(dtype).to(NPU).detach().requires_grad_() for i in inputs]
    before = dict(npusim.fallback_stats())
    y_npu, y_cpu = f(*npu), f(*cpu)
    grad = torch.randn(y_cpu.shape).to(dtype)
    y_npu.backward(grad.to(NPU))
    y_cpu.backward(grad.to(on_cpu))
    assert fallbacks_since(before) == {}
    torch.testing.assert_close(y_npu.detach().cpu(), y_cpu.detach().to(dtype), **TOLERANCE[dtype])
    for a, b in zip(npu, cpu):
        torch.testing.assert_close(a.grad.cpu(), b.grad.to(dtype), **(gradient_tolerance or TOLERANCE[dtype]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_norms_distances_and_their_gradients(dtype):
    torch.manual_seed(0)
    a, b = torch.randn(6, 9), torch.randn(6, 9)
    check_gradients(lambda u, v: F.pairwise_distance(u, v), [a, b], dtype)
    check_gradients(lambda u: torch.norm(u, 3, dim=1), [a], dtype)
    check_gradients(torch.hypot, [a, b], dtype)

    if dtype == torch.float32:  # (the CPU's cdist has no bf16)
        for p in [0.5, 1.0, 1.5, 2.0, 3.0, float("inf")]:
            # 5 and 7 rows: the direct path the CPU takes for these sizes (p = 2 beyond 25 rows uses matmuls).
            check_gradients(lambda u, v: torch.cdist(u, v, p=p), [torch.randn(2, 5, 4), torch.randn(2, 7, 4)], dtype)
    check(lambda u, v: torch.cdist(u, v, p=0.0), torch.randint(0, 2, (5, 4)).float(), torch.randint(0, 2, (7, 4)).float(), **EXACT)


def test_hypot_neither_overflows_nor_loses_its_edge_values():
    inf, nan = float("inf"), float("nan")
    a = torch.tensor([3.0, 3e30, 1e-30, 0.0, -0.0, inf, nan, inf, -inf, 5e-39])
    b = torch.tensor([4.0, -4e30, 0.0, 0.0, 2.0, nan, inf, inf, 1.0, 1e-39])
    check(torch.hypot, a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_glu_and_logit_and_their_gradients(dtype):
    torch.manual_seed(1)
    check_gradients(lambda x: F.glu(x, 1), [torch.randn(4, 10, 3)], dtype)
    check_gradients(lambda x: F.glu(x, -1), [torch.randn(5, 8)], dtype)
    probabilities = torch.rand(40) * 0.98 + 0.01
    # The reference in f64: PyTorch's own f32 logit on the CPU is off by up to 1e-4 relative (4096 random
    # values: 2.8e-5 in every process, 1e-4 in some); these 40 values are off by 2.9e-5 in about one
    # process in fifteen, without npusim loaded at all. Its log, log1p, exp and the others are within 1.2e-7.
    check_gradients(torch.logit, [probabilities], dtype, reference_dtype=torch.float64)
    # eps clamps: values outside [eps, 1 - eps] take the edge and a zero gradient.
    check_gradients(lambda x: torch.logit(x, eps=0.05), [torch.tensor([0.0, 0.01, 0.3, 0.5, 0.97, 1.0])], dtype,
                    reference_dtype=torch.float64)
    check(torch.logit, torch.tensor([0.0, 1.0, 0.5, float("nan"), -0.5]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_unfold_fold_and_adaptive_max_pooling_with_their_gradients(dtype):
    torch.manual_seed(2)
    x = torch.randn(2, 3, 8, 6)
    check_gradients(lambda t: F.unfold(t, (3, 2), padding=1, stride=(2, 1), dilation=(1, 2)), [x], dtype)
    columns = F.unfold(x, (3, 2), padding=(1, 0), stride=(1, 2))
    check_gradients(lambda c: F.fold(c, (8, 6), (3, 2), padding=(1, 0), stride=(1, 2)), [columns], dtype)
    check_gradients(lambda t: F.adaptive_max_pool2d(t, (4, 3)), [x], dtype)
    check(lambda t: F.adaptive_max_pool2d(t, (2, 1), return_indices=True), x, **EXACT)


def test_index_fill_and_masked_scatter_write_exactly():
    torch.manual_seed(3)
    x = torch.randn(5, 7)
    index = torch.tensor([0, 2, -1, 2])
    check(lambda t, i: t.index_fill(1, i, 1.5), x, index, **EXACT)
    check(lambda t, i: t.index_fill(0, i, torch.tensor(-2.0)), x, torch.tensor([4, 1]), **EXACT)
    check(lambda t, i: t.clone().index_fill_(0, i, -7), torch.arange(12).view(3, 4), torch.tensor([1]), **EXACT)
    with pytest.raises(IndexError):
        x.to(NPU).index_fill(1, torch.tensor([7]).to(NPU), 0.0)
    mask = torch.rand(5, 7) > 0.5
    check(lambda t, m, s: t.masked_scatter(m, s), x, mask, torch.randn(40), **EXACT)
    check(lambda t, m, s: t.masked_scatter(m, s), x, torch.tensor([True, False, True, True, False, False, True]), torch.randn(5, 8), **EXACT)
    check(lambda t, m, s: t.clone().masked_scatter_(m, s), torch.arange(6), torch.tensor([0, 1, 1, 0, 0, 1]).bool(), torch.arange(10, 16),
          **EXACT)
    with pytest.raises(RuntimeError, match="at least"):
        x.to(NPU).masked_scatter(torch.ones(5, 7, dtype=torch.bool).to(NPU), torch.randn(3).to(NPU))


def test_bucketize_and_searchsorted_find_the_cpus_positions():
    boundaries = torch.tensor([-1.0, 0.0, 0.0, 1.5])
    values = torch.tensor([[-2.0, -1.0, 0.0, 0.5], [1.5, 2.0, float("nan"), float("inf")]])
    for right in (False, True):
        check(lambda v, b: torch.bucketize(v, b, right=right), values, boundaries, **EXACT)
        check(lambda v, b: torch.bucketize(v, b, right=right, out_int32=True), values, boundaries, **EXACT)
        check(lambda s, v: torch.searchsorted(s, v, side="right" if right else "left"), torch.sort(torch.randn(3, 9))[0],
              torch.randn(3, 5), **EXACT)
    check(lambda s, v: torch.searchsorted(s, v), torch.tensor([1, 3, 5, 7], dtype=torch.int32), torch.tensor([0, 3, 4, 8], dtype=torch.int32),
          **EXACT)
    check(lambda b: torch.bucketize(0.25, b), boundaries, **EXACT)


def test_bincount_and_histc_count_exactly():
    torch.manual_seed(4)
    check(lambda t: torch.bincount(t), torch.randint(0, 9, (200,)), **EXACT)
    check(lambda t: torch.bincount(t, minlength=12), torch.randint(0, 5, (50,), dtype=torch.int32), **EXACT)
    check(lambda t, w: torch.bincount(t, w), torch.randint(0, 9, (100,)), torch.randn(100))
    with pytest.raises(RuntimeError, match="non-negative"):
        torch.bincount(torch.tensor([1, -1]).to(NPU))
    data = torch.randn(1000)
    check(lambda t: torch.histc(t, 17, -2, 2), data, **EXACT)
    check(lambda t: torch.histc(t, 10), data, **EXACT)  # min == max: the data's range, read back
    edges = torch.tensor([0.0, 0.25, 0.5, 0.75, 1.0, 1.0001, -0.0, float("nan"), 0.2499999, -1e-9])
    check(lambda t: torch.histc(t, 4, 0, 1), edges, **EXACT)
    check(lambda t: torch.histc(t, 3), torch.full((5,), 2.0), **EXACT)  # one value: the range widens by 1 each side


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_prod_and_cumprod_of_floats_and_their_gradients(dtype):
    torch.manual_seed(5)
    x = torch.rand(4, 9) + 0.5
    check_gradients(lambda t: torch.prod(t, 1), [x], dtype)
    check_gradients(lambda t: torch.cumprod(t, 1), [x], dtype)
    check_gradients(lambda t: torch.prod(t), [torch.rand(33) + 0.5], dtype)
    check(lambda t: torch.prod(t, 1), torch.randn(3, 0))


def test_integer_prod_and_cumprod_wrap_as_the_cpus_int64():
    torch.manual_seed(6)
    check(lambda t: torch.prod(t, 0), torch.randint(-5, 5, (7, 3), dtype=torch.int32), **EXACT)
    check(lambda t: torch.prod(t, 1), torch.randint(-2**40, 2**40, (3, 5)), **EXACT)  # wraps modulo 2^64
    check(lambda t: torch.prod(t, 1, keepdim=True), torch.rand(3, 4) > 0.2, **EXACT)
    check(lambda t: torch.cumprod(t, 0), torch.randint(-3, 4, (11, 2)), **EXACT)
    check(lambda t: torch.cumprod(t, 0), torch.randint(0, 4, (11,)).to(torch.uint8), **EXACT)
    check(lambda t: torch.cumprod(t, 0), torch.tensor(3), **EXACT)


def test_kthvalue_median_and_nanmedian_pick_exact_values():
    torch.manual_seed(7)
    x = torch.randn(4, 9)
    x[1, 4] = x[1, 6] = float("nan")
    x[2] = torch.tensor([1.0, 1.0, 1.0, 2.0, 2.0, 0.5, 0.5, 3.0, 3.0])  # ties
    x[3] = float("nan")
    for op in (lambda t: torch.kthvalue(t, 3, 1), lambda t: torch.median(t, 1), lambda t: torch.nanmedian(t, 1)):
        (values, indices), (want, _) = run_both(op, x)
        torch.testing.assert_close(values, want, **EXACT)
        torch.testing.assert_close(x.gather(1, indices.view(-1, 1)).view(-1), values, **EXACT)
    _, want_indices = torch.median(x, 1)
    assert torch.median(x.to(NPU), 1).indices.cpu()[[1, 3]].tolist() == want_indices[[1, 3]].tolist()  # the first NaN, as the CPU
    check(torch.median, x[0], **EXACT)
    check(torch.nanmedian, x, **EXACT)
    check(lambda t: torch.kthvalue(t, 2, 0, keepdim=True)[0], x, **EXACT)


@pytest.mark.parametrize("start, end, steps", [(0, 1, 7), (-3.5, 2.25, 100), (5, -5, 13), (0, 1, 1), (2, 3, 2), (0, 1, 0)])
def test_linspace_follows_atens_two_sided_formula(start, end, steps):
    check(lambda device: torch.linspace(start, end, steps, device=device), torch.device("cpu"))
    check(lambda device: torch.linspace(start, end, steps, device=device, dtype=torch.bfloat16), torch.device("cpu"),
          **TOLERANCE[torch.bfloat16])


@pytest.mark.parametrize("bias", [True, False])
def test_lstm_and_gru_layers_and_cells_run_and_train_on_the_chip(bias):
    # ATen's RNN code calls the fused cells on every non-CPU device: they raised before the npu had them.
    torch.manual_seed(8)
    x = torch.randn(3, 5, 6)  # [batch, time, features]
    for make in (lambda: torch.nn.LSTM(6, 4, num_layers=2, batch_first=True, bias=bias),
                 lambda: torch.nn.GRU(6, 4, batch_first=True, bias=bias, bidirectional=True)):
        cpu = make()
        npu = make().to(NPU)
        npu.load_state_dict(cpu.state_dict())
        before = dict(npusim.fallback_stats())
        y_npu, _ = npu(x.to(NPU))
        y_cpu, _ = cpu(x)
        grad = torch.randn(y_cpu.shape)
        y_npu.backward(grad.to(NPU))
        y_cpu.backward(grad)
        assert fallbacks_since(before) == {}
        torch.testing.assert_close(y_npu.detach().cpu(), y_cpu.detach(), rtol=1e-5, atol=1e-5)
        for (name, p_cpu), p_npu in zip(cpu.named_parameters(), npu.parameters()):
            torch.testing.assert_close(p_npu.grad.cpu(), p_cpu.grad, rtol=1e-4, atol=1e-5, msg=name)
    for cell, state in ((torch.nn.LSTMCell, lambda: (torch.randn(3, 4), torch.randn(3, 4))), (torch.nn.GRUCell, lambda: torch.randn(3, 4))):
        c_cpu = cell(6, 4, bias=bias)
        c_npu = cell(6, 4, bias=bias).to(NPU)
        c_npu.load_state_dict(c_cpu.state_dict())
        s = state()
        out_cpu = c_cpu(x[:, 0], s)
        out_npu = c_npu(x[:, 0].to(NPU), tuple(t.to(NPU) for t in s) if isinstance(s, tuple) else s.to(NPU))
        for a, b in zip(out_npu if isinstance(out_npu, tuple) else (out_npu,), out_cpu if isinstance(out_cpu, tuple) else (out_cpu,)):
            torch.testing.assert_close(a.detach().cpu(), b.detach(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_piecewise_activations_and_their_gradients(dtype):
    torch.manual_seed(9)
    x = torch.cat([torch.randn(200), torch.tensor([0.5, -0.5, 0.0, 1.0, -1.0])])  # lambda's and the threshold's edges
    check_gradients(lambda t: F.softshrink(t, 0.5), [x], dtype)
    check_gradients(lambda t: F.hardshrink(t, 0.5), [x], dtype)
    check_gradients(lambda t: F.threshold(t, 0.5, -2.0), [x], dtype)
    check_gradients(lambda t: F.rrelu(t, training=False), [x], dtype)
    images = torch.randn(2, 3, 4, 5)
    check_gradients(lambda t, w: F.prelu(t, w), [images, torch.tensor([0.1, -0.3, 0.25])], dtype)
    check_gradients(lambda t, w: F.prelu(t, w), [images, torch.tensor([0.2])], dtype)
    check(lambda t: F.softshrink(t, 0.5), torch.tensor([float("nan"), float("inf"), -float("inf")]))


def test_rrelu_in_training_draws_its_slopes_within_the_bounds():
    x = torch.randn(4000).to(NPU)
    before = dict(npusim.fallback_stats())
    noise = torch.empty_like(x)
    y = torch.ops.aten.rrelu_with_noise(x, noise, 0.1, 0.3, True)
    assert fallbacks_since(before) == {}
    x, y, noise = x.cpu(), y.cpu(), noise.cpu()
    negative = x <= 0
    assert ((noise[negative] >= 0.1) & (noise[negative] <= 0.3)).all() and (noise[~negative] == 1).all()
    assert noise[negative].std() > 0.03  # drawn, not one slope
    torch.testing.assert_close(y, x * noise, **EXACT)


def test_tensor_clamps_lerp_aminmax_and_cumulative_extrema():
    torch.manual_seed(10)
    x, lo, hi = torch.randn(6, 7), torch.randn(6, 7) - 1, torch.randn(7) + 1
    check(lambda t, a, b: torch.clamp(t, a, b), x, lo, hi, **EXACT)
    check(lambda t, a: torch.clamp(t, min=a), x, lo, **EXACT)
    check(lambda a, b, w: torch.lerp(a, b, w), x, lo, torch.rand(6, 7) * 1.4 - 0.2)
    check(lambda t: torch.aminmax(t), x, **EXACT)
    check(lambda t: torch.aminmax(t, dim=1, keepdim=True), x, **EXACT)
    y = torch.tensor([[1.0, 3.0, 3.0, 2.0, float("nan"), 5.0, float("nan"), 0.0], [2.0, 2.0, 1.0, 1.0, 0.0, 4.0, 4.0, -1.0]])
    for op in (torch.cummax, torch.cummin):
        check(lambda t: op(t, 1), y, **EXACT)  # ties take the later position; NaN, once seen, stays
        check(lambda t: op(t, 0), x, **EXACT)
        check(lambda t: op(t, 1), torch.randint(-5, 5, (3, 33), dtype=torch.int32), **EXACT)


def test_channel_shuffle_cross_renorm_and_triangle_indices():
    torch.manual_seed(11)
    check(lambda t: F.channel_shuffle(t, 3), torch.randn(2, 6, 4, 5), **EXACT)
    check(lambda a, b: torch.linalg.cross(a, b), torch.randn(5, 3), torch.randn(5, 3))
    check(lambda a, b: torch.linalg.cross(a, b, dim=0), torch.randn(3, 4), torch.randn(3, 1))
    check(lambda t: torch.renorm(t, 2, 0, 1.5), torch.randn(4, 5) * 2)
    check(lambda t: torch.renorm(t, 1, 1, 2.0), torch.randn(4, 5) * 2)
    for rows, cols, offset in [(4, 4, 0), (3, 5, 1), (5, 3, -1), (0, 3, 0)]:
        check(lambda device: torch.tril_indices(rows, cols, offset, device=device), torch.device("cpu"), **EXACT)
        check(lambda device: torch.triu_indices(rows, cols, offset, device=device), torch.device("cpu"), **EXACT)


@pytest.mark.parametrize("mode, per_sample, padding_idx", [("sum", False, None), ("sum", True, 2), ("mean", False, None), ("mean", False, 2)])
def test_embedding_bags_and_their_gradients(mode, per_sample, padding_idx):
    torch.manual_seed(12)
    indices, offsets = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 2, 11]), torch.tensor([0, 4, 4, 7])  # an empty bag, a repeated index
    inputs = [torch.randn(12, 5)] + ([torch.rand(10)] if per_sample else [])
    check_gradients(lambda w, *p: F.embedding_bag(indices.to(w.device), w, offsets.to(w.device), mode=mode,
                                                  per_sample_weights=p[0] if p else None, padding_idx=padding_idx), inputs)
    bag = torch.nn.EmbeddingBag(12, 5, mode=mode)
    on_chip = torch.nn.EmbeddingBag(12, 5, mode=mode).to(NPU)
    on_chip.load_state_dict(bag.state_dict())
    batch = torch.randint(0, 12, (4, 3))  # 2-D input: bags of 3
    with torch.no_grad():
        check(lambda i: (on_chip if i.device.type == "npu" else bag)(i), batch)


def test_pdist_and_logcumsumexp():
    torch.manual_seed(13)
    for p in (0.5, 1.0, 2.0, 3.0, float("inf")):
        check_gradients(lambda t: F.pdist(t, p), [torch.randn(7, 4)])
    # (PyTorch's backward formula takes exp(x - out) and reversed cumulative sums of it, which turn
    # out's f32 rounding, a few ulps of values near 50, into relative errors near 1e-5.)
    check_gradients(lambda t: torch.logcumsumexp(t, 1), [torch.randn(3, 40) * 20], gradient_tolerance=dict(rtol=1e-4, atol=1e-4))
    # Terms far below the running total neither underflow to -inf nor lose it (a cumsum of exp would).
    check(lambda t: torch.logcumsumexp(t, 1), torch.tensor([[-200.0, 0.0, -300.0, float("inf"), 1.0], [-float("inf")] * 2 + [3.0] * 3]))
    check(lambda t: torch.logcumsumexp(t, 0), torch.randn(33, 2).bfloat16(), **TOLERANCE[torch.bfloat16])


@pytest.mark.parametrize("kwargs", [dict(kernel_size=2), dict(kernel_size=(3, 2, 2), stride=(1, 2, 1), padding=(1, 1, 0)),
                                    dict(kernel_size=3, stride=2, padding=1)])
def test_3d_average_pooling_is_separable_on_the_chip(kwargs):
    torch.manual_seed(14)
    check_gradients(lambda t: F.avg_pool3d(t, **kwargs), [torch.randn(2, 3, 5, 6, 7)])
    check(lambda t: F.local_response_norm(t, 3), torch.randn(2, 6, 5, 5))  # (avg_pool3d inside)
    # The CPU has no bf16 avg_pool3d: against its f32 result on the same bf16 values.
    x = torch.randn(2, 3, 5, 6, 7).bfloat16()
    torch.testing.assert_close(F.avg_pool3d(x.to(NPU), **kwargs).cpu().float(), F.avg_pool3d(x.float(), **kwargs), **TOLERANCE[torch.bfloat16])
    before = dict(npusim.fallback_stats())
    F.avg_pool3d(torch.randn(1, 1, 4, 4, 4).to(NPU), 2, ceil_mode=True)  # not separable: the CPU, counted
    assert fallbacks_since(before) == {"aten::avg_pool3d": 1}


def indexed_on(t, index):
    """index with its tensors on t's device."""
    return tuple(i.to(t.device) if isinstance(i, torch.Tensor) else i for i in index)


def written(t, index, v):
    t = t.clone()
    t[indexed_on(t, index)] = v
    return t


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_indexing_after_whole_dims_and_its_gradient(dtype):
    x = torch.randn(2, 5, 6, 4)
    for index in [(Ellipsis, [-2], slice(None)),  # Falcon's fused_qkv[..., [-2], :]
                  (slice(None), [1, -1, 1]),
                  (slice(None), slice(None), torch.tensor([[0, 5], [2, 2]])),
                  (slice(None), torch.tensor([1, 2]), torch.tensor([3, 0]))]:
        check_gradients(lambda t, index=index: t[indexed_on(t, index)], [x], dtype)  # the gradient: index_put_ with accumulate
        values = torch.randn(x[index].shape[-1]).to(dtype)
        check(lambda t, v, index=index: written(t, index, v), x.to(dtype), values, **EXACT)


def test_index_tensors_on_the_cpu_index_npu_tensors():
    x, index = torch.randn(10, 3), torch.tensor([3, 1, 1, 9])  # (BEiT's relative position index, built in forward)
    check(lambda t: t[index], x, **EXACT)
    check(lambda t: written(t, (index,), 1.0), x, **EXACT)


def test_matmul_out_forms_write_into_slices():
    a, b, bias = torch.randn(8, 5), torch.randn(5, 3), torch.randn(3)

    def into_slices(a, b, bias):  # a mixture of experts' grouped matmul, one expert's rows at a time
        out = torch.zeros(8, 3, device=a.device)
        torch.mm(a[:3], b, out=out[:3])
        torch.addmm(bias, a[3:], b, out=out[3:])
        return out
    check(into_slices, a, b, bias)
    check(lambda p, q: torch.bmm(p, q, out=torch.empty(2, 8, 3, device=p.device)), a.expand(2, 8, 5), b.expand(2, 5, 3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_weight_norm_and_its_gradients(dtype):
    tolerance = None if dtype == torch.float32 else dict(rtol=5e-2, atol=5e-2)
    v, g = torch.randn(6, 3, 5), torch.rand(1, 1, 5) + 0.5
    for dim, g_shape in [(2, (1, 1, 5)), (0, (6, 1, 1))]:  # (wav2vec2's positional convolution: dim 2)
        g = torch.rand(g_shape) + 0.5
        check_gradients(lambda a, b, dim=dim: torch._weight_norm(a, b, dim), [v, g], dtype, tolerance)
    check_gradients(lambda a, b: torch.pow(a, b), [torch.rand(3, 4) + 0.5, torch.randn(4)], dtype, tolerance)  # pow of two tensors
    check(lambda b, p: torch.pow(b, p), torch.tensor(0.5), torch.arange(1, 9, dtype=torch.int32))  # BLOOM's ALiBi slopes


def test_layer_norm_of_rows_that_are_not_contiguous():
    x = torch.randn(2, 24, 10)  # [B, C, T] from a convolution, normalized over C as [B, T, C]
    layer = torch.nn.LayerNorm(24)
    check_gradients(lambda t: F.layer_norm(t.transpose(1, 2), (24,), layer.weight.detach().to(t.device), layer.bias.detach().to(t.device)), [x])


def test_cross_entropy_over_pixels_and_sums_of_scalars():
    x = torch.randn(2, 5, 4, 3)  # [N, C, H, W] scores: segmentation
    target = torch.randint(0, 5, (2, 4, 3))
    target[0, 0, 0] = -100
    weight = torch.rand(5) + 0.5
    for kwargs in [dict(), dict(reduction="sum"), dict(reduction="none"), dict(label_smoothing=0.1), dict(ignore_index=2)]:
        labels = target.clamp_min(0) if "ignore_index" in kwargs else target  # (-100 is the default ignored class)
        check_gradients(lambda t, kwargs=kwargs, labels=labels: F.cross_entropy(t, labels.to(t.device), **kwargs), [x])
        check_gradients(lambda t, kwargs=kwargs, labels=labels: F.cross_entropy(t, labels.to(t.device), weight=weight.to(t.device), **kwargs),
                        [x])
    # A scalar summed again (a loss's sum, a 0-dim mean and maximum): itself.
    check_gradients(lambda t: (t.square().mean() * 3).sum().mean().amax(), [x])


def test_a_mask_after_whole_dims_gives_the_cpus_result():
    # A bool mask indexes as many dims as it has: x[:, mask] with a 2-D mask is not a one-dim index.
    x, mask = torch.randn(2, 3, 4), torch.rand(3, 4) > 0.5
    torch.testing.assert_close(x.to(NPU)[:, mask.to(NPU)].cpu(), x[:, mask], rtol=0, atol=0)
    t, t_npu = x.clone(), x.to(NPU)
    t[:, mask] = 1.0
    t_npu[:, mask.to(NPU)] = 1.0
    torch.testing.assert_close(t_npu.cpu(), t, rtol=0, atol=0)
