"""npusim.export: torch.export programs compiled into deployment packages that
run without Python.

    ep = torch.export.export(model, (x,))
    npusim.export.compile(ep, "model.npupkg")     # programs, weights, memory plan, signature
    outputs, cycles = npusim.export.run("model.npupkg", x)

and from a shell, with no Python at all:

    npu-run model.npupkg --input x=x.bin --output output0=y.bin

compile() lowers the program with the backend's passes (core ATen minus what
the chip runs whole, layer norms and gemm epilogues fused: npusim.backend,
npusim.lowering), runs it once on the npu and records what it launches: each
kernel with its buffers, the host data it writes, and the contents of every
buffer it reads before writing (the weights). The package's memory plan lets
intermediates whose lifetimes do not overlap share a buffer. A run that
cannot be replayed without Python (an op that falls back to the CPU, or a
host read of device memory such as .item()) is refused, with the ops named.

Inputs and outputs are npu dtypes (f32, bf16, f16, i32, i8, u8) and their
shapes are fixed (those of the example inputs). An int64 input (token ids) is
the package's i32 input, widened on the chip as the program's first kernel:
its values must fit in 32 bits (run() checks them). Inputs given by keyword
when the program was exported are inputs of the package too, after the
positional ones, in the program's order. npu-run reads and writes raw
contiguous little-endian files (numpy: array.tofile / numpy.fromfile).

A buffer of the model that the program writes back (torch.export's buffer
mutations: a static KV cache updated with index_copy_) is the package's state:
loaded once, and what a run writes there is what the next run reads. A package
may hold several methods (compile({"prefill": ep1, "decode": ep2}, path)) that
share weights and state. A language model's prefill and decode steps packaged
so generate tokens from C++ alone:

    npu-run llama.npupkg --generate 16 --prompt 15,3,7      # or npusim.export.generate
"""

import copy
import operator
import os
from typing import List, Optional, Sequence, Tuple

import torch
import torch.utils._pytree as pytree

from . import _C, backend, lowering

__all__ = ["compile", "run", "generate", "info"]

_DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16, "i32": torch.int32, "i8": torch.int8,
           "u8": torch.uint8}


def compile(exported_program, path: str, *example_inputs: torch.Tensor) -> str:
    """Writes the package for `exported_program` to `path`; returns its summary.

    `exported_program` is one torch.export program (the package's one method, "forward"), or a dict of
    them by method name, such as {"prefill": ..., "decode": ...}: the methods are recorded in the dict's
    order and share what they have in common, every tensor of the same name and the same contents (the
    weights, and a KV cache that prefill writes and decode reads). The example inputs (default: the
    ones each program was exported with, positional and keyword) fix the shapes; given here, they are
    the one program's, positional."""
    programs = dict(exported_program) if isinstance(exported_program, dict) else {"forward": exported_program}
    if not programs:
        raise ValueError("npusim.export.compile: no programs")
    if example_inputs and len(programs) > 1:
        raise TypeError("npusim.export.compile: example inputs are given with one program, not with several methods")
    methods = [_prepare(name, program, example_inputs) for name, program in programs.items()]
    _move_to_npu_sharing_tensors([m.module for m in methods])
    nodes = sum(m.nodes for m in methods)
    source = f"torch.export of {type(next(iter(programs.values()))).__name__} ({nodes} graph nodes" + \
        (f" in methods {', '.join(programs)})" if len(programs) > 1 else ")")
    # The package's inputs: int64 ones as i32 (the chip has no int64 dtype), widened by the program's first kernels.
    # Made before the capture, which would record their copies to the device.
    inputs = [[a.detach().to(torch.int32 if a.dtype == torch.int64 else a.dtype).to("npu").contiguous() for a in m.flat] for m in methods]
    _C.begin_capture(source)
    try:
        with torch.no_grad():
            for m, method_inputs in zip(methods, inputs):
                _capture_method(m, method_inputs)
    except BaseException:
        _C.abort_capture()
        raise
    return _C.end_capture(str(path))


class _Method:
    """A program ready to record: its graph lowered for the chip (on the CPU until moved), its flat inputs."""

    def __init__(self, name, module, flat, spec, names, nodes):
        self.name, self.module, self.flat, self.spec, self.names, self.nodes = name, module, flat, spec, names, nodes


def _prepare(name: str, exported_program, example_inputs) -> _Method:
    args, kwargs = (example_inputs, {}) if example_inputs else exported_program.example_inputs
    flat, spec = pytree.tree_flatten((tuple(args), dict(kwargs)))
    if not all(isinstance(a, torch.Tensor) for a in flat):
        raise TypeError("npusim.export.compile: the program's inputs must all be tensors")
    program = exported_program.run_decompositions(backend.decompositions())
    module = copy.deepcopy(program.module())  # its parameters may be the caller's model's: moved to the npu, not those
    _drop_host_device_checks(module)
    lowering.lower(module, "inference")
    names = [s.arg.name for s in program.graph_signature.input_specs if s.kind == torch.export.graph_signature.InputKind.USER_INPUT]
    if len(names) != len(flat):
        names = [f"input{i}" for i in range(len(flat))]
    return _Method(name, module, flat, spec, names, len(list(program.graph.nodes)))


def _move_to_npu_sharing_tensors(modules: List[torch.fx.GraphModule]) -> None:
    """Moves the modules to the npu; a tensor that a later module reads under the name and with the contents
    of an earlier one's becomes that one's npu tensor: one buffer of the package, not two (weights, and state
    that one method writes and another reads)."""
    seen = {}  # attribute name -> (the CPU tensor it had, its npu tensor)
    for module in modules:
        targets = sorted({node.target for node in module.graph.nodes if node.op == "get_attr"})
        values = {t: operator.attrgetter(t)(module) for t in targets}
        # The contents before the move, detached (moving a module may give its parameter objects the moved data).
        cpu = {t: v.detach() for t, v in values.items() if isinstance(v, torch.Tensor)}
        for target, tensor in cpu.items():
            if target not in seen:
                continue
            earlier_cpu, earlier_npu = seen[target]
            if type(earlier_npu) is type(values[target]) and earlier_cpu.dtype == tensor.dtype and earlier_cpu.shape == tensor.shape \
                    and torch.equal(earlier_cpu, tensor):
                owner_name, _, attribute = target.rpartition(".")
                owner = module.get_submodule(owner_name)
                table = owner._parameters if attribute in owner._parameters else owner._buffers if attribute in owner._buffers else None
                if table is not None:
                    table[attribute] = earlier_npu
                else:
                    setattr(owner, attribute, earlier_npu)
        module.to("npu")
        for target, tensor in cpu.items():
            if target not in seen:
                seen[target] = (tensor, operator.attrgetter(target)(module))


def _capture_method(m: _Method, inputs: List[torch.Tensor]) -> None:
    _C.begin_capture_method(m.name, inputs, m.names, _mutated_buffers(m.module))
    widened = [i.to(torch.int64) if a.dtype == torch.int64 else i for i, a in zip(inputs, m.flat)]
    call_args, call_kwargs = pytree.tree_unflatten(widened, m.spec)
    result = m.module(*call_args, **call_kwargs)
    outputs, _ = pytree.tree_flatten(result)
    if not all(isinstance(o, torch.Tensor) for o in outputs):
        raise TypeError("npusim.export.compile: the program's outputs must all be tensors")
    _C.end_capture_method(outputs, [f"output{i}" for i in range(len(outputs))])


def _mutated_buffers(module: torch.fx.GraphModule) -> List[torch.Tensor]:
    """The module's buffers that the program writes back (copy_ into a get_attr: torch.export's buffer
    mutations, such as a static KV cache's index_copy_): the package's state, kept from one run to the next."""
    return [operator.attrgetter(node.args[0].target)(module) for node in module.graph.nodes
            if node.op == "call_function" and node.target is torch.ops.aten.copy_.default and node.args[0].op == "get_attr"]


def _drop_host_device_checks(module: torch.fx.GraphModule) -> None:
    """The program was exported with its inputs on the CPU: its graph asserts their device
    (aten._assert_tensor_metadata) and may name the CPU where it makes tensors. It runs on the npu."""
    for node in list(module.graph.nodes):
        if node.op != "call_function":
            continue
        if node.target is torch.ops.aten._assert_tensor_metadata.default:
            module.graph.erase_node(node)
        elif isinstance(node.kwargs.get("device"), torch.device) and node.kwargs["device"].type == "cpu":
            node.update_kwarg("device", torch.device("npu"))
    module.recompile()


def generate(path: str, prompt: Sequence[int], new_tokens: int) -> Tuple[List[int], List[int]]:
    """Greedy generation with a language model's package, as `npu-run --generate` does. Method "decode"
    (or the package's only method) takes the token ids i32[1, 1] and the position i32[1] and gives the
    logits [1, 1, V] first; method "prefill", if the package has one, takes P tokens i32[1, P] and their
    positions i32[P] and gives the logits [1, P, V]. The prompt runs through prefill P tokens at a time at
    positions 0, P, ..., what is left of it through decode a token at a time, and then each run's most
    likely token is fed back through decode. The KV cache is the package's state (a buffer the program
    writes back, e.g. with index_copy_). Returns the new tokens and the device cycles of each run, the
    prompt's first."""
    tokens, cycles = _C.generate_package(str(path), [int(t) for t in prompt], int(new_tokens))
    return list(tokens), list(cycles)


def info(path: str) -> dict:
    """The package's signature and summary: {"methods": {name: {"inputs": [(name, dtype, shape)], "outputs": [...]}},
    "inputs" and "outputs" (the first method's), "summary": str, "config": str, ...}."""
    return dict(_C.package_info(str(path)))


def run(path: str, *inputs: torch.Tensor, method: Optional[str] = None) -> Tuple[List[torch.Tensor], int]:
    """Runs one method of the package (by default its first) on this process's npu device, the way npu-run
    does: returns its outputs (CPU tensors) and the device cycles of the run."""
    methods = info(path)["methods"]
    if method is not None and method not in methods:
        raise ValueError(f"{path} has no method {method!r} (its methods: {', '.join(methods)})")
    signature = methods[method] if method is not None else next(iter(methods.values()))
    if len(inputs) != len(signature["inputs"]):
        raise ValueError(f"{path} takes {len(signature['inputs'])} inputs, got {len(inputs)}")
    data = []
    for tensor, (name, dtype, shape) in zip(inputs, signature["inputs"]):
        if tensor.dtype == torch.int64 and dtype == "i32":  # token ids: the package takes them as i32
            if tensor.numel() and (tensor.min() < -2**31 or tensor.max() >= 2**31):
                raise ValueError(f"input {name}: int64 values outside int32's range (the package takes i32)")
            tensor = tensor.to(torch.int32)
        if tuple(tensor.shape) != tuple(shape) or tensor.dtype != _DTYPES[dtype]:
            raise ValueError(f"input {name}: expected {dtype}{list(shape)}, got {tensor.dtype}{list(tensor.shape)}")
        data.append(_bytes_of(tensor))
    raw, cycles = _C.run_package(str(path), data, method or "")
    outputs = []
    for blob, (_, dtype, shape) in zip(raw, signature["outputs"]):
        outputs.append(torch.frombuffer(bytearray(blob), dtype=_DTYPES[dtype]).reshape(shape) if len(blob) else
                       torch.empty(shape, dtype=_DTYPES[dtype]))
    return outputs, cycles


def _bytes_of(tensor: torch.Tensor) -> bytes:
    t = tensor.detach().cpu().contiguous()
    return t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""


def save_raw(tensor: torch.Tensor, path: str) -> None:
    """Writes a tensor as npu-run reads it (raw, contiguous, little-endian): whole or not at all, and never
    over what is not a regular file (a directory, a device)."""
    _C.write_file(os.fspath(path), _bytes_of(tensor))


def load_raw(path: str, dtype: torch.dtype, shape: Sequence[int]) -> torch.Tensor:
    """Reads what npu-run --output wrote."""
    with open(path, "rb") as f:
        return torch.frombuffer(bytearray(f.read()), dtype=dtype).reshape(tuple(shape))
