#!/usr/bin/env python3
"""Simulator speed: simulated cycles and instructions per host second, functional and
timing-only, for a large tiled GEMM and a vector-heavy kernel on the `base` chip, with the
host time of the same GEMM in torch's CPU matmul, measured in the same run, as the reference.

Targets (issue: chip model): timing-only >= 50 M simulated cycles/s on the GEMM; functional
mode at most 3x the host matmul's time. That GEMM (examples/gemm.s) is bound by DMA and keeps the
tensor cores about 11% busy, which flatters cycles per second; so the run also times the compiler's
own GEMM (--compiled-size, 4096^3 bf16 through torch.compile on the npu device, timing-only, about
80% of the peak MACs on base), per DMA timing model, against issue 35's target for the reference
model: >= 20 M simulated cycles/s on a GEMM that keeps the tensor cores at least 80% busy.
Each kernel runs with DMA timed per request (the reference model), per step and per window
(--dma-timing step|window, docs/chip.md "DMA timing"), with the ratio of their cycles to the
reference's. Each simulation is timed as the best of five runs of npu-sim, or of more, up to 25,
while they take under a second in all (best_seconds); "sim s" takes away the process's start-up
(npu-sim running a program that halts at once, timed the same way: loading libraries and the
config, building the chip), so that the rate is the simulation's own.
Each reference is timed the same way after a warm-up, or is the warm-up alone where that takes more
than 10 s (bf16 on a host without bf16 instructions).

Usage: .venv/bin/python bench/sim_speed.py [--size 2048] [--compiled-size 4096] [--config base]
Needs the build (build/bin/npu-as, build/bin/npu-sim, the npusim module).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "build", "bin")


def with_constants(source_path, constants):
    text = open(source_path).read()
    for name, value in constants.items():
        text, count = re.subn(rf"^\.equ {name}, .*$", f".equ {name}, {value}", text, flags=re.M)
        if count != 1:
            sys.exit(f"bench: {source_path} has no single `.equ {name}`")
    return text


def assemble(text, directory, name):
    source = os.path.join(directory, name + ".s")
    program = os.path.join(directory, name + ".npubin")
    open(source, "w").write(text)
    subprocess.run([os.path.join(BIN, "npu-as"), source, "-o", program], check=True)
    return program


def best_seconds(run):
    """The least host time of run(): at least five runs, and more up to 25 while they take under a second
    in all (a run of a few tens of milliseconds on this kind of host is slowed by a third now and then,
    for seconds at a time: the least of many is the run's own time)."""
    times = []
    while len(times) < 5 or (len(times) < 25 and sum(times) < 1.0):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def simulate(program, config, timing_only, directory, dma_timing="request"):
    stats_path = os.path.join(directory, "stats.json")
    command = [os.path.join(BIN, "npu-sim"), "--config", config, program, "--stats", stats_path, "--dma-timing", dma_timing]
    if timing_only:
        command.append("--timing-only")
    seconds = best_seconds(lambda: subprocess.run(command, check=True, stdout=subprocess.DEVNULL))
    stats = json.load(open(stats_path))
    instructions = sum(engine["instructions"] for core in stats["cores"] for engine in core["engines"])
    return seconds, stats["cycles"], instructions, stats["tensor_utilization"]


def startup_seconds(config, directory):
    """npu-sim's wall time for a program that halts at once: its start-up (best_seconds)."""
    program = assemble(".code all\n    halt\n", directory, "halt")
    return best_seconds(lambda: subprocess.run([os.path.join(BIN, "npu-sim"), "--config", config, program, "--timing-only"],
                                               check=True, stdout=subprocess.DEVNULL))


def torch_matmul_seconds(size, dtype_name="bfloat16"):
    import torch

    dtype = getattr(torch, dtype_name)
    a = torch.randn(size, size).to(dtype)
    b = torch.randn(size, size).to(dtype)
    start = time.perf_counter()
    torch.matmul(a, b)  # warm up
    warm_up = time.perf_counter() - start
    if warm_up > 10:  # (bf16 without bf16 instructions takes minutes: one run is the measurement)
        return warm_up, torch.get_num_threads()
    return best_seconds(lambda: torch.matmul(a, b)), torch.get_num_threads()


COMPILED_GEMM = """
import json, sys, time, torch, npusim
from npusim.workloads.kernels import chip_peaks
size, config, dma_timing = int(sys.argv[1]), sys.argv[2], sys.argv[3]
npusim.init(config, timing_only=True, dma_timing=dma_timing)
a, b = (torch.randn(size, size, dtype=torch.bfloat16).to("npu") for _ in range(2))
gemm = torch.compile(lambda a, b: a @ b, backend="npu")
gemm(a, b); npusim.synchronize()  # compiles it
times = []
for _ in range(3):
    with npusim.profile() as profile:
        start = time.perf_counter(); gemm(a, b); npusim.synchronize(); times.append(time.perf_counter() - start)
cycles = profile.kernels[0][-1]
print(json.dumps({"seconds": min(times), "cycles": cycles, "busy": size ** 3 / chip_peaks(npusim)["macs_per_cycle"] / cycles}))
"""


def compiled_gemm(size, config, dma_timing):
    """The compiler's GEMM, timing-only in a process of its own (npusim.init once per process): the
    least host time of three calls after the one that compiles it, its device cycles, and the share of
    those cycles its MACs keep the tensor cores busy."""
    out = subprocess.run([sys.executable, "-c", COMPILED_GEMM, str(size), config, dma_timing], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=2048, help="GEMM M = N = K (default 2048)")
    parser.add_argument("--compiled-size", type=int, default=4096, help="the compiler's GEMM M = N = K (default 4096)")
    parser.add_argument("--config", default="base", help="chip preset or config file (default base)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as directory:
        gemm = assemble(with_constants(os.path.join(ROOT, "examples", "gemm.s"),
                                       {"M": args.size, "N": args.size, "K": args.size}), directory, "gemm")
        softmax = assemble(with_constants(os.path.join(ROOT, "examples", "softmax_rows.s"),
                                          {"ROWS": 4096, "COLS": 1024}), directory, "softmax")
        host_seconds, threads = torch_matmul_seconds(args.size)
        host_f32_seconds, _ = torch_matmul_seconds(args.size, "float32")
        print(f"reference: torch.matmul {args.size}^3 on the host CPU ({threads} threads): bf16 {host_seconds:.3f} s, "
              f"f32 {host_f32_seconds:.3f} s")
        startup = startup_seconds(args.config, directory)
        print(f"npu-sim start-up (a program that halts at once): {startup:.3f} s")
        print(f"{'kernel':<28}{'mode':<13}{'DMA':<9}{'wall s':>8}{'sim s':>8}{'sim cycles':>13}{'M cycles/s':>12}"
              f"{'(sim s)':>9}{'M instr/s':>11}{'tensor util':>13}")
        timings = ("request", "step", "window")
        results = {}
        for name, program in ((f"gemm {args.size}^3 bf16", gemm), ("softmax 4096x1024 f32", softmax)):
            # DMA timed per request (the reference model), per step and per window (docs/chip.md, "DMA timing").
            for dma_timing in timings:
                for timing_only in (False, True):
                    seconds, cycles, instructions, utilization = simulate(program, args.config, timing_only, directory,
                                                                          dma_timing)
                    simulating = max(seconds - startup, 1e-6)
                    mode = "timing-only" if timing_only else "functional"
                    results[(name, mode, dma_timing)] = seconds, simulating, cycles
                    print(f"{name:<28}{mode:<13}{dma_timing:<9}{seconds:>8.3f}{simulating:>8.3f}{cycles:>13}"
                          f"{cycles / seconds / 1e6:>12.2f}{cycles / simulating / 1e6:>9.2f}"
                          f"{instructions / seconds / 1e6:>11.3f}{100 * utilization:>12.1f}%")
        for name in (f"gemm {args.size}^3 bf16", "softmax 4096x1024 f32"):
            reference = results[(name, "functional", "request")][2]
            print(f"{name}: cycles per step / per request {results[(name, 'functional', 'step')][2] / reference:.4f}, "
                  f"per window / per request {results[(name, 'functional', 'window')][2] / reference:.4f}")
        gemm_name = f"gemm {args.size}^3 bf16"
        for dma_timing in timings:
            functional_seconds, _, cycles = results[(gemm_name, "functional", dma_timing)]
            timing_seconds, timing_simulating, _ = results[(gemm_name, "timing-only", dma_timing)]
            print(f"DMA per {dma_timing}: GEMM functional / host matmul: {functional_seconds / host_seconds:.2f}x bf16, "
                  f"{functional_seconds / host_f32_seconds:.1f}x f32 (target <= 3x); "
                  f"timing-only {cycles / timing_seconds / 1e6:.1f} M cycles/s, {cycles / timing_simulating / 1e6:.1f} "
                  f"without the start-up (target >= 50)")

    # The compiler's GEMM: its host time is the call's, torch's dispatch included (well under 1%).
    size = args.compiled_size
    print(f"the compiler's GEMM, {size}^3 bf16 through torch.compile, timing-only:")
    for dma_timing in timings:
        run = compiled_gemm(size, args.config, dma_timing)
        print(f"  DMA per {dma_timing:<8}{run['seconds']:>8.3f} s {run['cycles']:>11} cycles {run['cycles'] / run['seconds'] / 1e6:>7.2f} M cycles/s, "
              f"MACs at {100 * run['busy']:.1f}% of the peak" + (" (target >= 20 M cycles/s)" if dma_timing == "request" else ""))

if __name__ == "__main__":
    main()
