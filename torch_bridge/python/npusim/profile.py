"""npusim.profile(): device time per op and per layer, utilization, fallbacks.

    with npusim.profile() as prof:
        model(x)
    print(prof.table())

Every kernel launched inside the block is timed on the device (a timestamp
after it, on its queue) and named by the ATen op (or npusim:: custom op) that
launched it and by the layer it ran in. Layers are known in graph mode (from
each FX node's module stack, see npusim.backend) and in eager mode for
modules given to profile(modules=...) (forward hooks). Utilization comes from
the chip's counters over the block: tensor-core, vector-unit and DMA busy
cycles against the cores' cycles, DRAM bytes against the channels' peak.
Energy comes from the chip's action counts over the block, priced by the
config's technology (docs/energy.md): `prof.energy`.
"""

import collections
import contextlib
import dataclasses
import threading
from typing import Dict, List, Optional, Tuple

import torch

from . import _C

__all__ = ["profile", "Profile", "active"]

_state = threading.local()


def active() -> bool:
    """Whether a profile is recording (the graph-mode backend then names layers)."""
    return getattr(_state, "active", False)


@dataclasses.dataclass
class OpStats:
    calls: int = 0
    cycles: int = 0


@dataclasses.dataclass
class Profile:
    kernels: List[Tuple[str, str, str, int]] = dataclasses.field(default_factory=list)  # (layer, op, kernel, cycles)
    spans: List[Tuple[int, int]] = dataclasses.field(default_factory=list)  # each kernel's (start, end) device cycle
    # Each memory transfer over the host link: (start, end) device cycles, bytes, "to device" | "to host",
    # and what it was: "data" (the host's copy of a tensor or a program), "copy" (a command queue's COPY
    # packet), "queue" (the driver writing command packets, reading fence counters).
    host_transfers: List[Tuple[int, int, int, str, str]] = dataclasses.field(default_factory=list)
    plans: List[str] = dataclasses.field(default_factory=list)  # each kernel's tiling decisions, as the compiler chose them
    fallbacks: Dict[str, int] = dataclasses.field(default_factory=dict)
    counters: Dict[str, int] = dataclasses.field(default_factory=dict)  # deltas over the block
    chip: Dict[str, float] = dataclasses.field(default_factory=dict)

    def _group(self, index: int) -> Dict[str, OpStats]:
        groups: Dict[str, OpStats] = collections.OrderedDict()
        for row in self.kernels:
            stats = groups.setdefault(row[index] or "(no layer)", OpStats())
            stats.calls += 1
            stats.cycles += row[3]
        return groups

    @property
    def ops(self) -> Dict[str, OpStats]:
        return self._group(1)

    @property
    def layers(self) -> Dict[str, OpStats]:
        return self._group(0)

    @property
    def device_cycles(self) -> int:
        return self.counters.get("cycle", 0)

    @property
    def time_split(self) -> Dict[str, int]:
        """Where the block's device cycles went, each cycle counted once, in this order:
        "kernels", the cycles with at least one kernel in flight (from the event before it to the event after
        it on its queue, so its launch included), of which "launch", the command processor's cost to parse
        and start each launch (packet_cycles + launch_cycles of the config, per launch);
        "host transfers", the other cycles with a copy of data on the host link (tensors to and from the
        host, program uploads, COPY packets);
        "queue", the other cycles with the driver's queue traffic on the link (command packets written to
        the rings, fence counters read back);
        "host round trips", the rest: the host's register accesses and waits between launches (the
        profile's own counter reads among them).
        kernels + host transfers + queue + host round trips = device_cycles."""
        taken = _union(self.spans)
        split = {"kernels": _length(taken)}
        launch = len(self.spans) * int(self.chip.get("packet_cycles", 0) + self.chip.get("launch_cycles", 0))
        split["launch"] = min(launch, split["kernels"])
        for name, kinds in (("host transfers", ("data", "copy")), ("queue", ("queue",))):
            busy = _union([(t[0], t[1]) for t in self.host_transfers if t[4] in kinds])
            split[name] = min(_length(busy) - _overlap(busy, taken), max(0, self.device_cycles - _length(taken)))
            taken = _union(taken + busy)
        split["host round trips"] = max(0, self.device_cycles - _length(taken))
        return split

    @property
    def utilization(self) -> Dict[str, float]:
        cycles = max(1, self.device_cycles)
        cores = self.chip.get("num_cores", 1)
        return {
            "tensor_core": self.counters.get("tensor_busy_cycles", 0) / (cycles * cores),
            "vector_unit": self.counters.get("vector_busy_cycles", 0) / (cycles * cores),
            "dma": self.counters.get("dma_busy_cycles", 0) / (cycles * cores * self.chip.get("dma_channels", 1)),
            "dram_bandwidth": (self.counters.get("dram_read_bytes", 0) + self.counters.get("dram_write_bytes", 0)) /
                              (cycles * self.chip.get("dram_bytes_per_cycle", 1)),
        }

    @property
    def energy(self) -> Dict:
        """The block's energy, priced from the chip's action counts over its device cycles (docs/energy.md):
        total_pj, dynamic_pj, leakage_pj, seconds, average_power_w, peak_power_w (every unit at full rate: the
        design's bound), area_mm2, and components: {name: {dynamic_pj, leakage_pj, total_pj, area_mm2}}."""
        return dict(_C.price_energy({k: v for k, v in self.counters.items() if k.startswith("action.")}, self.device_cycles))

    @property
    def host_transfer_bytes(self) -> int:
        """Bytes of data copied over the host link in the block (the driver's queue traffic aside)."""
        return sum(t[2] for t in self.host_transfers if t[4] != "queue")

    def microseconds(self, cycles: int) -> float:
        return cycles / self.chip.get("clock_mhz", 1000.0)

    def table(self, top: int = 15) -> str:
        split = self.time_split
        lines = [f"device: {self.device_cycles} cycles ({self.microseconds(self.device_cycles):.1f} us), "
                 f"{len(self.kernels)} kernels, {sum(self.fallbacks.values())} CPU fallbacks",
                 f"  kernels {split['kernels']} cycles (their launches {split['launch']}), host transfers {split['host transfers']} "
                 f"({self.host_transfer_bytes} bytes), queue {split['queue']}, host round trips {split['host round trips']}"]
        for title, groups in (("op", self.ops), ("layer", self.layers)):
            total = max(1, sum(g.cycles for g in groups.values()))
            lines.append(f"{title:<40} {'calls':>6} {'cycles':>12} {'us':>10} {'share':>7}")
            ranked = sorted(groups.items(), key=lambda kv: -kv[1].cycles)
            for name, g in ranked[:top]:
                lines.append(f"{name[:40]:<40} {g.calls:>6} {g.cycles:>12} {self.microseconds(g.cycles):>10.1f} {100 * g.cycles / total:>6.1f}%")
            if len(ranked) > top:
                rest = ranked[top:]
                lines.append(f"{'(' + str(len(rest)) + ' more)':<40} {sum(g.calls for _, g in rest):>6} {sum(g.cycles for _, g in rest):>12}")
        lines.append("utilization: " + ", ".join(f"{k} {100 * v:.1f}%" for k, v in self.utilization.items()))
        energy = self.energy
        total = max(energy["total_pj"], 1e-30)
        lines.append(f"energy: {energy['total_pj'] / 1e6:.4g} uJ, average {energy['average_power_w']:.3g} W "
                     f"(design peak {energy['peak_power_w']:.3g} W), area {energy['area_mm2']:.4g} mm^2: " +
                     ", ".join(f"{name} {100 * c['total_pj'] / total:.1f}%" for name, c in energy["components"].items() if c["total_pj"] > 0))
        if self.fallbacks:
            lines.append("fallbacks: " + ", ".join(f"{op} x{n}" for op, n in sorted(self.fallbacks.items())))
        return "\n".join(lines)


def _union(intervals: List[Tuple[int, int]]) -> List[Tuple[int, int]]:
    """The intervals' union, as disjoint intervals in order."""
    merged: List[Tuple[int, int]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        elif end > start:
            merged.append((start, end))
    return merged


def _length(intervals: List[Tuple[int, int]]) -> int:
    return sum(end - start for start, end in intervals)


def _overlap(a: List[Tuple[int, int]], b: List[Tuple[int, int]]) -> int:
    """Cycles in both of two disjoint, ordered interval lists."""
    total, i, j = 0, 0, 0
    while i < len(a) and j < len(b):
        total += max(0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


@contextlib.contextmanager
def profile(path: str = "", modules: Optional[List[Tuple[str, torch.nn.Module]]] = None):
    """Profiles the npu work of the block; yields a Profile, filled when the block ends.
    `path` (.pftrace or .json): also write the block's trace of the chip and the driver there when
    the block ends, whether or not a trace was being recorded before (npusim.init(trace=...)); each
    launch's span carries its kernel, op, layer and FX nodes (npusim.trace reads it back).
    `modules`: (name, module) pairs whose forward calls name the layer in eager mode."""
    if path and not str(path).endswith((".pftrace", ".perfetto-trace", ".json")):
        # (Refused before the block runs, not after it.)
        raise ValueError(f"npusim.profile: {path}: a trace file ends in .pftrace (Perfetto) or .json (Chrome)")
    result = Profile(chip=dict(_C.chip_info()))
    hooks = []
    for name, module in modules or []:
        hooks.append(module.register_forward_pre_hook(lambda m, args, name=name: _C.set_profile_scope(name)))
        hooks.append(module.register_forward_hook(lambda m, args, out: _C.set_profile_scope("")))
    fallbacks_before = dict(_C.fallback_stats())
    counters_before = dict(_C.device_counters())
    _C.begin_profile(str(path) if path else "")
    _state.active = True
    try:
        yield result
    finally:
        _state.active = False
        for hook in hooks:
            hook.remove()
        _C.set_profile_scope("")
        rows, transfers = _C.end_profile()
        result.host_transfers = [tuple(t) for t in transfers]
        result.kernels = [tuple(row[:4]) for row in rows]
        result.plans = [row[4] for row in rows]
        result.spans = [(row[5], row[6]) for row in rows]
        counters_after = dict(_C.device_counters())
        result.counters = {k: counters_after[k] - counters_before.get(k, 0) for k in counters_after}
        after = dict(_C.fallback_stats())
        result.fallbacks = {op: n - fallbacks_before.get(op, 0) for op, n in after.items() if n != fallbacks_before.get(op, 0)}
