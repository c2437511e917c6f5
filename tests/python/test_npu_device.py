"""The "npu" PyTorch device end to end: tensors on the simulated chip, ops
through the compiler and the driver, checked against the CPU.

Tolerances: f32 elementwise arithmetic is exact (one IEEE operation per
element on both sides); transcendentals and softmax within
torch.testing.assert_close's f32 defaults; bf16 matmul within bf16's
defaults (rtol 1.6e-2, atol 1e-5) scaled by sqrt(K) for the summation, since
the chip accumulates in f32 in a different order than the CPU.
"""
import math
import os
import subprocess
import sys
import warnings

import pytest
import torch
import torch.nn.functional as F

import npusim

NPU = torch.device("npu")


def test_the_device_is_registered():
    assert torch.npu.is_available() and torch.npu.device_count() == 1
    x = torch.ones(3).npu()
    assert x.device == torch.device("npu:0") and x.is_npu
    assert torch.npu.current_device() == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.int64, torch.uint8, torch.bool])
def test_copies_round_trip_every_dtype(dtype):
    x = (torch.randn(37, 29) * 100).to(dtype)
    assert torch.equal(x.to(NPU).cpu(), x)


def test_views_and_non_contiguous_copies():
    x = torch.randn(12, 20)
    xn = x.to(NPU)
    assert torch.equal(xn.t().cpu(), x.t())                 # a strided view read back
    assert torch.equal(xn[2:9, 3:17:2].cpu(), x[2:9, 3:17:2])
    assert torch.equal(xn.view(4, 60).cpu(), x.view(4, 60))
    y = torch.zeros(20, 12).to(NPU)
    y.copy_(xn.t())                                          # device to device, strided source
    assert torch.equal(y.cpu(), x.t())
    z = torch.empty(20, 12, device=NPU)
    z.copy_(x.t())                                           # host to device, strided source
    assert torch.equal(z.cpu(), x.t())
    assert xn[3, 4].item() == x[3, 4].item()


def test_elementwise_ops_match_the_cpu():
    a, b = torch.randn(33, 70), torch.randn(70)
    an, bn = a.to(NPU), b.to(NPU)
    for op in (torch.add, torch.sub, torch.mul, torch.div, torch.maximum, torch.minimum):
        assert torch.equal(op(an, bn).cpu(), op(a, b)), op
    assert torch.equal((an * 2.5 + 1).cpu(), a * 2.5 + 1)   # Python scalars
    assert torch.equal((an > bn).cpu(), a > b)
    assert torch.equal(torch.relu(an).cpu(), torch.relu(a))
    for op in (torch.exp, torch.tanh, torch.sigmoid, F.silu, F.gelu):
        torch.testing.assert_close(op(an).cpu(), op(a), msg=str(op))
    torch.testing.assert_close(F.gelu(an, approximate="tanh").cpu(), F.gelu(a, approximate="tanh"))
    c = torch.randn(16, 16, dtype=torch.bfloat16)
    torch.testing.assert_close((c.to(NPU) + c.to(NPU)).cpu(), c + c)
    # In place and out=, with alpha (the optimizers' updates): on the chip, no fallback.
    before = dict(npusim.fallback_stats())
    an.add_(bn, alpha=-0.5)
    a.add_(b, alpha=-0.5)
    assert torch.equal(an.cpu(), a)
    out = torch.empty(33, 70, device=NPU)
    torch.mul(an, bn, out=out)
    assert torch.equal(out.cpu(), a * b)
    assert npusim.fallback_stats() == before


def bf16_close(actual, expected, k):
    torch.testing.assert_close(actual.float(), expected.float(), rtol=1.6e-2 * math.sqrt(k), atol=1e-5 * k)


def test_matmul_family_in_bf16():
    a, b = torch.randn(50, 64, dtype=torch.bfloat16), torch.randn(64, 40, dtype=torch.bfloat16)
    bf16_close((a.to(NPU) @ b.to(NPU)).cpu(), (a.float() @ b.float()).bfloat16(), 64)
    w, bias = torch.randn(40, 64, dtype=torch.bfloat16), torch.randn(40, dtype=torch.bfloat16)
    bf16_close(F.linear(a.to(NPU), w.to(NPU), bias.to(NPU)).cpu(), F.linear(a.float(), w.float(), bias.float()).bfloat16(), 64)
    x, y = torch.randn(3, 20, 30, dtype=torch.bfloat16), torch.randn(3, 30, 10, dtype=torch.bfloat16)
    bf16_close(torch.bmm(x.to(NPU), y.to(NPU)).cpu(), torch.bmm(x.float(), y.float()).bfloat16(), 30)
    # Large enough that the compiler has the cores share B's tiles over the NoC (on base; docs/compiler.md):
    # f32 sums rounded once to bf16, so within half a bf16 ulp of the f32 product plus the f32 sums' error.
    a, b = torch.randn(1024, 1024, dtype=torch.bfloat16), torch.randn(1024, 1024, dtype=torch.bfloat16)
    torch.testing.assert_close((a.to(NPU) @ b.to(NPU)).cpu().float(), a.float() @ b.float(), rtol=2.0**-8, atol=0.05)
    bias = torch.randn(1024, dtype=torch.bfloat16)  # a linear layer: the bias joins the shared schedule
    torch.testing.assert_close(F.linear(a.to(NPU), b.to(NPU), bias.to(NPU)).cpu().float(), F.linear(a.float(), b.float(), bias.float()),
                               rtol=2.0**-8, atol=0.05)


def test_the_matmul_schedule_is_chosen_by_an_environment_variable(monkeypatch):
    # NPUSIM_MATMUL_SCHEDULE (docs/torch.md): the same values in either schedule, the device time of each
    # its own (base, 1024^3: B shared over the NoC is about 12% faster), and a clear error for a bad value.
    a, b = torch.randn(1024, 1024, dtype=torch.bfloat16), torch.randn(1024, 1024, dtype=torch.bfloat16)
    an, bn = a.to(NPU), b.to(NPU)
    expected = a.float() @ b.float()
    device_ms = {}
    for schedule in ("own-tiles", "shared-b", "shared-b-streamed-a", "auto"):
        monkeypatch.setenv("NPUSIM_MATMUL_SCHEDULE", schedule)
        start, done = torch.Event(device="npu", enable_timing=True), torch.Event(device="npu", enable_timing=True)
        start.record()
        product = an @ bn
        done.record()
        torch.npu.synchronize()
        device_ms[schedule] = start.elapsed_time(done)
        torch.testing.assert_close(product.cpu().float(), expected, rtol=2.0**-8, atol=0.05)
    assert device_ms["shared-b"] < 0.95 * device_ms["own-tiles"]
    monkeypatch.setenv("NPUSIM_MATMUL_SCHEDULE", "fastest")
    with pytest.raises(RuntimeError, match="NPUSIM_MATMUL_SCHEDULE is auto, own-tiles, shared-b, shared-b-streamed-a or shared-ab"):
        an @ bn


def test_softmax_and_reductions():
    x = torch.randn(24, 300)
    xn = x.to(NPU)
    torch.testing.assert_close(torch.softmax(xn, -1).cpu(), torch.softmax(x, -1))
    torch.testing.assert_close(torch.log_softmax(xn, -1).cpu(), torch.log_softmax(x, -1))
    torch.testing.assert_close(xn.sum(-1).cpu(), x.sum(-1), rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(xn.mean(-1, keepdim=True).cpu(), x.mean(-1, keepdim=True))
    assert torch.equal(xn.amax(-1).cpu(), x.amax(-1))
    torch.testing.assert_close(xn.sum().cpu(), x.sum(), rtol=1e-5, atol=1e-3)
    # Other dims are moved last as strided views: still on the chip.
    before = dict(npusim.fallback_stats())
    torch.testing.assert_close(xn.sum(0).cpu(), x.sum(0), rtol=1e-5, atol=1e-5)
    assert torch.equal(xn.amin(0, keepdim=True).cpu(), x.amin(0, keepdim=True))
    torch.testing.assert_close(torch.softmax(xn, 0).cpu(), torch.softmax(x, 0))
    y = torch.randn(3, 5, 7)
    torch.testing.assert_close(y.to(NPU).mean(0).cpu(), y.mean(0))
    assert npusim.fallback_stats() == before
    # A middle dim leaves two dims that do not merge into rows: copied dense on the chip first.
    torch.testing.assert_close(y.to(NPU).mean(1).cpu(), y.mean(1))
    # Several dims, trailing or not, with and without keepdim.
    torch.testing.assert_close(y.to(NPU).sum((0, 2)).cpu(), y.sum((0, 2)))
    torch.testing.assert_close(y.to(NPU).amax((1, 2), keepdim=True).cpu(), y.amax((1, 2), keepdim=True))
    assert npusim.fallback_stats() == before


def test_long_rows_and_whole_tensor_reductions_stay_on_the_chip():
    torch.manual_seed(0)
    before = dict(npusim.fallback_stats())
    # 600,000 f32 per row (2.4 MB): longer than a core's scratchpad, so walked in chunks, once per statistic.
    x = torch.randn(2, 600_000)
    xn = x.to(NPU)
    torch.testing.assert_close(torch.softmax(xn, -1).cpu(), torch.softmax(x, -1))
    torch.testing.assert_close(torch.log_softmax(xn, -1).cpu(), torch.log_softmax(x, -1))
    torch.testing.assert_close(F.layer_norm(xn, (600_000,)).cpu(), F.layer_norm(x, (600_000,)), rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(xn.sum(-1).cpu(), x.sum(-1), rtol=1e-5, atol=1e-2)
    assert torch.equal(xn.amax(-1).cpu(), x.amax(-1))
    comparisons = npusim.kernel_stats().get("eq", 0)
    assert torch.equal(torch.argmax(xn, -1).cpu(), torch.argmax(x, -1))  # the argmax kernel, in chunks
    assert npusim.kernel_stats().get("eq", 0) == comparisons  # (not the composition: no comparison with the maximum)
    # A whole tensor: cut into rows for every core, their results (in f32) reduced by one more launch.
    big = torch.randn(1 << 20)
    bign = big.to(NPU)
    torch.testing.assert_close(bign.sum().cpu(), big.sum(), rtol=1e-5, atol=1e-2)
    torch.testing.assert_close(bign.mean().cpu(), big.mean(), rtol=1e-5, atol=1e-7)
    assert torch.equal(bign.amin().cpu(), big.amin())
    half = big.bfloat16()
    torch.testing.assert_close(half.to(NPU).sum().cpu(), half.sum())  # f32 partial sums, rounded once
    # A sum of bf16 may stay in f32, as on the CPU.
    wide = half.to(NPU).sum(dtype=torch.float32)
    assert wide.dtype == torch.float32
    torch.testing.assert_close(wide.cpu(), half.float().sum(), rtol=1e-5, atol=1e-2)
    rows = half.view(64, -1)
    torch.testing.assert_close(rows.to(NPU).mean(-1, dtype=torch.float32).cpu(), rows.float().mean(-1), rtol=1e-5, atol=1e-6)
    assert npusim.fallback_stats() == before


def test_a_small_mlp_runs_on_the_chip():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 10)).to(torch.bfloat16)
    x = torch.randn(32, 64, dtype=torch.bfloat16)
    expected = model.float()(x.float())
    before = npusim.kernel_stats().get("matmul", 0)
    actual = model.to(torch.bfloat16).to(NPU)(x.to(NPU)).cpu()
    assert npusim.kernel_stats()["matmul"] == before + 2  # both Linear layers on the tensor core
    torch.testing.assert_close(actual.float(), expected, rtol=0.05, atol=0.05)


def test_ops_without_a_kernel_fall_back_to_the_cpu_and_are_counted():
    x = torch.randn(10, 10)
    result = torch.i0(x.to(NPU))  # (no npu kernel for i0, the Bessel function)
    assert result.device.type == "npu"
    torch.testing.assert_close(result.cpu(), torch.i0(x))
    assert any(op.startswith("aten::i0") for op in npusim.fallback_stats())


@pytest.mark.parametrize("precision, max_relative_error", [("highest", 2e-6), ("high", 6e-5), ("medium", 2e-2)])
def test_f32_matmul_follows_the_float32_matmul_precision(precision, max_relative_error):
    """base's tensor core takes no f32: f32 products are bf16 parts of the operands
    (6, 3 or 1 products), as torch.set_float32_matmul_precision asks."""
    torch.manual_seed(1)
    a, b = torch.randn(33, 200), torch.randn(200, 17)
    exact = a.double() @ b.double()
    before_kernels, before_fallbacks = npusim.kernel_stats().get("matmul", 0), dict(npusim.fallback_stats())
    saved = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(precision)
    try:
        got = (a.to(NPU) @ b.to(NPU)).cpu().double()
    finally:
        torch.set_float32_matmul_precision(saved)
    assert npusim.kernel_stats()["matmul"] == before_kernels + 1 and npusim.fallback_stats() == before_fallbacks
    error = ((got - exact).abs().max() / exact.abs().max()).item()
    assert error <= max_relative_error
    if precision == "medium":
        assert error > 1e-4  # really bf16 inputs: the precision setting reached the chip


def test_memory_statistics_are_exact():
    torch.npu.synchronize()
    before = torch.npu.memory_allocated()
    x = torch.empty(1000, 1000, device=NPU)  # 4,000,000 bytes: a multiple of the 64-byte granule
    assert torch.npu.memory_allocated() == before + 4_000_000
    del x
    assert torch.npu.memory_allocated() == before


def test_out_of_device_memory_is_torch_out_of_memory():
    with pytest.raises(torch.OutOfMemoryError, match="out of device memory: requested"):
        torch.empty(1 << 40, dtype=torch.uint8, device=NPU)
    assert torch.ones(4, device="cpu").to(NPU).sum().item() == 4  # the device keeps working


def run_python(code, **env):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, **env}, timeout=300)


def test_autoload_and_its_switch():
    ok = run_python("import torch; print(torch.ones(2).to('npu').cpu().tolist())")
    assert ok.returncode == 0 and "[1.0, 1.0]" in ok.stdout, ok.stderr
    off = run_python("import torch; torch.ones(2).to('npu')", TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert off.returncode != 0


def test_strict_mode_names_the_op_and_init_picks_the_config():
    strict = run_python("import torch, npusim; torch.i0(torch.ones(3).to('npu'))", NPUSIM_STRICT="1")
    assert strict.returncode != 0 and "aten::i0" in strict.stderr
    tiny = run_python("import npusim, torch; npusim.init('tiny'); torch.ones(1).to('npu'); print(npusim._C.num_cores())")
    assert tiny.returncode == 0 and tiny.stdout.strip() == "1", tiny.stderr


@pytest.mark.parametrize("optimizer", [torch.optim.SGD, torch.optim.Adam])
@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_a_small_model_trains_like_on_the_cpu(optimizer, kind):
    """20 training steps of an f32 MLP and of a small CNN (convolutions with
    stride and padding, batch norm in training mode, max and adaptive average
    pooling), with cross-entropy. Everything runs on the chip (f32 matmuls as
    bf16 parts on base), the loss, its gradient and Adam's updates included,
    and batch norm's int64 batch counter (num_batches_tracked += 1, on the
    int64's 32-bit words)."""
    torch.manual_seed(0)
    if kind == "mlp":
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
        x = torch.randn(64, 16)
    else:
        model = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                    torch.nn.Conv2d(4, 8, 3, stride=2, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                                    torch.nn.Flatten(), torch.nn.Linear(8, 4))
        x = torch.randn(16, 1, 8, 8)
    y = torch.randint(0, 4, (x.shape[0],))

    def train(m, device):
        opt = optimizer(m.parameters(), lr=0.01)
        xs, ys = x.to(device), y.to(device)
        losses = []
        for _ in range(20):
            opt.zero_grad()
            loss = F.cross_entropy(m(xs), ys)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses

    import copy

    cpu_losses = train(copy.deepcopy(model), "cpu")
    before = dict(npusim.fallback_stats())
    npu_losses = train(copy.deepcopy(model).to(NPU), NPU)
    fell_back = {op for op, n in npusim.fallback_stats().items() if n != before.get(op, 0)}
    assert fell_back == set(), fell_back
    assert npu_losses[-1] < npu_losses[0]
    torch.testing.assert_close(torch.tensor(npu_losses), torch.tensor(cpu_losses), rtol=1e-5, atol=1e-5)


def test_autocast_runs_f32_layers_in_bf16_on_the_tensor_core():
    torch.manual_seed(0)
    layer = torch.nn.Linear(64, 32)
    x = torch.randn(16, 64)
    # Autocast rounds the operands to bf16 first: the reference does too, then multiplies in f32.
    rounded = [t.detach().bfloat16().float() for t in (x, layer.weight, layer.bias)]
    expected = F.linear(*rounded)
    before = dict(npusim.fallback_stats())
    with torch.autocast("npu", dtype=torch.bfloat16):
        y = layer.to(NPU)(x.to(NPU))
    assert y.dtype == torch.bfloat16
    assert npusim.fallback_stats() == before  # the casts and the product ran on the chip
    bf16_close(y.cpu(), expected.bfloat16(), 64)


def test_a_trace_of_the_chip_and_the_driver_is_written(tmp_path):
    path = tmp_path / "run.pftrace"
    run = run_python("import torch; torch.relu(torch.ones(64).to('npu')).cpu()", NPUSIM_TRACE=str(path))
    assert run.returncode == 0, run.stderr
    data = path.read_bytes()
    # Perfetto protobuf: the track names are stored as plain strings.
    for name in (b"host (driver)", b"command processor", b"queue 0 submissions", b"core 0", b"vector unit"):
        assert name in data, name


def test_streams_are_command_queues_and_events_time_them():
    s1, s2 = torch.Stream(device="npu"), torch.Stream(device="npu")
    assert len({0, s1.stream_id, s2.stream_id}) == 3  # the default stream is queue 0
    a = torch.randn(128, 128, dtype=torch.bfloat16)
    an = a.to(NPU)
    default = torch.accelerator.current_stream()
    try:
        torch.accelerator.set_stream(s1)
        start, done = torch.Event(device="npu", enable_timing=True), torch.Event(device="npu", enable_timing=True)
        start.record(s1)
        product = an @ an
        done.record(s1)
        torch.accelerator.set_stream(s2)
        s2.wait_event(done)  # queue 2 waits on the device for queue 1's product
        shifted = product + 1
    finally:
        torch.accelerator.set_stream(default)
    torch.npu.synchronize()
    assert done.query() and s1.query() and s2.query()
    assert start.elapsed_time(done) > 0  # device time, in milliseconds
    bf16_close(shifted.cpu(), ((a.float() @ a.float()).bfloat16().float() + 1).bfloat16(), 128)


def test_elementwise_results_are_laid_out_as_the_cpu_lays_them_out():
    # Compiled graphs view results with the strides PyTorch gives them: a permuted input gives a permuted result.
    x = torch.randn(2, 3, 4).permute(2, 0, 1)
    for op in (lambda t: t * 2, torch.exp, lambda t: t + t, lambda t: F.gelu(t)):
        expected, got = op(x), op(x.to("npu"))
        assert got.stride() == expected.stride()
        torch.testing.assert_close(got.cpu(), expected)


def test_npu_tensors_save_and_load(tmp_path):
    model = torch.nn.Linear(4, 3).to("npu")
    x = torch.randn(5, 4).to("npu")
    torch.save({"x": x, "model": model.state_dict()}, tmp_path / "saved.pt")
    loaded = torch.load(tmp_path / "saved.pt")
    assert loaded["x"].device.type == "npu" and torch.equal(loaded["x"].cpu(), x.cpu())
    assert loaded["model"]["weight"].device.type == "npu"
    on_cpu = torch.load(tmp_path / "saved.pt", map_location="cpu")
    assert on_cpu["x"].device.type == "cpu" and torch.equal(on_cpu["x"], x.cpu())
    restored = torch.nn.Linear(4, 3).to("npu")
    restored.load_state_dict(loaded["model"])
    torch.testing.assert_close(restored(x).cpu(), model(x).cpu())


def test_the_memory_functions_of_torch_npu():
    torch.npu.synchronize()
    free, total = torch.npu.mem_get_info()
    assert 0 < free <= total
    before = torch.npu.memory_allocated()
    assert torch.npu.memory_reserved() == before  # no caching allocator
    x = torch.empty(1 << 20, dtype=torch.uint8, device="npu")
    assert torch.npu.memory_stats()["allocated_bytes.all.current"] == before + (1 << 20)
    assert torch.npu.mem_get_info()[0] <= free - (1 << 20)
    del x
    torch.npu.reset_peak_memory_stats()
    assert torch.npu.max_memory_allocated() == torch.npu.memory_allocated() == before
    torch.npu.empty_cache()
    with torch.npu.device(0):
        assert torch.npu.current_device() == 0


def test_empty_cache_frees_the_programs_loaded_for_many_shapes():
    # Every distinct shape loads a program on the device; empty_cache frees them, and they load again on use.
    torch.npu.empty_cache()
    base = torch.npu.memory_allocated()
    x = torch.randn(64)
    for n in range(1, 41):
        assert torch.equal((x[:n].to(NPU) * 3).cpu(), x[:n] * 3)
    grown = torch.npu.memory_allocated() - base
    assert grown > 0  # 40 programs loaded
    torch.npu.empty_cache()
    assert torch.npu.memory_allocated() == base
    assert torch.equal((x[:7].to(NPU) * 3).cpu(), x[:7] * 3)  # loads again


def test_copies_of_any_view_and_of_int64_stay_on_the_chip():
    # More than three dims that do not merge: a copy per slice of the first dim. int64 and f64,
    # which the chip has no dtype for, are copied as pairs of 32-bit words.
    before = dict(npusim.fallback_stats())
    q = torch.randn(2, 3, 4, 5, 6).permute(0, 3, 1, 4, 2)
    assert torch.equal(q.to("npu").contiguous().cpu(), q.contiguous())
    assert torch.equal(q.to("npu").cpu(), q)
    big = torch.arange(24, dtype=torch.long).reshape(2, 3, 4) * (1 << 40)
    assert torch.equal(big.to("npu").transpose(0, 2).contiguous().cpu(), big.transpose(0, 2).contiguous())
    wide = torch.randn(5, 3, dtype=torch.float64)
    assert torch.equal(wide.to("npu").t().contiguous().cpu(), wide.t().contiguous())
    assert npusim.fallback_stats() == before


def test_where_and_embeddings_run_on_the_chip():
    before = dict(npusim.fallback_stats())
    x = torch.randn(4, 5)
    mask = x > 0
    assert torch.equal(torch.where(mask.to("npu"), x.to("npu"), float("-inf")).cpu(), torch.where(mask, x, float("-inf")))
    assert torch.equal(torch.where(mask[:1].to("npu"), 0.0, x.to("npu")).cpu(), torch.where(mask[:1], 0.0, x))
    table, ids = torch.randn(50, 8), torch.randint(0, 50, (3, 4))
    assert torch.equal(F.embedding(ids.to("npu"), table.to("npu")).cpu(), F.embedding(ids, table))
    x_grad = x.clone().requires_grad_()
    torch.relu(x_grad).backward(torch.ones(4, 5))
    x_npu = x.to("npu").requires_grad_()
    torch.relu(x_npu).backward(torch.ones(4, 5).to("npu"))  # threshold_backward: a comparison and a select
    assert torch.equal(x_npu.grad.cpu(), x_grad.grad)
    positions, picks = torch.arange(10).unsqueeze(0) * 7, torch.tensor([[3, 1, 4, 1, 5, 9]])
    assert torch.equal(positions.to("npu").gather(1, picks.to("npu")).cpu(), positions.gather(1, picks))
    assert npusim.fallback_stats() == before


@pytest.mark.parametrize("name", ["relu", "sigmoid", "tanh", "exp", "neg", "abs", "sqrt", "silu", "sin", "erf"])
def test_in_place_unary_ops_run_on_the_chip_with_the_out_of_place_bits(name):
    """nn.ReLU(inplace=True) and friends: the kernel writes where it read, also through a strided view."""
    before = npusim.fallback_stats()
    x = torch.randn(6, 10).abs().to(NPU) if name == "sqrt" else torch.randn(6, 10).to(NPU)
    op = getattr(torch.nn.functional, name) if name == "silu" else getattr(torch, name)
    expected = op(x)
    y = x.clone()
    if name == "silu":
        torch.nn.functional.silu(y, inplace=True)
    else:
        getattr(y, name + "_")()
    assert torch.equal(y.cpu(), expected.cpu())
    z = x.clone()
    view = z[:, ::3]  # strided: every third column
    getattr(view, name + "_")() if name != "silu" else torch.nn.functional.silu(view, inplace=True)
    assert torch.equal(z[:, ::3].cpu(), expected[:, ::3].cpu())
    assert torch.equal(z[:, 1::3].cpu(), x[:, 1::3].cpu())  # the other columns untouched
    assert npusim.fallback_stats() == before


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_gather_and_index_select_along_any_dim_run_on_the_chip(dtype):
    torch.manual_seed(7)
    before = dict(npusim.fallback_stats())
    x = (torch.randn(4, 7, 5) * 100).to(dtype)
    xn = x.to(NPU)
    for dim in (0, 1, 2, -1):
        index = torch.randint(0, x.size(dim), (6,))
        assert torch.equal(torch.index_select(xn, dim, index.to(NPU)).cpu(), torch.index_select(x, dim, index))
        shape = list(x.shape)
        shape[dim] = 9
        shape[0] = min(shape[0], 3) if dim % 3 != 0 else shape[0]  # smaller than x along another dim
        picks = torch.randint(0, x.size(dim), shape)
        assert torch.equal(torch.gather(xn, dim, picks.to(NPU)).cpu(), torch.gather(x, dim, picks))
    # A strided x (a transpose) and int32 indices.
    picks = torch.randint(0, 4, (5, 2), dtype=torch.int32)
    assert torch.equal(torch.gather(xn[:, 0].t(), 1, picks.to(NPU)).cpu(), torch.gather(x[:, 0].t(), 1, picks.long()))
    # Log-probabilities of chosen tokens, as a fine-tuning loss picks them.
    if dtype == torch.float32:
        logits, tokens = torch.randn(3, 8, 50), torch.randint(0, 50, (3, 8, 1))
        picked = torch.log_softmax(logits.to(NPU), -1).gather(-1, tokens.to(NPU)).cpu()
        torch.testing.assert_close(picked, torch.log_softmax(logits, -1).gather(-1, tokens))
    assert npusim.fallback_stats() == before


@pytest.mark.parametrize("dtype, tolerance", [(torch.float32, {"rtol": 1e-6, "atol": 1e-6}), (torch.bfloat16, {"rtol": 1.6e-2, "atol": 1e-2})])
def test_scatter_add_and_index_add_run_on_the_chip(dtype, tolerance):
    torch.manual_seed(8)
    before = dict(npusim.fallback_stats())
    x, src = torch.randn(4, 6, 5).to(dtype), torch.randn(8, 9, 8).to(dtype)  # src: larger than the index everywhere
    for dim in (0, 1, 2):
        shape = list(x.shape)
        shape[dim] = 7  # more picks than the dim has: indices repeat
        index = torch.randint(0, x.size(dim), shape)
        expected = x.float().scatter_add(dim, index, src.float()).to(dtype)
        torch.testing.assert_close(x.to(NPU).scatter_add(dim, index.to(NPU), src.to(NPU)).cpu(), expected, **tolerance)
        picks = torch.tensor([0, 2, 2, 1, 0])
        source = torch.randn(*[5 if k == dim else n for k, n in enumerate(x.shape)]).to(dtype)
        expected = x.float().index_add(dim, picks, source.float(), alpha=0.5).to(dtype)
        torch.testing.assert_close(x.to(NPU).index_add(dim, picks.to(NPU), source.to(NPU), alpha=0.5).cpu(), expected, **tolerance)
    # gather's backward is a scatter-add: log-probabilities of chosen tokens, differentiated.
    logits, tokens = torch.randn(3, 8, 50).to(dtype), torch.randint(0, 50, (3, 8, 1))
    on_chip = logits.to(NPU).requires_grad_()
    torch.log_softmax(on_chip.float(), -1).gather(-1, tokens.to(NPU)).sum().backward()
    on_cpu = logits.clone().requires_grad_()
    torch.log_softmax(on_cpu.float(), -1).gather(-1, tokens).sum().backward()
    torch.testing.assert_close(on_chip.grad.cpu(), on_cpu.grad, **tolerance)
    assert npusim.fallback_stats() == before
    with pytest.raises(IndexError, match="index out of range"):
        x.to(NPU).scatter_add(0, torch.full((1, 6, 5), 4).to(NPU), src.to(NPU))


def test_an_index_out_of_range_along_a_dim_is_refused_as_on_the_cpu():
    x = torch.randn(3, 4).to(NPU)
    for bad in (torch.tensor([0, 4]), torch.tensor([-1, 0])):
        with pytest.raises(IndexError, match="index out of range"):
            torch.index_select(x, 1, bad.to(NPU))
        with pytest.raises(IndexError, match="index out of range"):
            torch.gather(x, 1, bad.view(1, 2).to(NPU))
    torch.testing.assert_close((x * 2).cpu(), x.cpu() * 2)


def test_an_index_outside_the_table_faults_the_device_which_keeps_working():
    table = torch.randn(5, 4).to("npu")
    with pytest.raises(RuntimeError, match="v.gather"):
        F.embedding(torch.tensor([1, 5]).to("npu"), table).cpu()
    torch.testing.assert_close((table * 2).cpu(), table.cpu() * 2)


def test_tied_weights_stay_tied_when_a_module_moves():
    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = torch.nn.Embedding(10, 4)
            self.head = torch.nn.Linear(4, 10, bias=False)
            self.head.weight = self.embedding.weight

    for move in (lambda m: m.to("npu"), lambda m: m.npu(), lambda m: m.to("npu").cpu()):
        model = move(Tied())
        assert model.head.weight is model.embedding.weight


def test_mixing_devices_is_an_error_not_a_crash():
    weight, x = torch.randn(3, 4).to("npu"), torch.randn(2, 4)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        F.linear(x, weight)
    torch.testing.assert_close(F.linear(x.to("npu"), weight).cpu(), F.linear(x, weight.cpu()))
    # As on CUDA: a CPU operand is an error (never moved to the device silently), except a 0-dim CPU tensor.
    a, b = torch.randn(3, 4), torch.randn(3, 4).to("npu")
    for op in (lambda: a + b, lambda: b * a, lambda: torch.maximum(a, b), lambda: torch.cat([a, b]),
               lambda: torch.stack([b, a]), lambda: torch.where(b > 0, a, b), lambda: torch.where(a > 0, b, b)):
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
            op()
    scalar = torch.tensor(2.5)
    torch.testing.assert_close((b * scalar).cpu(), b.cpu() * scalar)
    torch.testing.assert_close(torch.where(b > 0, b, scalar).cpu(), torch.where(b.cpu() > 0, b.cpu(), scalar))


def conv_pool_norm_cases():
    F_ = F
    return {
        "conv2d": (lambda x, w: F_.conv2d(x, w, padding=1), [(2, 3, 7, 9), (4, 3, 3, 3)]),
        "conv2d stride dilation groups": (lambda x, w: F_.conv2d(x, w, stride=2, padding=2, dilation=2, groups=2), [(2, 4, 11, 10), (6, 2, 3, 3)]),
        "conv2d 7x7 stride 2": (lambda x, w: F_.conv2d(x, w, stride=2, padding=3), [(1, 3, 17, 15), (4, 3, 7, 7)]),
        "conv2d 3x3 stride 2, 16 channels": (lambda x, w: F_.conv2d(x, w, stride=2, padding=1), [(2, 16, 9, 11), (8, 16, 3, 3)]),
        # Groups of 8 channels: blocks of groups as block-diagonal dense convolutions (bf16), one block and two.
        "conv2d groups of 8 channels": (lambda x, w, b: F_.conv2d(x, w, b, padding=1, groups=4), [(2, 32, 7, 9), (16, 8, 3, 3), (16,)]),
        "conv2d 32 groups in 2 blocks": (lambda x, w: F_.conv2d(x, w, stride=(1, 2), padding=1, groups=32), [(1, 256, 5, 6), (64, 8, 3, 3)]),
        "conv2d channels_last 3x3": (lambda x, w: F_.conv2d(x.contiguous(memory_format=torch.channels_last), w, padding=1),
                                     [(2, 6, 7, 5), (4, 6, 3, 3)]),
        "conv2d channels_last 1x1": (lambda x, w: F_.conv2d(x.contiguous(memory_format=torch.channels_last), w), [(2, 6, 7, 5), (4, 6, 1, 1)]),
        "conv2d depthwise with bias": (lambda x, w, b: F_.conv2d(x, w, b, padding=1, groups=6), [(3, 6, 7, 5), (6, 1, 3, 3), (6,)]),
        "conv1d": (lambda x, w: F_.conv1d(x, w, stride=2, padding=1), [(2, 3, 13), (5, 3, 4)]),
        "conv_transpose2d": (lambda x, w: F_.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1), [(2, 4, 5, 6), (4, 3, 3, 3)]),
        # Windows that tile the output (stride = kernel): one product per element, then a pixel shuffle.
        "conv_transpose2d 2x2/2": (lambda x, w, b: F_.conv_transpose2d(x, w, b, stride=2), [(2, 6, 5, 7), (6, 4, 2, 2), (4,)]),
        "conv2d patches 2x2/2": (lambda x, w: F_.conv2d(x, w, stride=2), [(2, 3, 8, 6), (5, 3, 2, 2)]),
        "conv3d": (lambda x, w, b: F_.conv3d(x, w, b, stride=(1, 2, 2), padding=1), [(2, 3, 5, 7, 6), (4, 3, 3, 3, 3), (4,)]),
        "conv3d dilation groups": (lambda x, w: F_.conv3d(x, w, stride=2, padding=(2, 0, 1), dilation=(2, 1, 1), groups=2),
                                   [(1, 4, 7, 6, 6), (6, 2, 3, 2, 3)]),
        "conv3d tubelets": (lambda x, w: F_.conv3d(x, w, stride=(2, 4, 4)), [(2, 3, 4, 8, 8), (5, 3, 2, 4, 4)]),  # VideoMAE's patches
        "max_pool2d": (lambda x: F_.max_pool2d(x, 3, 2, 1), [(2, 3, 9, 8)]),
        "max_pool3d": (lambda x: F_.max_pool3d(x, 3, 2, 1), [(2, 3, 7, 9, 8)]),
        "max_pool3d overlapping unbatched": (lambda x: F_.max_pool3d(x, 3, 1, 1), [(3, 5, 6, 6)]),
        "max_pool3d dilation ceil": (lambda x: F_.max_pool3d(x, (2, 3, 3), (1, 2, 2), dilation=(2, 1, 1), ceil_mode=True), [(1, 2, 6, 7, 7)]),
        "max_pool2d ceil dilation": (lambda x: F_.max_pool2d(x, 2, 2, 0, dilation=2, ceil_mode=True), [(1, 2, 9, 8)]),
        "avg_pool2d": (lambda x: F_.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False), [(2, 3, 10, 9)]),
        "adaptive_avg_pool2d": (lambda x: F_.adaptive_avg_pool2d(x, (2, 3)), [(2, 5, 4, 9)]),
        "batch_norm train": (lambda x, w, b: F_.batch_norm(x, None, None, w, b, training=True), [(3, 4, 5, 5), (4,), (4,)]),
        "cross_entropy": (lambda x: F_.cross_entropy(x, torch.tensor([1, 2, 4, 0, 2, 3], device=x.device), ignore_index=2), [(6, 5)]),
        "cross_entropy weighted sum": (lambda x: F_.cross_entropy(x, torch.tensor([1, 2, 4, 0], device=x.device), reduction="sum",
                                                                  weight=torch.linspace(0.5, 1.5, 5, dtype=x.dtype).to(x.device)), [(4, 5)]),
        "softmax": (lambda x: torch.softmax(x, 1), [(3, 7)]),
        "softmax along a strided dim, made dense first": (lambda x: torch.log_softmax(x, 0), [(300, 256)]),
        "group_norm": (lambda x, w, b: F_.group_norm(x, 2, w, b), [(3, 4, 5, 5), (4,), (4,)]),
        "group_norm without affine": (lambda x: F_.group_norm(x, 3, eps=1e-3), [(2, 6, 7)]),
        "rms_norm": (lambda x, w: F_.rms_norm(x, (5,), w, eps=1e-5), [(3, 4, 5), (5,)]),
        "rms_norm over two dims, default eps": (lambda x: F_.rms_norm(x, (4, 5)), [(3, 4, 5)]),
        "var and std": (lambda x: torch.var(x, (0, 2), correction=0) + torch.std(x, 1, keepdim=True).sum((1, 2)).view(3, 1),
                        [(3, 4, 5)]),
        "var_mean and std_mean": (lambda x: sum(torch.var_mean(x, -1, correction=2)) + torch.std_mean(x)[0], [(4, 6)]),
    }


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", list(conv_pool_norm_cases()))
def test_convolution_pooling_norms_and_losses_run_on_the_chip(case, dtype):
    """Forward and every gradient against the CPU, with no CPU fallback."""
    fn, shapes = conv_pool_norm_cases()[case]
    torch.manual_seed(0)
    inputs = [torch.randn(*s, dtype=dtype, requires_grad=True) for s in shapes]
    expected = fn(*inputs)
    grad = torch.randn_like(expected)
    expected.backward(grad)
    on_npu = [t.detach().to(NPU).requires_grad_() for t in inputs]
    before = dict(npusim.fallback_stats())
    got = fn(*on_npu)
    got.backward(grad.to(NPU))
    assert npusim.fallback_stats() == before
    # f32: convolutions multiply bf16 parts (Highest: about f32's precision), the sums round in another order.
    # bf16: one bf16 ulp of the largest value (the CPU rounds some intermediates to bf16, the chip keeps f32).
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=1.6e-2, atol=3e-2)
    torch.testing.assert_close(got.cpu(), expected, **tol)
    for a, b in zip(on_npu, inputs):
        scale = b.grad.abs().max().item()
        torch.testing.assert_close(a.grad.cpu(), b.grad, rtol=tol["rtol"], atol=tol["atol"] * max(1.0, scale))


def test_integer_indexing_int64_to_bool_and_bool_logic_run_on_the_chip():
    torch.manual_seed(3)
    x = torch.randn(4, 5, 3)
    rows, cols = torch.tensor([[0], [3], [-1]]), torch.tensor([[1, -2, 4]])  # broadcast to [3, 3]; negatives wrap
    words = torch.tensor([[0, 1, 1 << 32, -7], [0, 0, 5, 0]])  # the high word alone is nonzero in one
    a, b = torch.rand(3, 4) > 0.5, torch.rand(3, 4) > 0.5
    before = dict(npusim.fallback_stats())
    assert torch.equal(x.to(NPU)[rows.to(NPU), cols.to(NPU)].cpu(), x[rows, cols])
    assert torch.equal(x.to(NPU)[rows.to(NPU).int()].cpu(), x[rows])
    assert torch.equal(words.to(NPU).bool().cpu(), words.bool())
    assert torch.equal(words.to(NPU).int().cpu(), words.int()) and torch.equal(words.int().to(NPU).long().cpu(), words.int().long())
    assert torch.equal((a.to(NPU) & b.to(NPU)).cpu(), a & b) and torch.equal((a.to(NPU) | b.to(NPU)).cpu(), a | b)
    assert npusim.fallback_stats() == before


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_extrema_and_their_indices_run_on_the_chip(dtype):
    torch.manual_seed(4)
    x = torch.randn(5, 9, 4).to(dtype)
    x[2, 3, 1] = x[2, 7, 1] = 9.0  # a tie along dim 1: the first index wins, as on the CPU
    x[0, 0, 0] = x[4, 8, 3] = -9.0
    xn = x.to(NPU)
    before = dict(npusim.fallback_stats())
    for dim in (0, 1, -1):
        for keepdim in (False, True):
            for op in (torch.max, torch.min):
                values, indices = op(xn, dim, keepdim=keepdim)
                expected = op(x, dim, keepdim=keepdim)
                assert torch.equal(values.cpu(), expected.values) and torch.equal(indices.cpu(), expected.indices)
            assert torch.equal(torch.argmax(xn, dim, keepdim).cpu(), torch.argmax(x, dim, keepdim))
            assert torch.equal(torch.argmin(xn, dim, keepdim).cpu(), torch.argmin(x, dim, keepdim))
    assert torch.equal(xn.argmax().cpu(), x.argmax()) and torch.equal(xn.argmin().cpu(), x.argmin())
    assert torch.equal(xn.max().cpu(), x.max()) and torch.equal(xn.min().cpu(), x.min())
    assert npusim.fallback_stats() == before


def test_argmax_and_var_are_one_kernel_each_and_nan_is_the_extreme_as_on_the_cpu():
    torch.manual_seed(6)
    x = torch.randn(6, 300)
    x[1, 17] = x[4, 0] = x[4, 9] = float("nan")
    xn = x.to(NPU)
    before, kernels = dict(npusim.fallback_stats()), dict(npusim.kernel_stats())
    assert torch.equal(torch.argmax(xn, 1).cpu(), torch.argmax(x, 1))
    assert torch.equal(torch.argmin(xn, 1).cpu(), torch.argmin(x, 1))
    values, indices = torch.max(xn, 1)
    expected = torch.max(x, 1)
    assert torch.equal(indices.cpu(), expected.indices)
    torch.testing.assert_close(values.cpu(), expected.values, rtol=0, atol=0, equal_nan=True)
    y = torch.randn(8, 1000) * 3 + 1
    yn = y.to(NPU)
    torch.testing.assert_close(torch.var(yn, 1).cpu(), torch.var(y, 1), rtol=1e-5, atol=1e-6)
    std, mean = torch.std_mean(yn, -1, correction=0, keepdim=True)
    expected_std, expected_mean = torch.std_mean(y, -1, correction=0, keepdim=True)
    torch.testing.assert_close(std.cpu(), expected_std, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(mean.cpu(), expected_mean, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(torch.var(yn.bfloat16(), 0).cpu(), torch.var(y.bfloat16(), 0))
    after = npusim.kernel_stats()
    # (Not the composition the bridge falls back to: a comparison with the extremum, a row minimum of positions.)
    launched = {name: after.get(name, 0) - kernels.get(name, 0) for name in ("argmax", "argmin", "var", "std", "eq", "amin")}
    assert launched == {"argmax": 2, "argmin": 1, "var": 2, "std": 1, "eq": 0, "amin": 0}
    assert npusim.fallback_stats() == before


def test_the_small_ops_of_a_training_loop_run_on_the_chip():
    """Norms, clamps, int64 comparisons, counts and masks: what gradient clipping, label smoothing and an
    accuracy metric call between the model's own ops."""
    torch.manual_seed(9)
    before = dict(npusim.fallback_stats())
    x = torch.randn(7, 33) * 3
    xn = x.to(NPU)
    for ord in (2, 1, float("inf"), float("-inf"), 0, 3.5):
        torch.testing.assert_close(torch.linalg.vector_norm(xn, ord).cpu(), torch.linalg.vector_norm(x, ord), rtol=2e-6, atol=1e-5)
        torch.testing.assert_close(torch.linalg.vector_norm(xn, ord, dim=1, keepdim=True).cpu(),
                                   torch.linalg.vector_norm(x, ord, dim=1, keepdim=True), rtol=2e-6, atol=1e-5)
    torch.testing.assert_close(torch.linalg.vector_norm(xn.bfloat16(), dim=(0, 1)).cpu(), torch.linalg.vector_norm(x.bfloat16()))
    assert torch.equal(torch.clamp(xn, -1.0, 2.0).cpu(), torch.clamp(x, -1.0, 2.0))
    assert torch.equal(xn.clone().clamp_(max=0.5).cpu(), x.clamp(max=0.5))
    labels, guesses = torch.randint(-3, 3, (40,)), torch.randint(-3, 3, (40,))
    labels[5] = guesses[5] = -(2 ** 40) - 7  # beyond the low word
    ln, gn = labels.to(NPU), guesses.to(NPU)
    assert torch.equal((ln == gn).cpu(), labels == guesses) and torch.equal((ln != gn).cpu(), labels != guesses)
    assert torch.equal((ln == -100).cpu(), labels == -100) and torch.equal((ln != 2).cpu(), labels != 2)
    hits = ln == gn
    assert torch.equal(hits.sum().cpu(), (labels == guesses).sum()) and hits.sum().dtype == torch.int64
    assert torch.equal((~hits).cpu(), ~(labels == guesses))
    torch.testing.assert_close((hits.sum() / 40.0).cpu(), (labels == guesses).sum() / 40.0)  # an int64 count divided
    torch.testing.assert_close((torch.tensor([3.0, 5.0]).to(NPU) / hits.sum()).cpu(), torch.tensor([3.0, 5.0]) / (labels == guesses).sum())
    assert torch.equal(labels.to(NPU).float().cpu(), labels.float())
    y = torch.tensor([1.0, float("nan"), float("inf"), -2.0])
    yn = y.to(NPU)
    assert torch.equal(yn.isnan().cpu(), y.isnan())
    assert torch.equal(yn.isnan().logical_or(yn.isinf()).cpu(), y.isnan() | y.isinf())
    assert torch.equal(torch.logical_and(yn, yn > 0).cpu(), torch.logical_and(y, y > 0))
    assert npusim.fallback_stats() == before

    # A training step with them: clip_grad_norm_, label smoothing, AdamW, an accuracy; against the CPU.
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.LayerNorm(128), torch.nn.Linear(128, 10))
    replica = __import__("copy").deepcopy(model).to(NPU)
    data, target = torch.randn(32, 64), torch.randint(0, 10, (32,))
    target[3] = -100  # ignored
    results = []
    for net, device in ((model, "cpu"), (replica, NPU)):
        optimizer = torch.optim.AdamW(net.parameters(), lr=1e-2)
        for _ in range(2):
            loss = F.cross_entropy(net(data.to(device)), target.to(device), label_smoothing=0.1)
            optimizer.zero_grad()
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(net.parameters(), 0.5)
            optimizer.step()
        accuracy = (net(data.to(device)).argmax(-1) == target.to(device)).float().mean()
        results.append((loss.detach().cpu(), norm.cpu(), accuracy.cpu(), [p.detach().cpu() for p in net.parameters()]))
    (loss, norm, accuracy, params), (loss_n, norm_n, accuracy_n, params_n) = results
    torch.testing.assert_close(loss_n, loss, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(norm_n, norm, rtol=1e-4, atol=1e-5)
    assert accuracy_n == accuracy
    for p, p_n in zip(params, params_n):
        torch.testing.assert_close(p_n, p, rtol=1e-4, atol=1e-5)
    assert npusim.fallback_stats() == before


def test_cumsum_runs_on_the_tensor_core():
    torch.manual_seed(10)
    before = dict(npusim.fallback_stats())
    x = torch.randn(5, 300, 3)
    for dim in (0, 1, -1):
        torch.testing.assert_close(torch.cumsum(x.to(NPU), dim).cpu(), torch.cumsum(x, dim), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(torch.cumsum(x.bfloat16().to(NPU), 1).cpu(), torch.cumsum(x.bfloat16(), 1), rtol=1.6e-2, atol=2e-2)
    # Position ids from an attention mask (int64), and a count of flags: exact.
    mask = torch.ones(3, 40, dtype=torch.long)
    mask[1, :7] = 0
    mask[2, 30:] = 0
    assert torch.equal(mask.to(NPU).cumsum(-1).cpu(), mask.cumsum(-1))  # (the "- 1" after it: int64 arithmetic, the CPU)
    flags = torch.rand(6, 100) > 0.5
    assert torch.equal(flags.to(NPU).cumsum(1).cpu(), flags.cumsum(1))
    # Values beyond int8: a scan of integer adds on the chip, not the tensor core, and still the CPU's sums.
    big = torch.tensor([1000, 2, 3, -2**40])
    matmuls = npusim.kernel_stats().get("matmul", 0)
    assert torch.equal(big.to(NPU).cumsum(0).cpu(), big.cumsum(0))
    assert npusim.kernel_stats().get("matmul", 0) == matmuls
    assert npusim.fallback_stats() == before


def test_cumsum_carries_nan_and_inf_forward_only():
    # On the tensor core, 0 * nan and 0 * inf would make every sum NaN; the CPU's running sum keeps those before them.
    for bad in (float("nan"), float("inf"), -float("inf")):
        x = torch.tensor([[1.0, 2.0, 3.0, bad, 4.0], [5.0, 6.0, 7.0, 8.0, 9.0]])
        for dtype in (torch.float32, torch.bfloat16):
            got = torch.cumsum(x.to(dtype).to(NPU), 1).cpu()
            torch.testing.assert_close(got, torch.cumsum(x.to(dtype), 1), equal_nan=True)
        torch.testing.assert_close(torch.cumsum(x.t().to(NPU), 0).cpu(), torch.cumsum(x.t(), 0), equal_nan=True)


def test_int8_matmul_sums_exactly_into_int32_on_the_tensor_core():
    torch.manual_seed(5)
    a, b = torch.randint(-128, 128, (33, 70), dtype=torch.int8), torch.randint(-128, 128, (70, 17), dtype=torch.int8)
    before, kernels = dict(npusim.fallback_stats()), npusim.kernel_stats().get("matmul", 0)
    assert torch.equal(torch._int_mm(a.to(NPU), b.to(NPU)).cpu(), torch._int_mm(a, b))
    assert torch.equal(torch._int_mm(a.to(NPU), b.t().contiguous().to(NPU).t()).cpu(), torch._int_mm(a, b))  # B as a transposed view
    assert npusim.fallback_stats() == before and npusim.kernel_stats()["matmul"] == kernels + 2


def test_variance_edge_cases_give_what_the_cpu_gives():
    before = dict(npusim.fallback_stats())
    with pytest.warns(UserWarning, match="degrees of freedom"):
        for x in (torch.tensor(3.0), torch.randn(1, 4)):
            for args in ((), (0,)):  # one element over the reduced dim: 0 / 0
                torch.testing.assert_close(torch.var(x.to(NPU), *args).cpu(), torch.var(x, *args), equal_nan=True)
    x = torch.randn(3, 5)
    torch.testing.assert_close(torch.std(x.to(NPU), 1, correction=5).cpu(), torch.std(x, 1, correction=5), equal_nan=True)  # 0 dof: inf
    assert torch.var(x.to(NPU), dim=[], correction=0).shape == torch.var(x, dim=[], correction=0).shape == torch.Size([])
    assert npusim.fallback_stats() == before


@pytest.mark.parametrize("approximate", ["none", "tanh"])
# f32: atol 1e-5 (torch.testing's default): where tanh is within a few ulps of -1 (x below about -4.5)
# the tanh form's two terms nearly cancel, and the chip's order of f32 steps (ATen's formula, one chain)
# rounds the difference unlike the CPU's vectorized kernel: up to ~2e-6 absolute, measured.
@pytest.mark.parametrize("dtype, tolerance", [(torch.float32, {"rtol": 2e-6, "atol": 1e-5}), (torch.bfloat16, {"rtol": 1.6e-2, "atol": 1e-2})])
def test_gelu_backward_and_erf_run_on_the_chip(approximate, dtype, tolerance):
    before = dict(npusim.fallback_stats())
    x = (torch.randn(37, 53) * 3).to(dtype)
    grad = torch.randn(37, 53).to(dtype)
    expected = torch.ops.aten.gelu_backward(grad, x, approximate=approximate)
    grad_npu, x_npu = grad.to(NPU), x.to(NPU)
    kernels = dict(npusim.kernel_stats())
    actual = torch.ops.aten.gelu_backward(grad_npu, x_npu, approximate=approximate)
    # one elementwise chain in f32 (bf16 converted on the chip), not a dozen kernels
    assert {op: n - kernels.get(op, 0) for op, n in npusim.kernel_stats().items() if n != kernels.get(op, 0)} == {"elementwise_chain": 1}
    actual = actual.cpu()
    assert actual.dtype == dtype
    torch.testing.assert_close(actual, expected, **tolerance)
    torch.testing.assert_close(torch.erf(x.to(NPU)).cpu(), torch.erf(x), **tolerance)
    assert {op: n for op, n in npusim.fallback_stats().items() if n != before.get(op, 0)} == {}


@pytest.mark.parametrize("dtype, tolerance", [(torch.float32, {"rtol": 1e-5, "atol": 1e-5}), (torch.bfloat16, {"rtol": 1.6e-2, "atol": 2e-2})])
def test_softmax_and_layer_norm_backward_are_one_kernel_each(dtype, tolerance):
    """The gradients of softmax, log_softmax (along any dim) and layer_norm's input are row kernels of
    their own: one launch each, not the composition of reductions and elementwise ops. f32 against
    the CPU; bf16 against the same math in f64 from the same bf16 values (the CPU's bf16 sums over
    240 rows for the weight's gradient are several bf16 ulps off it, the chip's f32 sums are not; the
    input's gradient comes from mean and rstd saved in bf16, as PyTorch saves them: atol 2e-2)."""
    torch.manual_seed(0)
    x = (torch.randn(6, 40, 96) * 2).to(dtype)
    grad = torch.randn(6, 40, 96).to(dtype)
    weight, bias = torch.randn(96).to(dtype), torch.randn(96).to(dtype)

    def gradients(device, as_dtype=None):
        cast = (lambda t: t.to(as_dtype)) if as_dtype else (lambda t: t)
        leaf = cast(x).to(device).requires_grad_()
        w, b = cast(weight).to(device).requires_grad_(), cast(bias).to(device).requires_grad_()
        g = cast(grad).to(device)
        outputs = [torch.softmax(leaf, -1), torch.log_softmax(leaf, 1), F.layer_norm(leaf, (96,), w, b)]
        results = []
        for out in outputs:
            results += torch.autograd.grad(out, [leaf] + ([w, b] if out is outputs[2] else []), g)
        return [r.cpu() for r in results]

    expected = gradients("cpu") if dtype == torch.float32 else [r.to(dtype) for r in gradients("cpu", torch.float64)]
    before, kernels = dict(npusim.fallback_stats()), dict(npusim.kernel_stats())
    actual = gradients(NPU)
    launched = {op: n - kernels.get(op, 0) for op, n in npusim.kernel_stats().items() if n != kernels.get(op, 0)}
    assert {op: n for op, n in npusim.fallback_stats().items() if n != before.get(op, 0)} == {}
    for op in ("softmax_backward", "log_softmax_backward", "layer_norm_backward"):
        assert launched.get(op) == 1, launched
    for got, want in zip(actual, expected):
        assert got.dtype == want.dtype
        if got.shape == (96,):  # weight and bias gradients: sums over 240 rows
            torch.testing.assert_close(got, want, rtol=tolerance["rtol"], atol=tolerance["atol"] * 16)
        else:
            torch.testing.assert_close(got, want, **tolerance)


def test_rms_norm_and_group_norm_gradients_use_the_norm_row_kernels():
    """F.rms_norm runs as aten::_fused_rms_norm: one rms_norm kernel forward and one rms_norm_backward
    kernel for the input's gradient; group norm's input gradient is the layer-norm backward kernel
    on its groups as rows."""
    x, w = torch.randn(8, 16, 64), torch.randn(64)
    before, kernels = dict(npusim.fallback_stats()), dict(npusim.kernel_stats())
    xn, wn = x.to(NPU).requires_grad_(), w.to(NPU).requires_grad_()
    F.rms_norm(xn, (64,), wn, 1e-6).backward(torch.ones(8, 16, 64).to(NPU))
    images = torch.randn(2, 6, 5, 5).to(NPU).requires_grad_()
    F.group_norm(images, 3).sum().backward()
    launched = {op: n - kernels.get(op, 0) for op, n in npusim.kernel_stats().items() if n != kernels.get(op, 0)}
    assert npusim.fallback_stats() == before
    assert launched.get("rms_norm") == 1 and launched.get("rms_norm_backward") == 1 and launched.get("layer_norm_backward") == 1, launched
    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    F.rms_norm(xc, (64,), wc, 1e-6).backward(torch.ones(8, 16, 64))
    torch.testing.assert_close(xn.grad.cpu(), xc.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(wn.grad.cpu(), wc.grad, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_topk_and_sort_run_on_the_chip(dtype):
    """topk (largest and smallest, any dim) and sort (both directions) by the topk kernel, equal to the
    CPU's: the values exactly; sort's indices exactly (equal values in order of position, as the CPU's
    stable sort; NaN above +inf); topk's pick those values, each position once (the CPU's topk orders
    equal values as it likes)."""
    torch.manual_seed(0)
    x = torch.randn(6, 50, 30).to(dtype)
    x[0, :5, 0] = 1.5                 # ties
    x[1, 3, 2] = float("nan")         # NaN ranks above everything
    x[2, 7, 1] = float("inf")
    xn = x.to(NPU)
    before, kernels = dict(npusim.fallback_stats()), npusim.kernel_stats().get("topk", 0)
    for dim in (1, -1):
        for largest in (True, False):
            got, want = torch.topk(xn, 7, dim=dim, largest=largest), torch.topk(x, 7, dim=dim, largest=largest)
            torch.testing.assert_close(got.values.cpu(), want.values, rtol=0, atol=0, equal_nan=True)
            # (the CPU's topk orders equal values as it likes: the indices must pick the values, each once)
            indices = got.indices.cpu()
            assert indices.dtype == torch.int64
            torch.testing.assert_close(torch.gather(x, dim, indices), want.values, rtol=0, atol=0, equal_nan=True)
            assert (indices.sort(dim).values.diff(dim=dim) > 0).all()
        for descending in (False, True):
            got, want = torch.sort(xn, dim=dim, descending=descending, stable=True), torch.sort(x, dim=dim, descending=descending, stable=True)
            torch.testing.assert_close(got.values.cpu(), want.values, rtol=0, atol=0, equal_nan=True)
            assert torch.equal(got.indices.cpu(), want.indices)
    # Top-k sampling as generation loops write it.
    logits = torch.randn(4, 1000)
    values, _ = torch.topk(logits.to(NPU), 50)
    masked = torch.where(logits.to(NPU) < values[:, -1:], torch.tensor(float("-inf")), logits.to(NPU))
    assert torch.equal(torch.isfinite(masked).sum(-1).cpu(), torch.full((4,), 50))
    assert npusim.fallback_stats() == before
    assert npusim.kernel_stats()["topk"] == kernels + 9


def test_a_scalar_to_a_tensor_power_runs_on_the_chip():
    """base ** x (RoPE's inverse frequencies, 10000 ** (-i / d)): v.pow of the filled base, exp(x ln base)
    in f32, within a few f32 ulps of the CPU's powf times the exponent's magnitude (here |x ln base| < 10)."""
    x = torch.linspace(-1, 1, 97)
    before = dict(npusim.fallback_stats())
    for base in (10000.0, 2.0, 0.5):
        torch.testing.assert_close((base ** x.to(NPU)).cpu(), base ** x, rtol=2e-6, atol=0)
    out = torch.empty(97, device=NPU)
    torch.pow(3.0, x.to(NPU), out=out)
    torch.testing.assert_close(out.cpu(), 3.0 ** x, rtol=2e-6, atol=0)
    assert npusim.fallback_stats() == before


def test_item_of_a_one_element_tensor_of_any_shape():
    for shape in ((), (1,), (1, 1)):
        for dtype in (torch.float32, torch.int64, torch.bool):
            assert torch.ones(shape, dtype=dtype).to(NPU).item() == 1
    with pytest.raises(RuntimeError, match="cannot be converted to Scalar"):
        torch.ones(2).to(NPU).item()


def test_arange_runs_on_the_chip():
    """Position ids and index ranges (int64, exactly), float ranges (exact for integers below 2^24,
    else within an f32 rounding or two of the CPU's double arithmetic), the CPU's size and errors."""
    before, kernels = dict(npusim.fallback_stats()), npusim.kernel_stats().get("arange", 0)
    for args in ((17,), (3, 40, 7), (10, -5, -3), (0, 1)):
        assert torch.equal(torch.arange(*args, device=NPU).cpu(), torch.arange(*args))
    assert torch.equal(torch.arange(0, 5000, dtype=torch.float32, device=NPU).cpu(), torch.arange(0, 5000, dtype=torch.float32))
    # bf16: each integer rounded once to bf16 (the CPU's bf16 arange is up to an ulp off that: 4113 -> 4096, not 4128)
    assert torch.equal(torch.arange(0, 5000, dtype=torch.bfloat16, device=NPU).cpu(), torch.arange(0, 5000).to(torch.bfloat16))
    torch.testing.assert_close(torch.arange(-1, 1, 0.01, device=NPU).cpu(), torch.arange(-1, 1, 0.01), rtol=0, atol=2.5e-7)
    assert torch.arange(0, device=NPU).shape == (0,)
    assert npusim.fallback_stats() == before and npusim.kernel_stats()["arange"] == kernels + 7
    with pytest.raises(RuntimeError, match="step must be nonzero"):
        torch.arange(0, 3, 0, device=NPU)
    big = torch.arange(2**33, 2**33 + 3, device=NPU)  # beyond 32 bits: the CPU's values, counted
    assert torch.equal(big.cpu(), torch.arange(2**33, 2**33 + 3))


def test_a_llama_style_block_trains_and_samples_with_zero_cpu_fallbacks():
    """RMSNorm, rotary embeddings (arange, a scalar-base power, cos/sin, cat), grouped-query causal
    attention (repeat_interleave), a SiLU-gated MLP, cross-entropy and its backward, then top-k sampling
    (softmax, topk, a mask, multinomial): every op on the chip, the loss as the CPU's."""
    torch.manual_seed(0)

    class Block(torch.nn.Module):
        def __init__(self, d=64, heads=4, kv_heads=2):
            super().__init__()
            self.heads, self.kv_heads, self.hd = heads, kv_heads, d // heads
            self.norm1, self.norm2 = torch.nn.RMSNorm(d), torch.nn.RMSNorm(d)
            self.q = torch.nn.Linear(d, d, bias=False)
            self.kv = torch.nn.Linear(d, 2 * kv_heads * self.hd, bias=False)
            self.o = torch.nn.Linear(d, d, bias=False)
            self.gate, self.up, self.down = (torch.nn.Linear(d, 4 * d, bias=False), torch.nn.Linear(d, 4 * d, bias=False),
                                             torch.nn.Linear(4 * d, d, bias=False))

        def rope(self, x):
            inv = 1.0 / (10000 ** (torch.arange(0, self.hd, 2, device=x.device).float() / self.hd))
            angles = torch.arange(x.shape[-2], device=x.device)[:, None].float() * inv[None, :]
            cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)
            half = self.hd // 2
            return x * cos + torch.cat([-x[..., half:], x[..., :half]], -1) * sin

        def forward(self, x):
            b, t, d = x.shape
            y = self.norm1(x)
            q = self.q(y).view(b, t, self.heads, self.hd).transpose(1, 2)
            k, v = self.kv(y).view(b, t, 2 * self.kv_heads, self.hd).transpose(1, 2).chunk(2, 1)
            q, k = self.rope(q), self.rope(k)
            repeat = self.heads // self.kv_heads
            a = F.scaled_dot_product_attention(q, k.repeat_interleave(repeat, 1), v.repeat_interleave(repeat, 1), is_causal=True)
            x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
            y = self.norm2(x)
            return x + self.down(F.silu(self.gate(y)) * self.up(y))

    model, embed, head = Block(), torch.nn.Embedding(100, 64), torch.nn.Linear(64, 100, bias=False)
    ids = torch.randint(0, 100, (2, 16))

    def step(device):
        for module in (model, embed, head):
            module.to(device).zero_grad()
        logits = head(model(embed(ids.to(device))))
        loss = F.cross_entropy(logits.view(-1, 100), ids.to(device).view(-1))
        loss.backward()
        probs = torch.softmax(logits[:, -1].detach() / 0.8, -1)
        top = torch.topk(probs, 5)
        kept = torch.where(probs < top.values[:, -1:], torch.zeros((), device=device), probs)
        return loss.item(), torch.multinomial(kept, 1).cpu(), top.indices.cpu(), head.weight.grad.cpu().clone()

    cpu_loss, _, cpu_top, cpu_grad = step("cpu")
    before = dict(npusim.fallback_stats())
    npu_loss, token, npu_top, npu_grad = step(NPU)
    assert npusim.fallback_stats() == before
    assert abs(npu_loss - cpu_loss) <= 1e-4 * abs(cpu_loss)
    torch.testing.assert_close(npu_grad, cpu_grad, rtol=1e-3, atol=1e-5)
    assert all(token[r].item() in npu_top[r].tolist() for r in range(2))  # drawn from the top 5


def test_max_pool3d_indices_are_the_cpus():
    torch.manual_seed(3)
    x = torch.randn(2, 3, 7, 9, 8)
    x[0, 0, 0, 0, :2] = 5.0  # a tie: the first position wins, as on the CPU
    before = dict(npusim.fallback_stats())
    for kwargs in (dict(kernel_size=3, stride=2, padding=1), dict(kernel_size=(2, 3, 3), stride=(1, 2, 2), dilation=(2, 1, 1), ceil_mode=True)):
        values, indices = F.max_pool3d(x.to(NPU), return_indices=True, **kwargs)
        expected_values, expected_indices = F.max_pool3d(x, return_indices=True, **kwargs)
        assert torch.equal(values.cpu(), expected_values) and torch.equal(indices.cpu(), expected_indices)
    assert npusim.fallback_stats() == before


def test_a_bf16_convolution_forms_its_windows_in_the_scratchpad(monkeypatch):
    """A stride-1 bf16 convolution is one tensor-core kernel with implicit im2col (no im2col matrix in
    DRAM), eagerly and in a compiled ResNet-style block (conv, batch norm, ReLU, residual)."""
    torch.manual_seed(0)
    block = torch.nn.Sequential(torch.nn.Conv2d(16, 32, 3, padding=1, bias=False), torch.nn.BatchNorm2d(32), torch.nn.ReLU())
    with torch.no_grad():
        block[1].running_mean.uniform_(-0.5, 0.5), block[1].running_var.uniform_(0.5, 2.0)
    block = block.eval().to(torch.bfloat16)
    x, skip = torch.randn(2, 16, 12, 10, dtype=torch.bfloat16), torch.randn(2, 32, 12, 10, dtype=torch.bfloat16)
    fn = lambda m, x, skip: torch.relu(m(x) + skip)
    expected = fn(block, x, skip)
    on_npu = block.to(NPU)
    for run in (fn, torch.compile(fn, backend="npu")):
        with npusim.profile() as prof:
            got = run(on_npu, x.to(NPU), skip.to(NPU))
        torch.testing.assert_close(got.cpu(), expected, rtol=1.6e-2, atol=3e-2)
        assert any("implicit im2col" in plan for plan in prof.plans), prof.plans
        assert not any(plan.startswith("im2col") for plan in prof.plans), prof.plans
    # NPUSIM_CONV=im2col: the windows through DRAM, the same values; an unknown value is an error.
    monkeypatch.setenv("NPUSIM_CONV", "im2col")
    with npusim.profile() as prof:
        got = fn(on_npu, x.to(NPU), skip.to(NPU))
    torch.testing.assert_close(got.cpu(), expected, rtol=1.6e-2, atol=3e-2)
    assert any(plan.startswith("im2col") for plan in prof.plans) and not any("implicit" in plan for plan in prof.plans), prof.plans
    monkeypatch.setenv("NPUSIM_CONV", "fastest")
    with pytest.raises(RuntimeError, match="NPUSIM_CONV is auto or im2col"):
        fn(on_npu, x.to(NPU), skip.to(NPU))


def test_a_convolution_sees_its_weights_changed_in_place():
    """The implicit-im2col kernel's weight layout is cached per weight tensor and version: an in-place
    update (an optimizer step) is seen at the next call, and a new tensor at the same place is not
    mistaken for the old one."""
    torch.manual_seed(0)
    x = torch.randn(1, 8, 9, 9, dtype=torch.bfloat16)
    w = torch.randn(16, 8, 3, 3, dtype=torch.bfloat16)
    on_npu = w.to(NPU)
    for step in range(3):
        torch.testing.assert_close(F.conv2d(x.to(NPU), on_npu, padding=1).cpu(), F.conv2d(x, w, padding=1), rtol=1.6e-2, atol=3e-2)
        with torch.no_grad():
            w.mul_(-0.5), on_npu.mul_(-0.5)
    for _ in range(3):  # new weights each time, freed after use
        w = torch.randn(16, 8, 3, 3, dtype=torch.bfloat16)
        torch.testing.assert_close(F.conv2d(x.to(NPU), w.to(NPU), padding=1).cpu(), F.conv2d(x, w, padding=1), rtol=1.6e-2, atol=3e-2)


def test_a_matmul_with_a_small_output_and_a_long_k_splits_k_over_the_cores():
    """256 x 256 from K = 8192 (a weight gradient's shape): K cut over the cores, partial products in f32,
    summed and rounded once by one elementwise chain; eagerly, compiled, with a transposed operand, in bf16
    and f32."""
    torch.manual_seed(0)
    for dtype, tol in ((torch.bfloat16, dict(rtol=1.6e-2, atol=0.5)), (torch.float32, dict(rtol=1e-4, atol=1e-3))):
        a, b = torch.randn(8192, 256, dtype=dtype).t(), torch.randn(8192, 256, dtype=dtype)
        expected = (a.float() @ b.float()).to(dtype)
        for run in (torch.mm, torch.compile(lambda a, b: a @ b, backend="npu")):
            with npusim.profile() as prof:
                got = run(a.to(NPU), b.to(NPU))
            torch.testing.assert_close(got.cpu(), expected, **tol)
            matmuls = [plan for plan in prof.plans if plan.startswith("matmul")]
            assert len(matmuls) == 1 and "4 x [256 x 2048] @ [2048 x 256]" in matmuls[0], prof.plans
            sums = [plan for plan in prof.plans if plan.startswith(("add", "elementwise_chain", "to"))]
            assert len(sums) == 1 and sums[0].startswith("elementwise_chain"), prof.plans


def test_elementwise_results_are_laid_out_as_atens():
    """A contiguous a with a permuted b gives a contiguous result, as TensorIterator lays it out (it took
    b's layout, and `(a + b).view(158, 64)` raised on the npu alone: Wav2Vec2's compiled training)."""
    a = torch.randn(2, 79, 64)
    b = torch.randn(2, 64, 79).transpose(1, 2)
    cond = a > 0
    for name, f in {"add": torch.add, "mul": torch.mul, "where": lambda x, y: torch.where(cond.to(x.device), x, y),
                    "b first": lambda x, y: y + x, "broadcast": lambda x, y: y + x[0, 0]}.items():
        want, got = f(a, b), f(a.to(NPU), b.to(NPU))
        assert got.stride() == want.stride(), (name, got.stride(), want.stride())
        torch.testing.assert_close(got.cpu(), want, msg=name)
    assert (a.to(NPU) + b.to(NPU)).view(158, 64).shape == (158, 64)


def test_a_kernel_that_declines_hands_its_op_to_the_one_cpu_fallback_with_its_reason():
    """fall_back (torch_bridge/csrc/aten/cpu_fallback.h): a case an npu kernel does not take (f64 here) runs the
    op through the boxed CPU fallback: the CPU's results on the npu, counted under the op's name, warned
    about once with the kernel's reason. batch norm's running statistics, which its schema does not mark
    as written, are updated as on the CPU."""
    torch.manual_seed(0)
    x = torch.randn(2, 3, 6, 6, dtype=torch.float64)
    cases = {
        "aten::max_pool2d_with_indices": lambda t: torch.nn.functional.max_pool2d(t, 2, return_indices=True),
        "aten::upsample_bilinear2d": lambda t: torch.nn.functional.interpolate(t, scale_factor=2, mode="bilinear"),
        "aten::native_layer_norm": lambda t: torch.nn.functional.layer_norm(t, (6, 6)),
        "aten::topk": lambda t: torch.topk(t.reshape(2, -1), 3),
        "aten::convolution": lambda t: torch.nn.functional.conv2d(t, torch.ones(2, 3, 3, 3, dtype=t.dtype, device=t.device)),
    }
    for name, f in cases.items():
        before = dict(npusim.fallback_stats())
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = f(x.to(NPU))
        counted = {k: v - before.get(k, 0) for k, v in npusim.fallback_stats().items() if v != before.get(k, 0)}
        assert counted.get(name) == 1, (name, counted)
        warned = [str(w.message) for w in caught if name in str(w.message)]
        if name not in before:  # (warned about once a process: the first time, with the kernel's reason)
            assert warned and "runs on the CPU (" in warned[0] and "no npu kernel" not in warned[0], warned
        for g, w in zip(got if isinstance(got, tuple) else (got,), f(x) if isinstance(got, tuple) else (f(x),)):
            assert g.device.type == "npu"
            torch.testing.assert_close(g.cpu(), w)
    cpu_norm, npu_norm = torch.nn.BatchNorm2d(3).double(), torch.nn.BatchNorm2d(3).double().to(NPU)
    torch.testing.assert_close(npu_norm(x.to(NPU)).cpu(), cpu_norm(x))
    torch.testing.assert_close(npu_norm.running_mean.cpu(), cpu_norm.running_mean)
    torch.testing.assert_close(npu_norm.running_var.cpu(), cpu_norm.running_var)


def test_the_shared_kernel_helpers_decline_through_the_one_cpu_fallback():
    """The helpers many kernels share (elementwise, matmul, row and reduction ops, the float functions, the
    paddings, integer division, the table's kernels) hand the op itself, with its own arguments, to the boxed
    CPU fallback: counted once under the op's name, results as the CPU's."""
    torch.manual_seed(0)
    x, y = torch.randn(4, 6, dtype=torch.float64), torch.randn(4, 6, dtype=torch.float64)
    cases = {
        "aten::add.Tensor": lambda a, b: torch.add(a, b, alpha=2),
        "aten::eq.Tensor": lambda a, b: torch.eq(a, b),
        "aten::mm": lambda a, b: a @ b.T,
        "aten::_softmax": lambda a, b: torch.softmax(a, 0),
        "aten::sum.dim_IntList": lambda a, b: a.sum(1),
        "aten::tan": lambda a, b: torch.tan(a),
        "aten::atan2": lambda a, b: torch.atan2(a, b),
        "aten::round": lambda a, b: torch.round(a * 3),  # (the product is a fallback of its own)
        "aten::floor_divide": lambda a, b: torch.floor_divide(a, b),
        "aten::tril": lambda a, b: torch.tril(a),
        "aten::reflection_pad1d": lambda a, b: torch.nn.functional.pad(a[None], (2, 1), mode="reflect")[0],
        "aten::leaky_relu_backward": lambda a, b: torch.ops.aten.leaky_relu_backward(a, b, 0.1, False),
    }
    for name, f in cases.items():
        a, b = x.to(NPU), y.to(NPU)
        before = dict(npusim.fallback_stats())
        got = f(a, b)
        counted = {k: v - before.get(k, 0) for k, v in npusim.fallback_stats().items() if v != before.get(k, 0)}
        assert counted.get(name) == 1, (name, counted)
        assert got.device.type == "npu"
        torch.testing.assert_close(got.cpu(), f(x, y))
