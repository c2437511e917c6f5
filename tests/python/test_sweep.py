"""npu-sweep (docs/architects.md): specs and their errors, a small sweep end to end on 2 workers with a
resume after a killed run and its report, and a sweep on a Ray cluster of two nodes on this machine.
Each point runs in a fresh process (a Ray task), so these tests take a minute or two."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from npusim.sweep import spec as spec_module
from npusim.sweep.report import pareto

SWEEP = [sys.executable, "-m", "npusim.sweep.cli"]
SMALL_SPEC = """
base: base
axes:
  core.scratchpad.size_bytes: [1048576, 2097152]
  dram.bytes_per_cycle_per_channel: {range: [64, 128, 64]}
constraints:
  - core.scratchpad.size_bytes * num_cores <= 64 * 2**20
workloads: ["kernel:mm 512^3 bf16"]
"""


def write(tmp_path, text, name="spec.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def sweep(*args, timeout=600):
    return subprocess.run(SWEEP + list(args), capture_output=True, text=True, timeout=timeout)


def test_spec_axes_expand_and_constraints_exclude(tmp_path):
    spec = spec_module.load(write(tmp_path, """
base: tiny
axes:
  core.vector_unit.lanes: {pow2: [8, 64]}
  array: {paths: [core.tensor_core.rows, core.tensor_core.cols], values: [8, 16]}
constraints: ["core.vector_unit.lanes <= 2 * core.tensor_core.rows"]
workloads: ["gpt2:decode:ctx=64"]
search: {random: 3}
"""))
    assert [a.values for a in spec.axes] == [(8, 16, 32, 64), (8, 16)]
    assert spec.settings({"core.vector_unit.lanes": 32, "array": 16}) == [
        "core.vector_unit.lanes=32", "core.tensor_core.rows=16", "core.tensor_core.cols=16"]
    assert len(spec_module.grid(spec)) == 8 and len(spec_module.sample(spec)) == 3
    from npusim import _C
    fields = _C.chip_config_fields("tiny", spec.settings({"core.vector_unit.lanes": 32, "array": 16}))
    assert spec_module.satisfies(spec, fields) == (True, "")
    fields = _C.chip_config_fields("tiny", spec.settings({"core.vector_unit.lanes": 64, "array": 8}))
    assert spec_module.satisfies(spec, fields) == (False, "core.vector_unit.lanes <= 2 * core.tensor_core.rows")


@pytest.mark.parametrize("text, message", [
    ("base: base\naxes: {x: 3}\nworkloads: [gpt2]\n", "axes.x: give a list of values"),
    ("base: base\nworkloads: [gpt3]\n", "unknown family 'gpt3'"),
    ("base: base\nworkloads: [gpt2:train]\n", "gpt2 has the phases prefill, decode, not 'train'"),
    ("base: base\nworkloads: ['gpt2:prefill:seqlen=4']\n", "'seqlen=4' is not one of batch=N, seq=N, ctx=N"),
    ("base: base\nworkloads: [gpt2]\nsearch: annealing\n", "search is grid, {random: N} or {optuna: N}"),
    ("base: base\nworkloads: [gpt2]\nobjectives: [speed]\n", "objectives speed: not among"),
    ("base: base\nworkload: [gpt2]\n", "unknown entries workload"),
    ("base: base\naxes: [\n", "spec.yaml:3:1: not YAML"),
    ("base: base\naxes: {core.tensor_core.rowz: [64]}\nworkloads: [gpt2]\n", "core.tensor_core has no field 'rowz'"),
    ("base: basic\nworkloads: [gpt2]\n", "unknown chip preset \"basic\""),
    ("base: missing.pbtxt\naxes: {num_cores: [1]}\nworkloads: [gpt2]\n", "missing.pbtxt: cannot open"),
])
def test_a_bad_spec_is_an_error_naming_the_file_and_the_entry(tmp_path, text, message):
    result = sweep("run", write(tmp_path, text), "--out", str(tmp_path / "out"))
    assert result.returncode == 1, result.stdout
    assert message in result.stderr and "spec.yaml" in result.stderr, result.stderr
    assert not (tmp_path / "out" / "results.parquet").exists()


def test_pareto_front_keeps_the_points_nothing_beats():
    points = [{"x": 1, "y": 5}, {"x": 2, "y": 3}, {"x": 3, "y": 4}, {"x": 4, "y": 1}, {"x": 2, "y": 6}]
    assert pareto(points, "x", "y") == [{"x": 1, "y": 5}, {"x": 2, "y": 3}, {"x": 4, "y": 1}]


def test_a_small_sweep_runs_resumes_after_a_kill_and_reports(tmp_path):
    spec = write(tmp_path, SMALL_SPEC)
    out = tmp_path / "out"
    # Killed once its first point is cached: the rerun runs only the rest.
    process = subprocess.Popen(SWEEP + ["run", spec, "--out", str(out), "--workers", "2", "--quiet"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline, points = time.time() + 300, out / "points"
    while not (points.is_dir() and any(points.glob("*.json"))):
        assert process.poll() is None, process.communicate()
        assert time.time() < deadline, "no point finished in 5 minutes"
        time.sleep(0.2)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    finished = len(list((out / "points").glob("*.json")))
    assert 1 <= finished <= 4
    result = sweep("run", spec, "--out", str(out), "--workers", "2", "--quiet")
    assert result.returncode == 0, result.stderr
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith(f"4 points: {4 - finished} done, {finished} cached, 0 failed in "), result.stdout

    import pyarrow.parquet as pq
    rows = pq.read_table(out / "results.parquet").to_pylist()
    assert len(rows) == 4 and {r["status"] for r in rows} == {"done"}
    assert {(r["axis.core.scratchpad.size_bytes"], r["axis.dram.bytes_per_cycle_per_channel"]) for r in rows} == {
        (s, b) for s in (1048576, 2097152) for b in (64, 128)}
    for row in rows:
        assert row["device_cycles"] > 0 and row["energy_pj"] > 0 and row["dram_bytes"] > 0
        assert row["energy_pj"] == pytest.approx(sum(row[f"energy_{c}_pj"] for c in (
            "tensor_core", "accumulator", "scratchpad", "vector_unit", "dma", "noc", "dram", "host_link", "control")))
    # More SRAM: more area (the model's monotonicity, through the sweep).
    area = {r["axis.core.scratchpad.size_bytes"]: r["area_mm2"] for r in rows}
    assert area[2097152] > area[1048576]
    assert (out / "results.csv").read_text().count("\n") == 5

    report = sweep("report", str(out))
    assert report.returncode == 0, report.stderr
    names = {os.path.basename(line) for line in report.stdout.split()}
    for kind in ("pareto", "energy", "utilization", "sensitivity", "roofline"):
        assert f"{kind}_kernel_mm_512_3_bf16.png" in names
    html = (out / "report" / "index.html").read_text()
    assert "plotly" in html.lower() and "Pareto front" in html and "<script" in html

    # A widened sweep runs only its new points.
    wider = write(tmp_path, SMALL_SPEC.replace("[64, 128, 64]", "[64, 192, 64]"), "wider.yaml")
    result = sweep("run", wider, "--out", str(out), "--workers", "2", "--quiet")
    assert result.stdout.strip().splitlines()[-1].startswith("6 points: 2 done, 4 cached, 0 failed in "), result.stdout


def test_a_failing_point_is_recorded_and_the_sweep_goes_on(tmp_path):
    # 16 MiB of DRAM cannot hold a 2048^3 bf16 GEMM's 24 MiB of operands: that point fails, the other runs.
    spec = write(tmp_path, """
base: base
axes:
  dram.size_bytes: [16777216, 1073741824]
workloads: ["kernel:mm 2048^3 bf16"]
""")
    result = sweep("run", spec, "--out", str(tmp_path / "out"), "--workers", "2", "--quiet")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1].startswith("2 points: 1 done, 0 cached, 1 failed in "), result.stdout
    import pyarrow.parquet as pq
    rows = {r["axis.dram.size_bytes"]: r for r in pq.read_table(tmp_path / "out" / "results.parquet").to_pylist()}
    assert rows[1073741824]["status"] == "done"
    assert rows[16777216]["status"] == "failed" and "out of device memory" in rows[16777216]["error"]


def test_points_run_on_every_node_of_a_ray_cluster(tmp_path):
    from ray.cluster_utils import Cluster
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        spec = write(tmp_path, SMALL_SPEC)
        result = sweep("run", spec, "--out", str(tmp_path / "out"), "--address", cluster.address, "--quiet")
        assert result.returncode == 0, result.stderr
        import pyarrow.parquet as pq
        rows = pq.read_table(tmp_path / "out" / "results.parquet").to_pylist()
        assert len({r["node_id"] for r in rows}) == 2, [r["node_id"] for r in rows]
    finally:
        cluster.shutdown()


def test_optuna_search_runs_its_budget(tmp_path):
    spec = write(tmp_path, """
base: base
axes:
  core.scratchpad.size_bytes: [1048576, 2097152, 4194304]
  dram.bytes_per_cycle_per_channel: [64, 128]
workloads: ["kernel:mm 256^3 bf16"]
search: {optuna: 4}
objectives: [latency_s, energy_pj]
""")
    result = sweep("run", spec, "--out", str(tmp_path / "out"), "--workers", "2", "--quiet")
    assert result.returncode == 0, result.stderr
    counts = result.stdout.strip().splitlines()[-1]
    points = int(counts.split()[0])
    assert 1 <= points <= 4 and " 0 failed" in counts, counts
    manifest = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert manifest["objectives"] == ["latency_s", "energy_pj"]


def test_kernel_rooflines_per_point(tmp_path):
    """kernel_rooflines: true gives each point's kernels' rooflines (from a trace of the call), a table of
    them and a heatmap in the report."""
    spec = write(tmp_path, """
base: base
axes:
  dram.bytes_per_cycle_per_channel: [32, 128]
workloads: ["kernel:conv 3x3 ResNet 1x64x56x56 -> 64"]
kernel_rooflines: true
""")
    out = tmp_path / "out"
    result = sweep("run", spec, "--out", str(out), "--workers", "2", "--quiet")
    assert result.returncode == 0, result.stderr
    import pyarrow.parquet as pq
    rows = pq.read_table(out / "results.parquet").to_pylist()
    kernels = pq.read_table(out / "kernels.parquet").to_pylist()
    assert "kernel_rooflines" not in rows[0] and len(rows) == 2
    for row in rows:
        mine = [k for k in kernels if k["point"] == row["point"]]
        assert len(mine) == row["kernels"] >= 1
        assert sum(k["macs"] for k in mine) == row["macs"]
        # Each kernel's bound against its point's peaks: base has 4 cores of 128 x 128 MACs and 256 lanes,
        # and 4 DRAM channels of the axis' bytes per cycle.
        dram_bytes_per_cycle = 4 * row["axis.dram.bytes_per_cycle_per_channel"]
        for k in mine:
            bounds = {"mac": k["macs"] / 65536, "dram": k["dram_bytes"] / dram_bytes_per_cycle, "vector": k["elements"] / 1024}
            assert k["bound_cycles"] == pytest.approx(max(bounds.values())) and k["binding"] == max(bounds, key=bounds.get)
            assert k["fraction_of_roofline"] == pytest.approx(k["bound_cycles"] / k["cycles"])
            assert k["axis.dram.bytes_per_cycle_per_channel"] == row["axis.dram.bytes_per_cycle_per_channel"]
    report = sweep("report", str(out))
    assert report.returncode == 0, report.stderr
    assert any(os.path.basename(line).startswith("kernel_rooflines_kernel_conv_3x3") for line in report.stdout.split()), report.stdout
