"""Complex tensors and FFTs on the chip (torch_bridge/csrc/aten/complex_ops.cpp): complex64 as pairs of f32,
the elementwise ops that have a complex form (add, sub, mul, neg, abs; polar, angle,
conj_physical) on those pairs, view_as_real /
view_as_complex as views, and torch.fft's transforms as DFT matmuls on the tensor cores; each against the
CPU with no CPU fallback.

Tolerances: a DFT of length n sums n products in f32 on the chip where pocketfft sums log n stages: the
results agree to 1e-4 relative to the signal's largest bin (rtol 1e-4, atol 1e-4 times that bin), for
the lengths tested here (up to 400). The elementwise ops: 1e-6 (one or two f32 roundings).
"""
import warnings

import pytest
import torch

import npusim

NPU = "npu"


@pytest.fixture(autouse=True)
def _quiet():
    warnings.simplefilter("ignore")


def fallbacks_since(before):
    return {name: n - before.get(name, 0) for name, n in npusim.fallback_stats().items() if n != before.get(name, 0)}


def close(got, want, scale_atol=1e-4):
    got = got.cpu()
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    largest = want.abs().max().item() if want.numel() else 0.0
    torch.testing.assert_close(got, want, rtol=1e-4, atol=scale_atol * max(largest, 1.0))


TRANSFORMS = [
    ("rfft", lambda t, n: torch.fft.rfft(t, norm=n)),
    ("rfft dim 0", lambda t, n: torch.fft.rfft(t, dim=0, norm=n)),
    ("irfft", lambda t, n: torch.fft.irfft(torch.fft.rfft(t), norm=n)),
    ("irfft odd n", lambda t, n: torch.fft.irfft(torch.fft.rfft(t), n=t.shape[-1] | 1, norm=n)),
    ("fft of a real signal", lambda t, n: torch.fft.fft(t, norm=n)),
    ("ifft", lambda t, n: torch.fft.ifft(torch.fft.fft(t), norm=n)),
    ("fft2", lambda t, n: torch.fft.fft2(t, norm=n)),
    ("rfft2", lambda t, n: torch.fft.rfft2(t, norm=n)),
    ("irfft2", lambda t, n: torch.fft.irfft2(torch.fft.rfft2(t), s=t.shape[-2:], norm=n)),
    ("fftn dims (0, 2)", lambda t, n: torch.fft.fftn(t.unsqueeze(1).expand(-1, 2, -1), dim=(0, 2), norm=n)),
    ("hfft", lambda t, n: torch.fft.hfft(torch.fft.rfft(t), norm=n)),
]


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
@pytest.mark.parametrize("name,f", TRANSFORMS, ids=[t[0] for t in TRANSFORMS])
@pytest.mark.parametrize("shape", [(6, 16), (5, 45)], ids=["even", "odd"])
def test_ffts_run_on_the_chip_and_match_the_cpu(name, f, norm, shape):
    torch.manual_seed(0)
    x = torch.randn(shape)
    before = dict(npusim.fallback_stats())
    got = f(x.to(NPU), norm)
    assert fallbacks_since(before) == {}
    close(got, f(x, norm))


def test_a_spectrogram_and_a_frequency_domain_filter_run_on_the_chip():
    """torch.stft's magnitudes (frames, a window, rfft, abs) and a filter applied as a complex product in
    the frequency domain and transformed back (GFNet's global filter, FNet's token mixing)."""
    torch.manual_seed(0)
    signal, tokens = torch.randn(2, 400), torch.randn(3, 32, 24)
    weight = torch.randn(17, 24, dtype=torch.complex64)
    window = torch.hann_window(64)

    def spectrogram(s, w):
        return torch.stft(s, 64, hop_length=16, window=w, return_complex=True).abs().pow(2)

    def global_filter(x, w):
        return torch.fft.irfft(torch.fft.rfft(x, dim=1) * w, n=x.shape[1], dim=1)

    def fnet(x):
        return torch.fft.fft(torch.fft.fft(x, dim=-1), dim=-2).real

    before = dict(npusim.fallback_stats())
    got = [spectrogram(signal.to(NPU), window.to(NPU)), global_filter(tokens.to(NPU), weight.to(NPU)), fnet(tokens.to(NPU))]
    assert fallbacks_since(before) == {}
    close(got[0], spectrogram(signal, window))
    close(got[1], global_filter(tokens, weight))
    close(got[2], fnet(tokens))


def test_complex_elementwise_ops_work_on_the_pairs():
    torch.manual_seed(0)
    a = torch.randn(4, 5, dtype=torch.complex64)
    b = torch.randn(4, 5, dtype=torch.complex64)
    r = torch.randn(5)
    cases = {
        "a + b": lambda a, b, r: a + b,
        "a - b": lambda a, b, r: a - b,
        "a * b": lambda a, b, r: a * b,
        "a * r (real, broadcast)": lambda a, b, r: a * r,
        "r * a": lambda a, b, r: r * a,
        "a + r": lambda a, b, r: a + r,
        "r - a": lambda a, b, r: r - a,
        "a * 2.5": lambda a, b, r: a * 2.5,
        "a * (1 - 2j)": lambda a, b, r: a * (1 - 2j),
        "a + 1j": lambda a, b, r: a + 1j,
        "-a": lambda a, b, r: -a,
        "|a|": lambda a, b, r: a.abs(),
        "a.real, a.imag": lambda a, b, r: torch.stack([a.real, a.imag]),
        "view_as_complex(view_as_real(a) * 2)": lambda a, b, r: torch.view_as_complex(torch.view_as_real(a) * 2),
        "r.to(complex64)": lambda a, b, r: r.to(torch.complex64),
        "a.t().contiguous()": lambda a, b, r: a.t().contiguous(),
        "a.conj() * b (a lazy conjugate resolved)": lambda a, b, r: a.conj() * b,
        "conj_physical(a)": lambda a, b, r: torch.conj_physical(a),
        "angle(a)": lambda a, b, r: a.angle(),
        "polar(|r|, r)": lambda a, b, r: torch.polar(r.abs(), r),
        "a += b": lambda a, b, r: a.clone().add_(b),
        "a / b": lambda a, b, r: a / b,
        "a / r (real divisor)": lambda a, b, r: a / r,
        "r / a (real dividend)": lambda a, b, r: r / a,
        "a / (3 - 4j)": lambda a, b, r: a / (3 - 4j),
        "a / (b * 1e30) (no overflow: Smith's method)": lambda a, b, r: a / (b * 1e30),
    }
    for name, f in cases.items():
        before = dict(npusim.fallback_stats())
        got = f(a.to(NPU), b.to(NPU), r.to(NPU))
        assert fallbacks_since(before) == {}, name
        want = f(a, b, r)
        assert got.dtype == want.dtype and got.shape == want.shape, name
        torch.testing.assert_close(got.cpu(), want, rtol=1e-6, atol=1e-6, msg=name)


def test_view_as_real_is_a_view_of_the_same_storage():
    z = torch.randn(3, 4, dtype=torch.complex64).to(NPU)
    pairs = torch.view_as_real(z)
    assert pairs.shape == (3, 4, 2) and pairs.dtype == torch.float32
    assert pairs.untyped_storage().data_ptr() == z.untyped_storage().data_ptr()
    pairs[0, 0, 1] = 7.0  # the imaginary part of z[0, 0]
    assert z[0, 0].cpu().imag.item() == 7.0
    assert torch.view_as_complex(pairs).untyped_storage().data_ptr() == z.untyped_storage().data_ptr()


def test_what_the_chip_does_not_take_runs_on_the_cpu_and_says_why():
    """A signal too long for a DFT matrix of 2^22 elements, and complex128, run on the CPU, counted:
    2047 real samples (a [2047, 2048] matrix) run on the chip, 2048 do not."""
    torch.manual_seed(0)
    longest, long = torch.randn(2, 2047), torch.randn(2, 2048)
    before = dict(npusim.fallback_stats())
    close(torch.fft.rfft(longest.to(NPU)), torch.fft.rfft(longest))
    assert fallbacks_since(before) == {}
    close(torch.fft.rfft(long.to(NPU)), torch.fft.rfft(long))
    assert fallbacks_since(before) == {"aten::_fft_r2c": 1}
    double = torch.randn(8, dtype=torch.float64)
    close(torch.fft.rfft(double.to(NPU)), torch.fft.rfft(double), 1e-10)


def test_gradients_through_an_fft_match_the_cpus():
    torch.manual_seed(0)
    x = torch.randn(4, 32)

    def loss(t):
        spectrum = torch.fft.rfft(t)
        return (spectrum.real ** 2 + spectrum.imag ** 2).sum() + torch.fft.irfft(spectrum * 0.5, n=32).pow(2).sum()

    want_x = x.clone().requires_grad_()
    loss(want_x).backward()
    got_x = x.to(NPU).requires_grad_()
    before = dict(npusim.fallback_stats())
    loss(got_x).backward()
    assert fallbacks_since(before) == {}
    close(got_x.grad, want_x.grad)


def test_a_compiled_graph_with_ffts_runs_on_the_chip():
    torch.manual_seed(0)
    x = torch.randn(2, 16, 8)

    def mix(t):
        return torch.fft.fft2(t).real + t

    compiled = torch.compile(mix, backend="npu")
    before = dict(npusim.fallback_stats())
    got = compiled(x.to(NPU))
    assert fallbacks_since(before) == {}
    close(got, mix(x))


def test_a_rotary_embedding_written_with_complex_numbers_runs_on_the_chip():
    """Meta's Llama reference code rotates queries and keys as complex numbers: torch.polar for the
    frequencies, view_as_complex of pairs, a complex product, view_as_real back; eager and compiled."""
    def frequencies(dim, end, device):
        inverse = 1.0 / (10000.0 ** (torch.arange(0, dim, 2, device=device)[: dim // 2].float() / dim))
        angles = torch.outer(torch.arange(end, device=device), inverse).float()
        return torch.polar(torch.ones_like(angles), angles)

    def rotate(x, freqs):
        pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(pairs * freqs.view(1, pairs.shape[1], 1, pairs.shape[-1])).flatten(3).type_as(x)

    torch.manual_seed(0)
    q = torch.randn(2, 16, 4, 32)
    want = rotate(q, frequencies(32, 16, "cpu"))
    for f in (rotate, torch.compile(rotate, backend="npu")):
        before = dict(npusim.fallback_stats())
        got = f(q.to(NPU), frequencies(32, 16, NPU))
        assert fallbacks_since(before) == {}
        torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
