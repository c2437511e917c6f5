"""Running a sweep: every (design point, workload) pair as a Ray task in a process of its own, timing
only; each result cached under DIR/points by a hash of (config, workload, mode, npusim build), so an
interrupted sweep resumes and a widened one runs only its new points; the table of all of them in
DIR/results.parquet and DIR/results.csv.
"""
import dataclasses
import hashlib
import json
import os
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional

from npusim import _C  # write_file: each result file whole or not at all

from . import spec as spec_module

_STATUS_DONE, _STATUS_FAILED = "done", "failed"


@dataclasses.dataclass
class Job:
    key: str                # the cache key: hash of (config text, workload, mode, npusim build)
    point: Dict[str, Any]   # axis name -> value
    workload: str
    config_text: str


def build_fingerprint() -> str:
    """What the cache keys a result to besides its inputs: the npusim build (the extension module's
    bytes and the package's Python sources), so that results from another build are not reused."""
    import npusim
    from npusim import _C
    digest = hashlib.sha256()
    with open(_C.__file__, "rb") as f:
        digest.update(f.read())
    package = os.path.dirname(npusim.__file__)
    for folder, _, files in sorted(os.walk(package)):
        for name in sorted(files):
            if name.endswith(".py"):
                with open(os.path.join(folder, name), "rb") as f:
                    digest.update(name.encode() + f.read())
    return digest.hexdigest()[:16]


def _run_point(config_text: str, workload: str, compiled: bool, kernel_rooflines: bool) -> Dict[str, Any]:
    """One point in this (fresh) process: its chip from the config text, timing only."""
    import ray
    started = time.time()
    with tempfile.NamedTemporaryFile("w", suffix=".pbtxt", delete=False) as f:
        f.write(config_text)
    try:
        import npusim
        import npusim.workloads
        npusim.init(config=f.name, timing_only=True)
        result = npusim.workloads.run(workload, compiled=compiled, kernel_rooflines=kernel_rooflines)
    finally:
        os.unlink(f.name)
    result["node_id"] = ray.get_runtime_context().get_node_id()
    result["host_seconds"] = time.time() - started
    return result


class Progress:
    """A progress bar of the sweep's points: done, running, cached, failed, and the estimated finish."""

    def __init__(self, total: int, cached: int, quiet: bool):
        from tqdm import tqdm
        self.done = self.failed = self.running = 0
        self.cached = cached
        self.bar = tqdm(total=total, initial=cached, unit="point", disable=quiet, file=sys.stderr, dynamic_ncols=True)
        self.show()

    def show(self) -> None:
        self.bar.set_postfix_str(f"done {self.done}, running {self.running}, cached {self.cached}, failed {self.failed}")

    def finished(self, ok: bool) -> None:
        self.done += ok
        self.failed += not ok
        self.bar.update(1)
        self.show()

    def close(self) -> None:
        self.bar.close()


class Runner:
    def __init__(self, spec: spec_module.Spec, out_dir: str, workers: Optional[int], address: Optional[str], quiet: bool):
        self.spec, self.out_dir, self.quiet = spec, out_dir, quiet
        self.points_dir = os.path.join(out_dir, "points")
        os.makedirs(self.points_dir, exist_ok=True)
        self.fingerprint = build_fingerprint()
        self.address = address
        self.workers = workers
        self.excluded: List[Dict[str, Any]] = []
        self.run_seconds = 0.0  # from the first point submitted to the last one back (Ray's start not included)
        self._ray = None

    # ---- points ---------------------------------------------------------------------------

    def jobs_for(self, point: Dict[str, Any]) -> List[Job]:
        """The point's jobs (one per workload), or none, recorded as excluded, if the config is invalid
        or breaks a constraint."""
        from npusim import _C
        settings = self.spec.settings(point)
        try:
            text = _C.chip_config_text(self.spec.base, settings)
            fields = _C.chip_config_fields(self.spec.base, settings)
        except ValueError as e:
            self.excluded.append({**point, "reason": str(e).splitlines()[0]})
            return []
        ok, broken = spec_module.satisfies(self.spec, fields)
        if not ok:
            self.excluded.append({**point, "reason": f"constraint: {broken}"})
            return []
        jobs = []
        for workload in self.spec.workloads:
            what = [text, workload, self.spec.mode, self.fingerprint] + (["kernel_rooflines"] if self.spec.kernel_rooflines else [])
            key = hashlib.sha256(json.dumps(what).encode()).hexdigest()[:20]
            jobs.append(Job(key, point, workload, text))
        return jobs

    def _path(self, job: Job) -> str:
        return os.path.join(self.points_dir, job.key + ".json")

    def cached(self, job: Job) -> Optional[Dict[str, Any]]:
        try:
            with open(self._path(job)) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    # ---- running --------------------------------------------------------------------------

    def _start_ray(self):
        if self._ray is not None:
            return self._ray
        import ray
        kwargs = dict(include_dashboard=False, logging_level="ERROR", log_to_driver=False, configure_logging=True)
        if self.address:
            ray.init(address=self.address, **kwargs)
        else:
            ray.init(num_cpus=self.workers or os.cpu_count(), **kwargs)
        if not self.workers:
            self.workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        # A task per process: each point's chip is the process's device, chosen once.
        self._remote = ray.remote(num_cpus=1, max_calls=1)(_run_point)
        self._ray = ray
        return ray

    def execute(self, jobs: List[Job], progress: Progress) -> Dict[str, Dict[str, Any]]:
        """Runs the jobs not cached, at most `workers` at a time; returns every job's result by key."""
        results: Dict[str, Dict[str, Any]] = {}
        pending = []
        for job in jobs:
            hit = self.cached(job)
            if hit is not None:
                results[job.key] = hit
            elif job.key not in {j.key for j in pending}:
                pending.append(job)
        if not pending:
            return results
        ray = self._start_ray()
        in_flight = {}
        compiled = self.spec.mode == "compiled"
        started = time.time()
        while pending or in_flight:
            while pending and len(in_flight) < self.workers:
                job = pending.pop(0)
                in_flight[self._remote.remote(job.config_text, job.workload, compiled, self.spec.kernel_rooflines)] = job
                progress.running = len(in_flight)
                progress.show()
            ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=1.0)
            for ref in ready:
                job = in_flight.pop(ref)
                try:
                    result = {"status": _STATUS_DONE, **ray.get(ref)}
                except Exception as e:  # the point failed (its error recorded) and the sweep goes on
                    cause = getattr(e, "cause", None) or e
                    lines = [line for line in str(cause).strip().splitlines() if line.strip()]
                    result = {"status": _STATUS_FAILED, "error": f"{type(cause).__name__}: {lines[-1] if lines else ''}"}
                result.update(workload=job.workload, key=job.key)
                if result["status"] == _STATUS_DONE:  # failed points are not cached: the next run tries them again
                    _C.write_file(self._path(job), json.dumps(result, sort_keys=True).encode())
                results[job.key] = result
                progress.running = len(in_flight)
                progress.finished(result["status"] == _STATUS_DONE)
        self.run_seconds += time.time() - started
        return results

    def close(self) -> None:
        if self._ray is not None:
            self._ray.shutdown()


def _row(job: Job, result: Dict[str, Any], spec: spec_module.Spec) -> Dict[str, Any]:
    row = {"point": job.key, "workload": job.workload, "mode": spec.mode, "base": os.path.basename(spec.base)}
    row.update({f"axis.{name}": value for name, value in job.point.items()})
    row.update({k: v for k, v in result.items() if k not in ("key", "workload")})
    row.setdefault("status", _STATUS_DONE)
    row.setdefault("error", "")
    return row


def write_results(out_dir: str, rows: List[Dict[str, Any]]) -> None:
    """results.parquet and results.csv, each written whole or not at all; with kernel rooflines, also
    kernels.parquet and kernels.csv: a row per kernel of each point (its point, workload and axes first)."""
    import pyarrow as pa
    import pyarrow.csv as pa_csv
    import pyarrow.parquet as pq

    kernels = []
    for row in rows:
        for k in row.pop("kernel_rooflines", None) or []:
            kernels.append({c: row[c] for c in row if c in ("point", "workload") or c.startswith("axis.")} | k)

    def write(stem: str, table_rows: List[Dict[str, Any]]) -> None:
        columns = []
        for row in table_rows:
            columns += [c for c in row if c not in columns]
        table = pa.Table.from_pylist([{c: row.get(c) for c in columns} for row in table_rows])
        for name, writer in ((stem + ".parquet", pq.write_table), (stem + ".csv", pa_csv.write_csv)):
            sink = pa.BufferOutputStream()
            writer(table, sink)
            _C.write_file(os.path.join(out_dir, name), sink.getvalue().to_pybytes())

    write("results", rows)
    if kernels:
        write("kernels", kernels)


def run(spec_path: str, out_dir: str, workers: Optional[int] = None, address: Optional[str] = None, quiet: bool = False) -> Dict[str, Any]:
    """Runs the sweep and writes its table; returns its counts (points, done, cached, failed, excluded), its
    seconds in all, and run_seconds, those spent running points."""
    started = time.time()
    spec = spec_module.load(spec_path)
    runner = Runner(spec, out_dir, workers, address, quiet)
    rows: List[Dict[str, Any]] = []
    counts = {"points": 0, "done": 0, "cached": 0, "failed": 0}
    try:
        if spec.search == "optuna":
            rows = _optuna(spec, runner, counts)
        else:
            jobs = [job for point in spec_module.sample(spec) for job in runner.jobs_for(point)]
            cached = sum(runner.cached(job) is not None for job in jobs)
            progress = Progress(len(jobs), cached, quiet)
            try:
                results = runner.execute(jobs, progress)
            finally:
                progress.close()
            rows = [_row(job, results[job.key], spec) for job in jobs]
            counts.update(points=len(jobs), cached=cached, done=progress.done, failed=progress.failed)
    finally:
        runner.close()
    write_results(out_dir, rows)
    manifest = {"spec": os.path.abspath(spec_path), "base": spec.base, "axes": [a.name for a in spec.axes],
                "objectives": spec.objectives, "workloads": spec.workloads, "excluded": runner.excluded,
                "build": runner.fingerprint}
    _C.write_file(os.path.join(out_dir, "sweep.json"), json.dumps(manifest, indent=2, default=str).encode())
    counts["excluded"] = len(runner.excluded)
    counts["seconds"] = time.time() - started
    counts["run_seconds"] = runner.run_seconds
    return counts


def _optuna(spec: spec_module.Spec, runner: Runner, counts: Dict[str, int]) -> List[Dict[str, Any]]:
    """Multi-objective search (NSGA-II) over the axes' values: each trial a design point run on every
    workload, its objectives summed over the workloads (area is the config's), `workers` trials at a time."""
    import optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = optuna.samplers.NSGAIISampler(seed=spec.seed, population_size=max(4, min(50, spec.budget // 2)))
    study = optuna.create_study(directions=["minimize"] * len(spec.objectives), sampler=sampler)
    distributions = {a.name: optuna.distributions.CategoricalDistribution(list(a.values)) for a in spec.axes}
    rows, seen = [], {}
    progress = Progress(spec.budget * len(spec.workloads), 0, runner.quiet)
    asked = 0
    try:
        while asked < spec.budget:
            batch = []
            while len(batch) < (runner.workers or os.cpu_count() or 1) and asked < spec.budget:
                trial = study.ask(distributions)
                asked += 1
                point = {a.name: trial.params[a.name] for a in spec.axes}
                jobs = runner.jobs_for(point)
                if not jobs:
                    study.tell(trial, state=optuna.trial.TrialState.FAIL)
                    progress.bar.update(len(spec.workloads))
                    continue
                batch.append((trial, jobs))
            all_jobs = [job for _, jobs in batch for job in jobs]
            progress.cached += sum(1 for job in all_jobs if job.key not in seen and runner.cached(job) is not None)
            results = runner.execute(all_jobs, progress)
            for trial, jobs in batch:
                values = []
                outcome = [results[job.key] for job in jobs]
                for job, result in zip(jobs, outcome):
                    if job.key not in seen:
                        seen[job.key] = True
                        rows.append(_row(job, result, spec))
                if any(r.get("status") != _STATUS_DONE for r in outcome):
                    study.tell(trial, state=optuna.trial.TrialState.FAIL)
                    continue
                for objective in spec.objectives:
                    per_workload = [r[objective] for r in outcome]
                    values.append(per_workload[0] if objective in ("area_mm2", "peak_power_w") else sum(per_workload))
                study.tell(trial, values)
    finally:
        progress.close()
    counts.update(points=len(rows), cached=progress.cached, done=progress.done, failed=progress.failed)
    return rows
