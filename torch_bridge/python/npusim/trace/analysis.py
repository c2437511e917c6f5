"""What a trace says about where the time went: kernels, each engine's busy and stall time by cause, each
kernel's roofline, the chain of spans that sets a kernel's end, and two runs side by side.

Everything here is computed from the trace alone (model.read), so it works on any trace npusim writes:
`npusim.profile(path)`, `npusim.init(trace=...)`, `npu-run --trace`, `npu-sim --trace`.
"""

import bisect
import collections
import dataclasses
import re
from typing import Dict, List, Optional, Tuple

from .model import RawTrace, Span, core_of

# Why an engine did not work, as the chip names the reasons (sim/src/stats.cpp, stall_reason_name), plus the
# two kinds of idle time a trace shows: "idle", inside its core's program with nothing issued to the engine
# (its control unit was busy or blocked elsewhere), and "host", outside every program on that core (the
# launch, the host, a copy, another queue's kernel; within one kernel: its launch, and the other cores'
# end).
STALL_CAUSES = ("dma_data", "semaphore", "queue_full", "sram_bank_conflict", "noc", "dram", "fence", "barrier")
CATEGORIES = ("busy",) + STALL_CAUSES + ("idle", "host")
CAUSE_TITLES = {"busy": "busy", "dma_data": "wait DMA", "semaphore": "wait semaphore", "queue_full": "queue full",
                "sram_bank_conflict": "SRAM banks", "noc": "NoC", "dram": "DRAM", "fence": "fence", "barrier": "barrier",
                "idle": "idle in kernel", "host": "no program"}


@dataclasses.dataclass
class Kernel:
    id: int
    name: str  # the layer and kernel ("layer1.0.conv1+bn1+relu (conv2d)"), or the program's name
    kernel: str  # the compiler's op ("matmul", "conv2d", ...) or the program
    op: str  # the ATen op that launched it ("aten::addmm"), when the launch said
    layer: str
    nodes: str  # the FX nodes it computes, comma-separated
    queue: str
    begin: int  # device cycles: its LAUNCH packet on the command processor (the launch's own cost included)
    end: int
    core_windows: Dict[int, Tuple[int, int]]  # core -> (begin, end) of its program there
    spans: List[Span] = dataclasses.field(default_factory=list)  # its instructions and stalls, on every core
    scratchpad_bytes: Dict[int, int] = dataclasses.field(default_factory=dict)  # core -> its program's scratchpad footprint

    @property
    def cycles(self) -> int:
        return self.end - self.begin

    def total(self, key: str) -> int:
        return sum(s.number(key) for s in self.spans)

    @property
    def macs(self) -> int:
        return self.total("macs")

    @property
    def dram_bytes(self) -> int:
        return self.total("dram_bytes")

    @property
    def elements(self) -> int:
        return self.total("elements")


def _is_stall(span: Span) -> bool:
    return "stall" in span.args


def _launch_name(kernel: str, layer: str, op: str) -> str:
    where = layer or (op if op and op != "(no op)" else "")
    return f"{where} ({kernel})" if where else kernel


def kernels(raw: RawTrace) -> List[Kernel]:
    """Every kernel of the trace, in order of its start. A kernel is a LAUNCH packet of the command processor
    (its host span, linked by a flow, says what it is for), or, in a trace of npu-sim running a program
    without the command processor, each set of programs that started together on the cores."""
    by_flow_out = {}
    for s in raw.spans:
        if s.category == "host":
            for f in s.flows_out:
                by_flow_out[f] = s
    controls = collections.defaultdict(list)  # core -> its program spans (begin-sorted)
    for s in raw.spans:
        if s.thread == "control" and not _is_stall(s) and core_of(s) is not None:
            controls[core_of(s)].append(s)
    control_begins = {core: [s.begin for s in spans] for core, spans in controls.items()}
    result = []
    launches = [s for s in raw.spans if s.process == "command processor" and s.name.startswith("LAUNCH")]
    if launches:
        for launch in launches:
            host = next((by_flow_out[f] for f in launch.flows_in if f in by_flow_out), None)
            a = host.args if host else {}
            program = host.name[len("launch "):] if host and host.name.startswith("launch ") else "kernel"
            kernel = a.get("kernel", program)
            windows = {}
            prefix = launch.thread + " launch"  # the firmware names each core's program "queue Q launch N"
            for core, spans in controls.items():
                for s in spans[bisect.bisect_left(control_begins[core], launch.begin):]:
                    if s.begin > launch.end:
                        break
                    if s.name.startswith(prefix):
                        windows[core] = (s.begin, s.end)
                        break
            result.append(Kernel(len(result), _launch_name(kernel, a.get("layer", ""), a.get("op", "")), kernel, a.get("op", ""),
                                 a.get("layer", ""), a.get("nodes", ""), launch.thread, launch.begin, launch.end, windows))
    else:
        groups = collections.OrderedDict()
        for core in sorted(controls):
            for s in controls[core]:
                groups.setdefault((s.begin, s.name), {})[core] = (s.begin, s.end)
        for (begin, name), windows in sorted(groups.items()):
            end = max(e for _, e in windows.values())
            result.append(Kernel(len(result), name, name, "", "", "", "", begin, end, windows))
    # Each core's instructions and stalls go to the kernel whose program was running there when they began.
    starts = collections.defaultdict(list)  # core -> [(begin, end, kernel)]
    for k in result:
        for core, (b, e) in k.core_windows.items():
            starts[core].append((b, e, k))
    for core in starts:
        starts[core].sort(key=lambda t: t[0])
    begins = {core: [t[0] for t in ws] for core, ws in starts.items()}
    for s in raw.spans:
        core = core_of(s)
        if core is None or core not in starts or (s.thread == "control" and not _is_stall(s)):
            continue
        i = bisect.bisect_right(begins[core], s.begin) - 1
        if i >= 0 and s.begin <= starts[core][i][1]:
            starts[core][i][2].spans.append(s)
    # Each program's scratchpad footprint: the core's "scratchpad used" counter from the program's start.
    for c in raw.counters:
        if c.name == "scratchpad used (bytes)" and c.process.startswith("core "):
            core = int(c.process[5:])
            i = bisect.bisect_left(begins.get(core, []), c.time)
            if i < len(begins.get(core, [])) and begins[core][i] == c.time and c.value > 0:
                k = starts[core][i][2]
                k.scratchpad_bytes[core] = max(k.scratchpad_bytes.get(core, 0), int(c.value))
    return result


def _merge(intervals: List[Tuple[int, int]]) -> List[Tuple[int, int]]:
    merged = []
    for b, e in sorted(intervals):
        if merged and b <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((b, e))
    return merged


def _overlap(intervals: List[Tuple[int, int]], lo: int, hi: int) -> int:
    return sum(max(0, min(e, hi) - max(b, lo)) for b, e in intervals)


def engine_time(raw: RawTrace, ks: Optional[List[Kernel]] = None, kernel: Optional[Kernel] = None) -> Dict[str, Dict[str, int]]:
    """Each engine's cycles by category (CATEGORIES): busy, the stall causes, idle inside a kernel, and no
    kernel, over the whole trace, or over `kernel`'s cycles (its engines only). The categories of an engine
    add up to the window. Keys are "core N / engine"."""
    ks = kernels(raw) if ks is None else ks
    if kernel is not None:
        lo, hi = kernel.begin, kernel.end
        ks, spans = [kernel], kernel.spans
    else:
        spans = raw.spans
        device = [s for s in spans if s.category in ("device", "command")]
        lo, hi = min((s.begin for s in device), default=0), max((s.end for s in device), default=0)
    programs = collections.defaultdict(list)  # core -> its kernels' windows
    for k in ks:
        for core, w in k.core_windows.items():
            programs[core].append(w)
    programs = {core: _merge(ws) for core, ws in programs.items()}
    tracks = collections.defaultdict(list)
    for s in spans:
        if core_of(s) is not None and s.category == "device":
            tracks[(core_of(s), s.thread)].append(s)
    result = {}
    for (core, thread), spans in sorted(tracks.items(), key=lambda kv: (kv[0][0], _engine_order(kv[0][1]))):
        t = dict.fromkeys(CATEGORIES, 0)
        inside = _overlap(programs.get(core, []), lo, hi)
        t["host"] = (hi - lo) - inside
        covered = 0
        for s in spans:
            d = max(0, min(s.end, hi) - max(s.begin, lo))
            if d == 0:
                continue
            if thread == "control" and not _is_stall(s):
                continue  # the program's span: what its blocked spans leave is the control unit's work
            if _is_stall(s):
                t[s.args["stall"]] = t.get(s.args["stall"], 0) + d
            else:
                # An instruction's own waits (a DMA's for DRAM, the NoC, the banks) come out of its busy time.
                inner = {c: s.number("stall." + c) for c in STALL_CAUSES if "stall." + c in s.args}
                scale = min(1.0, d / max(1, sum(inner.values()))) if inner else 1.0
                stalled = 0
                for c, v in inner.items():
                    share = int(v * scale)
                    t[c] += share
                    stalled += share
                t["busy"] += d - stalled
            covered += d
        if thread == "control":
            t["busy"] = inside - covered
        else:
            t["idle"] = inside - covered
        result[f"core {core} / {thread}"] = t
    return result


def _engine_order(thread: str) -> Tuple[int, str]:
    order = {"control": 0, "tensor core": 2, "vector unit": 3}
    return (order.get(thread, 1), thread)


def engine_kind(key: str) -> str:
    """"core 3 / dma ch1" -> "dma": the engines summed across cores and channels."""
    thread = key.split(" / ", 1)[1]
    return "dma" if thread.startswith("dma") else thread


def by_kind(times: Dict[str, Dict[str, int]]) -> Dict[str, Dict[str, int]]:
    result = collections.OrderedDict()
    for key, t in times.items():
        total = result.setdefault(engine_kind(key), dict.fromkeys(CATEGORIES, 0))
        for c, v in t.items():
            total[c] += v
    return dict(sorted(result.items(), key=lambda kv: _engine_order(kv[0])))


# ---- roofline ----------------------------------------------------------------------------------------------


@dataclasses.dataclass
class RooflinePoint:
    kernel: Kernel
    macs: int
    dram_bytes: int
    elements: int
    bounds: Dict[str, float]  # cycles each resource needs at its peak: "mac", "dram", "vector"
    binding: str  # the resource with the largest bound

    @property
    def bound_cycles(self) -> float:
        return self.bounds[self.binding]

    @property
    def fraction_of_roofline(self) -> float:
        return self.bound_cycles / max(1, self.kernel.cycles)

    @property
    def rates(self) -> Dict[str, float]:
        c = max(1, self.kernel.cycles)
        return {"macs_per_cycle": self.macs / c, "dram_bytes_per_cycle": self.dram_bytes / c, "elements_per_cycle": self.elements / c}


def roofline(raw: RawTrace, ks: Optional[List[Kernel]] = None) -> List[RooflinePoint]:
    """Each kernel's achieved rates against the chip's peaks (from the trace's chip description): the work
    it did (MACs of its tc.mm, bytes its DMA moved to or from DRAM, elements its vector ops processed) over
    its cycles, and the bound max(MACs / peak MACs per cycle, DRAM bytes / DRAM bytes per cycle, elements /
    vector lanes). The work is what the chip executed (padding and re-reads included), so the fraction says
    how well the kernel keeps the chip busy for the work it issues; bench/roofline.py compares against the
    algorithmic minimum instead."""
    ks = kernels(raw) if ks is None else ks
    chip = raw.chip
    points = []
    for k in ks:
        macs, dram, elements = k.macs, k.dram_bytes, k.elements
        bounds = {"mac": macs / chip.macs_per_cycle, "dram": dram / chip.dram_bytes_per_cycle, "vector": elements / chip.vector_elements_per_cycle}
        points.append(RooflinePoint(k, macs, dram, elements, bounds, max(bounds, key=bounds.get)))
    return points


# ---- critical path -----------------------------------------------------------------------------------------


@dataclasses.dataclass
class PathStep:
    span: Span
    reason: str  # why the step before it (later in time) could not start earlier


_WAITED_SEMAPHORE = re.compile(r"\bs(\d+)\s*$")


def critical_path(k: Kernel) -> List[PathStep]:
    """The chain of spans that sets the kernel's end, earliest first. From the span that ends last, step back:
    a wait on a semaphore was ended by the span that ended when the wait did (its releaser): on another engine
    of its core, or a dma.send from another core that raised that semaphore there (the path then goes on on
    the sender's core); an instruction started when the one before it on its engine ended, or, after a gap,
    when the span on its core ended that let the control unit issue it."""
    spans = [s for s in k.spans if s.cycles > 0 or _is_stall(s)]
    if not spans:
        return []
    by_core = collections.defaultdict(list)
    for s in spans:
        by_core[core_of(s)].append(s)
    # dma.send spans by the (core, semaphore) they raise (the simulator names both in their args).
    sends = collections.defaultdict(list)
    for s in spans:
        if "to_core" in s.args and "sem" in s.args:
            sends[(int(s.args["to_core"]), int(s.args["sem"]))].append(s)

    def releaser(wait: Span) -> Optional[Span]:
        """The span whose end released the wait (the last to end within it): on another engine of the wait's
        core, or a send from another core to the semaphore waited on."""
        if not (_is_stall(wait) and wait.args["stall"] in ("dma_data", "semaphore")):
            return None
        candidates = [s for s in by_core[core_of(wait)] if s.thread != wait.thread and not _is_stall(s) and wait.begin <= s.end <= wait.end]
        waited = _WAITED_SEMAPHORE.search(wait.args.get("instruction", ""))
        if waited:
            candidates += [s for s in sends[(core_of(wait), int(waited.group(1)))] if core_of(s) != core_of(wait) and wait.begin <= s.end <= wait.end]
        # (On a tie, the send: it names the semaphore waited on, where a local span only ended within the wait.)
        return max(candidates, key=lambda s: (s.end, core_of(s) != core_of(wait)), default=None)

    def through_waits(span: Span, reason: str) -> Tuple[Span, str]:
        # A wait is an edge, not work: the path goes on through what released it.
        while (released := releaser(span)) is not None:
            where = f" on core {core_of(span)}" if core_of(released) != core_of(span) else ""
            span, reason = released, f"its end released {span.thread} ({span.name}){where}"
        return span, reason

    current, reason = through_waits(max(spans, key=lambda s: (s.end, s.begin)), "ends the kernel")
    steps = [PathStep(current, reason)]
    seen = {current.index}
    while True:
        core_spans = by_core[core_of(current)]
        same = [s for s in core_spans if s.thread == current.thread and s.end <= current.begin and s.index not in seen]
        before = max(same, key=lambda s: s.end, default=None)
        nxt = None
        if before is not None and before.end == current.begin:
            nxt, reason = through_waits(before, f"held {current.thread} until {current.name} began")
        else:
            gap_from = before.end if before is not None else -1
            others = [s for s in core_spans if s.thread != current.thread and gap_from < s.end <= current.begin and s.index not in seen]
            if others:
                nxt, reason = through_waits(max(others, key=lambda s: s.end), f"ended as {current.thread} was issued {current.name}")
            elif before is not None:
                nxt, reason = through_waits(before, f"ran earlier on {current.thread}")
        if nxt is None or nxt.index in seen:
            break
        seen.add(nxt.index)
        steps.append(PathStep(nxt, reason))
        current = nxt
    steps.reverse()
    return steps


def covered(intervals: List[Tuple[int, int]], begin: int, end: int) -> int:
    """The cycles of [begin, end) inside at least one of `intervals`."""
    total, reached = 0, begin
    for a, b in sorted(intervals):
        a, b = max(a, reached), min(b, end)
        if b > a:
            total, reached = total + b - a, b
    return total


def block_path(raw: RawTrace) -> List[Tuple[int, int, str, str]]:
    """The chain that sets the trace's end on the command processor, earliest first, as (begin, end, where,
    what): each packet (a LAUNCH is its kernel's whole run) back from the last to end, through the one before
    it on its queue, and, for a FENCE_WAIT, through the other queue's packet that released it; a gap between
    two packets of a queue is time it had nothing to run ("host": the host had not submitted the next)."""
    packets = [s for s in raw.spans if s.process == "command processor"]
    if not packets:
        return []
    by_queue = collections.defaultdict(list)
    for s in packets:
        by_queue[s.thread].append(s)
    current = max(packets, key=lambda s: (s.end, s.begin))
    chain = [(current.begin, current.end, current.thread, current.name)]
    seen = {current.index}
    while True:
        nxt = None
        if current.name.startswith("FENCE_WAIT"):
            others = [s for t, spans in by_queue.items() if t != current.thread for s in spans
                      if s.name.startswith("FENCE_SIGNAL") and current.begin <= s.end <= current.end]
            nxt = max(others, key=lambda s: s.end, default=None)
        if nxt is None:
            before = [s for s in by_queue[current.thread] if s.end <= current.begin and s.index not in seen]
            nxt = max(before, key=lambda s: s.end, default=None)
            if nxt is not None and nxt.end < current.begin:
                chain.append((nxt.end, current.begin, current.thread, "host"))
        if nxt is None or nxt.index in seen:
            break
        seen.add(nxt.index)
        chain.append((nxt.begin, nxt.end, nxt.thread, nxt.name))
        current = nxt
    start = min(s.begin for s in raw.spans if s.category != "metadata")
    if start < current.begin:  # before the first packet: copies to the device, the host's own work
        chain.append((start, current.begin, current.thread, "host"))
    chain.reverse()
    return chain


def path_shares(steps: List[PathStep]) -> Dict[str, int]:
    """The cycles of the path on each engine kind and stall cause ("tensor core", "dma", "wait DMA", ...)."""
    shares = collections.Counter()
    for step in steps:
        s = step.span
        label = CAUSE_TITLES.get(s.args["stall"], s.args["stall"]) if _is_stall(s) else engine_kind("x / " + s.thread)
        shares[label] += s.cycles
    return dict(shares.most_common())


# ---- diff --------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class DiffRow:
    key: str
    calls: Tuple[int, int]
    cycles: Tuple[int, int]
    dram_bytes: Tuple[int, int]

    @property
    def delta(self) -> int:
        return self.cycles[1] - self.cycles[0]


def group(ks: List[Kernel], by: str) -> Dict[str, Tuple[int, int, int]]:
    """(calls, cycles, DRAM bytes) per layer, op or kernel name."""
    field = {"layer": lambda k: k.layer or "(no layer)", "op": lambda k: k.op or k.kernel, "kernel": lambda k: k.name}[by]
    groups = collections.OrderedDict()
    for k in ks:
        calls, cycles, dram = groups.get(field(k), (0, 0, 0))
        groups[field(k)] = (calls + 1, cycles + k.cycles, dram + k.dram_bytes)
    return groups


def diff(a: List[Kernel], b: List[Kernel], by: str = "layer") -> List[DiffRow]:
    """Two runs side by side, grouped `by` layer, op or kernel, sorted by the size of the cycle change."""
    ga, gb = group(a, by), group(b, by)
    rows = []
    for key in list(ga) + [k for k in gb if k not in ga]:
        ca, cb = ga.get(key, (0, 0, 0)), gb.get(key, (0, 0, 0))
        rows.append(DiffRow(key, (ca[0], cb[0]), (ca[1], cb[1]), (ca[2], cb[2])))
    rows.sort(key=lambda r: (-abs(r.delta), r.key))
    return rows
