"""fmod, remainder (%), floor_divide (//) and div(rounding_mode="floor") of floats on the npu, bit-exact
with the CPU (torch_bridge/csrc/aten/integer_division.cpp: an exact fmod from Dekker's product, then ATen's
formulas on it), at the IEEE edges too (signed zeros, infinities, NaN, a zero divisor), in f32 and bf16;
values whose quotient reaches 2^22 go to the CPU, counted with that reason. Integer fmod (the truncating
remainder) too.
"""
import pytest
import torch

import npusim  # noqa: F401

NPU = torch.device("npu")
INF, NAN = float("inf"), float("nan")


def fallbacks_since(before):
    return {name: n - before.get(name, 0) for name, n in npusim.fallback_stats().items() if n != before.get(name, 0)}


def identical(got, want):
    """Equal bit for bit, NaN where NaN (of any payload), the sign of zeros included."""
    assert got.dtype == want.dtype and got.shape == want.shape
    nan = want.isnan()
    assert torch.equal(got.isnan(), nan)
    assert torch.equal(got[~nan], want[~nan]) and torch.equal(torch.signbit(got[~nan]), torch.signbit(want[~nan]))


def operands(seed):
    g = torch.Generator().manual_seed(seed)
    a = torch.cat([torch.randn(3000, generator=g) * 100, torch.randn(1000, generator=g) * 1e-3,
                   torch.tensor([0.0, -0.0, 5.0, -5.0, 7.5, -7.5, INF, -INF, NAN, 1.0, 3.0, 1e30, 3.0, 0.1, -0.1, 2.5, 6.0, -6.0])])
    b = torch.cat([torch.randn(3000, generator=g) * 3, torch.randn(1000, generator=g) * 1e-4,
                   torch.tensor([3.0, 3.0, -3.0, 2.5, 2.5, -2.5, 2.0, 1.0, 1.0, 0.0, INF, 1e30, -0.0, 0.3, 0.3, -0.5, 3.0, -3.0])])
    return a, b


OPS = {
    "fmod": torch.fmod,
    "remainder": torch.remainder,
    "floor_divide": torch.floor_divide,
    "div floor": lambda x, y: torch.div(x, y, rounding_mode="floor"),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", list(OPS))
def test_float_division_is_bit_exact(name, dtype):
    a, b = (t.to(dtype) for t in operands(1))
    before = dict(npusim.fallback_stats())
    got = OPS[name](a.to(NPU), b.to(NPU)).cpu()
    moderate = a[:4000]  # (1e30 / 0.3 would reach 2^22: the CPU's)
    by_number = OPS[name](moderate.to(NPU), 0.3).cpu()  # a Python number divisor
    assert fallbacks_since(before) == {}
    identical(got, OPS[name](a, b))
    identical(by_number, OPS[name](moderate, 0.3))


def test_integer_fmod_truncates():
    g = torch.Generator().manual_seed(2)
    a = torch.randint(-50, 50, (200,), generator=g, dtype=torch.int32)
    b = torch.randint(1, 9, (200,), generator=g, dtype=torch.int32) * (torch.randint(0, 2, (200,), generator=g, dtype=torch.int32) * 2 - 1)
    before = dict(npusim.fallback_stats())
    for x, y in ((a, b), (a.long(), b.long()), (a.to(torch.int8), b.to(torch.int8))):
        got = torch.fmod(x.to(NPU), y.to(NPU)).cpu()
        assert got.dtype == x.dtype and torch.equal(got, torch.fmod(x, y))
    assert fallbacks_since(before) == {}


def test_quotients_beyond_the_exact_range_go_to_the_cpu_with_their_reason():
    before = dict(npusim.fallback_stats())
    got = torch.fmod(torch.tensor([1e10, 5.0]).to(NPU), torch.tensor([3.0, 3.0]).to(NPU)).cpu()
    assert fallbacks_since(before) == {"aten::fmod.Tensor": 1}
    identical(got, torch.fmod(torch.tensor([1e10, 5.0]), torch.tensor([3.0, 3.0])))
