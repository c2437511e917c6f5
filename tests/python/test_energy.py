"""Energy as the tools report it (docs/energy.md): npu-sim's statistics, the trace's power counter
against them, and npusim.profile().energy against the device's action counts. The prices themselves are
checked against hand calculations in tests/sim/energy_test.cpp."""
import json
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, "build", "bin")
# The actions the power track spreads over time (the rest are in the totals only).
TRACKED = ("tensor_core.", "accumulator.", "scratchpad.", "vector_unit.", "noc.byte_hop", "dram.read_byte", "dram.write_byte")


@pytest.fixture(scope="module")
def gemm_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("energy")
    program = str(folder / "gemm.npubin")
    subprocess.run([os.path.join(BIN, "npu-as"), os.path.join(ROOT, "examples", "gemm.s"), "-o", program], check=True)
    result = subprocess.run([os.path.join(BIN, "npu-sim"), "--config", "base", program, "--trace", str(folder / "t.json"),
                             "--stats", str(folder / "s.json"), "--action-counts", str(folder / "a.yaml")],
                            capture_output=True, text=True, check=True)
    with open(folder / "s.json") as f:
        stats = json.load(f)
    with open(folder / "t.json") as f:
        trace = json.load(f)
    return result.stdout, stats, trace, folder


def test_stats_report_energy_per_component_and_action(gemm_run):
    stdout, stats, _, folder = gemm_run
    energy = stats["energy"]
    components = {c["name"]: c for c in energy["components"]}
    assert set(components) == {"tensor_core", "accumulator", "scratchpad", "vector_unit", "dma", "noc", "dram", "host_link", "control"}
    assert energy["total_pj"] == pytest.approx(sum(c["total_pj"] for c in components.values()), rel=1e-5)
    actions = {a["name"]: a for a in energy["actions"]}
    # The statistics' own counts, priced: the DRAM's bytes and the tensor core's MACs.
    dram_bytes = sum(ch["read_bytes"] + ch["write_bytes"] for ch in stats["dram_channels"])
    assert actions["dram.read_byte"]["count"] + actions["dram.write_byte"]["count"] == dram_bytes
    assert actions["tensor_core.mac_bf16"]["count"] == stats["macs"]
    assert energy["average_power_w"] == pytest.approx(energy["total_pj"] * 1e-12 / (stats["cycles"] / 1e9), rel=1e-4)
    assert 0 < energy["average_power_w"] < energy["peak_power_w"]
    assert "energy: " in stdout and " uJ, average " in stdout
    counts = (folder / "a.yaml").read_text()
    assert counts.startswith("action_counts:\n  version: '0.4'\n") and f"counts: {stats['macs']}" in counts


def test_the_power_track_integrates_to_the_energy_of_the_actions_it_tracks(gemm_run):
    _, stats, trace, _ = gemm_run
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    samples = sorted((e["ts"], e["args"]["value"]) for e in events if e.get("ph") == "C" and e.get("name") == "power (W)")
    assert samples, "no power counter in the trace"
    energy = stats["energy"]
    leakage_w = energy["leakage_pj"] * 1e-12 / (stats["cycles"] / 1e9)
    window_s = 1000 / 1e9  # base: counter windows of 1000 cycles at 1 GHz
    dynamic_j = sum((value - leakage_w) * window_s for _, value in samples)
    tracked_fj = sum(a["count"] * a["energy_fj"] for a in energy["actions"] if a["name"].startswith(TRACKED))
    assert dynamic_j == pytest.approx(tracked_fj * 1e-15, rel=1e-5)  # (the statistics print 6 digits)
    assert min(value for _, value in samples) == pytest.approx(leakage_w, rel=1e-5)  # the window after the run
    assert tracked_fj > 0.9 * energy["dynamic_pj"] * 1000  # what the track leaves out is small


def test_profile_energy_prices_the_blocks_action_counts():
    import torch
    import npusim
    a = torch.randn(256, 256, dtype=torch.bfloat16).to("npu")
    with npusim.profile() as prof:
        (a @ a).sum()
    energy = prof.energy
    assert energy["components"]["tensor_core"]["dynamic_pj"] == pytest.approx(
        prof.counters["action.tensor_core.mac_bf16"] * 0.700, rel=1e-3)  # base: 0.700 pJ per bf16 MAC
    assert energy["total_pj"] == pytest.approx(energy["dynamic_pj"] + energy["leakage_pj"])
    assert energy["seconds"] == pytest.approx(prof.device_cycles / 1e9)
    assert "energy: " in prof.table()
