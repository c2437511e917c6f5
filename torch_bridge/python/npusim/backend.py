"""torch.compile(model, backend="npu"): Dynamo's graphs, through aot_autograd
(forward and backward graphs), decomposed to core ATen, fused
(npusim.lowering), then run on the simulated chip.

    model = torch.compile(model.to("npu"), backend="npu")

What runs where: each node of the final graph is an ATen op or an npusim::
custom op on npu tensors. Those with an npu kernel run on the chip; the rest
go through the CPU fallback, which counts them (npusim.fallback_stats();
npusim.explain names them per graph). The decomposition table is core
ATen's, minus the ops the chip runs whole (so silu stays silu), plus
native_layer_norm -> npusim::layer_norm. Attention without a mask stays one
op (PyTorch's overrideable SDPA backend) and runs as the flash-attention kernel.

Not done yet (see docs/graph.md): static memory planning inside compiled
graphs (intermediates are allocated per op from the driver's allocator, none
kept in SRAM across kernels) and fusing elementwise chains into one kernel.
"""

from typing import List

import torch
import torch._decomp
from torch._dynamo.backends.common import aot_autograd

from . import _C, lowering, profile

__all__ = ["npu_backend", "reports", "clear_reports"]

aten = torch.ops.aten

# Every graph the backend has lowered in this process, in order (npusim.explain reads these).
_reports: List[lowering.GraphReport] = []


def reports() -> List[lowering.GraphReport]:
    return list(_reports)


def clear_reports() -> None:
    _reports.clear()


def _native_layer_norm(x, normalized_shape, weight, bias, eps):
    """native_layer_norm with its output from the one-kernel npusim::layer_norm.
    Its mean and rstd (computed in f32, returned in x's dtype as the npu's eager
    kernel and the CPU return them) are only used by backward graphs;
    inference graphs drop them as dead code."""
    if len(normalized_shape) != 1 or not x.dtype.is_floating_point:
        return torch._decomp.decomposition_table[aten.native_layer_norm.default](x, normalized_shape, weight, bias, eps)
    xf = x.float()
    mean = xf.mean(-1, keepdim=True)
    centered = xf - mean
    rstd = torch.rsqrt((centered * centered).mean(-1, keepdim=True) + eps)
    return torch.ops.npusim.layer_norm(x, weight, bias, eps), mean.to(x.dtype), rstd.to(x.dtype)


def _fused_rms_norm(x, normalized_shape, weight, eps):
    """_fused_rms_norm with its output from the one-kernel npusim::rms_norm. Its rstd (f32, as the
    npu's eager kernel and the CPU return it) is only used by backward graphs; inference graphs drop
    it as dead code (the eager op computes it always: five more kernels)."""
    if len(normalized_shape) != 1 or not x.dtype.is_floating_point:
        return torch._decomp.decomposition_table[aten._fused_rms_norm.default](x, normalized_shape, weight, eps)
    eps = torch.finfo(torch.float32).eps if eps is None else eps
    xf = x.float()
    rstd = torch.rsqrt((xf * xf).mean(-1, keepdim=True) + eps)
    return torch.ops.npusim.rms_norm(x, weight, eps), rstd


# Elementwise ops whose npu kernels are compositions of elementwise, comparison and select kernels
# (torch_bridge/csrc/aten/activations.cpp): in a graph their decompositions fuse with the ops around them
# into one chain (GPT-2's GELU backward, tanh's backward included: 13 ops, one kernel), so they are
# decomposed even though eager mode has kernels for them.
COMPOSED_ELEMENTWISE = {
    aten.tanh_backward, aten.sigmoid_backward, aten.hardswish, aten.hardswish_backward, aten.hardsigmoid,
    aten.hardsigmoid_backward, aten.hardtanh, aten.hardtanh_backward, aten.leaky_relu, aten.leaky_relu_backward,
    aten.elu, aten.elu_backward, aten.softplus, aten.softplus_backward, aten.mish, aten.log_sigmoid_forward,
    aten.log_sigmoid_backward, aten.mse_loss, aten.mse_loss_backward, aten.clamp_min, aten.clamp_max, aten.nan_to_num,
    aten.smooth_l1_loss, aten.smooth_l1_loss_backward, aten.huber_loss, aten.huber_loss_backward,
}


def decompositions() -> dict:
    """Core ATen's decompositions, except for the ops the chip runs whole."""
    table = {}
    for op, fn in torch._decomp.core_aten_decompositions().items():
        try:
            if torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "PrivateUse1") and op.overloadpacket not in COMPOSED_ELEMENTWISE:
                continue
        except (AttributeError, RuntimeError):
            pass
        table[op] = fn
    table[aten.native_layer_norm.default] = _native_layer_norm
    table[aten._fused_rms_norm.default] = _fused_rms_norm
    return table


class _LayerNamingInterpreter(torch.fx.Interpreter):
    """Runs a graph telling the profiler (and the trace) which layer and FX nodes each kernel is for."""

    def run_node(self, n):
        if n.op == "call_function":
            _C.set_profile_scope(lowering.layer_of(n), ",".join(n.meta.get("npusim_nodes", [n.name])))
        return super().run_node(n)


def sram_pool():
    """(bytes per core, cores) of the device's SRAM pools (npusim.init(sram_pool=...))."""
    stats = _C.sram_stats()
    return int(stats["pool_bytes_per_core"]), int(stats["num_cores"])


def _compiler(kind: str):
    def compile_graph(gm: torch.fx.GraphModule, example_inputs):
        _reports.append(lowering.lower(gm, kind, sram_pool=sram_pool()))

        # Node by node, each op launching its kernel on the chip (or falling back, counted);
        # under npusim.profile, through an interpreter that names each node's layer.
        def run(*args):
            if profile.active() or _C.tracing():
                try:
                    return _LayerNamingInterpreter(gm).run(*args)
                finally:
                    _C.set_profile_scope("")
            return gm(*args)

        run._boxed_call = getattr(gm, "_boxed_call", False)
        return run

    return compile_graph


def npu_backend(gm: torch.fx.GraphModule, example_inputs, **kwargs):
    """The Dynamo backend "npu"."""
    inference = not torch.is_grad_enabled()
    backend = aot_autograd(
        fw_compiler=_compiler("inference" if inference else "forward"),
        bw_compiler=_compiler("backward"),
        inference_compiler=_compiler("inference"),
        decompositions=decompositions(),
    )
    return backend(gm, example_inputs, **kwargs)


def register() -> None:
    from torch._dynamo import register_backend
    from torch._dynamo.backends.registry import _COMPILER_FNS

    if "npu" not in _COMPILER_FNS:
        register_backend(name="npu")(npu_backend)
    _register_device_interface()


def _register_device_interface() -> None:
    """What Dynamo asks of a device (so torch.npu.synchronize and friends trace without graph breaks)."""
    from torch._dynamo import device_interface as di

    class NpuInterface(di.DeviceInterface):
        @staticmethod
        def is_available() -> bool:
            return True

        @staticmethod
        def device_count() -> int:
            return torch.npu.device_count()

        @staticmethod
        def current_device() -> int:
            return 0

        @staticmethod
        def set_device(device) -> None:
            torch.npu.set_device(device)

        @staticmethod
        def synchronize(device=None) -> None:
            torch.npu.synchronize()

        @staticmethod
        def get_compute_capability(device=None) -> str:
            return ""

        @classmethod
        def is_bf16_supported(cls, including_emulation: bool = False) -> bool:
            return True

        @classmethod
        def is_dtype_supported(cls, dtype, including_emulation: bool = False) -> bool:
            return dtype in (torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int8, torch.uint8, torch.bool)

    di.register_interface_for_device("npu", NpuInterface)
