"""npusim: the simulated NPU as a PyTorch device, "npu".

    import torch, npusim            # or just `import torch`: the torch.backends entry point loads npusim
    x = torch.randn(4, 8).to("npu")
    y = torch.relu(x @ x.T).cpu()

The chip config is chosen before first use with npusim.init(config=...) or the
NPUSIM_CONFIG environment variable (tiny, base, large, tpu_v4, tpu_v5e, tpu_v6e or a .pbtxt file; base by
default). Ops the compiler has kernels for run on the simulated chip; the
others run on the CPU through PyTorch's CPU fallback, are counted
(npusim.fallback_stats()) and warned about once each; NPUSIM_STRICT=1 makes a
fallback an error that names the op.
"""


def _autoload() -> None:
    """The torch.backends entry point: importing npusim registers the device.
    Defined before `import torch`, which may itself load this entry point."""


import atexit  # noqa: E402
import warnings  # noqa: E402
from typing import Optional  # noqa: E402

import torch  # noqa: E402

try:
    from . import _C  # noqa: E402
except ImportError as _error:  # not built yet (scripts/build.sh builds it): torch must still import
    _C = None
    warnings.warn(f"npusim: the npu device is unavailable, its extension is not built ({_error}); run scripts/build.sh")

__all__ = ["explain", "profile", "init", "write_trace", "is_initialized", "synchronize", "fallback_stats", "kernel_stats", "memory_stats", "sram_stats", "report"]

_DEVICE = "npu"


def init(config: str = "base", trace: str = "", timing_only: bool = False, sram_pool: Optional[int] = None,
         dma_timing: str = "") -> None:
    """Chooses the chip config, and a trace file (.pftrace or .json) of the chip and the
    driver written at exit and by write_trace(), before the device is first used.
    timing_only (or NPUSIM_TIMING_ONLY=1): the chip models time but computes nothing;
    results are meaningless, cycles are those of a functional run.
    sram_pool (or NPUSIM_SRAM_POOL): bytes at the top of each core's scratchpad that hold
    tensors, for torch.compile's memory plan (intermediates kept in SRAM between kernels);
    every kernel is then compiled for the rest of the scratchpad. A multiple of the
    scratchpad's banks x bank width; 0: none; None: NPUSIM_SRAM_POOL if set, else a
    quarter of the scratchpad.
    dma_timing (or NPUSIM_DMA_TIMING): "request", "step" or "window", over the config's own DMA
    timing (docs/chip.md, "DMA timing": per step and, faster still, per window simulate DMA-heavy
    work faster, in cycles within a few percent on models); "": NPUSIM_DMA_TIMING if set, else the
    config's."""
    if not _C.init(config, trace, timing_only, -1 if sram_pool is None else sram_pool, dma_timing):
        raise RuntimeError("npusim.init: the npu device is already in use; call init before the first npu tensor")


def write_trace() -> None:
    """Writes the trace chosen with init(trace=...) or NPUSIM_TRACE, up to now."""
    _C.write_trace()


def is_initialized() -> bool:
    return _C.is_initialized()


def synchronize() -> None:
    """Waits for every kernel launched on the device; raises RuntimeError for a device fault."""
    _C.synchronize()


def fallback_stats() -> dict:
    """Calls per op that ran on the CPU because the npu has no kernel for them (yet)."""
    return dict(_C.fallback_stats())


def kernel_stats() -> dict:
    """Kernels launched on the simulated chip, per op."""
    return dict(_C.kernel_stats())


def memory_stats() -> dict:
    return dict(_C.memory_stats())


def sram_stats() -> dict:
    """The SRAM pools (npusim.init(sram_pool=...)): bytes per core, cores, bytes in use now and at the peak
    (the sum of each pool's peak), allocations."""
    return dict(_C.sram_stats())


def report() -> str:
    """What npu-smi prints, for this process's device: memory, status, counters."""
    return _C.report()


class _DeviceModule:
    """torch.npu: the device module PyTorch expects of a backend."""

    @staticmethod
    def is_available() -> bool:
        return True

    @staticmethod
    def device_count() -> int:
        return 1

    @staticmethod
    def current_device() -> int:
        return 0

    @staticmethod
    def set_device(device) -> None:
        index = torch.device(device).index if not isinstance(device, int) else device
        if index not in (None, 0):
            raise ValueError("npu: there is one device, npu:0")

    @staticmethod
    def is_initialized() -> bool:
        return _C.is_initialized()

    @staticmethod
    def _is_in_bad_fork() -> bool:
        return _C.in_bad_fork()

    # torch.accelerator's: the guard's synchronizeDevice, and a function Dynamo traces into the graph.
    synchronize = staticmethod(torch.accelerator.synchronize)

    @staticmethod
    def memory_allocated(device=None) -> int:
        return int(_C.memory_stats()["allocated_bytes"]) if _C.is_initialized() else 0

    @staticmethod
    def max_memory_allocated(device=None) -> int:
        return int(_C.memory_stats()["peak_allocated_bytes"]) if _C.is_initialized() else 0

    @staticmethod
    def memory_reserved(device=None) -> int:
        """The same as memory_allocated: there is no caching allocator, freed memory returns to the driver."""
        return _DeviceModule.memory_allocated(device)

    @staticmethod
    def max_memory_reserved(device=None) -> int:
        return _DeviceModule.max_memory_allocated(device)

    @staticmethod
    def memory_stats(device=None) -> dict:
        """The driver allocator's statistics, under torch.cuda.memory_stats' names where they exist."""
        s = _C.memory_stats()
        return {"allocated_bytes.all.current": int(s["allocated_bytes"]), "allocated_bytes.all.peak": int(s["peak_allocated_bytes"]),
                "reserved_bytes.all.current": int(s["allocated_bytes"]), "reserved_bytes.all.peak": int(s["peak_allocated_bytes"]),
                "allocation.all.current": int(s["allocations"]), "allocation.all.allocated": int(s["total_allocations"]),
                "allocation.all.freed": int(s["total_frees"]), "free_bytes": int(s["free_bytes"]),
                "largest_free_bytes": int(s["largest_free_bytes"]), "fragmentation": s["fragmentation"]}

    @staticmethod
    def reset_peak_memory_stats(device=None) -> None:
        _C.reset_peak_memory_stats()

    @staticmethod
    def empty_cache() -> None:
        """Frees the programs loaded on the device (after every launched kernel; they load again when next
        launched). Tensors' memory needs no emptying: it returns to the driver at once (no caching allocator)."""
        _C.empty_cache()

    @staticmethod
    def mem_get_info(device=None):
        """(free, total) bytes of device memory that tensors can use."""
        return int(_C.memory_stats()["free_bytes"]), int(_C.memory_total_bytes())

    class device:
        """`with torch.npu.device(0):` (there is one device, npu:0)."""

        def __init__(self, device):
            index = torch.device(device).index if not isinstance(device, int) else device
            if index not in (None, -1, 0):
                raise ValueError("npu: there is one device, npu:0")

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    @staticmethod
    def get_amp_supported_dtype():
        return [torch.bfloat16, torch.float16]

    # The npu's own generator (torch_bridge/csrc/runtime/generator.cpp): a seed and a counter offset for
    # the chip's counter-based v.rand. torch.manual_seed seeds it too (through manual_seed_all).
    @staticmethod
    def manual_seed(seed: int) -> None:
        _C.default_generator().manual_seed(int(seed))

    manual_seed_all = manual_seed

    @staticmethod
    def seed() -> None:
        _C.default_generator().seed()

    seed_all = seed

    @staticmethod
    def initial_seed() -> int:
        return _C.default_generator().initial_seed()

    @staticmethod
    def get_rng_state(device=None) -> torch.Tensor:
        """16 bytes: the seed and the counter offset (little-endian u64s)."""
        return _C.default_generator().get_state()

    @staticmethod
    def set_rng_state(state, device=None) -> None:
        _C.default_generator().set_state(state)

    @staticmethod
    def get_rng_state_all():
        return [_DeviceModule.get_rng_state()]

    @staticmethod
    def set_rng_state_all(states) -> None:
        for state in states:
            _DeviceModule.set_rng_state(state)

    @property
    def default_generators(self):
        return (_C.default_generator(),)

    @staticmethod
    def _is_in_bad_fork() -> bool:
        return _C.in_bad_fork()


def _register() -> None:
    if getattr(torch, _DEVICE, None) is not None:
        return
    torch.utils.rename_privateuse1_backend(_DEVICE)
    torch._register_device_module(_DEVICE, _DeviceModule())
    torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)


if _C is not None:
    _register()
    from . import custom_ops  # noqa: E402,F401  (fake kernels and autograd of torch.ops.npusim.*)
    from . import backend as _backend  # noqa: E402  (torch.compile(..., backend="npu"))

    _backend.register()
    from .explain import explain  # noqa: E402
    from . import export  # noqa: E402,F401  (npusim.export.compile / run: packages for npu-run)
    from . import llm  # noqa: E402,F401  (npusim.llm.DecodeStep: a language model's step for a package)
    from .profile import profile  # noqa: E402
    # The device lives until the process ends; its trace is written on the way out (by the process that
    # opened it: a forked child cannot reach it).
    atexit.register(lambda: None if _C.in_bad_fork() else _C.write_trace())

