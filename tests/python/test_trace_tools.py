"""The analyst's tools: npusim.trace and npu-trace on traces npusim writes, profile(path) without a trace
chosen before, and torch.profiler seeing the chip's kernels (docs/analysts.md)."""
import json
import os
import re
import subprocess
import sys

import pytest
import torch

import npusim
import npusim.trace as nt
from npusim.trace import analysis

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.join(ROOT, "build", "bin")
PYTHON = sys.executable


def _npu_sim(tmp_path, source: str, config: str, name: str):
    """Assembles examples/SOURCE and runs it on CONFIG with a trace and statistics; returns their paths."""
    binary = tmp_path / (name + ".npubin")
    subprocess.run([os.path.join(BIN, "npu-as"), os.path.join(ROOT, "examples", source), "-o", str(binary)], check=True)
    trace, stats = tmp_path / (name + ".json"), tmp_path / (name + "_stats.json")
    subprocess.run([os.path.join(BIN, "npu-sim"), "--config", config, str(binary), "--trace", str(trace), "--stats", str(stats)],
                   check=True, capture_output=True)
    return str(trace), json.loads(stats.read_text())


@pytest.mark.parametrize("source", ["gemm.s", "softmax_rows.s", "layernorm_rows.s", "transpose_dma.s"])
def test_stalls_add_up_to_each_engines_cycles_and_match_the_chips_statistics(tmp_path, source):
    trace_path, stats = _npu_sim(tmp_path, source, "base", source[:-2])
    trace = nt.load(trace_path)
    times = trace.engine_time()
    device = [s for s in trace.raw.spans if s.category == "device"]
    window = max(s.end for s in device) - min(s.begin for s in device)
    for core in stats["cores"]:
        for engine in core["engines"]:
            t = times.get(f"core {core['core']} / {engine['name']}")
            if t is None:  # an engine with no span at all (an unused DMA channel)
                assert engine["instructions"] == 0 and sum(engine["stall_cycles"].values()) == 0
                continue
            assert sum(t.values()) == window, (engine["name"], t)
            for cause, cycles in engine["stall_cycles"].items():
                assert t[cause] == cycles, (core["core"], engine["name"], cause, t[cause], cycles)
            if engine["name"] != "control":
                # The chip counts an instruction's own waits (a DMA's for DRAM) in its busy cycles too; the
                # trace splits them out, so that busy and stalls add up.
                inner = sum(t[c] for c in ("sram_bank_conflict", "noc", "dram"))
                assert t["busy"] + inner == engine["busy_cycles"], (engine["name"], t, engine["busy_cycles"])


def test_roofline_against_a_hand_calculation(tmp_path):
    """examples/gemm.s: C = A B, 256 x 256 x 256 bf16, cut into 8 tiles of 128 x 64, each loading its
    A rows (128 x 256) and B columns (256 x 64) once and storing its C tile, converted to bf16 on the vector
    unit. On base: 4 cores of 128 x 128 MACs, 4 DRAM channels of 128 B/cycle, 256 lanes per core."""
    trace_path, stats = _npu_sim(tmp_path, "gemm.s", "base", "gemm")
    trace = nt.load(trace_path)
    [point] = analysis.roofline(trace.raw, trace.kernels)
    macs = 256 * 256 * 256
    tiles = (256 // 128) * (256 // 64)
    dram_bytes = tiles * (128 * 256 * 2 + 256 * 64 * 2 + 128 * 64 * 2)
    elements = tiles * 128 * 64
    assert (point.macs, point.dram_bytes, point.elements) == (macs, dram_bytes, elements)
    assert point.macs == stats["macs"]
    chip = trace.chip
    assert (chip.macs_per_cycle, chip.dram_bytes_per_cycle, chip.vector_elements_per_cycle) == (4 * 128 * 128, 4 * 128, 4 * 256)
    assert point.bounds == {"mac": macs / 65536, "dram": dram_bytes / 512, "vector": elements / 1024}
    assert point.binding == "dram" and point.bound_cycles == 1792
    assert point.kernel.cycles == stats["cycles"]
    assert point.fraction_of_roofline == pytest.approx(1792 / stats["cycles"])
    text = trace.roofline()
    assert re.search(r"gemm\.s\s+%d\s+" % stats["cycles"], text) and "dram" in text
    png = tmp_path / "roof.png"
    trace.roofline_plot(str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_scratchpad_footprint_per_core_against_the_programs_layout(tmp_path):
    """examples/gemm.s lays out two A tiles (128 x 256 bf16), two B tiles (256 x 64) and two output tiles
    (128 x 64), each at the next multiple of 64 bytes: the last ends at 229,376 bytes. On base each core
    runs two of the 8 tiles, so it uses both slots of each ring."""
    trace_path, _ = _npu_sim(tmp_path, "gemm.s", "base", "gemm")
    trace = nt.load(trace_path)
    a, b, o = 128 * 256 * 2, 256 * 64 * 2, 128 * 64 * 2
    assert trace.kernels[0].scratchpad_bytes == {core: 2 * a + 2 * b + 2 * o for core in range(4)}
    samples = [c for c in trace.raw.counters if c.name == "scratchpad used (bytes)" and c.process == "core 0"]
    assert [c.value for c in samples] == [229376, 0]  # over the program, then back to nothing
    out = subprocess.run([PYTHON, "-m", "npusim.trace.cli", "summary", trace_path, "--kernel", "0"], capture_output=True, text=True,
                         check=True).stdout
    assert "scratchpad: up to 229376 of" in out


def test_critical_path_is_a_chain_that_ends_the_kernel(tmp_path):
    trace_path, _ = _npu_sim(tmp_path, "gemm.s", "base", "gemm")
    trace = nt.load(trace_path)
    k = trace.kernels[0]
    steps = analysis.critical_path(k)
    assert steps and steps[-1].span.end == max(e for _, e in k.core_windows.values())
    for before, after in zip(steps, steps[1:]):
        assert before.span.end <= after.span.begin or "released" in after.reason or "released" in before.reason
        assert "stall" not in before.span.args  # waits are edges: the path goes through what ended them
    # On gemm.s the last tile's store waits for the vector unit's conversion, which waits for the tensor
    # core's drain, which waits for the tile's loads.
    threads = [s.span.thread for s in steps]
    assert threads[-1].startswith("dma") and "tensor core" in threads and "vector unit" in threads
    assert "ends the kernel" in trace.critical_path()


def test_critical_path_crosses_cores_through_the_send_that_released_a_wait(tmp_path):
    """examples/noc_ring.s: each core sends its tile to the next (dma.send raises RECV_FULL, s2, there), whose
    vector unit waits for it before the add. The path of the kernel's end runs back from the last store
    through the add and the wait for RECV_FULL to the predecessor's send, on the predecessor's core."""
    trace_path, _ = _npu_sim(tmp_path, "noc_ring.s", "base", "noc_ring")
    trace = nt.load(trace_path)
    k = trace.kernels[0]
    send_spans = [s for s in k.spans if s.name == "dma.send"]
    assert sorted((analysis.core_of(s), int(s.args["to_core"]), int(s.args["sem"])) for s in send_spans) == [
        (c, (c + 1) % 4, 2) for c in range(4)]
    steps = analysis.critical_path(k)
    last_core = analysis.core_of(steps[-1].span)
    [send] = [step for step in steps if step.span.name == "dma.send"]
    assert analysis.core_of(send.span) == (last_core - 1) % 4  # the predecessor's send
    assert f"released vector unit (wait s2) on core {last_core}" in send.reason, send.reason
    assert analysis.core_of(steps[steps.index(send) + 1].span) == last_core
    assert "dma.send" in trace.critical_path()


@pytest.mark.parametrize("source", ["gemm.s", "noc_ring.s"])
def test_noc_link_counters_add_up_to_the_chips_link_statistics(tmp_path, source):
    trace_path, stats = _npu_sim(tmp_path, source, "large", source[:-2])
    trace = nt.load(trace_path)
    busy = trace.noc_link_busy_cycles()
    expected = {link["link"]: link["busy_cycles"] for link in stats["noc_links"]}
    assert expected and set(busy) == set(expected)
    for name, cycles in expected.items():
        assert busy[name] == pytest.approx(cycles, rel=1e-9), name
    report = trace.noc_report()
    busiest = max(expected, key=expected.get)
    assert report.splitlines()[1].startswith(busiest)
    png = tmp_path / "links.png"
    trace.noc_heatmap(str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _small_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64)).to(torch.bfloat16)


def test_profile_path_records_the_block_without_a_trace_chosen_before(tmp_path):
    model = _small_model().to("npu")
    compiled = torch.compile(model, backend="npu")
    x = torch.randn(16, 128, dtype=torch.bfloat16).to("npu")
    compiled(x).cpu()
    was_tracing = npusim._C.tracing()
    paths = [tmp_path / "first.pftrace", tmp_path / "second.json"]
    for path in paths:
        with npusim.profile(str(path)) as prof:
            compiled(x).cpu()
        assert npusim._C.tracing() == was_tracing  # the profile's own trace ended with it
        trace = nt.load(str(path))
        assert len(trace.kernels) == len(prof.kernels) == 2
        # Each kernel is named after its layer (the fused group) and carries its op and FX nodes.
        assert [k.layer for k in trace.kernels] == ["0+1", "2"]
        assert trace.kernels[0].nodes == "addmm,relu" and trace.kernels[0].op == "npusim::gemm"
        # Only the block: nothing before the profile began.
        assert min(s.begin for s in trace.raw.spans if s.category == "device") >= trace.kernels[0].begin - 10_000
        # A kernel's span on the command processor and the profile's events around it differ only by the events' packets.
        for k, (start, end) in zip(trace.kernels, prof.spans):
            assert start <= k.begin and k.end <= end
    assert "0+1 (matmul)" in nt.load(str(paths[0])).summary()
    # The block's chain on the command processor: one queue, so its steps follow each other without a gap
    # or an overlap, from the trace's start to its last packet, through both kernels.
    trace = nt.load(str(paths[0]))
    chain = analysis.block_path(trace.raw)
    assert all(a[1] == b[0] for a, b in zip(chain, chain[1:]))
    assert chain[0][0] == min(s.begin for s in trace.raw.spans if s.category != "metadata")
    assert chain[-1][1] == max(s.end for s in trace.raw.spans if s.process == "command processor")
    assert [(b, e) for b, e, _, name in chain if name.startswith("LAUNCH")] == [(k.begin, k.end) for k in trace.kernels]
    assert "kernel 1 2 (matmul)" in trace.block_path()
    # The host link track: the copies of x and of the result; inside the chain's waits for the host.
    link = [s for s in trace.raw.spans if s.category == "host link"]
    assert any(s.name == "to host" and s.args["bytes"] == str(16 * 64 * 2) for s in link), link
    waits = [(b, e) for b, e, _, name in chain if name == "host"]
    assert 0 < sum(analysis.covered([(s.begin, s.end) for s in link], b, e) for b, e in waits) <= sum(e - b for b, e in waits)
    assert "the host link carried memory in" in trace.block_path()


def test_profile_refuses_a_trace_name_it_cannot_write_before_the_block_runs(tmp_path):
    ran = []
    with pytest.raises(ValueError, match=r"run.txt: a trace file ends in .pftrace"):
        with npusim.profile(str(tmp_path / "run.txt")):
            ran.append(True)
    assert not ran and not (tmp_path / "run.txt").exists()


def _run_model_on(config: str, path: str) -> None:
    script = (
        "import torch, npusim\n"
        f"npusim.init(config={config!r})\n"
        "torch.manual_seed(0)\n"
        "m = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64)).to(torch.bfloat16).to('npu')\n"
        "c = torch.compile(m, backend='npu')\n"
        "x = torch.randn(64, 128, dtype=torch.bfloat16).to('npu')\n"
        "c(x).cpu()\n"
        f"with npusim.profile({path!r}):\n"
        "    c(x).cpu()\n")
    subprocess.run([PYTHON, "-c", script], check=True, capture_output=True, timeout=300)


def test_diff_of_two_configs(tmp_path):
    a, b = str(tmp_path / "tiny.json"), str(tmp_path / "base.json")
    _run_model_on("tiny", a)
    _run_model_on("base", b)
    ta, tb = nt.load(a), nt.load(b)
    rows = analysis.diff(ta.kernels, tb.kernels, "layer")
    assert {r.key for r in rows} == {"0+1", "2"}
    for r in rows:
        ka = [k for k in ta.kernels if k.layer == r.key]
        kb = [k for k in tb.kernels if k.layer == r.key]
        assert r.cycles == (sum(k.cycles for k in ka), sum(k.cycles for k in kb))
        assert r.calls == (1, 1)
    assert abs(rows[0].delta) >= abs(rows[1].delta)  # biggest change first
    text = nt.diff(ta, tb, by="layer")
    assert "B - A" in text and "0+1" in text and "tensor core" in text
    out = subprocess.run([PYTHON, "-m", "npusim.trace.cli", "diff", a, b, "--by", "op"], capture_output=True, text=True, check=True).stdout
    assert "npusim::gemm" in out and "aten::addmm" in out


def test_cli_summary_export_and_sql(tmp_path):
    trace_path, _ = _npu_sim(tmp_path, "softmax_rows.s", "base", "softmax")
    cli = [PYTHON, "-m", "npusim.trace.cli"]
    out = subprocess.run(cli + ["summary", trace_path], capture_output=True, text=True, check=True).stdout
    assert "softmax_rows.s" in out and "vector unit" in out
    directory = tmp_path / "tables"
    subprocess.run(cli + ["export", trace_path, "--parquet", str(directory)], check=True, capture_output=True)
    import pyarrow.parquet as pq

    kernels = pq.read_table(directory / "kernels.parquet").to_pylist()
    spans = pq.read_table(directory / "spans.parquet")
    assert sorted(p.name for p in directory.iterdir()) == sorted(f"{t}.parquet" for t in ("spans", "counters", "flows", "kernels", "engines"))
    assert kernels[0]["elements"] == sum(e for e, k in zip(spans.column("elements").to_pylist(), spans.column("kernel").to_pylist()) if k == 0)
    out = subprocess.run(cli + ["sql", trace_path, "SELECT count(*) AS n FROM spans WHERE thread = 'vector unit' AND stall IS NULL"],
                         capture_output=True, text=True, check=True).stdout
    expected = sum(1 for s in nt.load(trace_path).raw.spans if s.thread == "vector unit" and "stall" not in s.args)
    assert str(expected) in out


def test_cli_refuses_what_is_not_a_trace(tmp_path):
    cli = [PYTHON, "-m", "npusim.trace.cli"]
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [1, 2')
    for path, message in ((bad, "bad.json:1:"), (tmp_path / "missing.pftrace", "cannot read"), (tmp_path / "garbage.pftrace", "not a Perfetto trace")):
        if path.name == "garbage.pftrace":
            path.write_bytes(b"\xff\xff\xff\xff")
        result = subprocess.run(cli + ["summary", str(path)], capture_output=True, text=True)
        assert result.returncode == 1 and message in result.stderr and str(path.name) in result.stderr, result.stderr
    trace_path, _ = _npu_sim(tmp_path, "gemm.s", "base", "gemm")
    result = subprocess.run(cli + ["sql", trace_path, "SELECT nope FROM kernels"], capture_output=True, text=True)
    assert result.returncode == 1 and "nope" in result.stderr


def test_torch_profiler_sees_the_chips_kernels(tmp_path):
    from torch.profiler import ProfilerActivity, profile

    model = _small_model().to("npu")
    compiled = torch.compile(model, backend="npu")
    x = torch.randn(16, 128, dtype=torch.bfloat16).to("npu")
    compiled(x).cpu()
    clock_mhz = npusim._C.chip_info()["clock_mhz"]
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        with npusim.profile() as ours:
            compiled(x).cpu()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1]
    assert len(kernels) == len(ours.kernels) == 2
    # Each kernel lasts what the chip simulated, and is linked to the op that launched it.
    for event, (layer, op, kernel, cycles) in zip(sorted(kernels, key=lambda e: e.time_range.start), ours.kernels):
        assert event.name == kernel
        assert event.time_range.elapsed_us() == pytest.approx(cycles / clock_mhz, abs=2e-3)
    by_op = {e.key: e for e in prof.key_averages()}
    for layer, op, kernel, cycles in ours.kernels:
        assert by_op[op].device_time_total == pytest.approx(cycles / clock_mhz, abs=2e-3), op
    path = str(tmp_path / "kineto.json")
    prof.export_chrome_trace(path)
    events = json.load(open(path))["traceEvents"]
    device = [e for e in events if e.get("cat") == "kernel"]
    ops = {e["args"]["External id"]: e["name"] for e in events if e.get("cat") == "cpu_op"}
    assert sorted(ops[e["args"]["External id"]] for e in device) == sorted(op for _, op, _, _ in ours.kernels)
    assert {e["args"]["layer"] for e in device} == {"0+1", "2"}
    assert any(e.get("ph") == "s" and e.get("cat") == "ac2g" for e in events)
    # Holistic Trace Analysis reads it and finds the kernels.
    os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
    from hta.trace_analysis import TraceAnalysis

    directory = tmp_path / "hta"
    directory.mkdir()
    os.replace(path, directory / "rank0.json")
    analysis_ = TraceAnalysis(trace_dir=str(directory))
    breakdown = analysis_.get_gpu_kernel_breakdown(visualize=False)[1]
    names = set(breakdown["name"])
    assert "matmul" in names


def test_a_cpu_only_torch_profile_records_no_device_kernels():
    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(8, 8).to("npu")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        (x @ x).cpu()
    assert not [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1]
