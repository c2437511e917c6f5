"""FX graph passes of the npu backend: what torch.compile's graphs become
before they run on the simulated chip.

The graphs come from aot_autograd, decomposed to core ATen (npusim.backend).
Passes, in order:
  fuse_gemm_epilogues   mm / addmm / bmm whose only use is an activation (through
                        views) become one npusim::gemm with that epilogue: the
                        activation runs on the tile in the accumulator, not as
                        a second kernel reading and writing DRAM.
  dead code elimination (decompositions leave unused values, such as a layer
                        norm's mean and rstd in inference graphs).
Layer norms are fused by the decomposition table itself (npusim.backend).

What a pass does is recorded in a GraphReport, which npusim.explain prints.
"""

import dataclasses
from typing import Dict, List

import torch
import torch.fx

aten = torch.ops.aten

# ATen activations a gemm epilogue applies, by the epilogue's name.
_ACTIVATIONS = {
    aten.relu.default: "relu",
    aten.silu.default: "silu",
    aten.tanh.default: "tanh",
    aten.sigmoid.default: "sigmoid",
}
_MATMULS = (aten.mm.default, aten.addmm.default, aten.bmm.default)
_VIEWS = (aten.view.default, aten._unsafe_view.default, aten.reshape.default)


@dataclasses.dataclass
class GraphReport:
    """What the backend did to one graph (forward or backward)."""

    kind: str  # "forward", "backward" or "inference"
    nodes_before: int = 0
    nodes_after: int = 0
    fused: List[str] = dataclasses.field(default_factory=list)  # one line per fused kernel
    ops: Dict[str, int] = dataclasses.field(default_factory=dict)  # ATen op -> calls in the final graph


def _activation_name(node: torch.fx.Node):
    if node.op != "call_function":
        return None
    if node.target is aten.gelu.default:
        approximate = node.kwargs.get("approximate", node.args[1] if len(node.args) > 1 else "none")
        return "gelu_tanh" if approximate == "tanh" else "gelu"
    return _ACTIVATIONS.get(node.target)


def _only_user(node: torch.fx.Node):
    users = list(node.users)
    return users[0] if len(users) == 1 else None


def fuse_gemm_epilogues(gm: torch.fx.GraphModule, report: GraphReport) -> None:
    graph = gm.graph
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in _MATMULS:
            continue
        # The chain: matmul -> views* -> activation+, each the only user of the one before.
        views, current = [], node
        while (user := _only_user(current)) is not None and user.op == "call_function" and user.target in _VIEWS:
            views.append(user)
            current = user
        activations = []
        while (user := _only_user(current)) is not None and _activation_name(user) is not None:
            activations.append(user)
            current = user
        if not activations:
            continue
        if node.target is aten.addmm.default:
            bias, a, b = node.args[:3]
            beta = node.kwargs.get("beta", node.args[3] if len(node.args) > 3 else 1)
            alpha = node.kwargs.get("alpha", node.args[4] if len(node.args) > 4 else 1)
        else:
            (a, b), bias, alpha, beta = node.args[:2], None, 1, 1
        names = [_activation_name(n) for n in activations]
        with graph.inserting_before(activations[0]):
            fused = graph.call_function(torch.ops.npusim.gemm.default, (a, b, bias, float(alpha), float(beta), names))
            fused.meta["val"] = node.meta.get("val")
            result = fused
            for view in views:
                result = graph.call_function(view.target, (result, *view.args[1:]), dict(view.kwargs))
                result.meta["val"] = view.meta.get("val")
        activations[-1].replace_all_uses_with(result)
        for dead in reversed([node, *views, *activations]):
            graph.erase_node(dead)
        report.fused.append(f"{node.target.__name__.split('.')[0]} + {' + '.join(names)} -> npusim::gemm")


def lower(gm: torch.fx.GraphModule, kind: str) -> GraphReport:
    """Runs the passes on gm in place; returns what they did."""
    report = GraphReport(kind=kind, nodes_before=sum(1 for n in gm.graph.nodes if n.op == "call_function"))
    fuse_gemm_epilogues(gm, report)
    gm.graph.eliminate_dead_code()
    gm.graph.lint()
    gm.recompile()
    for node in gm.graph.nodes:
        if node.op == "call_function":
            name = getattr(node.target, "__name__", str(node.target))
            if isinstance(node.target, torch._ops.OpOverload):
                name = node.target.name()
                if name == "npusim::layer_norm":
                    report.fused.append("native_layer_norm -> npusim::layer_norm")
            report.ops[name] = report.ops.get(name, 0) + 1
    report.nodes_after = sum(report.ops.values())
    return report
