"""The elementary functions the vector unit has no instruction for (torch_bridge/csrc/
elementary_functions.cpp): tan, sinh, cosh, asinh, acosh, atanh, atan, asin, acos, atan2, erfinv,
erfc, sinc, frac, logaddexp, copysign, signbit, heaviside, logical_xor. Each against the CPU over wide
ranges and at its edges (zeros of both signs, infinities, NaN, the ends of its domain, values where a
naive formula cancels or overflows), its gradient too, with no CPU fallback.

Tolerance: f32 as torch.testing's defaults (rtol 1.3e-6, about 11 f32 ulps; atol 1e-5), bf16 rtol 1.6e-2
and atol 1e-2 (test_model_ops.py says why). copysign, signbit, heaviside, logical_xor and frac are exact.
"""
import pytest
import torch

import npusim  # noqa: F401

NPU = torch.device("npu")
INF, NAN = float("inf"), float("nan")
EXACT = dict(rtol=0, atol=0, equal_nan=True)


def fallbacks_since(before):
    return {name: n - before.get(name, 0) for name, n in npusim.fallback_stats().items() if n != before.get(name, 0)}


def check(f, *inputs, **tolerance):
    before = dict(npusim.fallback_stats())
    actual = f(*[i.to(NPU) for i in inputs]).cpu()
    assert fallbacks_since(before) == {}
    torch.testing.assert_close(actual, f(*inputs), **({"equal_nan": True} | tolerance))


def spread(seed):
    """Random values, magnitudes from 1e-30 to 1e30 of both signs, and the IEEE edge values."""
    g = torch.Generator().manual_seed(seed)
    magnitudes = torch.logspace(-30, 30, 200)
    return torch.cat([torch.randn(2000, generator=g) * 3, magnitudes, -magnitudes,
                      torch.tensor([0.0, -0.0, INF, -INF, NAN, 1.0, -1.0, 88.0, -88.0, 100.0])])


def unit_interval(seed):
    """[-1, 1] and its ends, values next to them, tiny values, and a few outside."""
    g = torch.Generator().manual_seed(seed)
    return torch.cat([torch.rand(2000, generator=g) * 2 - 1, 1 - torch.logspace(-7, -1, 50), torch.logspace(-30, -1, 50),
                      torch.tensor([0.0, -0.0, 1.0, -1.0, 0.9999999, -0.9999999, NAN, 1.5, -2.0])])


DOMAINS = {
    "tan": lambda: torch.randn(2000) * 3,
    "sinh": lambda: torch.cat([torch.randn(2000) * 3, torch.tensor([0.0, -0.0, 1e-20, 0.999, 1.001, -0.5, 50.0, -80.0, INF, -INF, NAN])]),
    "cosh": lambda: torch.cat([torch.randn(2000) * 3, torch.tensor([0.0, -0.0, 50.0, -80.0, INF, -INF, NAN])]),
    "asinh": lambda: spread(1),
    "acosh": lambda: torch.cat([1 + torch.rand(1000) * 5, torch.logspace(0, 30, 100), torch.tensor([1.0, 0.5, INF, NAN, 1.0000001])]),
    "atanh": lambda: unit_interval(2),
    "atan": lambda: spread(3),
    "asin": lambda: unit_interval(4),
    "acos": lambda: unit_interval(5),
    "erfinv": lambda: unit_interval(6),
    # erfc's tail down to f32's smallest normals keeps its relative precision (1 - erf would lose it from x = 1)
    "erfc": lambda: torch.cat([torch.randn(2000) * 3, torch.linspace(-12, 12, 2001), torch.tensor([0.0, -0.0, INF, -INF, NAN, 26.0])]),
    "sinc": lambda: torch.cat([torch.randn(1000) * 3, torch.tensor([0.0, -0.0, 1.0, 2.0, INF, NAN, 1e-20])]),
}


@pytest.mark.parametrize("name", sorted(DOMAINS))
def test_unary_functions_match_the_cpu_over_their_domains(name):
    torch.manual_seed(0)
    f = getattr(torch, name)
    x = DOMAINS[name]()
    check(f, x)
    check(f, x.bfloat16(), rtol=1.6e-2, atol=1e-2)


@pytest.mark.parametrize("name", sorted(DOMAINS))
def test_unary_functions_have_the_cpus_gradients(name):
    torch.manual_seed(1)
    f = getattr(torch, name)
    x = DOMAINS[name]()
    x = x[torch.isfinite(x) & (x.abs() < 50)][:500]  # where the gradient itself is finite
    if name in ("atanh", "asin", "acos", "erfinv"):
        x = x[x.abs() < 0.999]
    if name == "acosh":
        x = x[x > 1.001]
    x_cpu, x_npu = x.clone().requires_grad_(), x.to(NPU).requires_grad_()
    before = dict(npusim.fallback_stats())
    f(x_npu).sum().backward()
    assert fallbacks_since(before) == {}
    f(x_cpu).sum().backward()
    torch.testing.assert_close(x_npu.grad.cpu(), x_cpu.grad, rtol=1e-5, atol=1e-5)


def test_atan2_has_cs_values_at_zeros_and_infinities():
    torch.manual_seed(2)
    edges_y = [0.0, -0.0, 0.0, -0.0, INF, INF, -INF, -INF, 1.0, -1.0, 1.0, -1.0, INF, 0.0, NAN, 1.0, -1e-30]
    edges_x = [0.0, 0.0, -0.0, -0.0, INF, -INF, INF, -INF, 0.0, 0.0, -0.0, -0.0, 1.0, INF, 1.0, NAN, -1e30]
    y = torch.cat([torch.randn(500) * 10, torch.tensor(edges_y)])
    x = torch.cat([torch.randn(500) * 10, torch.tensor(edges_x)])
    check(torch.atan2, y, x)
    check(lambda a: torch.atan2(a, torch.tensor(-2.0, device=a.device)), y)  # a broadcast operand
    check(torch.atan2, y.bfloat16(), x.bfloat16(), rtol=1.6e-2, atol=1e-2)


def test_frac_logaddexp_and_the_sign_functions():
    x = spread(7)
    check(torch.frac, x, **EXACT)
    check(torch.copysign, x, -x.flip(0), **EXACT)
    check(torch.signbit, x, **EXACT)
    check(torch.heaviside, x, torch.full_like(x, 0.5), **EXACT)
    check(torch.logical_xor, x > 0, x < 1, **EXACT)
    a = torch.cat([torch.randn(500) * 10, torch.tensor([INF, -INF, INF, NAN, 0.0, 80.0])])
    b = torch.cat([torch.randn(500) * 10, torch.tensor([INF, -INF, -INF, 1.0, -INF, -80.0])])
    check(torch.logaddexp, a, b)


def test_the_unary_ops_out_forms_stay_on_the_chip():
    x = torch.randn(7, 5)
    for f in (torch.neg, torch.abs, torch.exp, torch.tanh, torch.sigmoid, torch.sin, torch.atan, torch.erfinv):
        check(lambda t, f=f: f(t.tanh(), out=torch.empty_like(t)), x)
