"""npusim.trace: a trace npusim wrote, as answers and as tables.

    t = npusim.trace.load("run.pftrace")      # or .json; from npusim.profile(path), npu-run/npu-sim --trace
    print(t.summary())                          # per kernel, op, layer and engine: busy and stalls by cause
    print(t.roofline()); t.roofline_plot("roof.png")
    print(t.critical_path())                    # the chain of spans that sets the longest kernel's end
    print(npusim.trace.diff(t, npusim.trace.load("other.pftrace")))
    t.export_parquet("tables/"); t.sql("SELECT name, cycles FROM kernels ORDER BY cycles DESC LIMIT 5")

The same from the shell: `npu-trace summary|diff|roofline|critical-path|export|sql` (npusim.trace.cli).
docs/analysts.md walks through an investigation with them.
"""

import collections
import json
import os
from typing import Dict, List, Optional

from . import analysis
from .analysis import CATEGORIES, CAUSE_TITLES, Kernel
from .model import Chip, RawTrace, Span, TraceError, core_of, read

__all__ = ["load", "Trace", "TraceError", "diff"]


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:5.1f}%" if whole else "    -"


class Trace:
    def __init__(self, raw: RawTrace):
        self.raw = raw
        self.kernels: List[Kernel] = analysis.kernels(raw)

    @property
    def chip(self) -> Chip:
        return self.raw.chip

    @property
    def path(self) -> str:
        return self.raw.path

    def find_kernel(self, which: Optional[str]) -> Kernel:
        """A kernel by id ("3") or by a part of its name; the longest when `which` is None."""
        if not self.kernels:
            raise TraceError(f"{self.path}: the trace has no kernels")
        if which is None:
            return max(self.kernels, key=lambda k: k.cycles)
        if which.isdigit():
            index = int(which)
            if index >= len(self.kernels):
                raise TraceError(f"{self.path}: no kernel {index} (the trace has {len(self.kernels)})")
            return self.kernels[index]
        matches = [k for k in self.kernels if which in k.name]
        if not matches:
            raise TraceError(f"{self.path}: no kernel's name contains {which!r}")
        return max(matches, key=lambda k: k.cycles)

    def engine_time(self, kernel: Optional[Kernel] = None) -> Dict[str, Dict[str, int]]:
        return analysis.engine_time(self.raw, self.kernels, kernel)

    # ---- reports (text) ----

    def summary(self, top: int = 15) -> str:
        lines = [f"{self.path}: chip '{self.chip.config}' ({self.chip.num_cores} cores, {self.chip.clock_mhz:g} MHz), "
                 f"{len(self.kernels)} kernels, {sum(k.cycles for k in self.kernels)} kernel cycles"]
        lines.append("")
        lines.append(f"{'kernel':<48} {'cycles':>10} {'share':>6} {'% roof':>7} {'bound':>6}  top stall (of DMA, tensor core, vector unit)")
        points = {p.kernel.id: p for p in analysis.roofline(self.raw, self.kernels)}
        total = max(1, sum(k.cycles for k in self.kernels))
        ranked = sorted(self.kernels, key=lambda k: -k.cycles)
        for k in ranked[:top]:
            p = points[k.id]
            # (The control unit's stalls, a full queue or a fence, mirror its engines': its engines' say why.)
            times = analysis.by_kind(self.engine_time(k))
            stalls = {c: sum(t[c] for kind, t in times.items() if kind != "control") for c in analysis.STALL_CAUSES}
            worst = max(stalls, key=stalls.get) if any(stalls.values()) else ""
            lines.append(f"{(str(k.id) + ' ' + k.name)[:48]:<48} {k.cycles:>10} {_pct(k.cycles, total)} "
                         f"{100 * p.fraction_of_roofline:6.1f}% {p.binding:>6}  {CAUSE_TITLES.get(worst, '')}")
        if len(ranked) > top:
            lines.append(f"({len(ranked) - top} more kernels, {sum(k.cycles for k in ranked[top:])} cycles)")
        for by in ("op", "layer"):
            groups = analysis.group(self.kernels, by)
            lines.append("")
            lines.append(f"{by:<48} {'calls':>6} {'cycles':>10} {'share':>6} {'DRAM MB':>9}")
            for key, (calls, cycles, dram) in sorted(groups.items(), key=lambda kv: -kv[1][1])[:top]:
                lines.append(f"{key[:48]:<48} {calls:>6} {cycles:>10} {_pct(cycles, total)} {dram / 1e6:>9.3f}")
        lines.append("")
        lines.append(self.engine_table())
        return "\n".join(lines)

    def engine_table(self, kernel: Optional[Kernel] = None) -> str:
        """Each kind of engine (all cores together): the share of its cycles busy and stalled by cause."""
        times = analysis.by_kind(self.engine_time(kernel))
        shown = [c for c in CATEGORIES if any(t[c] for t in times.values())]
        head = f"{'engine (all cores)':<18}" + "".join(f" {CAUSE_TITLES[c][:10]:>10}" for c in shown)
        lines = [head]
        for kind, t in times.items():
            whole = sum(t.values())
            lines.append(f"{kind:<18}" + "".join(f" {_pct(t[c], whole):>10}" for c in shown))
        # Busy is not the same as efficient: a tc.mm of a shallow or narrow tile keeps the tensor core busy
        # with part of its array.
        busy = times.get("tensor core", {}).get("busy", 0)
        macs = kernel.macs if kernel else sum(k.macs for k in self.kernels)
        if busy:
            per_core = self.chip.macs_per_cycle / self.chip.num_cores
            lines.append(f"tensor core: {macs} MACs in {busy} busy cycles: {_pct(macs, busy * per_core).strip()} of the array's peak while busy")
        return "\n".join(lines)

    def roofline(self, top: int = 30) -> str:
        chip = self.chip
        lines = [f"peaks: {chip.macs_per_cycle:g} MACs/cycle, {chip.dram_bytes_per_cycle:g} DRAM B/cycle, "
                 f"{chip.vector_elements_per_cycle:g} vector elements/cycle",
                 f"{'kernel':<44} {'cycles':>9} {'MACs/cyc':>9} {'DRAM B/cyc':>10} {'elem/cyc':>9} {'bound':>9} {'binding':>7} {'% roof':>7}"]
        for p in sorted(analysis.roofline(self.raw, self.kernels), key=lambda p: -p.kernel.cycles)[:top]:
            r = p.rates
            lines.append(f"{(str(p.kernel.id) + ' ' + p.kernel.name)[:44]:<44} {p.kernel.cycles:>9} {r['macs_per_cycle']:>9.1f} "
                         f"{r['dram_bytes_per_cycle']:>10.2f} {r['elements_per_cycle']:>9.1f} {p.bound_cycles:>9.0f} {p.binding:>7} "
                         f"{100 * p.fraction_of_roofline:>6.1f}%")
        return "\n".join(lines)

    def roofline_plot(self, path: str) -> None:
        """A PNG: each kernel's MACs per cycle against its arithmetic intensity (MACs per DRAM byte) under the
        chip's roof, and each kernel's fraction of its bound."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        points = analysis.roofline(self.raw, self.kernels)
        chip = self.chip
        fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5))
        colors = {"mac": "tab:blue", "dram": "tab:red", "vector": "tab:green"}
        mac_points = [p for p in points if p.macs > 0 and p.dram_bytes > 0]
        if mac_points:
            intensities = [p.macs / p.dram_bytes for p in mac_points]
            lo, hi = min(intensities + [1.0]) / 2, max(intensities + [chip.macs_per_cycle / chip.dram_bytes_per_cycle]) * 2
            xs = [lo * (hi / lo) ** (i / 100) for i in range(101)]
            left.plot(xs, [min(chip.macs_per_cycle, x * chip.dram_bytes_per_cycle) for x in xs], "k-", label="roof")
            for p, x in zip(mac_points, intensities):
                left.scatter(x, p.rates["macs_per_cycle"], color=colors[p.binding], s=12)
            left.set_xscale("log")
            left.set_yscale("log")
        left.set_xlabel("MACs per DRAM byte")
        left.set_ylabel("MACs per cycle")
        left.set_title(f"kernels with MACs (chip '{chip.config}')")
        ranked = sorted(points, key=lambda p: -p.kernel.cycles)[:30]
        right.barh(range(len(ranked)), [100 * p.fraction_of_roofline for p in ranked], color=[colors[p.binding] for p in ranked])
        right.set_yticks(range(len(ranked)), [p.kernel.name[:40] for p in ranked], fontsize=6)
        right.invert_yaxis()
        right.set_xlabel("% of roofline (bound / cycles); colour: binding resource (blue MACs, red DRAM, green vector)")
        right.set_title("the longest kernels")
        fig.tight_layout()
        tmp = path + ".tmp.png"
        fig.savefig(tmp, dpi=110)
        plt.close(fig)
        os.replace(tmp, path)

    def block_path(self, top: int = 20) -> str:
        """The chain of packets and gaps on the command processor that sets the trace's end, with the share
        of its cycles in kernels, other packets, and waiting for the host (and how much of that wait had a
        memory transfer on the host link: the host's copies, program uploads, command packets)."""
        chain = analysis.block_path(self.raw)
        if not chain:
            return f"{self.path}: no command-processor packets (a trace of npu-sim running a program: use --kernel)"
        kernel_at = {(k.queue, k.begin): k for k in self.kernels}
        link = [(s.begin, s.end) for s in self.raw.spans if s.category == "host link"]
        shares, host_link = collections.Counter(), 0
        rows = []
        for begin, end, queue, name in chain:
            if name == "host":
                copying = analysis.covered(link, begin, end)
                host_link += copying
                kind, label = "waiting for the host", f"(nothing queued: the host's work; {copying} cycles with a transfer on the host link)"
            elif name.startswith("LAUNCH"):
                k = kernel_at.get((queue, begin))
                kind, label = "kernels", f"kernel {k.id} {k.name}" if k else name
            else:
                kind, label = "other packets", name
            shares[kind] += end - begin
            rows.append((begin, end - begin, queue, label))
        span = chain[-1][1] - chain[0][0]
        lines = [f"{self.path}: the chain that ends the trace, cycles {chain[0][0]}..{chain[-1][1]} ({span})",
                 ", ".join(f"{kind} {v} ({_pct(v, span).strip()})" for kind, v in shares.most_common()) +
                 (f"; the host link carried memory in {host_link} of the host's cycles" if shares["waiting for the host"] else ""),
                 f"{'begin':>10} {'cycles':>9}  {'queue':<8} what"]
        longest = sorted(rows, key=lambda r: -r[1])[:top]
        for begin, cycles, queue, label in rows:
            if (begin, cycles, queue, label) in longest:
                lines.append(f"{begin:>10} {cycles:>9}  {queue:<8} {label}")
        if len(rows) > top:
            lines.append(f"(the {top} longest of {len(rows)} steps shown)")
        return "\n".join(lines)

    def critical_path(self, which: Optional[str] = None) -> str:
        k = self.find_kernel(which)
        steps = analysis.critical_path(k)
        lines = [f"kernel {k.id} {k.name}: cycles {k.begin}..{k.end} ({k.cycles}); its programs end at "
                 f"{max((e for _, e in k.core_windows.values()), default=k.end)}",
                 f"{'begin':>10} {'cycles':>8}  {'where':<22} {'span':<28} why it is on the path"]
        for step in steps:
            s = step.span
            lines.append(f"{s.begin:>10} {s.cycles:>8}  {s.process + ' / ' + s.thread:<22} {s.name[:28]:<28} {step.reason}")
        shares = analysis.path_shares(steps)
        covered = sum(shares.values())
        lines.append("on the path: " + ", ".join(f"{name} {v} ({_pct(v, k.cycles).strip()})" for name, v in shares.items()) +
                     f"; not covered by a span (launch, issue gaps): {max(0, k.cycles - covered)}")
        return "\n".join(lines)

    def noc_links(self) -> Dict[str, List[tuple]]:
        """Each NoC link's busy percentage over time, from its counter track: {"(x,y)E": [(cycle, percent), ...]}
        (a link appears once a transfer crossed it)."""
        links = {}
        for c in self.raw.counters:
            if c.name.startswith("noc link ") and c.name.endswith(" busy %"):
                links.setdefault(c.name[len("noc link "):-len(" busy %")], []).append((c.time, c.value))
        return {name: sorted(samples) for name, samples in sorted(links.items())}

    def noc_link_busy_cycles(self) -> Dict[str, float]:
        """Each link's busy cycles over the trace (the integral of its counter)."""
        result = {}
        for name, samples in self.noc_links().items():
            result[name] = sum(v / 100 * (t1 - t0) for (t0, v), (t1, _) in zip(samples, samples[1:]))
        return result

    def noc_report(self, top: int = 20) -> str:
        device = [s for s in self.raw.spans if s.category in ("device", "command")]
        window = max(1, max((s.end for s in device), default=1) - min((s.begin for s in device), default=0))
        busy = self.noc_link_busy_cycles()
        if not busy:
            return f"{self.path}: no NoC link carried a transfer"
        lines = [f"{'link':<10} {'busy cycles':>12} {'busy %':>7}   ({len(busy)} links used of the mesh; window {window} cycles)"]
        for name, cycles in sorted(busy.items(), key=lambda kv: -kv[1])[:top]:
            lines.append(f"{name:<10} {cycles:>12.0f} {100 * cycles / window:>6.1f}%")
        return "\n".join(lines)

    def noc_heatmap(self, path: str) -> None:
        """A PNG: each link's busy % (rows) in each counter window (columns)."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        links = self.noc_links()
        if not links:
            raise TraceError(f"{self.path}: no NoC link carried a transfer: nothing to plot")
        times = sorted({t for samples in links.values() for t, _ in samples})
        grid = []
        for samples in links.values():
            at, value, row = dict(samples), 0.0, []
            for t in times:  # a counter holds its value until its next sample
                value = at.get(t, value)
                row.append(value)
            grid.append(row)
        fig, ax = plt.subplots(figsize=(12, max(3, 0.25 * len(links) + 1.5)))
        image = ax.imshow(grid, aspect="auto", interpolation="nearest", cmap="viridis", vmin=0, vmax=100,
                          extent=(times[0], times[-1], len(links) - 0.5, -0.5))
        ax.set_yticks(range(len(links)), list(links), fontsize=7)
        ax.set_xlabel("device cycle")
        ax.set_title(f"NoC link busy % per window (chip '{self.chip.config}')")
        fig.colorbar(image, ax=ax, label="busy %")
        fig.tight_layout()
        tmp = path + ".tmp.png"
        fig.savefig(tmp, dpi=110)
        plt.close(fig)
        os.replace(tmp, path)

    # ---- tables ----

    def tables(self) -> Dict[str, "pyarrow.Table"]:  # noqa: F821
        """spans, counters, flows, kernels and engines as pyarrow tables, times in cycles."""
        import pyarrow as pa

        kernel_of = {}
        for k in self.kernels:
            for s in k.spans:
                kernel_of[s.index] = k.id
        spans = self.raw.spans
        numeric = ("macs", "bytes", "dram_bytes", "elements")
        span_table = pa.table({
            "id": [s.index for s in spans],
            "process": [s.process for s in spans],
            "thread": [s.thread for s in spans],
            "core": [core_of(s) for s in spans],
            "name": [s.name for s in spans],
            "category": [s.category for s in spans],
            "begin": [s.begin for s in spans],
            "end": [s.end for s in spans],
            "cycles": [s.cycles for s in spans],
            "kernel": [kernel_of.get(s.index) for s in spans],
            "stall": [s.args.get("stall") for s in spans],
            **{key: [s.number(key) for s in spans] for key in numeric},
            "args": [json.dumps(s.args, sort_keys=True) for s in spans],
        })
        counters = self.raw.counters
        counter_table = pa.table({"process": [c.process for c in counters], "name": [c.name for c in counters],
                                  "time": [c.time for c in counters], "value": [c.value for c in counters]})
        starts, ends = {}, {}
        for s in spans:
            for f in s.flows_out:
                starts[f] = s.index
            for f in s.flows_in:
                ends[f] = s.index
        flow_ids = sorted(set(starts) | set(ends))
        flow_table = pa.table({"id": flow_ids, "from_span": [starts.get(f) for f in flow_ids], "to_span": [ends.get(f) for f in flow_ids]},
                              schema=pa.schema([("id", pa.uint64()), ("from_span", pa.int64()), ("to_span", pa.int64())]))
        points = analysis.roofline(self.raw, self.kernels)
        kernel_table = pa.table({
            "id": [k.id for k in self.kernels], "name": [k.name for k in self.kernels], "kernel": [k.kernel for k in self.kernels],
            "op": [k.op for k in self.kernels], "layer": [k.layer for k in self.kernels], "nodes": [k.nodes for k in self.kernels],
            "queue": [k.queue for k in self.kernels], "begin": [k.begin for k in self.kernels], "end": [k.end for k in self.kernels],
            "cycles": [k.cycles for k in self.kernels], "cores": [len(k.core_windows) for k in self.kernels],
            "scratchpad_bytes": [max(k.scratchpad_bytes.values(), default=0) for k in self.kernels],
            "macs": [p.macs for p in points], "dram_bytes": [p.dram_bytes for p in points], "elements": [p.elements for p in points],
            "bound_cycles": [p.bound_cycles for p in points], "binding": [p.binding for p in points],
            "fraction_of_roofline": [p.fraction_of_roofline for p in points],
        })
        times = self.engine_time()
        engine_table = pa.table({"engine": list(times), **{c: [t[c] for t in times.values()] for c in CATEGORIES}})
        return {"spans": span_table, "counters": counter_table, "flows": flow_table, "kernels": kernel_table, "engines": engine_table}

    def export_parquet(self, directory: str) -> List[str]:
        import pyarrow.parquet as pq

        os.makedirs(directory, exist_ok=True)
        written = []
        for name, table in self.tables().items():
            path = os.path.join(directory, name + ".parquet")
            tmp = path + ".tmp"
            pq.write_table(table, tmp)
            os.replace(tmp, path)
            written.append(path)
        return written

    def sql(self, query: str):
        """Runs `query` (DuckDB's SQL) over the tables (spans, counters, flows, kernels, engines); returns a
        DuckDB relation (.fetchall(), .df(), str() prints it)."""
        import duckdb

        connection = duckdb.connect()
        for name, table in self.tables().items():
            connection.register(name, table)
        return connection.sql(query)


def load(path: str) -> Trace:
    """Reads a trace npusim wrote (.pftrace or .json); TraceError naming the file if it cannot."""
    return Trace(read(path))


def diff(a: Trace, b: Trace, by: str = "layer", top: int = 20) -> str:
    """Two runs side by side by layer, op or kernel: cycles and DRAM bytes, sorted by the size of the change;
    then each engine kind's busy and stall shares in both."""
    rows = analysis.diff(a.kernels, b.kernels, by)
    ta, tb = sum(k.cycles for k in a.kernels), sum(k.cycles for k in b.kernels)
    ua, ub = ta / a.chip.clock_mhz, tb / b.chip.clock_mhz
    lines = [f"A: {a.path} (chip '{a.chip.config}', {a.chip.clock_mhz:g} MHz), {len(a.kernels)} kernels, {ta} kernel cycles ({ua:.1f} us)",
             f"B: {b.path} (chip '{b.chip.config}', {b.chip.clock_mhz:g} MHz), {len(b.kernels)} kernels, {tb} kernel cycles ({ub:.1f} us)",
             f"B - A: {tb - ta:+d} cycles ({(tb - ta) / max(1, ta):+.1%}), {ub - ua:+.1f} us ({(ub - ua) / max(1e-9, ua):+.1%})" +
             ("" if a.chip.clock_mhz == b.chip.clock_mhz else "; the rows are in each chip's own cycles"),
             "",
             f"{by:<44} {'calls A/B':>10} {'cycles A':>10} {'cycles B':>10} {'delta':>10} {'DRAM MB A':>10} {'DRAM MB B':>10}"]
    for r in rows[:top]:
        lines.append(f"{r.key[:44]:<44} {f'{r.calls[0]}/{r.calls[1]}':>10} {r.cycles[0]:>10} {r.cycles[1]:>10} {r.delta:>+10d} "
                     f"{r.dram_bytes[0] / 1e6:>10.3f} {r.dram_bytes[1] / 1e6:>10.3f}")
    if len(rows) > top:
        rest = rows[top:]
        lines.append(f"({len(rest)} more, {sum(r.delta for r in rest):+d} cycles)")
    for label, t in (("A", a), ("B", b)):
        lines.append("")
        lines.append(f"{label}: " + t.engine_table().replace("\n", "\n   "))
    return "\n".join(lines)
