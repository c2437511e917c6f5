"""npusim's tensor core against SCALE-Sim v3 on GEMM layers.

Runs each layer through SCALE-Sim 3.0.0 (in an environment of its own, as it
needs numpy < 2; made on first use in .venv-scalesim) and through npusim's
simulator (one tc.mm, timing-only, `npu-sim`), and prints the cycles of both:

  - npusim configured as SCALE-Sim models the array (weight double buffering
    off, every fold timed as the full array): must equal SCALE-Sim's count,
    which is its "Total Cycles" + 1 (SCALE-Sim reports the index of the cycle
    that serves the last output);
  - npusim's default fold timing (a partial fold costs the rows and columns it
    uses), and npusim with base's double-buffered weights: the departures.

Output stationary departs on purpose: npusim drains each fold's outputs (R
cycles a fold) where SCALE-Sim overlaps them with the next fold.

    .venv/bin/python validation/scalesim_check.py [--scalesim-python PY]

Exit status 1 when a weight-stationary layer of the matching config differs
from SCALE-Sim. tests/sim/golden_latency_test.cpp pins the same numbers.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from typing import Dict, List, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "build", "bin")
SCALESIM_VERSION = "3.0.0"

# (array rows, array cols, m, n, k): the layers of the golden test, and ResNet/BERT layers on a 128 x 128 array.
LAYERS: List[Tuple[int, int, int, int, int]] = [
    (r, c, m, n, k) for (r, c) in [(32, 32), (8, 16)]
    for (m, n, k) in [(64, 32, 32), (100, 50, 70), (8, 96, 40), (1, 128, 256), (300, 17, 9), (33, 65, 129)]
] + [
    # Layers of real networks on a 128 x 128 array, cut to fit base's scratchpad and accumulator.
    (128, 128, 392, 128, 1152),   # ResNet-18 conv3_x 3x3 as im2col GEMM: 14 x 28 pixels, 128 x 9 deep
    (128, 128, 196, 256, 1152),   # ResNet-18 conv4_x 3x3 (14 x 14 pixels), half its 256 x 9 depth
    (128, 128, 128, 768, 768),    # BERT-base attention projection, 128 tokens
    (128, 128, 128, 1024, 768),   # BERT-base FFN up, 128 tokens, a third of its 3072 columns
    (128, 128, 8, 1000, 512),     # ResNet-18 classifier, batch 8
]

SCALESIM_CONFIG = """[general]
run_name = check
[architecture_presets]
ArrayHeight: {rows}
ArrayWidth: {cols}
IfmapSramSzkB: 65536
FilterSramSzkB: 65536
OfmapSramSzkB: 65536
IfmapOffset: 0
FilterOffset: 10000000
OfmapOffset: 20000000
Dataflow: {dataflow}
Bandwidth: 100
ReadRequestBuffer: 32
WriteRequestBuffer: 32
[layout]
IfmapCustomLayout: False
IfmapSRAMBankBandwidth: 10
IfmapSRAMBankNum: 10
IfmapSRAMBankPort: 2
FilterCustomLayout: False
FilterSRAMBankBandwidth: 10
FilterSRAMBankNum: 10
FilterSRAMBankPort: 2
[sparsity]
SparsitySupport: false
SparseRep: ellpack_block
OptimizedMapping: false
BlockSize: 8
RandomNumberGeneratorSeed: 40
[run_presets]
InterfaceBandwidth: USER
UseRamulatorTrace: False
"""

# Run inside SCALE-Sim's environment: argv = config, topology, layout, output dir; prints the totals as JSON.
SCALESIM_DRIVER = """
import io, contextlib, json, os, sys
from scalesim.scale_sim import scalesim
config, topology, layout, out = sys.argv[1:5]
with contextlib.redirect_stdout(io.StringIO()):
    sim = scalesim(save_disk_space=True, verbose=False, config=config, topology=topology, layout=layout,
                   input_type_gemm=True)
    sim.run_scale(top_path=out)
reports = [os.path.join(d, f) for d, _, fs in os.walk(out) for f in fs if f == "COMPUTE_REPORT.csv"]
lines = open(reports[0]).read().splitlines()[1:]
print(json.dumps([int(line.split(",")[2]) for line in lines if line.strip()]))
"""


def scalesim_python(path: str) -> str:
    """SCALE-Sim's interpreter, made on first use (a virtual environment with numpy < 2)."""
    if os.path.exists(path):
        return path
    env = os.path.dirname(os.path.dirname(path))
    print(f"making {env} (numpy<2, scalesim=={SCALESIM_VERSION})", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", env], check=True)
    subprocess.run([path, "-m", "pip", "install", "-q", "numpy<2", f"scalesim=={SCALESIM_VERSION}"], check=True)
    return path


def run_scalesim(python: str, dataflow: str, rows: int, cols: int, shapes: List[Tuple[int, int, int]], work: str) -> List[int]:
    tag = f"{dataflow}_{rows}x{cols}"
    config, topology, layout = (os.path.join(work, f"{tag}.{ext}") for ext in ("cfg", "gemm.csv", "layout.csv"))
    with open(config, "w") as f:
        f.write(SCALESIM_CONFIG.format(rows=rows, cols=cols, dataflow=dataflow))
    with open(topology, "w") as f:
        f.write("Layer, M, N, K,\n" + "".join(f"l{i}, {m}, {n}, {k},\n" for i, (m, n, k) in enumerate(shapes)))
    with open(layout, "w") as f:
        f.write("Layer,\n")  # read even with custom layouts off
    out = subprocess.run([python, "-c", SCALESIM_DRIVER, config, topology, layout, os.path.join(work, tag)],
                         check=True, capture_output=True, text=True, cwd=work)
    return json.loads(out.stdout.strip().splitlines()[-1])


def npusim_config(base_text: str, rows: int, cols: int, dataflow: str, double_buffering: bool, full_array: bool) -> str:
    """base's config with its tensor core replaced (one array of rows x cols)."""
    tensor_core = (f"tensor_core {{ rows: {rows} cols: {cols} dataflow: {dataflow} input_dtypes: [\"bf16\"] "
                   f"weight_double_buffering: {str(double_buffering).lower()} "
                   f"fold_timing: {'FULL_ARRAY' if full_array else 'USED_EXTENT'} }}")
    text, count = re.subn(r"tensor_core \{.*?\n  \}", tensor_core, base_text, count=1, flags=re.S)
    assert count == 1, "no tensor_core section in the dumped config"
    return text


def npusim_cycles(config_path: str, m: int, n: int, k: int, work: str) -> int:
    """The tensor core's busy cycles for one m x n x k tc.mm (operands in the scratchpad)."""
    b_offset = (m * k * 2 + 4095) // 4096 * 4096
    source = os.path.join(work, f"mm_{m}_{n}_{k}.s")
    with open(source, "w") as f:
        f.write(f".code 0\n  li r1, 0x40000000\n  li r2, 0\n  li r3, {b_offset}\n  li r4, {m}\n  li r5, {n}\n"
                f"  li r6, {k}\n  tc.mm bf16, none, r1, r2, r3, r4, r5, r6\n  halt\n")
    program, stats = source.replace(".s", ".npubin"), source.replace(".s", ".json")
    subprocess.run([os.path.join(BIN, "npu-as"), source, "-o", program], check=True)
    run = subprocess.run([os.path.join(BIN, "npu-sim"), program, "--config", config_path, "--timing-only", "--stats", stats],
                         capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"npu-sim failed on the {m} x {n} x {k} tc.mm:\n{run.stdout}{run.stderr}")
    with open(stats) as f:
        engines = json.load(f)["cores"][0]["engines"]
    return next(e["busy_cycles"] for e in engines if e["name"] == "tensor core")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scalesim-python", default=os.path.join(ROOT, ".venv-scalesim", "bin", "python"),
                        help="the Python of an environment with scalesim and numpy < 2 (made there if missing)")
    args = parser.parse_args(argv)
    python = scalesim_python(args.scalesim_python)
    base_text = subprocess.run([os.path.join(BIN, "npu-sim"), "--config", "base", "--dump-config"],
                               check=True, capture_output=True, text=True).stdout
    mismatches = 0
    with tempfile.TemporaryDirectory() as work:
        print(f"{'df':3} {'array':>8} {'m':>5} {'n':>5} {'k':>5} | {'SCALE-Sim':>9} {'npusim':>9} {'diff':>6} | "
              f"{'used-ext':>9} {'err':>7} | {'dbl-buf':>9} {'err':>7}")
        for dataflow, scalesim_dataflow in [("WEIGHT_STATIONARY", "ws"), ("OUTPUT_STATIONARY", "os")]:
            arrays: Dict[Tuple[int, int], List[Tuple[int, int, int]]] = {}
            for r, c, m, n, k in LAYERS:
                arrays.setdefault((r, c), []).append((m, n, k))
            for (rows, cols), shapes in arrays.items():
                totals = run_scalesim(python, scalesim_dataflow, rows, cols, shapes, work)
                configs = {}
                variants = [("match", False, True), ("used", False, False)]
                if dataflow == "WEIGHT_STATIONARY":
                    variants.append(("double", True, False))
                for name, double_buffering, full_array in variants:
                    path = os.path.join(work, f"{scalesim_dataflow}_{rows}x{cols}_{name}.pbtxt")
                    with open(path, "w") as f:
                        f.write(npusim_config(base_text, rows, cols, dataflow, double_buffering, full_array))
                    configs[name] = path
                for (m, n, k), total in zip(shapes, totals):
                    scale_sim = total + 1
                    cycles = {name: npusim_cycles(path, m, n, k, work) for name, path in configs.items()}
                    diff = cycles["match"] - scale_sim
                    if dataflow == "WEIGHT_STATIONARY" and diff != 0:
                        mismatches += 1
                    error = {name: 100.0 * (c - scale_sim) / scale_sim for name, c in cycles.items()}
                    double = f"{cycles['double']:9d} {error['double']:+6.1f}%" if "double" in cycles else f"{'-':>9} {'':>7}"
                    print(f"{scalesim_dataflow:3} {f'{rows}x{cols}':>8} {m:5d} {n:5d} {k:5d} | {scale_sim:9d} "
                          f"{cycles['match']:9d} {diff:+6d} | {cycles['used']:9d} {error['used']:+6.1f}% | {double}")
    print("SCALE-Sim's count is its Total Cycles + 1. Output stationary: npusim adds R cycles a fold (it drains "
          "each fold's outputs).")
    print(f"weight stationary, matching config: {mismatches} layer(s) differ from SCALE-Sim {SCALESIM_VERSION}")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
