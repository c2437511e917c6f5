"""The npu's random numbers: its own generator (seed and counter offset) and the
random ops on the chip's counter-based v.rand (Philox4x32-10).

The values are not the CPU's (another algorithm, as on CUDA), so they are
checked against this file's own Philox: uniform and bernoulli exactly, normal
(Box-Muller in f32 on the chip) within 1e-5 relative; plus the statistics,
the generator's state handling and dropout's training contract.
"""
import math

import pytest
import torch
import torch.nn.functional as F

import npusim

NPU = torch.device("npu")
M32 = 0xFFFFFFFF


def philox_word0(key, counter):
    """Random123's philox4x32-10, first output word; counter (c, c >> 32, 0, 0), key (k, k >> 32)."""
    c0, c1, c2, c3 = counter & M32, (counter >> 32) & M32, 0, 0
    k0, k1 = key & M32, (key >> 32) & M32
    for r in range(10):
        if r:
            k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
        p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & M32, p1 & M32, ((p0 >> 32) ^ c3 ^ k1) & M32, p0 & M32
    return c0


def unit(seed, counter, digits=24):
    return (philox_word0(seed, counter) >> (32 - digits)) / float(1 << digits)


def chip_kernels():
    return dict(npusim.kernel_stats())


def new_fallbacks(before):
    return {op: n for op, n in npusim.fallback_stats().items() if n != before.get(op, 0)}


@pytest.mark.parametrize("dtype, digits", [(torch.float32, 24), (torch.bfloat16, 8)])
def test_rand_is_the_generators_philox_stream(dtype, digits):
    torch.npu.manual_seed(1234)
    first = torch.rand(300, device=NPU, dtype=dtype).cpu()
    second = torch.rand(7, device=NPU, dtype=dtype).cpu()  # the offset moved on by 300
    assert first.tolist() == [unit(1234, i, digits) for i in range(300)]
    assert second.tolist() == [unit(1234, 300 + i, digits) for i in range(7)]
    assert torch.npu.get_rng_state()[8:].view(torch.int64).item() == 307


def test_uniform_normal_and_bernoulli_in_place_run_on_the_chip():
    before, kernels = dict(npusim.fallback_stats()), chip_kernels()
    torch.npu.manual_seed(5)
    u = torch.empty(1000, device=NPU).uniform_(-2, 6).cpu()
    assert u.tolist() == [torch.tensor(unit(5, i) * 8.0 - 2.0, dtype=torch.float32).item() for i in range(1000)]
    z = torch.empty(2000, device=NPU).normal_(1.0, 3.0).cpu()  # counters 1000 .. 4999
    expected = [1.0 + 3.0 * math.sqrt(-2 * math.log(1 - unit(5, 1000 + i))) * math.cos(2 * math.pi * unit(5, 3000 + i)) for i in range(2000)]
    torch.testing.assert_close(z, torch.tensor(expected), rtol=1e-5, atol=3e-5)
    b = torch.empty(500, device=NPU).bernoulli_(0.25).cpu()  # counters 5000 ..
    assert b.tolist() == [1.0 if unit(5, 5000 + i) < 0.25 else 0.0 for i in range(500)]
    assert new_fallbacks(before) == {}
    after = chip_kernels()
    assert after.get("uniform", 0) > kernels.get("uniform", 0) and after.get("normal", 0) > kernels.get("normal", 0)


def test_the_distributions_have_their_moments():
    before = dict(npusim.fallback_stats())
    torch.npu.manual_seed(0)
    n = 200_000
    for dtype in (torch.float32, torch.bfloat16):
        z = torch.randn(n, device=NPU, dtype=dtype).float().cpu()
        assert abs(z.mean().item()) < 5 / math.sqrt(n) + (4e-3 if dtype == torch.bfloat16 else 0)
        assert abs(z.std().item() - 1) < 5 / math.sqrt(2 * n) + (4e-3 if dtype == torch.bfloat16 else 0)
        u = torch.rand(n, device=NPU, dtype=dtype).float().cpu()
        assert u.min().item() >= 0 and u.max().item() < 1
        assert abs(u.mean().item() - 0.5) < 5 * math.sqrt(1 / 12 / n)
    p = torch.linspace(0, 1, 11, device=NPU).repeat(10_000)  # repeat: unfold, a view, on the npu
    draws = torch.bernoulli(p).cpu().view(10_000, 11)
    rates = draws.mean(0)
    assert rates[0] == 0 and rates[-1] == 1
    assert torch.allclose(rates, torch.linspace(0, 1, 11), atol=5 * 0.5 / math.sqrt(10_000))
    assert set(new_fallbacks(before)) <= {"aten::linspace.out"}


def test_seeds_states_and_generators():
    torch.manual_seed(77)  # seeds the npu generator too
    a = torch.randn(64, device=NPU).cpu()
    torch.npu.manual_seed(77)
    assert torch.equal(torch.randn(64, device=NPU).cpu(), a)
    assert torch.npu.initial_seed() == 77
    state = torch.npu.get_rng_state()
    b = torch.rand(10, device=NPU).cpu()
    torch.rand(5, device=NPU)
    torch.npu.set_rng_state(state)
    assert torch.equal(torch.rand(10, device=NPU).cpu(), b)
    with pytest.raises(RuntimeError, match="16 bytes"):
        torch.npu.set_rng_state(torch.zeros(3, dtype=torch.uint8))
    # A generator of its own leaves the default one alone.
    g = torch.Generator(device=NPU)
    g.manual_seed(77)
    state = torch.npu.get_rng_state()
    assert torch.equal(torch.randn(64, device=NPU, generator=g).cpu(), a)
    assert torch.equal(torch.npu.get_rng_state(), state)
    # fork_rng restores the npu's state.
    with torch.random.fork_rng(device_type="npu"):
        torch.rand(3, device=NPU)
    assert torch.equal(torch.npu.get_rng_state(), state)


def test_a_non_contiguous_target_and_an_f64_one():
    torch.npu.manual_seed(3)
    base = torch.zeros(8, 6, device=NPU)
    base.t().uniform_()  # a transposed view: generated contiguous, then copied in
    assert torch.equal(base.t().contiguous().cpu().flatten(), torch.tensor([unit(3, i) for i in range(48)]))
    before = dict(npusim.fallback_stats())
    torch.empty(4, device=NPU, dtype=torch.float64).uniform_()
    assert "aten::uniform_" in new_fallbacks(before)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_dropout_trains_on_the_chip_with_the_cpus_arithmetic(dtype):
    before = dict(npusim.fallback_stats())
    torch.npu.manual_seed(11)
    x = torch.randn(33, 65, dtype=dtype).to(NPU).requires_grad_()
    out, mask = torch.native_dropout(x, 0.3, True)
    assert mask.dtype == torch.bool and mask.device.type == "npu"
    keep = mask.cpu()
    assert 0.6 < keep.float().mean().item() < 0.8
    # The CPU's arithmetic on the chip's mask: x * mask * (1 / 0.7), rounded once.
    torch.testing.assert_close(out.detach().cpu(), x.detach().cpu() * keep * (1 / 0.7), rtol=0, atol=0)
    y = F.dropout(x, 0.3, training=True)
    grad = torch.randn_like(y.detach().cpu())
    y.backward(grad.to(NPU))
    kept = y.detach().cpu() != 0
    torch.testing.assert_close(x.grad.cpu(), grad * kept * (1 / 0.7), rtol=0, atol=0)
    assert torch.equal(F.dropout(x, 0.3, training=False).detach().cpu(), x.detach().cpu())
    assert new_fallbacks(before) == {}


def test_a_model_with_dropout_initializes_and_trains_on_the_chip():
    before = dict(npusim.fallback_stats())
    torch.npu.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Dropout(0.2), torch.nn.Linear(64, 4)).to(NPU)
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.1)  # normal_ on the chip, in place on the parameters
    x, target = torch.randn(64, 32).to(NPU), torch.randint(0, 4, (64,)).to(NPU)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.2)
    losses = []
    for _ in range(30):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0], losses
    assert new_fallbacks(before) == {}


def test_multinomial_draws_on_the_chip_with_the_distributions_frequencies():
    """Inverse transform on the chip: frequencies within 4 standard deviations of the probabilities,
    a zero-probability category (first, middle, last) never drawn, the CPU's errors for bad rows, and
    the same draws for the same seed."""
    probabilities = torch.tensor([[0.0, 0.1, 0.0, 0.6, 0.3, 0.0], [1.0, 1.0, 2.0, 0.0, 0.0, 4.0]])  # unnormalized rows too
    torch.npu.manual_seed(7)
    before = dict(npusim.fallback_stats())
    draws = torch.multinomial(probabilities.to(NPU), 20000, replacement=True).cpu()
    assert npusim.fallback_stats() == before and draws.dtype == torch.int64 and draws.shape == (2, 20000)
    for row in range(2):
        want = probabilities[row] / probabilities[row].sum()
        got = torch.bincount(draws[row], minlength=6).double() / 20000
        assert (got[want == 0] == 0).all()
        assert ((got - want.double()).abs() <= 4 * (want.double() * (1 - want.double()) / 20000).sqrt() + 1e-9).all(), (got, want)
    one = torch.multinomial(torch.tensor([0.2, 0.0, 0.8]).to(NPU), 1)
    assert one.shape == (1,) and one.item() in (0, 2)
    torch.npu.manual_seed(7)
    again = torch.multinomial(probabilities.to(NPU), 20000, replacement=True).cpu()
    assert torch.equal(again, draws)
    with pytest.raises(RuntimeError, match="element < 0"):
        torch.multinomial(torch.tensor([0.5, -0.1]).to(NPU), 1)
    with pytest.raises(RuntimeError, match="sum of probabilities <= 0"):
        torch.multinomial(torch.zeros(2, 3).to(NPU), 1)


@pytest.mark.parametrize("dtype, low, high", [(torch.int64, 0, 1000), (torch.int32, -5, 3), (torch.uint8, 0, 256), (torch.float32, 2, 9)])
def test_randint_draws_every_value_of_its_range_evenly_on_the_chip(dtype, low, high):
    """random_(from, to): from + floor(u (to - from)); every value reached, none outside, frequencies
    within 5 standard deviations of uniform, the same draws for the same seed."""
    torch.npu.manual_seed(11)
    before = dict(npusim.fallback_stats())
    draws = torch.randint(low, high, (40000,), device=NPU, dtype=dtype).cpu()
    assert new_fallbacks(before) == {} and draws.dtype == dtype
    counts = torch.bincount(draws.long() - low, minlength=high - low).double()
    assert counts.numel() == high - low and (counts > 0).all()
    p = 1.0 / (high - low)
    assert ((counts / 40000 - p).abs() <= 5 * math.sqrt(p * (1 - p) / 40000)).all()
    torch.npu.manual_seed(11)
    assert torch.equal(torch.randint(low, high, (40000,), device=NPU, dtype=dtype).cpu(), draws)


def test_randperm_is_a_permutation_drawn_on_the_chip():
    torch.npu.manual_seed(12)
    before = dict(npusim.fallback_stats())
    first = torch.randperm(1000, device=NPU).cpu()
    second = torch.randperm(1000, device=NPU).cpu()
    assert new_fallbacks(before) == {} and first.dtype == torch.int64
    assert torch.equal(torch.sort(first).values, torch.arange(1000)) and not torch.equal(first, second)
    torch.npu.manual_seed(12)
    assert torch.equal(torch.randperm(1000, device=NPU).cpu(), first)
    # Beyond 4096 elements the CPU's generator draws it, counted.
    assert torch.equal(torch.sort(torch.randperm(5000, device=NPU).cpu()).values, torch.arange(5000))
    assert "aten::randperm.generator_out" in new_fallbacks(before)
