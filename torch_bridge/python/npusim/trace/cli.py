"""npu-trace: questions to a trace npusim wrote (.pftrace or .json), answered in the terminal.

    npu-trace summary run.pftrace                 kernels, ops, layers; each engine's busy and stall time
    npu-trace summary run.pftrace --kernel 3      one kernel's engines
    npu-trace diff a.pftrace b.pftrace --by op    two runs side by side, biggest changes first
    npu-trace roofline run.pftrace --png roof.png each kernel against the chip's bounds
    npu-trace critical-path run.pftrace [--kernel ID|NAME | --block]
    npu-trace noc run.pftrace --png links.png     each NoC link's busy time; a heatmap of links over time
    npu-trace export run.pftrace --parquet DIR    spans, counters, flows, kernels, engines as Parquet
    npu-trace sql run.pftrace "SELECT name, cycles FROM kernels ORDER BY cycles DESC LIMIT 5"

Exit status 1, with the file named, for a file that cannot be read or is not a trace.
"""

import argparse
import json
import sys


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="npu-trace", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog="docs/analysts.md has a worked example.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p = sub.add_parser("summary", help="per kernel, op and layer; each engine's busy time and stalls by cause")
    p.add_argument("trace")
    p.add_argument("--kernel", help="one kernel (its id, or part of its name): its engines over its cycles")
    p.add_argument("--top", type=int, default=15, help="rows per table (default 15)")
    p.add_argument("--json", metavar="FILE", help="also write the kernels and engine times as JSON")
    p = sub.add_parser("diff", help="two runs side by side, sorted by the size of the change")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--by", choices=("layer", "op", "kernel"), default="layer")
    p.add_argument("--top", type=int, default=20)
    p = sub.add_parser("roofline", help="each kernel's rates against the chip's MAC, DRAM and vector bounds")
    p.add_argument("trace")
    p.add_argument("--png", metavar="FILE", help="also plot it")
    p.add_argument("--top", type=int, default=30)
    p = sub.add_parser("noc", help="each NoC link's busy time, and a heatmap of links over time")
    p.add_argument("trace")
    p.add_argument("--png", metavar="FILE", help="also plot the heatmap")
    p.add_argument("--top", type=int, default=20)
    p = sub.add_parser("critical-path", help="the chain of spans that sets a kernel's end, or the trace's")
    p.add_argument("trace")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--kernel", help="its id or part of its name (default: the longest kernel)")
    which.add_argument("--block", action="store_true", help="the whole trace: kernels, packets and the host's gaps on the command processor")
    p = sub.add_parser("export", help="the trace as Parquet tables")
    p.add_argument("trace")
    p.add_argument("--parquet", metavar="DIR", required=True)
    p = sub.add_parser("sql", help="a DuckDB query over the tables spans, counters, flows, kernels, engines")
    p.add_argument("trace")
    p.add_argument("query")
    return parser


def run(args) -> None:
    from . import diff, load

    if args.command == "diff":
        print(diff(load(args.a), load(args.b), by=args.by, top=args.top))
        return
    trace = load(args.trace)
    if args.command == "summary":
        if args.kernel is not None:
            k = trace.find_kernel(args.kernel)
            print(f"kernel {k.id} {k.name}: {k.cycles} cycles, op {k.op or '-'}, layer {k.layer or '-'}, nodes {k.nodes or '-'}")
            used = max(k.scratchpad_bytes.values(), default=0)
            print(f"scratchpad: up to {used} of {trace.chip.scratchpad_bytes_per_core} bytes on a core "
                  f"({100 * used / max(1, trace.chip.scratchpad_bytes_per_core):.1f}%), on {len(k.core_windows)} cores")
            print(trace.engine_table(k))
        else:
            print(trace.summary(top=args.top))
        if args.json:
            tables = trace.tables()
            with open(args.json, "w") as f:
                json.dump({"kernels": tables["kernels"].to_pylist(), "engines": tables["engines"].to_pylist()}, f, indent=1)
    elif args.command == "roofline":
        print(trace.roofline(top=args.top))
        if args.png:
            trace.roofline_plot(args.png)
            print(f"wrote {args.png}")
    elif args.command == "noc":
        print(trace.noc_report(top=args.top))
        if args.png:
            trace.noc_heatmap(args.png)
            print(f"wrote {args.png}")
    elif args.command == "critical-path":
        print(trace.block_path() if args.block else trace.critical_path(args.kernel))
    elif args.command == "export":
        for path in trace.export_parquet(args.parquet):
            print(f"wrote {path}")
    elif args.command == "sql":
        print(trace.sql(args.query))


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    from .model import TraceError

    try:
        run(args)
    except TraceError as e:
        print(f"npu-trace: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # DuckDB's errors for a bad query, an unwritable output
        if type(e).__module__.startswith(("duckdb", "_duckdb")) or isinstance(e, OSError):
            print(f"npu-trace: {e}", file=sys.stderr)
            return 1
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
