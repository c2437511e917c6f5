"""How npu-sweep scales with workers: the same sweep (6 design points of GPT-2 124M's forward on base, each a Ray
task in a process of its own) run with 1 worker and with 2, from empty result folders; prints points
per second of each (from the first point submitted to the last back: Ray's own start is not counted)
and their ratio. Goal (issue 38): 2 workers at least 1.8x the points per second of 1 on a 2-core machine.

    .venv/bin/python bench/sweep_scaling.py [--workload NAME] [--points N]
"""
import argparse
import os
import sys
import tempfile

from npusim.sweep.run import run


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", default="gpt2:prefill:seq=128")
    parser.add_argument("--points", type=int, default=6, help="design points (DRAM bandwidths per channel, 32 B apart)")
    args = parser.parse_args(argv)
    rates = {}
    with tempfile.TemporaryDirectory() as folder:
        spec = os.path.join(folder, "spec.yaml")
        with open(spec, "w") as f:
            f.write(f"base: base\naxes:\n  dram.bytes_per_cycle_per_channel: {{range: [32, {32 * args.points}, 32]}}\n"
                    f"workloads: [{args.workload!r}]\n")
        for workers in (1, 2):
            counts = run(spec, os.path.join(folder, f"out{workers}"), workers=workers, quiet=True)
            if counts["failed"] or counts["done"] != args.points:
                print(f"{workers} worker(s): {counts}", file=sys.stderr)
                return 1
            rates[workers] = counts["done"] / counts["run_seconds"]
            print(f"{workers} worker(s): {counts['done']} points in {counts['run_seconds']:.1f} s, {rates[workers]:.3f} points/s")
    print(f"2 workers / 1 worker: {rates[2] / rates[1]:.2f}x the points per second (goal: 1.8x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
