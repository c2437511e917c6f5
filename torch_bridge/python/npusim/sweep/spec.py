"""A sweep's specification (a YAML file), and the design points it names.

    base: base                          # a preset or a .pbtxt file; relative paths from the spec's folder
    axes:                               # any config field by its path (npu-sim --dump-config shows them)
      core.scratchpad.size_bytes: [1048576, 2097152, 4194304]
      dram.bytes_per_cycle_per_channel: {range: [64, 256, 64]}    # 64, 128, 192, 256
      core.vector_unit.lanes: {pow2: [64, 512]}                   # 64, 128, 256, 512
      array:                            # one axis that sets several fields to each value
        paths: [core.tensor_core.rows, core.tensor_core.cols]
        values: [64, 128, 256]
    set: [technology.process_nm=7]      # fixed settings for every point (optional)
    constraints:                        # Python expressions over the point's config (optional)
      - num_cores * core.scratchpad.size_bytes <= 64 * 2**20
    workloads: ["gpt2:prefill:seq=128"] # npusim.workloads names
    mode: compiled                      # or eager
    search: grid                        # or {random: N} or {optuna: N}
    objectives: [latency_s, energy_pj, area_mm2]   # minimized by optuna; the report's Pareto axes
    kernel_rooflines: false             # true: each point's kernels' rooflines too (kernels.parquet; a trace per point)
    seed: 0

Errors name the spec file and the entry at fault.
"""
import dataclasses
import itertools
import os
import random
import types
from typing import Any, Dict, List, Sequence, Tuple

import yaml

METRICS = ("latency_s", "device_cycles", "energy_pj", "average_power_w", "area_mm2", "dram_bytes", "peak_power_w")


class SpecError(ValueError):
    pass


@dataclasses.dataclass
class Axis:
    name: str
    paths: Tuple[str, ...]
    values: Tuple[Any, ...]


@dataclasses.dataclass
class Spec:
    path: str
    base: str
    axes: List[Axis]
    fixed: List[str]
    constraints: List[str]
    workloads: List[str]
    mode: str
    search: str
    budget: int          # points for random and optuna; 0 for grid
    objectives: List[str]
    seed: int
    kernel_rooflines: bool = False

    def settings(self, point: Dict[str, Any]) -> List[str]:
        """The point's config settings ("path=value"), the fixed ones first."""
        out = list(self.fixed)
        for axis in self.axes:
            out += [f"{path}={_text(point[axis.name])}" for path in axis.paths]
        return out


def _text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def _values(spec_path: str, name: str, entry) -> Tuple[Any, ...]:
    where = f"{spec_path}: axes.{name}"
    if isinstance(entry, list):
        values = entry
    elif isinstance(entry, dict) and "range" in entry:
        bounds = entry["range"]
        if not (isinstance(bounds, list) and len(bounds) in (2, 3) and all(isinstance(b, int) for b in bounds)):
            raise SpecError(f"{where}: range is [first, last] or [first, last, step], integers")
        step = bounds[2] if len(bounds) == 3 else 1
        if step <= 0:
            raise SpecError(f"{where}: the range's step must be positive")
        values = list(range(bounds[0], bounds[1] + 1, step))
    elif isinstance(entry, dict) and "pow2" in entry:
        bounds = entry["pow2"]
        if not (isinstance(bounds, list) and len(bounds) == 2 and all(isinstance(b, int) and b > 0 for b in bounds)):
            raise SpecError(f"{where}: pow2 is [first, last], positive integers")
        values, v = [], bounds[0]
        while v <= bounds[1]:
            values.append(v)
            v *= 2
    else:
        raise SpecError(f"{where}: give a list of values, {{range: [first, last, step]}} or {{pow2: [first, last]}}")
    if not values:
        raise SpecError(f"{where}: no values")
    return tuple(values)


def load(path: str) -> Spec:
    try:
        with open(path) as f:
            raw = yaml.safe_load(f)
    except OSError as e:
        raise SpecError(f"{path}: cannot read: {e.strerror}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else path
        raise SpecError(f"{where}: not YAML: {getattr(e, 'problem', e)}") from None
    if not isinstance(raw, dict):
        raise SpecError(f"{path}: a sweep spec is a mapping (base, axes, workloads, ...)")
    known = {"base", "axes", "set", "constraints", "workloads", "mode", "search", "objectives", "seed", "metrics", "kernel_rooflines"}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise SpecError(f"{path}: unknown entries {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    base = str(raw.get("base", "base"))
    if ("/" in base or base.endswith(".pbtxt")) and not os.path.isabs(base):
        base = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(path)), base))
    axes = []
    for name, entry in (raw.get("axes") or {}).items():
        if isinstance(entry, dict) and "paths" in entry:
            paths = entry["paths"]
            if not (isinstance(paths, list) and paths and all(isinstance(p, str) for p in paths)):
                raise SpecError(f"{path}: axes.{name}.paths: a list of config field paths")
            axes.append(Axis(str(name), tuple(paths), _values(path, name, entry.get("values"))))
        else:
            axes.append(Axis(str(name), (str(name),), _values(path, name, entry)))
    workloads = raw.get("workloads")
    if not (isinstance(workloads, list) and workloads):
        raise SpecError(f"{path}: workloads: a list of workload names (npusim.workloads.names())")
    from .. import workloads as registry
    for w in workloads:
        try:
            registry.parse(str(w))
        except ValueError as e:
            raise SpecError(f"{path}: workloads: {e}") from None
    mode = raw.get("mode", "compiled")
    if mode not in ("compiled", "eager"):
        raise SpecError(f"{path}: mode is compiled or eager, not {mode!r}")
    search, budget = raw.get("search", "grid"), 0
    if isinstance(search, dict) and len(search) == 1 and next(iter(search)) in ("random", "optuna"):
        search, budget = next(iter(search.items()))
        if not (isinstance(budget, int) and budget > 0):
            raise SpecError(f"{path}: search.{search}: a positive number of points")
    elif search != "grid":
        raise SpecError(f"{path}: search is grid, {{random: N}} or {{optuna: N}}")
    objectives = list(raw.get("objectives") or raw.get("metrics") or ["latency_s", "energy_pj", "area_mm2"])
    bad = [o for o in objectives if o not in METRICS]
    if bad:
        raise SpecError(f"{path}: objectives {', '.join(bad)}: not among {', '.join(METRICS)}")
    fixed = [str(s) for s in raw.get("set") or []]
    constraints = [str(c) for c in raw.get("constraints") or []]
    kernel_rooflines = raw.get("kernel_rooflines", False)
    if not isinstance(kernel_rooflines, bool):
        raise SpecError(f"{path}: kernel_rooflines is true or false, not {kernel_rooflines!r}")
    spec = Spec(path, base, axes, fixed, constraints, [str(w) for w in workloads], mode, search, int(budget), objectives,
                int(raw.get("seed", 0)), kernel_rooflines)
    if search == "optuna" and not axes:
        raise SpecError(f"{path}: search optuna needs at least one axis")
    _check_paths(spec)
    return spec


def _check_paths(spec: Spec) -> None:
    """The base config loads, and every axis and setting names a field (a value a point's config refuses
    only excludes that point; a path that names nothing would exclude them all)."""
    from npusim import _C
    for axis in spec.axes:
        for value in axis.values:
            try:
                _C.chip_config_text(spec.base, spec.fixed + [f"{p}={_text(value)}" for p in axis.paths])
            except ValueError as e:
                message = str(e).splitlines()[0]
                if message.startswith("--set ") or "unknown chip preset" in message or ": cannot " in message:
                    raise SpecError(f"{spec.path}: {'axes.' + axis.name if message.startswith('--set ') else 'base'}: {message}") from None
    if not spec.axes:
        try:
            _C.chip_config_text(spec.base, spec.fixed)
        except ValueError as e:
            raise SpecError(f"{spec.path}: {str(e).splitlines()[0]}") from None


def config_namespace(fields: Sequence[Tuple[str, str]]) -> types.SimpleNamespace:
    """The config's fields as nested attributes (core.scratchpad.size_bytes), numbers as numbers."""
    root = types.SimpleNamespace()
    for path, text in fields:
        node = root
        parts = path.replace("[", ".").replace("]", "").split(".")
        for part in parts[:-1]:
            key = f"_{part}" if part.isdigit() else part
            if not hasattr(node, key):
                setattr(node, key, types.SimpleNamespace())
            node = getattr(node, key)
        try:
            value = int(text)
        except ValueError:
            try:
                value = float(text)
            except ValueError:
                value = {"true": True, "false": False}.get(text, text)
        setattr(node, parts[-1], value)
    return root


def satisfies(spec: Spec, fields: Sequence[Tuple[str, str]]) -> Tuple[bool, str]:
    """Whether the config meets every constraint; the first one it breaks."""
    namespace = vars(config_namespace(fields))
    for constraint in spec.constraints:
        try:
            ok = eval(constraint, {"__builtins__": {"min": min, "max": max, "abs": abs}}, namespace)  # noqa: S307 (the user's own spec)
        except Exception as e:
            raise SpecError(f"{spec.path}: constraint {constraint!r}: {type(e).__name__}: {e}") from None
        if not ok:
            return False, constraint
    return True, ""


def grid(spec: Spec) -> List[Dict[str, Any]]:
    names = [a.name for a in spec.axes]
    return [dict(zip(names, values)) for values in itertools.product(*(a.values for a in spec.axes))]


def sample(spec: Spec) -> List[Dict[str, Any]]:
    """Grid points, or `budget` of them drawn without repeats (random search)."""
    points = grid(spec)
    if spec.search == "random" and spec.budget < len(points):
        points = random.Random(spec.seed).sample(points, spec.budget)
    return points
