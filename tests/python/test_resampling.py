"""Resampling on the npu (nearest, linear, bilinear, bicubic and trilinear upsampling, reflection and
replication padding in 1, 2 and 3 dims, adaptive average pooling of any sizes, grid_sample) and their gradients, against the CPU in f32 and bf16, with no CPU fallback.

Index maps (nearest, padding) move values: exactly the CPU's. Bilinear's and bicubic's weights and every
gradient are f32 sums in another order than the CPU's: f32 within torch.testing's defaults,
bf16 within rtol 1.6e-2 / atol 1e-2 (test_opinfo.py's), the sums rounded once where the CPU's bf16
padding gradients round after every add.
"""
import pytest
import torch
import torch.nn.functional as F

import npusim  # noqa: F401
from test_model_ops import NPU, check_forward_and_backward, launched

UPSAMPLINGS = [
    dict(scale_factor=2),
    dict(scale_factor=3),
    dict(scale_factor=(2, 1)),
    dict(size=(7, 10)),  # not a whole factor: gathers forward, matmuls backward
    dict(scale_factor=1.7),
    dict(size=(4, 3)),  # downsampling
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("kwargs", UPSAMPLINGS, ids=[str(k) for k in UPSAMPLINGS])
def test_nearest_upsampling_and_its_gradient_run_on_the_chip(kwargs, dtype):
    torch.manual_seed(2)
    x = torch.randn(2, 3, 5, 6)
    check_forward_and_backward(lambda t: F.interpolate(t, **kwargs), x, dtype)
    # The forward only moves values: exactly the CPU's.
    assert torch.equal(F.interpolate(x.to(dtype).to(NPU), **kwargs).cpu(), F.interpolate(x.to(dtype), **kwargs))


def test_a_whole_factor_upsampling_is_one_copy_kernel():
    x = torch.randn(2, 4, 8, 8).to(NPU)
    before = dict(npusim.kernel_stats())
    F.interpolate(x, scale_factor=2)
    assert launched(before) == {"copy": 1}



RESAMPLINGS = {
    "bilinear 2x": lambda t: F.interpolate(t, scale_factor=2, mode="bilinear"),
    "bilinear align_corners": lambda t: F.interpolate(t, size=(9, 4), mode="bilinear", align_corners=True),
    "bilinear down": lambda t: F.interpolate(t, size=(3, 4), mode="bilinear"),
    "bilinear 1.7": lambda t: F.interpolate(t, scale_factor=1.7, mode="bilinear"),
    "bicubic 2x": lambda t: F.interpolate(t, scale_factor=2, mode="bicubic"),
    "bicubic align_corners": lambda t: F.interpolate(t, size=(9, 4), mode="bicubic", align_corners=True),
    "bicubic down": lambda t: F.interpolate(t, size=(3, 4), mode="bicubic"),  # taps clamped at both edges
    "bicubic 1.7": lambda t: F.interpolate(t, scale_factor=1.7, mode="bicubic"),
    "reflect 2-D": lambda t: F.pad(t, (2, 1, 3, 4), mode="reflect"),
    "replicate 2-D": lambda t: F.pad(t, (2, 1, 0, 4), mode="replicate"),
    "reflect 1-D": lambda t: F.pad(t.flatten(2), (3, 2), mode="reflect"),
    "replicate 1-D": lambda t: F.pad(t.flatten(2), (0, 5), mode="replicate"),
    "reflect unbatched": lambda t: F.pad(t[0], (1, 1, 1, 1), mode="reflect"),
    "reflect 3-D": lambda t: F.pad(t.view(2, 3, 5, 2, 3), (1, 1, 1, 0, 2, 1), mode="reflect"),
    "replicate 3-D unbatched": lambda t: F.pad(t.view(2, 3, 5, 2, 3)[1], (2, 0, 1, 3, 0, 2), mode="replicate"),
    # 1-D and 3-D: the same maps on the last dim, or on H and W and then D
    "linear 1-D": lambda t: F.interpolate(t.flatten(2), size=47, mode="linear"),
    "linear 1-D align_corners": lambda t: F.interpolate(t.flatten(2), scale_factor=1.5, mode="linear", align_corners=True),
    "nearest 1-D": lambda t: F.interpolate(t.flatten(2), size=47),
    "trilinear": lambda t: F.interpolate(t.view(2, 3, 5, 2, 3), scale_factor=(1.5, 2, 1), mode="trilinear"),
    "trilinear align_corners down": lambda t: F.interpolate(t.view(2, 3, 5, 2, 3), size=(3, 3, 2), mode="trilinear", align_corners=True),
    "nearest 3-D": lambda t: F.interpolate(t.view(2, 3, 5, 2, 3), size=(7, 3, 4)),
    # adaptive average pooling of sizes that do not divide: averaging matrices
    "adaptive avg 2-D": lambda t: F.adaptive_avg_pool2d(t, (4, 4)),
    "adaptive avg 1-D": lambda t: F.adaptive_avg_pool1d(t.flatten(2), 7),
    "adaptive avg 3-D": lambda t: F.adaptive_avg_pool3d(t.view(2, 3, 5, 2, 3), (3, 2, 2)),
    "adaptive avg unbatched": lambda t: F.adaptive_avg_pool2d(t[0], (3, 4)),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", list(RESAMPLINGS))
def test_bilinear_upsampling_and_padding_run_on_the_chip(name, dtype):
    torch.manual_seed(4)
    f = RESAMPLINGS[name]
    if "3-D" in name and dtype == torch.bfloat16 and ("reflect" in name or "replicate" in name):
        # The CPU adds bf16 padding gradients in bf16, rounding at every add (up to 8 at a 3-D corner):
        # the chip's f32 sums, rounded once, are held to the f32 gradient rounded to bf16 instead.
        x = torch.randn(2, 3, 5, 6)
        grad = torch.randn(f(x).shape).bfloat16()
        x_npu = x.bfloat16().to(NPU).requires_grad_()
        f(x_npu).backward(grad.to(NPU))
        x_f32 = x.bfloat16().float().requires_grad_()
        f(x_f32).backward(grad.float())
        assert torch.equal(x_npu.grad.cpu(), x_f32.grad.bfloat16())
    else:
        check_forward_and_backward(f, torch.randn(2, 3, 5, 6), dtype)
    if any(word in name for word in ("pad", "reflect", "replicate", "nearest")):  # an index map: exact
        x = torch.randn(2, 3, 5, 6).to(dtype)
        assert torch.equal(f(x.to(NPU)).cpu(), f(x))


def test_a_padding_the_cpu_refuses_is_refused_with_its_error():
    with pytest.raises(RuntimeError, match="Padding size should be less than"):
        F.pad(torch.randn(1, 2, 3, 3).to(NPU), (3, 3, 0, 0), mode="reflect")


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_and_its_gradients_run_on_the_chip(mode, padding_mode, align_corners):
    torch.manual_seed(5)
    x = torch.randn(2, 3, 6, 7)
    grid = torch.rand(2, 5, 4, 2) * 2.6 - 1.3  # some points outside the image
    grid[1, 0, 1] = torch.tensor([1.0, -1.0])  # a corner exactly
    if padding_mode == "zeros":
        grid[0, 0, 0] = torch.tensor([float("nan"), 0.3])  # outside, as ATen maps it (its CPU backward crashes on NaN with border)
    x_cpu, grid_cpu = x.clone().requires_grad_(), grid.clone().requires_grad_()
    x_npu, grid_npu = x.to(NPU).requires_grad_(), grid.to(NPU).requires_grad_()
    before = dict(npusim.fallback_stats())
    y_npu = F.grid_sample(x_npu, grid_npu, mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    y_cpu = F.grid_sample(x_cpu, grid_cpu, mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    grad = torch.randn(y_cpu.shape)
    y_npu.backward(grad.to(NPU))
    y_cpu.backward(grad)
    assert {k: v for k, v in npusim.fallback_stats().items() if v != before.get(k, 0)} == {}
    torch.testing.assert_close(y_npu.detach().cpu(), y_cpu.detach(), equal_nan=True)
    torch.testing.assert_close(x_npu.grad.cpu(), x_cpu.grad)
    torch.testing.assert_close(grid_npu.grad.cpu(), grid_cpu.grad, equal_nan=True)
