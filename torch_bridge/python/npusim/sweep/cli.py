"""npu-sweep: design-space sweeps of the simulated chip (docs/architects.md).

    npu-sweep run SPEC.yaml --out DIR [--workers N] [--address RAY_ADDRESS]
    npu-sweep report DIR
"""
import argparse
import sys

USAGE = __doc__


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="npu-sweep", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Design-space sweeps of the simulated chip: every (design point, workload) pair runs timing-only "
                    "as a Ray task; results are cached per point, tabled and plotted (docs/architects.md).")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run a sweep (resumes: points already in DIR are not run again)")
    run.add_argument("spec", help="the sweep's YAML spec (docs/architects.md: base, axes, constraints, workloads, search)")
    run.add_argument("--out", required=True, metavar="DIR", help="where points/, results.parquet and results.csv go")
    run.add_argument("--workers", type=int, metavar="N",
                     help="points in flight at once (default: this machine's cores, or the cluster's CPUs with --address)")
    run.add_argument("--address", metavar="RAY_ADDRESS",
                     help="an existing Ray cluster (host:port, or 'auto'); default: a local Ray instance for this run")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    report = commands.add_parser("report", help="plot a sweep's results into DIR/report/ (PNG and one HTML page)")
    report.add_argument("dir", metavar="DIR")
    args = parser.parse_args(argv)

    if args.command == "run":
        if args.workers is not None and args.workers < 1:
            parser.error("--workers must be at least 1")
        from .run import run as run_sweep
        from .spec import SpecError
        try:
            counts = run_sweep(args.spec, args.out, args.workers, args.address, args.quiet)
        except SpecError as e:
            print(f"npu-sweep: error: {e}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print("npu-sweep: interrupted; run the same command again to resume", file=sys.stderr)
            return 130
        if counts["excluded"]:
            print(f"{counts['excluded']} design points excluded (invalid config or a constraint): {args.out}/sweep.json lists them")
        print(f"results: {args.out}/results.parquet, {args.out}/results.csv")
        print(f"{counts['points']} points: {counts['done']} done, {counts['cached']} cached, {counts['failed']} failed "
              f"in {counts['seconds']:.0f} s")
        return 0
    from .report import ReportError, report as make_report
    try:
        files = make_report(args.dir)
    except ReportError as e:
        print(f"npu-sweep: error: {e}", file=sys.stderr)
        return 1
    for path in files:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
