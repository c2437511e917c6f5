"""npusim.explain(model, *inputs): what torch.compile(model, backend="npu")
makes of a model, measured by running it.

    print(npusim.explain(model, x))

It reports Dynamo's graphs and graph breaks (with their reasons), what the
backend fused, every node that fell back to the CPU, the partitions of each
graph (runs of nodes on the chip, and the fallbacks between them), and the
device cycles and DRAM bytes of one run in graph mode against one in eager
mode. Partitions and fallbacks are measured per node (the fallback counter
before and after it), not guessed from the op's name.
"""

import dataclasses
from typing import Dict, List, Tuple

import torch
import torch.fx

from . import _C, backend, lowering

__all__ = ["explain", "Explanation"]


@dataclasses.dataclass
class GraphExplanation:
    kind: str
    nodes: int
    fused: List[str]
    partitions: List[Tuple[str, int, List[str]]]  # ("npu" | "cpu", nodes, the ops of the cpu ones)
    fallbacks: Dict[str, int]
    dropped_clones: int = 0  # copies that changed no layout, removed
    sram_values: int = 0  # intermediates the memory plan keeps in the SRAM pools
    sram_peak_bytes: int = 0


@dataclasses.dataclass
class Explanation:
    graphs: List[GraphExplanation]
    graph_breaks: int
    break_reasons: List[str]
    fallbacks: Dict[str, int]  # summed over the graphs
    eager: Dict[str, int]  # device counters of one eager run: cycles, DRAM bytes, kernels
    compiled: Dict[str, int]  # the same for one run of the compiled model

    def __str__(self) -> str:
        lines = [f"{len(self.graphs)} graph(s), {self.graph_breaks} graph break(s)"]
        lines += [f"  break: {reason}" for reason in self.break_reasons]
        for i, g in enumerate(self.graphs):
            lines.append(f"graph {i} ({g.kind}): {g.nodes} nodes, {len(g.partitions)} partition(s)")
            lines += [f"  fused: {f}" for f in g.fused]
            if g.dropped_clones:
                lines.append(f"  dropped: {g.dropped_clones} clone(s) that changed no layout")
            if g.sram_values:
                lines.append(f"  memory plan: {g.sram_values} intermediate(s) in the SRAM pools, at most "
                             f"{g.sram_peak_bytes / 1024:.0f} KiB at once")
            for where, count, ops in g.partitions:
                lines.append(f"  {where}: {count} node(s)" + (f" ({', '.join(ops)})" if ops else ""))
        lines.append("fallbacks: " + (", ".join(f"{op} x{n}" for op, n in sorted(self.fallbacks.items())) or "none"))
        for key in ("cycles", "dram_bytes", "kernels"):
            e, c = self.eager.get(key, 0), self.compiled.get(key, 0)
            ratio = f" ({c / e:.2f}x)" if e else ""
            lines.append(f"{key}: eager {e}, compiled {c}{ratio}")
        return "\n".join(lines)


def _counters() -> Dict[str, int]:
    c = _C.device_counters()
    return {"cycles": c["cycle"], "dram_bytes": c["dram_read_bytes"] + c["dram_write_bytes"],
            "kernels": sum(_C.kernel_stats().values())}


def _measure(fn) -> Dict[str, int]:
    before = _counters()
    fn()
    after = _counters()
    return {k: after[k] - before[k] for k in before}


class _MeasuringInterpreter(torch.fx.Interpreter):
    """Runs a graph node by node, noting which nodes fell back to the CPU."""

    def __init__(self, gm, record):
        super().__init__(gm)
        self.record = record

    def run_node(self, n):
        if n.op != "call_function":
            return super().run_node(n)
        before = dict(_C.fallback_stats())
        result = super().run_node(n)
        after = dict(_C.fallback_stats())
        fell_back = {op: after[op] - before.get(op, 0) for op in after if after[op] != before.get(op, 0)}
        self.record.append((n, fell_back))
        return result


def explain(model, *inputs, **kwargs) -> Explanation:
    """Compiles `model` for the npu (a fresh compile, whatever is cached), runs
    it once measured node by node, and once more eagerly and compiled to
    compare device cycles and DRAM bytes. Inputs are npu tensors (or what
    the model takes)."""
    import torch._dynamo

    dynamo = torch._dynamo.explain(model)(*inputs, **kwargs)
    records: List[list] = []
    reports: List[lowering.GraphReport] = []

    def measuring_backend(gm, example_inputs):
        def compiler(kind):
            def compile_graph(g, _):
                reports.append(lowering.lower(g, kind, sram_pool=backend.sram_pool()))
                record: list = []
                records.append(record)
                return lambda *args: _MeasuringInterpreter(g, record).run(*args)

            return compile_graph

        from torch._dynamo.backends.common import aot_autograd

        inference = not torch.is_grad_enabled()
        return aot_autograd(fw_compiler=compiler("inference" if inference else "forward"), bw_compiler=compiler("backward"),
                            inference_compiler=compiler("inference"), decompositions=backend.decompositions())(gm, example_inputs)

    torch.compile(model, backend=measuring_backend)(*inputs, **kwargs)
    _C.synchronize()

    graphs, total = [], {}
    for report, record in zip(reports, records):
        partitions: List[Tuple[str, int, List[str]]] = []
        fallbacks: Dict[str, int] = {}
        for node, fell_back in record:
            where = "cpu" if fell_back else "npu"
            for op, count in fell_back.items():
                fallbacks[op] = fallbacks.get(op, 0) + count
                total[op] = total.get(op, 0) + count
            if partitions and partitions[-1][0] == where:
                partitions[-1] = (where, partitions[-1][1] + 1, partitions[-1][2] + list(fell_back))
            else:
                partitions.append((where, 1, list(fell_back)))
        graphs.append(GraphExplanation(report.kind, report.nodes_after, report.fused, partitions, fallbacks, report.dropped_clones,
                                       report.sram_values, report.sram_peak_bytes))

    compiled_model = torch.compile(model, backend="npu")
    compiled_model(*inputs, **kwargs)  # compiles (and warms the program cache) outside the measurement
    model(*inputs, **kwargs)
    eager = _measure(lambda: model(*inputs, **kwargs))
    compiled = _measure(lambda: compiled_model(*inputs, **kwargs))
    return Explanation(graphs, dynamo.graph_break_count, [str(r.reason) for r in dynamo.break_reasons], total, eager, compiled)
