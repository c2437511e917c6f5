"""Integer arithmetic on the npu, bit-exact against the CPU: bitwise ops and shifts of every
integer dtype the chip stores (v.and, v.or, v.xor, v.shl, v.shr), and int64, which the chip has no
dtype for, on its 32-bit words: products, bitwise ops, comparisons, maxima and minima, elementwise
and reduced (with their indices, as for every integer dtype), negation and abs, conversion from
floats, and sums of every integer dtype into int64. Each at the edges of the words (carries, signs, 2^31, 2^32, -2^63) and on random
values, with no CPU fallback.
"""
import pytest
import torch

import npusim  # noqa: F401

NPU = torch.device("npu")


def fallbacks_since(before):
    return {name: n - before.get(name, 0) for name, n in npusim.fallback_stats().items() if n != before.get(name, 0)}


def launched(before):
    return {name: n - before.get(name, 0) for name, n in npusim.kernel_stats().items() if n != before.get(name, 0)}


def same(got, want):
    assert got.dtype == want.dtype and torch.equal(got.cpu(), want), (got.cpu(), want)


EDGES = torch.tensor([0, 1, -1, 2, 2**16 - 1, 2**16, 2**31 - 1, -2**31, 2**31, -2**31 - 1, 2**32 - 1, 2**32, -2**32, 2**48 + 3,
                      2**62, -2**63, 2**63 - 1, -2**63 + 1, 123456789012345, -98765432109876])


def int64_operands(seed):
    g = torch.Generator().manual_seed(seed)
    a = torch.cat([EDGES, torch.randint(-2**63, 2**63 - 1, (300,), generator=g), torch.randint(-1000, 1000, (100,), generator=g)])
    b = torch.cat([EDGES.flip(0), torch.randint(-2**63, 2**63 - 1, (300,), generator=g), torch.randint(-1000, 1000, (100,), generator=g)])
    return a, b


INT64_BINARY = {
    "mul": torch.mul,
    "bitwise_and": torch.bitwise_and,
    "bitwise_or": torch.bitwise_or,
    "bitwise_xor": torch.bitwise_xor,
    "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
}


@pytest.mark.parametrize("name", INT64_BINARY)
def test_int64_binary_ops_are_exact_on_the_words(name):
    f = INT64_BINARY[name]
    a, b = int64_operands(1)
    an, bn = a.to(NPU), b.to(NPU)
    before = dict(npusim.fallback_stats())
    same(f(an, bn), f(a, b))
    same(f(an, an), f(a, a))  # equal operands: ties in every word
    same(f(an[:20].view(-1, 1), bn[:7]), f(a[:20].view(-1, 1), b[:7]))  # broadcast
    same(f(an, torch.tensor(2**33 + 5)), f(a, torch.tensor(2**33 + 5)))  # a 0-dim CPU operand
    assert fallbacks_since(before) == {}


def test_int64_multiplication_wraps_as_the_cpus_and_is_one_chain_for_its_high_word():
    a, b = int64_operands(2)
    an = a.to(NPU)
    before = dict(npusim.kernel_stats())
    same(an * 3, a * 3)
    # The low word's product, the high word's chain, the two words written.
    assert launched(before) == {"mul": 1, "elementwise_chain": 1, "copy": 2}
    same(an * -(2**40), a * -(2**40))
    same(an * an, a * a)


def test_int64_bitwise_not_and_reductions():
    a, _ = int64_operands(3)
    an = a.to(NPU)
    before = dict(npusim.fallback_stats())
    same(~an, ~a)
    same(an.max(), a.max())
    same(an.min(), a.min())
    m = a[:400].view(20, 20)
    mn = m.to(NPU)
    for dims, keepdim in [(1, False), (0, True), ((0, 1), False), (-1, True)]:
        same(mn.amax(dims, keepdim), m.amax(dims, keepdim))
        same(mn.amin(dims, keepdim), m.amin(dims, keepdim))
    # Elements equal in their high words: the low words (as unsigned) decide.
    close = torch.tensor([2**32 + 5, 2**32 + 2**31, 2**32 - 1, -2**32 + 7, 2**32 + 2**31 + 1])
    same(close.to(NPU).max(), close.max())
    same(close.to(NPU).min(), close.min())
    same(torch.tensor(-7).to(NPU).max(), torch.tensor(-7))  # 0-dim
    assert fallbacks_since(before) == {}


def test_int64_negation_abs_and_the_indices_of_integer_extrema():
    a, _ = int64_operands(4)
    an = a.to(NPU)
    before = dict(npusim.fallback_stats())
    same(-an, -a)  # -(-2^63) wraps to itself, as on the CPU
    same(an.abs(), a.abs())
    same(torch.neg(an[:5], out=torch.empty(5, dtype=torch.long, device=NPU)), -a[:5])
    g = torch.Generator().manual_seed(5)
    for dtype in (torch.int64, torch.int32, torch.int8, torch.uint8):
        m = torch.randint(0, 9, (6, 11), generator=g).to(dtype)  # ties: the first position, as the CPU's
        m[2] = 4
        if dtype == torch.int64:
            m[3] = torch.tensor([2**40, -2**40, 2**40 + 1, 5, 2**40 + 1, 0, 0, 0, 0, 0, 0])
        mn = m.to(NPU)
        for dim, keepdim in [(1, False), (0, True), (-1, True)]:
            for got, want in ((mn.max(dim, keepdim), m.max(dim, keepdim)), (mn.min(dim, keepdim), m.min(dim, keepdim))):
                same(got.values, want.values)
                same(got.indices, want.indices)
        same(mn.argmax(-1), m.argmax(-1))  # (CLIP's text model finds its end token so)
        same(mn.argmin(0), m.argmin(0))
    assert fallbacks_since(before) == {}


@pytest.mark.parametrize("dtype,high", [(torch.int64, 2**62), (torch.int64, 2**40), (torch.int64, 2**20), (torch.int32, 2**30),
                                        (torch.int32, 5), (torch.int8, 100), (torch.uint8, 250)])
def test_integer_sorts_are_stable_and_exact(dtype, high):
    g = torch.Generator().manual_seed(high % 1000)
    x = torch.randint(0 if dtype == torch.uint8 else -high, high, (5, 37), generator=g).to(dtype)
    x[0, :10] = x[0, 0]  # ties keep their order
    xn = x.to(NPU)
    before = dict(npusim.fallback_stats())
    for dim, descending in [(1, False), (0, True), (-1, True)]:
        got, want = xn.sort(dim=dim, descending=descending), x.sort(dim=dim, descending=descending, stable=True)
        same(got.values, want.values)
        same(got.indices, want.indices)
    same(torch.argsort(torch.argsort(xn, dim=1), dim=1), torch.argsort(torch.argsort(x, dim=1, stable=True), dim=1, stable=True))
    assert fallbacks_since(before) == {}


def test_integer_histc_cumsum_and_sign():
    g = torch.Generator().manual_seed(7)
    experts = torch.randint(0, 8, (300,), generator=g)
    before = dict(npusim.fallback_stats())
    for dtype in (torch.int32, torch.int64, torch.uint8):  # a mixture of experts' tokens per expert (CUDA's integer histc)
        same(torch.histc(experts.to(dtype).to(NPU), bins=8, min=0, max=7), torch.bincount(experts, minlength=8).to(dtype))
    # CUDA's bins: (x - min) * bins / (max - min) truncated, the last edge in the last bin, outside values dropped
    same(torch.histc(torch.tensor([1, 2, 2, 9, -3, 5, 6], dtype=torch.int32).to(NPU), bins=4, min=0, max=6),
         torch.tensor([1, 2, 0, 2], dtype=torch.int32))
    counts = torch.randint(-2**40, 2**40, (3, 70), generator=g)
    for values, dtype in [(counts, None), (counts, torch.int32), (counts.int(), None), (experts.view(3, 100), torch.int32)]:
        same(values.to(NPU).cumsum(-1, dtype=dtype), values.cumsum(-1, dtype=dtype))
    for values in (counts, counts.int(), counts.to(torch.int8), counts.to(torch.uint8)):
        same(values.to(NPU).sign(), values.sign())
    assert fallbacks_since(before) == {}


def test_floats_convert_to_int64_truncating_as_the_cpu():
    g = torch.Generator().manual_seed(6)
    edges = [0.0, -0.0, 0.5, -0.5, 1.9999, -1.9999, 2.0**31, -2.0**31, 2.0**31 - 128, -2.0**31 - 256, 2.0**32, -2.0**32,
             2.0**62, -2.0**62, -2.0**63, 3e9, -3e9]
    x = torch.cat([torch.randn(500, generator=g) * 1e3, torch.randn(500, generator=g) * 1e12, torch.tensor(edges)])
    before = dict(npusim.fallback_stats())
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        v = x.to(dtype)
        v = v[v.isfinite()]
        same(v.to(NPU).long(), v.long())
    # (T5's relative position buckets: log-spaced float positions made int64)
    positions = torch.arange(-40, 41).view(1, -1) - torch.arange(0, 30).view(-1, 1)
    buckets = lambda p: (torch.log(p.abs().float().clamp_min(1) / 8) / 2.77 * 8).to(torch.long) + p.abs() * 0  # noqa: E731
    same(buckets(positions.to(NPU)), buckets(positions))
    assert fallbacks_since(before) == {}


def test_integer_sums_into_int64_are_exact_and_wrap_as_the_cpus():
    a, _ = int64_operands(4)
    g = torch.Generator().manual_seed(4)
    before = dict(npusim.fallback_stats())
    same(a.to(NPU).sum(), a.sum())  # random values near 2^63: the sum wraps modulo 2^64
    m = a[:400].view(20, 20)
    for dims, keepdim in [(1, False), (0, True), ((0, 1), False), (-1, True)]:
        same(m.to(NPU).sum(dims, keepdim), m.sum(dims, keepdim))
    # Rows longer than one chunk of the i32 partial sums (4096), one of them not a multiple of it.
    long_rows = torch.randint(-2**63, 2**63 - 1, (3, 10001), generator=g)
    same(long_rows.to(NPU).sum(-1), long_rows.sum(-1))
    all_ones_low = torch.full((5000,), 2**32 - 1)  # every low word 0xffffffff: the 16-bit halves' sums carry
    same(all_ones_low.to(NPU).sum(), all_ones_low.sum())
    for dtype, low, high in [(torch.int32, -2**31, 2**31 - 1), (torch.int8, -128, 127), (torch.uint8, 0, 255)]:
        x = torch.randint(low, high, (6, 700), dtype=dtype, generator=g)
        same(x.to(NPU).sum(1), x.sum(1))
        same(x.to(NPU).sum(), x.sum())
    same(torch.zeros(3, 0, dtype=torch.long).to(NPU).sum(1), torch.zeros(3, dtype=torch.long))
    assert fallbacks_since(before) == {}


@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.int8, torch.int32])
def test_int64_with_a_narrower_integer_operand_widens_it_on_the_chip(dtype):
    # generate()'s `unfinished_sequences & ~stopped` and `tokens * unfinished`: int64 against bools.
    a, _ = int64_operands(6)
    flags = (torch.arange(a.numel()) % 3 == 0).to(dtype)
    an, fn = a.to(NPU), flags.to(NPU)
    before = dict(npusim.fallback_stats())
    same(an & fn, a & flags)
    same(fn * an, flags * a)
    same(an + fn, a + flags)
    same(torch.maximum(an, fn), torch.maximum(a, flags))
    assert fallbacks_since(before) == {}


INTEGER_DTYPES = {torch.int32: (-2**31, 2**31), torch.int8: (-128, 128), torch.uint8: (0, 256)}


@pytest.mark.parametrize("dtype", list(INTEGER_DTYPES))
def test_bitwise_ops_and_shifts_of_every_integer_dtype(dtype):
    low, high = INTEGER_DTYPES[dtype]
    g = torch.Generator().manual_seed(4)
    x = torch.randint(low, high, (9, 37), generator=g).to(dtype)
    y = torch.randint(low, high, (9, 37), generator=g).to(dtype)
    # Shift counts below 0 and at or past the width: every bit shifted out (the sign, for a signed >>).
    counts = torch.randint(0 if dtype == torch.uint8 else -3, 40, (9, 37), generator=g).to(dtype)
    xn, yn, cn = x.to(NPU), y.to(NPU), counts.to(NPU)
    before = dict(npusim.fallback_stats())
    same(xn & yn, x & y)
    same(xn | yn, x | y)
    same(xn ^ yn, x ^ y)
    same(~xn, ~x)
    same(xn << cn, x << counts)
    same(xn >> cn, x >> counts)
    same(xn << 3, x << 3)
    same(xn >> 3, x >> 3)
    same(xn & 0x5A, x & 0x5A)
    same(xn[:, :1] ^ yn, x[:, :1] ^ y)  # column broadcast
    same(torch.bitwise_left_shift(xn, cn[0]), torch.bitwise_left_shift(x, counts[0]))  # row broadcast
    out = torch.empty_like(xn)
    torch.bitwise_xor(xn, yn, out=out)
    same(out, x ^ y)
    assert fallbacks_since(before) == {}


def test_bool_logic_and_allclose_stay_on_the_chip():
    g = torch.Generator().manual_seed(5)
    p, q = torch.rand(6, 7, generator=g) > 0.5, torch.rand(6, 7, generator=g) > 0.5
    pn, qn = p.to(NPU), q.to(NPU)
    before = dict(npusim.fallback_stats())
    same(pn ^ qn, p ^ q)
    same(pn & qn[0], p & q[0])
    same(pn | qn, p | q)
    same(~pn, ~p)
    x = torch.randn(6, 7, generator=g)
    assert torch.allclose(x.to(NPU), (x + 1e-9).to(NPU)) and not torch.allclose(x.to(NPU), (x + 1).to(NPU))
    assert fallbacks_since(before) == {}


def test_bitwise_ops_of_floats_raise_the_cpus_error():
    x = torch.randn(3)
    with pytest.raises(RuntimeError) as on_cpu:
        x & x
    with pytest.raises(RuntimeError) as on_npu:
        x.to(NPU) & x.to(NPU)
    assert str(on_npu.value) == str(on_cpu.value)


DIVISIONS = {
    "floor_divide": torch.floor_divide,
    "remainder": torch.remainder,
    "trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "true": torch.div,
}


def division_operands(dtype, seed):
    g = torch.Generator().manual_seed(seed)
    low, high = {torch.int32: (-2**31 + 1, 2**31), torch.int8: (-127, 128), torch.uint8: (0, 256), torch.int64: (-2**31 + 1, 2**31)}[dtype]
    a = torch.randint(low, high, (11, 29), generator=g).to(dtype)
    b = torch.randint(max(low, -40), min(high, 40), (11, 29), generator=g).to(dtype)
    b[b == 0] = 7 if dtype == torch.uint8 else -3
    # Dividends that divide exactly, and both signs against both signs.
    a[0, :8] = torch.tensor([6, -6, 6, -6, 7, -7, 7, -7] if dtype != torch.uint8 else [6, 6, 7, 7, 0, 1, 255, 254]).to(dtype)
    b[0, :8] = torch.tensor([3, 3, -3, -3, 2, 2, -2, -2] if dtype != torch.uint8 else [3, 2, 2, 7, 5, 255, 2, 255]).to(dtype)
    return a, b


@pytest.mark.parametrize("name", DIVISIONS)
@pytest.mark.parametrize("dtype", [torch.int32, torch.int8, torch.uint8, torch.int64])
def test_integer_division_rounds_as_the_cpu(name, dtype):
    f = DIVISIONS[name]
    a, b = division_operands(dtype, 7)
    an, bn = a.to(NPU), b.to(NPU)
    before = dict(npusim.fallback_stats())
    if name == "true":
        torch.testing.assert_close(f(an, bn).cpu(), f(a, b), rtol=0, atol=0)  # int to float, then one f32 division, as the CPU
    else:
        same(f(an, bn), f(a, b))
        same(f(an, 5), f(a, 5))  # a Python divisor
        same(f(an, bn[0]), f(a, b[0]))  # broadcast
    assert fallbacks_since(before) == {}


def test_int64_division_beyond_32_bits_goes_to_the_cpu_with_its_reason():
    a = torch.tensor([2**40 + 3, 17, -2**31])
    b = torch.tensor([7, 5, -1])
    before = dict(npusim.fallback_stats())
    same(a.to(NPU) // b.to(NPU), a // b)
    same(a[2:].to(NPU) // b[2:].to(NPU), a[2:] // b[2:])  # -2^31 // -1 does not fit 32 bits
    assert fallbacks_since(before) == {"aten::floor_divide": 2}
    before = dict(npusim.fallback_stats())
    same(a[1:2].to(NPU) % b[1:2].to(NPU), a[1:2] % b[1:2])
    assert fallbacks_since(before) == {}


def test_integer_division_by_zero_faults_and_the_device_keeps_working():
    # (The CPU raises ZeroDivisionError; the device reports an execution error at the instruction,
    # with the chip's reason, read through the FAULT_MESSAGE registers.)
    with pytest.raises(RuntimeError, match="execution error .* `v.div i32.*: integer division by zero"):
        (torch.tensor([1, 2], device=NPU) // torch.tensor([1, 0], device=NPU)).cpu()
    same(torch.tensor([9], device=NPU) // 2, torch.tensor([4]))


def test_python_numbers_promote_as_on_the_cpu():
    # A Python number keeps an integer tensor's dtype: int32 ** 3 wraps in int32, clamp of ints stays int, and an
    # int32 compared with a number beyond f32's 24 bits compares exactly.
    x = torch.tensor([3, -7, 1290, 2**31 - 1, 16777217], dtype=torch.int32)
    same(x.to(NPU) ** 3, x ** 3)
    same(x.to(NPU).clamp(min=-5, max=2000), x.clamp(min=-5, max=2000))
    same(x.to(NPU) == 16777217, x == 16777217)
    same(x.to(NPU) > 16777216, x > 16777216)
    root = (x.to(NPU) ** 0.5).cpu()  # a float exponent: float, as on the CPU
    assert root.dtype == torch.float32
    torch.testing.assert_close(root, x ** 0.5, equal_nan=True)
