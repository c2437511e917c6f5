"""FX graph passes of the npu backend: what torch.compile's graphs become
before they run on the simulated chip.

The graphs come from aot_autograd, decomposed to core ATen (npusim.backend).
Passes, in order:
  fold_constants        (below)
  recognize_gelu        the tanh approximation of GELU written out in elementwise
                        ops (GPT-2's "gelu_new": 0.5 x (1 + tanh(sqrt(2/pi) (x +
                        0.044715 x^3)))) becomes aten.gelu(approximate="tanh"): one
                        vector instruction instead of eight kernels, and a gemm
                        epilogue when it follows a matmul.
  drop_clones           clones that keep their input's strides (an eval-mode dropout
                        decomposes to one) are dropped: the graphs are functional,
                        so a copy that changes no layout is a kernel for nothing.
  fuse_gemm_epilogues   mm / addmm / bmm whose only use is a product or quotient by a
                        number (its alpha), a residual add of a tensor of its shape
                        and/or an activation (through views)
                        become one npusim::gemm with that scale, residual and epilogue:
                        they run on the tile in the accumulator, not as more
                        kernels reading and writing DRAM.
  fuse_conv_bn          (inference graphs) a 2-D convolution followed by an eval-mode
                        batch norm, a residual add and/or activations becomes one
                        npusim::conv2d: the norm as a per-channel scale s = gamma /
                        sqrt(var + eps) and shift (b - mean) * s + beta (small kernels
                        on the parameter vectors, not on the weights) applied with the
                        residual and the activations in the matmul's epilogue, so the
                        activations cross DRAM once.
  eval_batch_norm_as_elementwise  (inference graphs) an eval batch norm no convolution
                        took (of a contiguous x, f32 parameters): x * scale + shift with
                        fuse_conv_bn's per-channel scale and shift, elementwise ops that
                        join the chains around them (a cast of x before, an activation
                        after): one pass over x.
  values_only_max_pool  (inference graphs) max_pool2d_with_indices whose indices
                        nothing reads becomes npusim::max_pool2d: im2col and one
                        row max, no running comparisons for the indices.
  fold_constants        values that depend on no input (attention masks built
                        from arange, full, comparisons: often in integer and bool
                        dtypes the chip lacks) are computed once at compile time on
                        the CPU and become constants of the graph on the device.
  causal_attention      attention whose mask is a folded constant equal to the causal
                        mask (0 / True on and below the diagonal, -inf / False above)
                        takes is_causal instead: the flash-attention kernel's own
                        mask, no mask tensor read (GPT-2 passes such a mask).
  fold_float_casts      x.float() of a bf16 or f16 x read only as the input of softmax,
                        log_softmax or a layer or RMS norm: each reads x as it is and
                        keeps its f32 result (they compute in f32 anyway), so x's f32
                        copy never crosses DRAM (Llama's RMSNorm, attention
                        probabilities in f32).
  transposed_attention  attention written with its roles transposed, vᵀ @ softmax(k @ qᵀ
                        · s, dim=-2) (3-D), becomes npusim::attention(q, k, v) turned
                        over (a copy of the [B, Dv, L] result): the flash kernel, no
                        scores in DRAM.
  dead code elimination (decompositions leave unused values, such as a layer
                        norm's mean and rstd in inference graphs).
  split_clamps          clamp(x, lo, hi) beside an elementwise op becomes clamp_min, clamp_max:
                        a maximum and a minimum with constants, chain steps (hardswish,
                        hardsigmoid and relu6 then fuse into one chain).
  fuse_elementwise_chains  connected elementwise ops of one float dtype whose
                        intermediates nothing else reads (a GELU's or a loss's
                        backward, an optimizer's update) become one
                        npusim::elementwise_chain: each step rounds as the op alone
                        does, and the intermediates stay on the core. Casts between
                        f32 and bf16/f16 at a chain of f32 steps' ends join it (the
                        chain then computed in f32, rounded once to its result's dtype).
  plan_sram             (last; when the device has an SRAM pool: npusim.init(sram_pool=...))
                        static memory planning: walking the graph in order with each
                        value's lifetime (to its last reader, through views), the
                        intermediates that fit in the cores' pools are allocated
                        there, so the kernels that produce and read them move them
                        over the NoC instead of through DRAM. A value the graph
                        returns (or a view of it) stays in DRAM. The plan mirrors the
                        driver's choice of pool; should a pool be fuller at run time
                        than planned, the allocation goes to DRAM (never an error).
Layer norms are fused by the decomposition table itself (npusim.backend).

What a pass does is recorded in a GraphReport, which npusim.explain prints.
"""

import dataclasses
import math
import operator
import re
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
    folded: int = 0  # nodes computed at compile time
    dropped_clones: int = 0  # copies that changed no layout
    split_clamps: int = 0  # clamps made two chain steps
    constant_values: Dict[str, torch.Tensor] = dataclasses.field(default_factory=dict)  # folded constants, on the CPU
    sram_values: int = 0  # intermediates planned in the SRAM pools
    sram_bytes: int = 0  # their bytes, summed
    sram_peak_bytes: int = 0  # the most planned in the pools at once
    ops: Dict[str, int] = dataclasses.field(default_factory=dict)  # ATen op -> calls in the final graph


def layer_of(node: torch.fx.Node) -> str:
    """The layer a node's kernel is attributed to in profiles: the module it came from ("transformer.h.0.attn",
    from Dynamo's module stack) or, for a fused node, its group's name (_name_fused_group)."""
    if "npusim_layer" in node.meta:
        return node.meta["npusim_layer"]
    stack = node.meta.get("nn_module_stack")
    if not stack:
        return ""
    path = list(stack.values())[-1][0]
    # Dynamo names the compiled module by the argument it came in ("L['self']", "L['fn']", "L__self___").
    return re.sub(r"^(L\['[^']*'\]\.?|L__self___)", "", path)


def _name_fused_group(fused: torch.fx.Node, main: torch.fx.Node, others) -> None:
    """A fused node is attributed to the module of its main work (a convolution, a matmul), named with the
    modules it took in: "layer1.0.conv1+bn1+relu" (each further module by its last name, once)."""
    main_layer = name = layer_of(main)
    for other in others:
        path = layer_of(other)
        if not path or main_layer == path or main_layer.startswith(path + "."):  # (the block around it: a residual add)
            continue
        if "+" + path.rsplit(".", 1)[-1] not in name:
            name += "+" + path.rsplit(".", 1)[-1]
    fused.meta["npusim_layer"] = name
    fused.meta["npusim_nodes"] = [main.name, *(other.name for other in others)]  # the FX nodes it computes
    for key in ("nn_module_stack", "stack_trace"):
        if key in main.meta:
            fused.meta[key] = main.meta[key]


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


def drop_clones(gm: torch.fx.GraphModule, report: GraphReport) -> None:
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target is not aten.clone.default or len(node.args) != 1:
            continue
        source = node.args[0]
        mine, theirs = node.meta.get("val"), getattr(source, "meta", {}).get("val")
        if not isinstance(mine, torch.Tensor) or not isinstance(theirs, torch.Tensor) or mine.stride() != theirs.stride():
            continue
        if any(user.op == "output" for user in node.users):  # an output must not alias another value
            continue
        if any(user.target is aten.copy_.default and user.args[0] is source for user in source.users):
            continue  # the source is written later (an input mutation): the copy keeps the old values
        node.replace_all_uses_with(source)
        gm.graph.erase_node(node)
        report.dropped_clones += 1


def _residual_add(node: torch.fx.Node):
    """The only user of node when it adds a tensor of node's shape and dtype to it
    (alpha 1): (the add, the other operand); else (None, None)."""
    add = _only_user(node)
    if add is None or add.op != "call_function" or add.target is not aten.add.Tensor or len(add.args) != 2:
        return None, None
    if add.kwargs.get("alpha", 1) != 1:
        return None, None
    other = add.args[1] if add.args[0] is node else add.args[0]
    if other is node or not isinstance(other, torch.fx.Node):
        return None, None
    mine, theirs = node.meta.get("val"), other.meta.get("val")
    if not isinstance(mine, torch.Tensor) or not isinstance(theirs, torch.Tensor):
        return None, None
    if theirs.shape != mine.shape or theirs.dtype != mine.dtype or theirs.device != mine.device:
        return None, None
    return add, other


def _activations_after(current: torch.fx.Node):
    """The activations that follow current, each the only user of the one before."""
    activations = []
    while (user := _only_user(current)) is not None and _activation_name(user) is not None:
        activations.append(user)
        current = user
    return activations


def _scaled_by_a_number(node: torch.fx.Node):
    """(the factor, the node) when node's only user multiplies or divides it by a finite nonzero number."""
    user = _only_user(node)
    if user is None or user.op != "call_function" or user.kwargs or len(user.args) != 2 or user.args[0] is not node:
        return None
    factor = user.args[1]
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not math.isfinite(factor) or factor == 0:
        return None
    if user.target in (aten.mul.Tensor, aten.mul.Scalar):
        return float(factor), user
    if user.target in (aten.div.Tensor, aten.div.Scalar):
        return 1.0 / float(factor), user
    return None


def _product_shape(graph: torch.fx.Graph, product: torch.fx.Node, a: torch.fx.Node, b: torch.fx.Node) -> list:
    """The shape of mm/addmm/bmm's result as a graph argument: its sizes, where a size is symbolic (a dynamic
    dim) the size of a or b it comes from, read in the graph (a SymInt's name means nothing at run time)."""
    shape = []
    for dim, size in enumerate(product.meta["val"].shape):
        if isinstance(size, int):
            shape.append(size)
            continue
        last = dim == product.meta["val"].dim() - 1
        source, source_dim = (b, b.meta["val"].dim() - 1) if last else (a, dim)
        node = graph.call_function(torch.ops.aten.sym_size.int, (source, source_dim))
        node.meta["val"] = size
        shape.append(node)
    return shape


def fuse_gemm_epilogues(gm: torch.fx.GraphModule, report: GraphReport) -> None:
    graph = gm.graph
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in _MATMULS:
            continue
        # The chain: matmul -> views* -> residual add? -> activation*, each the only user of the one before.
        views, current = [], node
        while (user := _only_user(current)) is not None and user.op == "call_function" and user.target in _VIEWS:
            views.append(user)
            current = user
        # A product or quotient by a number (attention's scores / sqrt(d)): the gemm's alpha (and beta).
        scale, scaled = 1.0, _scaled_by_a_number(current)
        if scaled is not None:
            scale, current = scaled
        add, residual = _residual_add(current)
        if add is not None:
            current = add
        activations = _activations_after(current)
        if not activations and add is None and scale == 1.0:
            continue
        if node.target is aten.addmm.default:
            bias, a, b = node.args[:3]
            beta = node.kwargs.get("beta", node.args[3] if len(node.args) > 3 else 1)
            alpha = node.kwargs.get("alpha", node.args[4] if len(node.args) > 4 else 1)
        else:
            (a, b), bias, alpha, beta = node.args[:2], None, 1, 1
        alpha, beta = alpha * scale, beta * scale
        names = [_activation_name(n) for n in activations]
        last = activations[-1] if activations else add if add is not None else current
        with graph.inserting_before(last):
            if residual is not None and views:  # the residual as the matmul's output
                reshaped = graph.call_function(aten.reshape.default, (residual, _product_shape(graph, node, a, b)))
                reshaped.meta = {k: v for k, v in add.meta.items() if k in ("nn_module_stack", "stack_trace")}
                reshaped.meta["val"] = residual.meta["val"].reshape(node.meta["val"].shape)
                residual = reshaped
            fused = graph.call_function(torch.ops.npusim.gemm.default, (a, b, bias, float(alpha), float(beta), names, residual))
            fused.meta = dict(node.meta)  # its value and its layer are the matmul's
            _name_fused_group(fused, node, [*([add] if add is not None else []), *activations])
            result = fused
            for view in views:
                result = graph.call_function(view.target, (result, *view.args[1:]), dict(view.kwargs))
                result.meta = dict(view.meta)
        last.replace_all_uses_with(result)
        scaling = [scaled[1]] if scaled is not None else []
        for dead in reversed([node, *views, *scaling, *([add] if add is not None else []), *activations]):
            graph.erase_node(dead)
        steps = ([f"scale {scale:g}"] if scaled is not None else []) + (["residual add"] if add is not None else []) + names
        report.fused.append(f"{node.target.__name__.split('.')[0]} + {' + '.join(steps)} -> npusim::gemm")


_BATCH_NORM_EVAL = aten._native_batch_norm_legit_no_training.default


def _call(graph: torch.fx.Graph, target, args, meta, kwargs=None) -> torch.fx.Node:
    node = graph.call_function(target, args, kwargs)
    node.meta = {k: v for k, v in meta.items() if k in ("nn_module_stack", "stack_trace")}  # its layer, not its value
    # Its own value, from its arguments' (fake tensors: shapes and dtypes only), for the passes after this one.
    values = [a.meta.get("val") if isinstance(a, torch.fx.Node) else a for a in args]
    if all(isinstance(v, torch.Tensor) for a, v in zip(args, values) if isinstance(a, torch.fx.Node)):
        node.meta["val"] = target(*values, **(kwargs or {}))
    return node


def _batch_norm_scale_shift(graph: torch.fx.Graph, bn: torch.fx.Node, bias):
    """An eval batch norm's per-channel scale gamma / sqrt(var + eps) and shift (bias - mean) * scale + beta
    (bias: a convolution's, or None), as nodes before the insertion point: small kernels on [C] vectors."""
    _, gamma, beta, mean, var, _, eps = bn.args
    meta = bn.meta
    scale = _call(graph, aten.rsqrt.default, (_call(graph, aten.add.Tensor, (var, float(eps)), meta),), meta)
    if gamma is not None:
        scale = _call(graph, aten.mul.Tensor, (scale, gamma), meta)
    centered = _call(graph, aten.sub.Tensor, (bias, mean), meta) if bias is not None else _call(graph, aten.neg.default, (mean,), meta)
    shift = _call(graph, aten.mul.Tensor, (centered, scale), meta)
    if beta is not None:
        shift = _call(graph, aten.add.Tensor, (shift, beta), meta)
    return scale, shift


def _eval_batch_norm_value(bn: torch.fx.Node):
    """The getitem of an eval batch norm's result when nothing reads its other outputs; else None."""
    outputs = list(bn.users)
    firsts = [o for o in outputs if o.target is operator.getitem and o.args[1] == 0]
    if len(firsts) == 1 and all(o is firsts[0] or not o.users for o in outputs):
        return firsts[0]
    return None


def fuse_conv_bn(gm: torch.fx.GraphModule, report: GraphReport) -> None:
    graph = gm.graph
    for conv in list(graph.nodes):
        if conv.op != "call_function" or conv.target is not aten.convolution.default:
            continue
        x, w, b, stride, padding, dilation, transposed, _, groups = conv.args
        if transposed or len(stride) != 2:
            continue
        chain, current, bn = [], conv, None
        user = _only_user(current)
        if user is not None and user.target is _BATCH_NORM_EVAL and (value := _eval_batch_norm_value(user)) is not None:
            bn, current = user, value
            chain += [bn, *user.users]
        add, residual = _residual_add(current)
        if add is not None:
            current = add
        activations = _activations_after(current)
        if activations:
            current = activations[-1]
        if bn is None and add is None and not activations:
            continue
        with graph.inserting_before(current):
            bias, scale = b, None
            if bn is not None:
                scale, bias = _batch_norm_scale_shift(graph, bn, b)
            names = [_activation_name(n) for n in activations]
            fused = graph.call_function(torch.ops.npusim.conv2d.default,
                                        (x, w, bias, list(stride), list(padding), list(dilation), groups, names, scale, residual))
            fused.meta = dict(current.meta)
            _name_fused_group(fused, conv, [*([bn] if bn is not None else []), *([add] if add is not None else []), *activations])
        current.replace_all_uses_with(fused)
        for dead in reversed([conv, *chain, *([add] if add is not None else []), *activations]):
            if not dead.users:
                graph.erase_node(dead)
        steps = (["batch_norm"] if bn is not None else []) + (["residual add"] if add is not None else []) + names
        report.fused.append("convolution" + "".join(f" + {n}" for n in steps) + " -> npusim::conv2d")


def eval_batch_norm_as_elementwise(gm: torch.fx.GraphModule, report: GraphReport) -> None:
    graph = gm.graph
    for bn in list(graph.nodes):
        if bn.op != "call_function" or bn.target is not _BATCH_NORM_EVAL or (value := _eval_batch_norm_value(bn)) is None:
            continue
        x = bn.args[0]
        val = x.meta.get("val")
        params = [p.meta.get("val") for p in bn.args[1:5] if isinstance(p, torch.fx.Node)]
        # (Contiguous x: the chain's result is contiguous. Parameters in f32: the eager kernel's arithmetic.)
        if (not isinstance(val, torch.Tensor) or val.device.type != "npu" or val.dim() < 2 or not val.is_contiguous()
                or val.dtype not in (torch.float32, torch.bfloat16, torch.float16)
                or not all(isinstance(p, torch.Tensor) and p.dtype == torch.float32 for p in params)):
            continue
        with graph.inserting_before(value):
            scale, shift = _batch_norm_scale_shift(graph, bn, None)
            per_channel = [val.shape[1]] + [1] * (val.dim() - 2)
            x32 = x if val.dtype == torch.float32 else _call(graph, aten._to_copy.default, (x,), bn.meta, {"dtype": torch.float32})
            y = _call(graph, aten.mul.Tensor, (x32, _call(graph, aten.view.default, (scale, per_channel), bn.meta)), bn.meta)
            y = _call(graph, aten.add.Tensor, (y, _call(graph, aten.view.default, (shift, per_channel), bn.meta)), bn.meta)
            if val.dtype != torch.float32:
                y = _call(graph, aten._to_copy.default, (y,), bn.meta, {"dtype": val.dtype})
        value.replace_all_uses_with(y)
        for dead in [*bn.users, bn]:
            if not dead.users:
                graph.erase_node(dead)
        report.fused.append("batch_norm (eval) -> x * scale + shift, elementwise")


def values_only_max_pool(gm: torch.fx.GraphModule, report: GraphReport) -> None:
    graph = gm.graph
    for pool in list(graph.nodes):
        if pool.op != "call_function" or pool.target is not aten.max_pool2d_with_indices.default:
            continue
        outputs = list(pool.users)
        values = [o for o in outputs if o.target is operator.getitem and o.args[1] == 0]
        if len(values) != 1 or any(o is not values[0] and o.users for o in outputs):
            continue
        x, kernel = pool.args[:2]
        stride = pool.args[2] if len(pool.args) > 2 and pool.args[2] else kernel
        padding = pool.args[3] if len(pool.args) > 3 else 0
        dilation = pool.args[4] if len(pool.args) > 4 else 1
        ceil_mode = pool.args[5] if len(pool.args) > 5 else False
        pair = lambda v: [int(v), int(v)] if isinstance(v, int) else [int(e) for e in v] * (2 if len(v) == 1 else 1)  # noqa: E731
        with graph.inserting_before(values[0]):
            fused = graph.call_function(torch.ops.npusim.max_pool2d.default,
                                        (x, pair(kernel), pair(stride), pair(padding), pair(dilation), bool(ceil_mode)))
            fused.meta = dict(values[0].meta)
        values[0].replace_all_uses_with(fused)
        for dead in [*outputs, pool]:
            if not dead.users:
                graph.erase_node(dead)
        report.fused.append("max_pool2d_with_indices, values only -> npusim::max_pool2d")


# Constants larger than this stay computed at run time (a graph's constants live on the device).
_FOLD_LIMIT_ELEMENTS = 1 << 20


def _foldable(node: torch.fx.Node) -> bool:
    if node.op != "call_function":
        return False
    if node.target is operator.getitem:
        return True
    if not isinstance(node.target, torch._ops.OpOverload):
        return False
    schema = node.target._schema
    return not schema.is_mutable and torch.Tag.nondeterministic_seeded not in node.target.tags


def _on_cpu(value):
    if isinstance(value, torch.device):
        return torch.device("cpu")
    return value.cpu() if isinstance(value, torch.Tensor) else value


def fold_constants(gm: torch.fx.GraphModule, report: GraphReport) -> None:
    # Backends are called with the tracer's fake tensor mode active: constants must be real.
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    with unset_fake_temporarily():
        _fold_constants(gm, report)


def _fold_constants(gm: torch.fx.GraphModule, report: GraphReport) -> None:
    graph = gm.graph
    values = {}  # node -> its value, computed on the CPU
    for node in graph.nodes:
        if not _foldable(node) or any(d not in values for d in node.all_input_nodes):
            continue
        args = torch.fx.node.map_aggregate(torch.fx.node.map_arg(node.args, lambda n: values[n]), _on_cpu)
        kwargs = torch.fx.node.map_aggregate(torch.fx.node.map_arg(node.kwargs, lambda n: values[n]), _on_cpu)
        try:
            values[node] = node.target(*args, **kwargs)
        except Exception:  # anything the CPU cannot evaluate this way stays in the graph
            continue
    # The frontier: folded values used by nodes that are not folded become constants.
    for node, value in values.items():
        if all(user in values for user in node.users) or not isinstance(value, torch.Tensor):
            continue
        if value.numel() > _FOLD_LIMIT_ELEMENTS:
            continue
        fake = node.meta.get("val")
        device = fake.device if isinstance(fake, torch.Tensor) else torch.device("cpu")
        name = f"_npusim_constant_{report.kind}_{report.folded}"
        gm.register_buffer(name, value.to(device))
        report.constant_values[name] = value
        with graph.inserting_before(node):
            constant = graph.get_attr(name)
        constant.meta = dict(node.meta)
        node.replace_all_uses_with(constant)
        report.folded += 1


def _gelu_written_out(x):
    half = aten.mul.Tensor(x, 0.5)
    inner = aten.mul.Tensor(aten.add.Tensor(x, aten.mul.Tensor(aten.pow.Tensor_Scalar(x, 3.0), 0.044715)), math.sqrt(2.0 / math.pi))
    return aten.mul.Tensor(half, aten.add.Tensor(aten.tanh.default(inner), 1.0))


def _gelu_tanh(x):
    return aten.gelu.default(x, approximate="tanh")


def recognize_gelu(gm: torch.fx.GraphModule, report: GraphReport) -> None:
    from torch.fx import subgraph_rewriter

    for match in subgraph_rewriter.replace_pattern_with_filters(gm, _gelu_written_out, _gelu_tanh):
        for node in match.replacements:
            node.meta = dict(match.anchor.meta)  # the value and the layer of what it replaces
        report.fused.append("gelu written out (tanh form) -> aten::gelu")


_SDPA = aten._scaled_dot_product_fused_attention_overrideable.default


def _is_causal_mask(mask: torch.Tensor, queries: int, keys: int) -> bool:
    """Whether mask, broadcast to [..., queries, keys], is PyTorch's is_causal mask (top-left aligned)."""
    if mask.dim() < 2 or tuple(mask.shape[-2:]) != (queries, keys):
        return False
    visible = torch.ones(queries, keys, dtype=torch.bool).tril()
    if mask.dtype == torch.bool:
        return bool((mask == visible).all())
    if not mask.is_floating_point():
        return False
    # An additive mask hides with -inf or the dtype's lowest value (which absorbs any finite score).
    hidden = (mask == float("-inf")) | (mask <= torch.finfo(mask.dtype).min)
    return bool(((mask == 0) == visible).all() and (hidden == ~visible).all())


def causal_attention(gm: torch.fx.GraphModule, report: GraphReport) -> None:
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target is not _SDPA or len(node.args) < 4:
            continue
        mask = node.args[3]
        if not isinstance(mask, torch.fx.Node) or mask.op != "get_attr" or mask.target not in report.constant_values:
            continue
        q, k = node.args[0].meta.get("val"), node.args[1].meta.get("val")
        if not isinstance(q, torch.Tensor) or not isinstance(k, torch.Tensor):
            continue
        from torch._subclasses.fake_tensor import unset_fake_temporarily

        with unset_fake_temporarily():  # the constant is real; the tracer's fake mode is active
            causal = _is_causal_mask(report.constant_values[mask.target], q.shape[-2], k.shape[-2])
        if not causal:
            continue
        dropout = node.args[4] if len(node.args) > 4 else 0.0
        node.args = (*node.args[:3], None, dropout, True, *node.args[6:])
        report.fused.append("attention with a constant causal mask -> is_causal")


_SHAPE_KEEPING_VIEWS = (aten.view.default, aten.expand.default, aten._unsafe_view.default, aten.reshape.default)


def _below_views(node):
    """The node under the views and expands that aot_autograd writes around a bmm operand without changing
    its shape."""
    while (isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target in _SHAPE_KEEPING_VIEWS
           and isinstance(node.args[0], torch.fx.Node) and node.args[0].meta["val"].shape == node.meta["val"].shape):
        node = node.args[0]
    return node


def _untransposed(node):
    """x where node is x with its last two dims swapped (a permute), else None."""
    if not isinstance(node, torch.fx.Node) or node.op != "call_function" or node.target is not aten.permute.default:
        return None
    dims, rank = list(node.args[1]), len(node.args[1])
    return node.args[0] if dims == [*range(rank - 2), rank - 1, rank - 2] else None


def transposed_attention(gm: torch.fx.GraphModule, report: GraphReport) -> None:
    """Attention written with its roles transposed, vᵀ @ softmax(k @ qᵀ · s, dim=-2), is the flash kernel's
    softmax(q @ kᵀ · s) @ v turned over: one npusim::attention and a copy of its result into the product's
    layout, instead of two products and a column softmax with the scores in DRAM."""
    graph = gm.graph
    for softmax in list(graph.nodes):
        if softmax.op != "call_function" or softmax.target is not aten._softmax.default or softmax.args[2]:
            continue
        rank = softmax.meta["val"].dim()
        if rank != 3 or softmax.args[1] not in (-2, rank - 2):
            continue
        scores, scale = _below_views(softmax.args[0]), 1.0
        if scores.op == "call_function" and scores.target in (aten.mul.Tensor, aten.div.Tensor, aten.mul.Scalar, aten.div.Scalar):
            factor = scores.args[1]
            if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not math.isfinite(factor) or factor == 0:
                continue
            scale = float(factor) if scores.target in (aten.mul.Tensor, aten.mul.Scalar) else 1.0 / float(factor)
            scores = _below_views(scores.args[0])
        if scores.op != "call_function" or scores.target is not aten.bmm.default:
            continue
        k, q = _below_views(scores.args[0]), _untransposed(_below_views(scores.args[1]))
        # The softmax's one reader: the second product, through views, as its right operand.
        product, reader = None, softmax
        while len(reader.users) == 1:
            reader = next(iter(reader.users))
            if reader.target is aten.bmm.default:
                product = reader
                break
            if reader.target not in _SHAPE_KEEPING_VIEWS:
                break
        if q is None or product is None or _below_views(product.args[1]) is not softmax:
            continue
        v = _untransposed(_below_views(product.args[0]))
        if v is None or any(t.meta["val"].dtype != q.meta["val"].dtype for t in (k, v)):
            continue
        with graph.inserting_before(product):
            out = graph.call_function(torch.ops.npusim.attention.default, (q, k, v, False, scale))
            out.meta = {key: value for key, value in product.meta.items() if key in ("nn_module_stack", "stack_trace")}
            out.meta["val"] = torch.ops.npusim.attention.default(q.meta["val"], k.meta["val"], v.meta["val"], False, scale)
            turned = graph.call_function(aten.permute.default, (out, [0, 2, 1]))
            turned.meta = {key: value for key, value in out.meta.items() if key != "val"}
            turned.meta["val"] = out.meta["val"].permute(0, 2, 1)
            # (Laid out as the product's result was: the copy of [B, Dv, L] is small next to the scores it saves.)
            dense = graph.call_function(aten.clone.default, (turned,), {"memory_format": torch.contiguous_format})
            dense.meta = dict(product.meta)
        product.replace_all_uses_with(dense)
        graph.eliminate_dead_code()
        report.fused.append("vᵀ @ softmax(k @ qᵀ, dim=-2) -> npusim::attention, transposed")


# Elementwise ATen ops an elementwise chain runs, by the compiler's name for them.
_CHAIN_UNARY = {
    aten.neg.default: "neg", aten.abs.default: "abs", aten.exp.default: "exp", aten.log.default: "log",
    aten.sqrt.default: "sqrt", aten.rsqrt.default: "rsqrt", aten.reciprocal.default: "reciprocal",
    aten.tanh.default: "tanh", aten.sigmoid.default: "sigmoid", aten.relu.default: "relu", aten.silu.default: "silu",
    aten.sin.default: "sin", aten.cos.default: "cos", aten.erf.default: "erf",
}
_CHAIN_BINARY = {
    aten.add.Tensor: "add", aten.sub.Tensor: "sub", aten.mul.Tensor: "mul", aten.div.Tensor: "div",
    aten.add.Scalar: "add", aten.sub.Scalar: "sub", aten.mul.Scalar: "mul", aten.div.Scalar: "div",
    aten.maximum.default: "maximum", aten.minimum.default: "minimum",
    aten.clamp_min.default: "maximum", aten.clamp_max.default: "minimum",
    aten.pow.Tensor_Tensor: "pow", aten.pow.Tensor_Scalar: "pow",
}
_CHAIN_MAX_INPUTS = 8  # compiler/ops.def's elementwise_chain
_CHAIN_MAX_STEPS = 32  # each live intermediate takes a tile of the scratchpad


def _chain_step(node: torch.fx.Node):
    """(the compiler's op name, the tensor and number operands) when node is an elementwise op of one
    float dtype on the npu that a chain runs; else None."""
    if node.op != "call_function":
        return None
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor) or not val.is_floating_point() or val.device.type != "npu":
        return None
    if node.target in _CHAIN_UNARY and len(node.args) == 1 and not node.kwargs:
        name, operands = _CHAIN_UNARY[node.target], node.args
    elif node.target is aten.gelu.default:
        name, operands = _activation_name(node), node.args[:1]
    elif node.target in _CHAIN_BINARY and len(node.args) == 2 and node.kwargs.get("alpha", 1) == 1:
        name, operands = _CHAIN_BINARY[node.target], node.args
    elif node.target is aten.clamp.default and not node.kwargs and len(node.args) in (2, 3):
        # One bound: a maximum or a minimum with it (hardswish decomposes to clamp(x, 0) and clamp(x, None, 6)).
        low, high = node.args[1], node.args[2] if len(node.args) == 3 else None
        if (low is None) == (high is None):
            return None
        name, operands = ("maximum", (node.args[0], low)) if high is None else ("minimum", (node.args[0], high))
    else:
        return None
    for operand in operands:
        if isinstance(operand, torch.fx.Node):
            theirs = operand.meta.get("val")
            if not isinstance(theirs, torch.Tensor) or theirs.dtype != val.dtype or theirs.device != val.device:
                return None
        elif isinstance(operand, bool) or not isinstance(operand, (int, float)) or not math.isfinite(operand):
            return None
    return name, operands


_HALF_FLOATS = (torch.bfloat16, torch.float16)


def _float_cast(node: torch.fx.Node):
    """"in" for x.float() of a bf16 or f16 x on the npu, "out" for an f32 x cast to bf16 or f16; else None."""
    if node.op != "call_function" or node.target is not aten._to_copy.default or len(node.args) != 1 or set(node.kwargs) != {"dtype"}:
        return None
    source = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
    if not isinstance(source, torch.Tensor) or source.device.type != "npu":
        return None
    target = node.kwargs["dtype"]
    if source.dtype in _HALF_FLOATS and target == torch.float32:
        return "in"
    if source.dtype == torch.float32 and target in _HALF_FLOATS:
        return "out"
    return None


_ROW_OPS_WITH_F32_RESULT = (aten._softmax.default, aten._log_softmax.default)  # (x, dim, half_to_float)
_NORMS_WITH_DTYPE = (torch.ops.npusim.layer_norm.default, torch.ops.npusim.rms_norm.default)  # (x, ..., dtype=None)


def _reads_cast_as_rows(user: torch.fx.Node, cast: torch.fx.Node) -> bool:
    """Whether user reads `cast` only as the input of a row op that can take x itself and keep an f32 result."""
    if user.op != "call_function" or not user.args or user.args[0] is not cast:
        return False
    if any(a is cast for a in [*user.args[1:], *user.kwargs.values()]):
        return False
    if user.target in _ROW_OPS_WITH_F32_RESULT:
        return len(user.args) == 3 and user.args[2] is False and not user.kwargs
    return user.target in _NORMS_WITH_DTYPE and user.kwargs.get("dtype") is None


def fold_float_casts(gm: torch.fx.GraphModule, report: GraphReport) -> None:
    """x.float() of a bf16 or f16 x whose every reader is a row op computing in f32 (softmax, log_softmax,
    layer and RMS norm): each reads x itself and keeps its f32 result, so no f32 copy of x is written
    and read back."""
    for cast in list(gm.graph.nodes):
        if _float_cast(cast) != "in" or not cast.users or not all(_reads_cast_as_rows(user, cast) for user in cast.users):
            continue
        x = cast.args[0]
        val = x.meta["val"]
        for user in list(cast.users):
            user.update_arg(0, x)
            if user.target in _ROW_OPS_WITH_F32_RESULT:
                user.update_arg(2, True)
            else:
                user.update_kwarg("dtype", torch.float32)
            report.fused.append(f"{val.dtype} -> float32 cast into {user.target.name()}")


def split_clamps(gm: torch.fx.GraphModule, report: GraphReport) -> None:
    """clamp(x, lo, hi) (or hardtanh) with number bounds next to an elementwise op becomes clamp_min then clamp_max: two
    chain steps (a maximum and a minimum with constants) that fuse with the ops around them (hardswish's
    and hardsigmoid's decompositions, relu6), where the clamp alone was a kernel of its own."""
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.kwargs:
            continue
        if node.target is aten.clamp.default and len(node.args) == 3:
            x, low, high = node.args
        elif node.target is aten.hardtanh.default:  # (relu6: hardtanh(x, 0, 6))
            defaults = (None, -1.0, 1.0)  # hardtanh's min_val and max_val
            x, low, high = (node.args[i] if i < len(node.args) else defaults[i] for i in range(3))
        else:
            continue
        if not all(isinstance(b, (int, float)) and not isinstance(b, bool) for b in (low, high)):
            continue
        if not any(isinstance(n, torch.fx.Node) and _chain_step(n) is not None for n in [x, *node.users]):
            continue
        with gm.graph.inserting_before(node):
            at_least = gm.graph.call_function(aten.clamp_min.default, (x, low))
            at_least.meta = dict(node.meta)
            clamped = gm.graph.call_function(aten.clamp_max.default, (at_least, high))
            clamped.meta = dict(node.meta)
        node.replace_all_uses_with(clamped)
        gm.graph.erase_node(node)
        report.split_clamps += 1


def fuse_elementwise_chains(gm: torch.fx.GraphModule, report: GraphReport) -> None:
    """Connected elementwise ops whose intermediates nothing else reads become one npusim::elementwise_chain:
    the intermediates stay on the core instead of crossing DRAM once written and once per reader. Casts
    join chains of f32 steps (x.float() of a chain's input, the result cast to bf16 or f16 at its end, as
    autocast and norms in f32 write them): the chain is computed in f32 over the inputs as they are and
    rounded once to the result's dtype, which is what the casts and f32 ops one by one compute."""
    graph = gm.graph
    order = {node: i for i, node in enumerate(graph.nodes)}
    steps = {node: step for node in graph.nodes if (step := _chain_step(node)) is not None}
    casts = {node: cast for node in graph.nodes if (cast := _float_cast(node)) is not None}
    taken = set()
    for root in reversed(list(graph.nodes)):
        if root in taken or not (root in steps or casts.get(root) == "out") or not root.meta["val"].is_contiguous():
            continue
        # Grow from the root towards its producers: one joins when every reader of it has joined. A cast to
        # f32 joins as the chain reading its input; a cast from f32 only as the root.
        group = {root}
        frontier = [a for a in (steps[root][1] if root in steps else root.args) if isinstance(a, torch.fx.Node)]
        while frontier and len(group) < _CHAIN_MAX_STEPS:
            producer = frontier.pop()
            joins = producer in steps or casts.get(producer) == "in"
            if producer in group or producer in taken or not joins or not all(u in group for u in producer.users):
                continue
            group.add(producer)
            if producer in steps:
                frontier.extend(a for a in steps[producer][1] if isinstance(a, torch.fx.Node))
        members = sorted(group, key=order.get)
        computed = [m for m in members if m in steps]
        with_casts = len(computed) < len(members)
        if len(members) < 2 or not computed or (with_casts and any(m.meta["val"].dtype != torch.float32 for m in computed)):
            continue
        inputs, text, number = [], [], {}
        for member in computed:
            name, operands = steps[member]
            args = []
            for operand in operands:
                if isinstance(operand, torch.fx.Node) and operand in group and operand in steps:
                    args.append(f"%{number[operand]}")
                elif isinstance(operand, torch.fx.Node):
                    source = operand.args[0] if operand in group else operand  # (a cast to f32 in the chain reads its input)
                    if source not in inputs:
                        inputs.append(source)
                    args.append(f"in{inputs.index(source)}")
                else:
                    args.append(repr(float(operand)))
            number[member] = len(number)
            text.append(f"{name}({', '.join(args)})")
        if len(inputs) > _CHAIN_MAX_INPUTS:
            continue
        args = (inputs, "; ".join(text), root.meta["val"].dtype) if with_casts else (inputs, "; ".join(text))
        with graph.inserting_before(root):
            fused = graph.call_function(torch.ops.npusim.elementwise_chain.default, args)
        fused.meta = dict(root.meta)
        root.replace_all_uses_with(fused)
        for dead in reversed(members):
            graph.erase_node(dead)
        taken |= group
        names = [steps[m][0] if m in steps else f"cast to {m.kwargs['dtype']}" for m in members]
        report.fused.append(f"{len(members)} elementwise ops ({', '.join(names)}) -> npusim::elementwise_chain")


def _aliases_an_input(node: torch.fx.Node) -> bool:
    """Whether the node's result may share its first argument's storage (views, in-place ops)."""
    if not isinstance(node.target, torch._ops.OpOverload):
        return node.target is operator.getitem
    return any(r.alias_info is not None for r in node.target._schema.returns)


def _allocates_one_tensor(node: torch.fx.Node) -> bool:
    if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
        return False
    value = node.meta.get("val")
    if not isinstance(value, torch.Tensor) or value.device.type != "npu":
        return False
    return not _aliases_an_input(node) and not node.target._schema.is_mutable


def _with_sram_placement(target):
    """target, its outputs allocated in the SRAM pools while it runs (where one has room)."""
    from . import _C

    def in_sram(*args, **kwargs):
        previous = _C.set_sram_placement(True)
        try:
            return target(*args, **kwargs)
        finally:
            _C.set_sram_placement(previous)

    in_sram.__name__ = f"in_sram_{getattr(target, '__name__', 'op').replace('.', '_')}"
    in_sram.npusim_target = target
    return in_sram


def plan_sram(gm: torch.fx.GraphModule, report: GraphReport, pool_bytes_per_core: int, cores: int) -> None:
    order = {node: i for i, node in enumerate(gm.graph.nodes)}
    granule = 64  # the driver's allocation granule

    def storage_users(node):
        """Every reader of node's storage: its users, and through views and in-place ops theirs."""
        readers, pending = [], [node]
        while pending:
            current = pending.pop()
            for user in current.users:
                readers.append(user)
                if _aliases_an_input(user) and user.args and user.args[0] is current:
                    pending.append(user)
        return readers

    free = [pool_bytes_per_core] * cores
    live = []  # (index of the last reader, core, bytes)
    in_use = 0
    for node in list(gm.graph.nodes):
        if not _allocates_one_tensor(node):
            continue
        readers = storage_users(node)
        if not readers or any(user.op == "output" for user in readers):
            continue  # unused, or returned: its storage outlives the graph
        # Values whose last reader ran before this node have been freed (FX drops them after it).
        here = order[node]
        for entry in [e for e in live if e[0] < here]:
            live.remove(entry)
            free[entry[1]] += entry[2]
            in_use -= entry[2]
        nbytes = node.meta["val"].untyped_storage().nbytes()
        if not isinstance(nbytes, int):
            continue  # a dynamic size: no static plan (and no guard on it)
        size = -(-max(nbytes, 1) // granule) * granule
        core = max(range(cores), key=lambda c: (free[c], -c))  # the driver's choice: the roomiest pool
        if free[core] < size:
            continue
        free[core] -= size
        in_use += size
        live.append((max(order[user] for user in readers), core, size))
        node.target = _with_sram_placement(node.target)
        report.sram_values += 1
        report.sram_bytes += size
        report.sram_peak_bytes = max(report.sram_peak_bytes, in_use)


def lower(gm: torch.fx.GraphModule, kind: str, sram_pool=None) -> GraphReport:
    """Runs the passes on gm in place; returns what they did. sram_pool:
    (bytes per core, cores) of the device's SRAM pools, or None: no SRAM planning."""
    report = GraphReport(kind=kind, nodes_before=sum(1 for n in gm.graph.nodes if n.op == "call_function"))
    fold_constants(gm, report)
    recognize_gelu(gm, report)
    drop_clones(gm, report)
    causal_attention(gm, report)
    transposed_attention(gm, report)
    fuse_gemm_epilogues(gm, report)
    if kind == "inference":
        fuse_conv_bn(gm, report)
        eval_batch_norm_as_elementwise(gm, report)
        values_only_max_pool(gm, report)
    fold_float_casts(gm, report)
    gm.graph.eliminate_dead_code()
    split_clamps(gm, report)
    fuse_elementwise_chains(gm, report)
    for node in gm.graph.nodes:
        if node.op == "call_function":
            name = getattr(node.target, "__name__", str(node.target))
            if isinstance(node.target, torch._ops.OpOverload):
                name = node.target.name()
                if name == "npusim::layer_norm":
                    report.fused.append("native_layer_norm -> npusim::layer_norm")
            report.ops[name] = report.ops.get(name, 0) + 1
    report.nodes_after = sum(report.ops.values())
    if sram_pool and sram_pool[0] > 0:
        plan_sram(gm, report, *sram_pool)
    gm.graph.lint()
    gm.recompile()
    return report
