"""Monotone in resources: doubling a resource of the chip never makes a kernel
of the roofline suite (bench/roofline.py) slower by more than 1%.

    .venv/bin/python bench/monotonicity.py [--config base|large|FILE] [--only REGEX]
        [--knobs dram,sram,array,cores] [--json OUT] [--isolate]

Knobs, each applied to the config alone (a copy of its text with one value
changed): dram (bytes_per_cycle_per_channel x2), sram (each core's
scratchpad x2), array (the tensor core's rows and columns x2), cores
(num_cores x2, the mesh twice as wide). Every kernel is measured on the
config and on each variant (one process per config, timing-only); a row
prints each variant's cycles as a ratio of the config's. Exits 1 when any
ratio is above 1.01 (tests/python/test_roofline_suite.py runs a slice).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOLERANCE = 1.01


def _double(text: str, pattern: str, what: str) -> str:
    """text with the integer of the one match of `pattern` (its group 1) doubled."""
    matches = list(re.finditer(pattern, text, re.S))
    if len(matches) != 1:
        raise ValueError(f"monotonicity: {len(matches)} matches for {what} in the config (expected one)")
    m = matches[0]
    return text[:m.start(1)] + str(2 * int(m.group(1))) + text[m.end(1):]


KNOBS = {
    "dram": lambda t: _double(t, r"\bbytes_per_cycle_per_channel:\s*(\d+)", "the DRAM channels' bytes per cycle"),
    "sram": lambda t: _double(t, r"scratchpad\s*\{[^}]*?size_bytes:\s*(\d+)", "the scratchpad's size"),
    "array": lambda t: _double(_double(t, r"tensor_core\s*\{[^}]*?\brows:\s*(\d+)", "the array's rows"),
                               r"tensor_core\s*\{[^}]*?\bcols:\s*(\d+)", "the array's columns"),
    "cores": lambda t: _double(_double(t, r"(?m)^num_cores:\s*(\d+)", "num_cores"), r"\bmesh_cols:\s*(\d+)", "the mesh's columns"),
}


def config_text(config: str) -> str:
    path = config if os.path.exists(config) else os.path.join(ROOT, "configs", config + ".pbtxt")
    with open(path) as f:
        return f.read()


def measure(config_path: str, only: str, out_json: str, isolate: bool) -> dict:
    command = [sys.executable, os.path.join(ROOT, "bench", "roofline.py"), "--config", config_path, "--json", out_json]
    if isolate:
        command.append("--isolate")
    if only:
        command += ["--only", only]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"roofline.py --config {config_path} failed:\n{result.stderr[-3000:]}")
    with open(out_json) as f:
        return {row["kernel"]: row["cycles"] for row in json.load(f)["rows"]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="base")
    parser.add_argument("--only", help="only the suite's kernels whose name matches this regular expression")
    parser.add_argument("--knobs", default=",".join(KNOBS), help="comma-separated, of: " + ", ".join(KNOBS))
    parser.add_argument("--json", help="also write every kernel's ratios to this file")
    parser.add_argument("--isolate", action="store_true",
                        help="each kernel in a process of its own (roofline.py --isolate): ratios free of the DRAM state "
                             "earlier kernels leave, about five times slower")
    args = parser.parse_args(argv)
    knobs = [k for k in args.knobs.split(",") if k]
    unknown = [k for k in knobs if k not in KNOBS]
    if unknown:
        print(f"monotonicity.py: unknown knob {unknown[0]!r} (knobs: {', '.join(KNOBS)})", file=sys.stderr)
        return 1
    text = config_text(args.config)
    with tempfile.TemporaryDirectory() as tmp:
        base_path = os.path.join(tmp, "config.pbtxt")
        with open(base_path, "w") as f:
            f.write(text)
        cycles = {"config": measure(base_path, args.only, os.path.join(tmp, "config.json"), args.isolate)}
        for knob in knobs:
            path = os.path.join(tmp, f"{knob}.pbtxt")
            with open(path, "w") as f:
                f.write(KNOBS[knob](text))
            cycles[knob] = measure(path, args.only, os.path.join(tmp, f"{knob}.json"), args.isolate)
    print(f"{args.config}: each resource doubled, cycles as a ratio of the config's (above {TOLERANCE}: a violation)")
    print(f"{'kernel':48} {'cycles':>11} " + " ".join(f"{k:>7}" for k in knobs))
    violations, rows = [], []
    for kernel, base in cycles["config"].items():
        ratios = {k: cycles[k][kernel] / max(base, 1) for k in knobs}
        rows.append({"kernel": kernel, "cycles": base, "ratios": ratios})
        marks = " ".join(f"{ratios[k]:>6.3f}{'!' if ratios[k] > TOLERANCE else ' '}" for k in knobs)
        print(f"{kernel[:48]:48} {base:>11} {marks}")
        violations += [(kernel, k, ratios[k]) for k in knobs if ratios[k] > TOLERANCE]
    print(f"{len(violations)} violations over {len(rows)} kernels and {len(knobs)} knobs" +
          "".join(f"\n  {kernel}: {knob} x2 takes {ratio:.3f}x the cycles" for kernel, knob, ratio in violations))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"config": args.config, "knobs": knobs, "rows": rows, "violations": violations}, f, indent=1)
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
