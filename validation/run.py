"""npusim against published measurements of real chips.

Each row of validation/data/CHIP.csv is a workload measured on the real chip
(its source in the row). This runs each one through the real path,
torch.compile(backend="npu") on the chip's preset in timing-only mode, and
compares the device time of the kernels it launched (cycles / clock) with the
measurement:

    .venv/bin/python validation/run.py [--chip tpu_v4] [--config FILE.pbtxt]
        [--dma-timing request|step|window] [--only REGEX] [--json OUT] [--plot OUT.png] [--calibrate]

Per workload it prints measured, simulated and the error; then the mean
absolute percentage error (MAPE) per category and overall, for the rows used
to calibrate and for the held-out rows (every third row: ids numbered 1 mod 3); the last line
is `MAPE X% over N workloads`. --config runs the chip's rows on another
config (the preset changed, say) instead of the chip's preset. --calibrate fits the preset's one calibrated
number, command_processor.launch_cycles (the fixed cost of each op, which no
public source gives), on the calibration rows only, and prints it.

Data and sources: docs/validation.md. Inputs have the row's dtype, as in its
source. npusim's time is the device's; a row's `span` says what the source
timed (an XLA fusion, module or op on the device, or `host`: around the call).
"""
import argparse
import csv
import json
import os
import re
import sys
import time
from typing import Callable, Dict, List, Tuple

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))


# ---- workloads: the op of a row, as PyTorch computes it --------------------------------------

def _shape(row: dict) -> Dict[str, int]:
    return {k: int(v) for k, v in (item.split("=") for item in row["shape"].split(";"))}


# A row's dtype names its inputs' dtype.
_DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}

# Each builder takes the row's shape and dtype and gives the function and its (CPU) inputs.


def _matmul(s, dtype):
    return (lambda a, b: a @ b), (torch.randn(s["M"], s["K"], dtype=dtype), torch.randn(s["K"], s["N"], dtype=dtype))


def _conv2d(s, dtype):
    # jax.lax.conv_general_dilated(x, w, (1, 1), "VALID") in NCHW / OIHW.
    return (lambda x, w: F.conv2d(x, w)), (torch.randn(s["N"], s["C"], s["H"], s["W"], dtype=dtype),
                                           torch.randn(s["K"], s["C"], s["R"], s["S"], dtype=dtype))


# The source's norms take gamma and beta in f32, so their results are f32.
def _layer_norm(s, dtype):
    return (lambda x: F.layer_norm(x.float(), (x.shape[-1],), eps=1e-5)), (torch.randn(s["B"], s["L"], s["H"], dtype=dtype),)


def _rms_norm(s, dtype):
    return (lambda x: F.rms_norm(x.float(), (x.shape[-1],), eps=1e-6)), (torch.randn(s["B"], s["L"], s["H"], dtype=dtype),)


def _batch_norm(s, dtype):
    c = s["C"]
    stats = (torch.zeros(c), torch.ones(c), torch.ones(c), torch.zeros(c))
    return (lambda x, mean, var, w, b: F.batch_norm(x.float(), mean, var, w, b, training=False, eps=1e-5)), (
        torch.randn(s["N"], c, s["H"], s["W"], dtype=dtype),) + stats


def _binary(fn):
    return lambda s, dtype: (fn, (torch.randn(s["D0"], s["D1"], dtype=dtype), torch.randn(s["D0"], s["D1"], dtype=dtype)))


def _unary(fn):
    return lambda s, dtype: (fn, (torch.randn(s["D0"], s["D1"], dtype=dtype),))


WORKLOADS: Dict[str, Callable] = {
    "matmul": _matmul,
    "conv2d": _conv2d,
    "layer_norm": _layer_norm,
    "rms_norm": _rms_norm,
    "batch_norm": _batch_norm,
    "add": _binary(torch.add),
    "sub": _binary(torch.sub),
    "mul": _binary(torch.mul),
    "div": _binary(torch.div),
    "relu": _unary(F.relu),
    "sigmoid": _unary(torch.sigmoid),
    "tanh": _unary(torch.tanh),
    "leaky_relu": _unary(lambda x: F.leaky_relu(x, 0.1)),
    "elu": _unary(F.elu),
    "selu": _unary(F.selu),
}


def load_rows(chip: str) -> List[dict]:
    path = os.path.join(HERE, "data", f"{chip}.csv")
    with open(path) as f:
        rows = list(csv.DictReader(f))
    for line, row in enumerate(rows, start=2):
        if row["op"] not in WORKLOADS:
            raise SystemExit(f"{path}:{line}:1: unknown op {row['op']!r} (known: {', '.join(WORKLOADS)})")
        if row["dtype"] not in _DTYPES:
            raise SystemExit(f"{path}:{line}:1: unknown dtype {row['dtype']!r} (known: {', '.join(_DTYPES)})")
    return rows


def held_out(row: dict) -> bool:
    """Every third row is held out of calibration: those whose number (the id's last part) is 1 mod 3."""
    return int(row["id"].rsplit("-", 1)[1]) % 3 == 1


# ---- simulating -----------------------------------------------------------------------------

def simulate(row: dict, npusim) -> Tuple[int, int]:
    """Device cycles and kernel launches of the row's workload (its second run: the first compiles)."""
    import gc
    torch._dynamo.reset()
    gc.collect()
    torch.npu.empty_cache()
    torch.manual_seed(0)
    fn, args = WORKLOADS[row["op"]](_shape(row), _DTYPES[row["dtype"]])
    args = [t.to("npu") for t in args]
    compiled = torch.compile(fn, backend="npu", fullgraph=True, dynamic=False)
    compiled(*args)
    npusim.synchronize()
    with npusim.profile() as prof:
        compiled(*args)
    fallbacks = sum(prof.fallbacks.values())
    if fallbacks or not prof.kernels:
        raise SystemExit(f"{row['id']} ({row['op']} {row['shape']}): {fallbacks} op(s) ran on the CPU "
                         f"({', '.join(prof.fallbacks) or 'no kernel on the chip'}): its time would not be the chip's")
    return sum(k[3] for k in prof.kernels), len(prof.kernels)


def mape(errors: List[float]) -> float:
    return sum(abs(e) for e in errors) / len(errors) if errors else float("nan")


def summarize(results: List[dict]) -> List[str]:
    lines = []
    for part, chosen in (("calibration", [r for r in results if not r["held_out"]]),
                         ("held out", [r for r in results if r["held_out"]])):
        categories = sorted({r["category"] for r in chosen})
        per = ", ".join(f"{c} {mape([r['error_percent'] for r in chosen if r['category'] == c]):.1f}% "
                        f"({sum(r['category'] == c for r in chosen)})" for c in categories)
        lines.append(f"{part}: MAPE {mape([r['error_percent'] for r in chosen]):.1f}% over {len(chosen)}; {per}")
    return lines


def calibrate_launch_cycles(results: List[dict], clock_mhz: float, launch_cycles: int) -> int:
    """The launch cost that minimizes the calibration rows' MAPE: each kernel launch adds it once (the
    device time of a row moves by launches x the change), searched on a grid of whole cycles."""
    rows = [r for r in results if not r["held_out"]]
    best = (float("inf"), launch_cycles)
    for candidate in range(0, 20001, 10):
        errors = []
        for r in rows:
            cycles = r["cycles"] + r["kernels"] * (candidate - launch_cycles)
            errors.append(100.0 * (cycles / clock_mhz - r["measured_us"]) / r["measured_us"])
        best = min(best, (mape(errors), candidate))
    return best[1]


def plot(results: List[dict], chip: str, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.5, 6))
    for index, category in enumerate(sorted({r["category"] for r in results})):
        for held, marker in ((False, "o"), (True, "^")):
            chosen = [r for r in results if r["category"] == category and r["held_out"] == held]
            if chosen:
                ax.scatter([r["measured_us"] for r in chosen], [r["simulated_us"] for r in chosen], marker=marker,
                           color=f"C{index}", label=f"{category} ({'held out' if held else 'calibration'})", alpha=0.75)
    low = min(min(r["measured_us"], r["simulated_us"]) for r in results) * 0.8
    high = max(max(r["measured_us"], r["simulated_us"]) for r in results) * 1.25
    ax.plot([low, high], [low, high], "k-", lw=0.8)
    for factor in (0.8, 1.25):
        ax.plot([low, high], [low * factor, high * factor], "k:", lw=0.6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured (us)")
    ax.set_ylabel("npusim (us)")
    ax.set_title(f"npusim {chip} preset against measurements (dotted: +-20%)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path + ".tmp.png", dpi=120)
    os.replace(path + ".tmp.png", path)  # never a half-written plot where the old one was


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chip", default="tpu_v4", help="a data file in validation/data and the preset of that name")
    parser.add_argument("--config", default="", help="a chip config to run the rows on instead of the chip's preset")
    parser.add_argument("--dma-timing", default="", choices=["", "request", "step", "window"],
                        help="override the preset's DMA timing model")
    parser.add_argument("--only", default="", help="rows whose id, op or category matches this regex")
    parser.add_argument("--json", default="", help="write every row's result here")
    parser.add_argument("--plot", default="", help="write a measured-against-simulated plot (PNG) here")
    parser.add_argument("--calibrate", action="store_true",
                        help="fit command_processor.launch_cycles on the calibration rows and print it")
    args = parser.parse_args(argv)

    rows = load_rows(args.chip)
    if args.only:
        pattern = re.compile(args.only)
        rows = [r for r in rows if pattern.search(r["id"]) or pattern.search(r["op"]) or pattern.search(r["category"])]
    import npusim
    config = args.config or args.chip
    npusim.init(config=config, timing_only=True, dma_timing=args.dma_timing)
    info = npusim._C.chip_info()
    clock_mhz = info["clock_mhz"]
    start = time.perf_counter()
    print(f"chip {args.chip} (config {config}): {info['num_cores']:g} cores at {clock_mhz:g} MHz; timing-only"
          + (f"; DMA timing {args.dma_timing}" if args.dma_timing else ""))
    print(f"{'id':8} {'category':11} {'workload':34} {'measured':>11} {'npusim':>11} {'error':>8} {'kernels':>7}")
    results = []
    for row in rows:
        cycles, kernels = simulate(row, npusim)
        measured = float(row["measured_us"])
        simulated = cycles / clock_mhz
        error = 100.0 * (simulated - measured) / measured
        results.append({"id": row["id"], "category": row["category"], "op": row["op"], "shape": row["shape"],
                        "measured_us": measured, "simulated_us": simulated, "cycles": cycles, "kernels": kernels,
                        "error_percent": error, "held_out": held_out(row)})
        workload = f"{row['op']} {row['shape'].replace(';', ' ')}"
        print(f"{row['id']:8} {row['category']:11} {workload:34.34} {measured:9.2f}us {simulated:9.2f}us "
              f"{error:+7.1f}% {kernels:7d}{'  (held out)' if held_out(row) else ''}", flush=True)
    for line in summarize(results):
        print(line)
    if args.calibrate:
        launch = int(npusim._C.chip_info()["launch_cycles"])
        print(f"calibrated command_processor.launch_cycles: {calibrate_launch_cycles(results, clock_mhz, launch)} "
              f"(the config has {launch})")
    if args.json:
        with open(args.json + ".tmp", "w") as f:
            json.dump({"chip": args.chip, "config": config, "dma_timing": args.dma_timing or "preset", "rows": results}, f, indent=1)
        os.replace(args.json + ".tmp", args.json)
    if args.plot:
        plot(results, args.chip, args.plot)
    print(f"({time.perf_counter() - start:.0f} s)")
    print(f"MAPE {mape([r['error_percent'] for r in results]):.1f}% over {len(results)} workloads")
    return 0


if __name__ == "__main__":
    sys.exit(main())
