"""The gamma family on the chip (torch_bridge/csrc/composites/gamma_functions.cpp): lgamma, digamma and
polygamma(1, x), against the CPU over wide ranges and at their edges (poles, zeros of both signs,
infinities, NaN, values next to negative integers and near the functions' own zeros), with their
gradients, and with no CPU fallback.

Tolerance: f32 as torch.testing's defaults (rtol 1.3e-6, atol 1e-5): near the functions' zeros the
shifted series cancel, and lgamma is within 5.3e-6 absolute there (half the tolerance); bf16 rtol 1.6e-2 and atol
1e-2 (test_model_ops.py says why).
"""
import pytest
import torch

import npusim  # noqa: F401

NPU = torch.device("npu")
INF, NAN = float("inf"), float("nan")


def fallbacks_since(before):
    return {name: n - before.get(name, 0) for name, n in npusim.fallback_stats().items() if n != before.get(name, 0)}


def check(f, x, **tolerance):
    before = dict(npusim.fallback_stats())
    actual = f(x.to(NPU)).cpu()
    assert fallbacks_since(before) == {}
    torch.testing.assert_close(actual, f(x), **({"equal_nan": True} | tolerance))


def domain(seed):
    """Random values near zero and far out, both signs; the poles and the values next to them; the
    functions' zeros (lgamma: 1, 2 and between negative integers; digamma: 1.4616...); IEEE edges."""
    g = torch.Generator().manual_seed(seed)
    integers = torch.arange(-6.0, 12.0)
    near_poles = torch.cat([integers + 1e-3, integers - 1e-3, integers + 0.5, -torch.logspace(-6, -1, 20)])
    return torch.cat([torch.randn(2000, generator=g) * 5, torch.rand(500, generator=g) * 40, torch.logspace(-30, 30, 120),
                      -torch.logspace(-3, 6, 60), integers, near_poles, torch.linspace(0.9, 2.1, 121), torch.linspace(1.4, 1.5, 101),
                      torch.tensor([0.0, -0.0, INF, -INF, NAN, 1e-38, 9.999, 10.0, 7.999, 8.0, -2.457024, -2.747682, 1e10, -1e10])])


FUNCTIONS = {
    "lgamma": torch.lgamma,
    "digamma": torch.digamma,
    "trigamma": lambda x: torch.polygamma(1, x),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_gamma_functions_match_the_cpu_over_their_domains(name):
    f = FUNCTIONS[name]
    x = domain(1)
    if name == "trigamma":  # the CPU's own float trigamma takes sin(pi x) unreduced: it is noise far from zero
        x = x[x.isnan() | (x.abs() < 1e4)]
    check(f, x)
    check(f, x.bfloat16(), rtol=1.6e-2, atol=1e-2)


def test_the_poles_and_infinities_are_the_cpus():
    x = torch.tensor([0.0, -0.0, -1.0, -2.0, -7.0, -1e9, INF, -INF, NAN])
    for f in FUNCTIONS.values():
        check(f, x, rtol=0, atol=0)


@pytest.mark.parametrize("name", ["lgamma", "digamma"])
def test_gamma_functions_have_the_cpus_gradients(name):
    f = FUNCTIONS[name]
    x = domain(2)
    x = x[torch.isfinite(x) & (x.abs() < 100) & ((x - x.round()).abs() > 1e-2)][:800]  # away from the poles
    x_cpu, x_npu = x.clone().requires_grad_(), x.to(NPU).requires_grad_()
    before = dict(npusim.fallback_stats())
    f(x_npu).sum().backward()  # lgamma's gradient is digamma, digamma's is polygamma(1, x)
    assert fallbacks_since(before) == {}
    f(x_cpu).sum().backward()
    torch.testing.assert_close(x_npu.grad.cpu(), x_cpu.grad, rtol=1e-5, atol=1e-5)


def test_forms_and_composites_stay_on_the_chip():
    x = torch.rand(6, 7) * 10 + 0.1
    check(lambda t: torch.lgamma(t, out=torch.empty_like(t)), x)
    check(lambda t: t.clone().digamma_(), x)
    check(lambda t: t.clone().polygamma_(1), x)
    check(lambda t: torch.polygamma(0, t), x)
    check(lambda t: torch.mvlgamma(t + 2, p=3), x)  # sums of lgamma
    # Log-probabilities add and subtract lgammas of up to 100 into results near 10: rtol 1e-5.
    D = torch.distributions
    for log_prob in (lambda t: D.Gamma(t, 2.0).log_prob(t + 1),
                     lambda t: D.Beta(t, t + 1).log_prob(torch.sigmoid(t)),
                     lambda t: D.Dirichlet(t).log_prob(t / t.sum(-1, keepdim=True)),
                     lambda t: D.StudentT(t + 2).log_prob(t - 3),
                     lambda t: D.Poisson(t).log_prob(torch.floor(t)),
                     lambda t: D.Binomial(12, probs=torch.sigmoid(t)).log_prob(torch.floor(t))):
        check(log_prob, x, rtol=1e-5, atol=1e-5)
    # Higher orders (the Hurwitz zeta function) run on the CPU, counted.
    before = dict(npusim.fallback_stats())
    torch.testing.assert_close(torch.polygamma(2, x.to(NPU)).cpu(), torch.polygamma(2, x))
    assert fallbacks_since(before) == {"aten::polygamma": 1}
