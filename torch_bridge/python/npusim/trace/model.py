"""Reading a trace npusim wrote (.pftrace: Perfetto protobuf, .json: Chrome JSON) into spans, counters and
flows, in device cycles.

Both writers come from one event model (traces/include/npusim/traces/trace.h): tracks (processes, threads,
counters), slices with string arguments and flow ids, counter samples. The chip describes itself in a
"metadata" slice named "chip ..." (clock, cores, peaks: sim/src/chip_trace.cpp); times are converted to
cycles with its cycle_ps. A .json trace keeps picoseconds; a .pftrace keeps nanoseconds, so its cycles are
exact at clocks of 1 GHz and below and within a cycle above.
"""

import dataclasses
import json
import os
from typing import Dict, List, Optional


class TraceError(ValueError):
    """A file that is not a trace npusim can read; the message names the file."""


@dataclasses.dataclass
class Span:
    index: int
    process: str  # "core 0", "command processor", "host (driver)", ...
    thread: str  # "tensor core", "dma ch1", "queue 0", ...
    name: str
    category: str
    begin: int  # device cycles
    end: int
    args: Dict[str, str]
    flows_out: List[int]
    flows_in: List[int]

    @property
    def cycles(self) -> int:
        return self.end - self.begin

    def number(self, key: str) -> int:
        value = self.args.get(key)
        return int(value) if value not in (None, "") else 0


@dataclasses.dataclass
class CounterSample:
    process: str
    name: str
    time: int  # device cycles
    value: float


@dataclasses.dataclass
class Chip:
    config: str
    clock_mhz: float
    cycle_ps: int
    num_cores: int
    dma_channels: int
    macs_per_cycle: float  # the whole chip's
    vector_elements_per_cycle: float
    dram_bytes_per_cycle: float
    scratchpad_bytes_per_core: int


@dataclasses.dataclass
class RawTrace:
    path: str
    chip: Chip
    spans: List[Span]
    counters: List[CounterSample]


def _chip(spans_ps: List[dict], path: str) -> Chip:
    for s in spans_ps:
        if s["category"] == "metadata" and s["name"].startswith("chip"):
            a = s["args"]
            cores = int(a["num_cores"])
            return Chip(config=a.get("config", ""), clock_mhz=float(a["clock_mhz"]), cycle_ps=int(a["cycle_ps"]), num_cores=cores,
                        dma_channels=int(a["dma_channels"]),
                        macs_per_cycle=float(a["macs_per_cycle"]),
                        vector_elements_per_cycle=float(a["vector_elements_per_cycle"]),
                        dram_bytes_per_cycle=float(a["dram_bytes_per_cycle"]),
                        scratchpad_bytes_per_core=int(a["scratchpad_bytes_per_core"]))
    raise TraceError(f"{path}: the trace does not describe its chip (no 'chip' metadata span): written by an older npusim?")


def _read_json(path: str, text: str):
    try:
        document = json.loads(text)
    except json.JSONDecodeError as e:
        raise TraceError(f"{path}:{e.lineno}:{e.colno}: not JSON: {e.msg}") from None
    events = document.get("traceEvents") if isinstance(document, dict) else document
    if not isinstance(events, list):
        raise TraceError(f"{path}: no traceEvents list: not a Chrome JSON trace")
    processes, threads = {}, {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            processes[e["pid"]] = e["args"]["name"]
        elif e.get("ph") == "M" and e.get("name") == "thread_name":
            threads[(e["pid"], e["tid"])] = e["args"]["name"]
    spans, counters, starts = [], [], {}
    ps = lambda us: round(float(us) * 1e6)  # noqa: E731 (the writer prints microseconds with six decimals: exact picoseconds)
    for e in events:
        ph = e.get("ph")
        if ph == "X":
            begin = ps(e["ts"])
            span = {"process": processes.get(e["pid"], str(e["pid"])), "thread": threads.get((e["pid"], e["tid"]), str(e["tid"])),
                    "name": e.get("name", ""), "category": e.get("cat", ""), "begin": begin, "end": begin + ps(e.get("dur", 0)),
                    "args": {k: str(v) for k, v in (e.get("args") or {}).items()}, "flows_out": [], "flows_in": []}
            starts[(e["pid"], e["tid"], begin)] = span
            spans.append(span)
        elif ph == "C":
            for value in (e.get("args") or {}).values():
                counters.append((processes.get(e["pid"], str(e["pid"])), e["name"], ps(e["ts"]), float(value)))
    # A flow event sits at the start of the slice it leaves or enters (traces/src/chrome_json_writer.cpp).
    for e in events:
        if e.get("ph") in ("s", "f"):
            span = starts.get((e["pid"], e["tid"], ps(e["ts"])))
            if span is not None:
                span["flows_out" if e["ph"] == "s" else "flows_in"].append(int(e["id"]))
    return spans, counters


def _read_perfetto(path: str, data: bytes):
    try:
        from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
    except ImportError as e:  # pragma: no cover (setup.sh installs it)
        raise TraceError(f"{path}: reading .pftrace needs the perfetto package (pip install perfetto): {e}") from None
    trace = pb.Trace()
    try:
        trace.ParseFromString(data)
    except Exception as e:  # protobuf's DecodeError
        raise TraceError(f"{path}: not a Perfetto trace: {e}") from None
    tracks = {}  # uuid -> (process name, thread or counter name)
    processes = {}
    for packet in trace.packet:
        if packet.HasField("track_descriptor"):
            d = packet.track_descriptor
            if d.HasField("process"):
                processes[d.uuid] = d.process.process_name
                tracks[d.uuid] = (d.process.process_name, "")
            elif d.HasField("thread"):
                tracks[d.uuid] = (d.parent_uuid, d.thread.thread_name)
            else:
                tracks[d.uuid] = (d.parent_uuid, d.name)
    tracks = {uuid: (processes.get(parent, parent) if not isinstance(parent, str) else parent, name) for uuid, (parent, name) in tracks.items()}
    spans, counters, open_spans = [], [], {}
    for packet in trace.packet:
        if not packet.HasField("track_event"):
            continue
        event, time = packet.track_event, packet.timestamp * 1000
        process, thread = tracks.get(event.track_uuid, ("?", "?"))
        if event.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            span = {"process": process, "thread": thread, "name": event.name, "category": event.categories[0] if event.categories else "",
                    "begin": time, "end": time, "args": {a.name: a.string_value for a in event.debug_annotations},
                    "flows_out": list(event.flow_ids), "flows_in": list(event.terminating_flow_ids)}
            open_spans.setdefault(event.track_uuid, []).append(span)
            spans.append(span)
        elif event.type == pb.TrackEvent.TYPE_SLICE_END:
            stack = open_spans.get(event.track_uuid)
            if not stack:
                raise TraceError(f"{path}: a slice ends on track {event.track_uuid} with none open")
            stack.pop()["end"] = time
        elif event.type == pb.TrackEvent.TYPE_COUNTER:
            counters.append((process, thread, time, event.double_counter_value))
    return spans, counters


def read(path: str) -> RawTrace:
    """Reads `path` (.pftrace or .json, by its content); TraceError with the file's name if it cannot."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise TraceError(f"{path}: cannot read: {e.strerror}") from None
    if data.lstrip()[:1] in (b"{", b"["):
        spans_ps, counters_ps = _read_json(path, data.decode("utf-8", errors="replace"))
    else:
        spans_ps, counters_ps = _read_perfetto(path, data)
    chip = _chip(spans_ps, path)
    cycle = lambda t: round(t / chip.cycle_ps)  # noqa: E731
    spans = [Span(i, s["process"], s["thread"], s["name"], s["category"], cycle(s["begin"]), cycle(s["end"]), s["args"], s["flows_out"],
                  s["flows_in"]) for i, s in enumerate(sorted(spans_ps, key=lambda s: (s["begin"], -s["end"])))]
    counters = [CounterSample(p, n, cycle(t), v) for p, n, t, v in counters_ps]
    return RawTrace(path, chip, spans, counters)


def core_of(span: Span) -> Optional[int]:
    """The core a span ran on ("core 3" -> 3), None for the command processor, the host and the memory system."""
    if span.process.startswith("core "):
        try:
            return int(span.process[5:])
        except ValueError:
            return None
    return None
