"""Named workloads built from configs alone: models from their transformers config with no weights
on the host (meta tensors, then device memory that holds nothing in timing-only mode), and the
compiler's suite kernels. A workload is named by its family, its phase and its sizes:

    gpt2:prefill:batch=1:seq=128        llama-3-8b:decode:batch=8:ctx=2048
    bert:forward:batch=8:seq=128        resnet-50:forward:batch=1
    kernel:mm 4096^3 bf16               (any row of bench/roofline.py's suite)

    import npusim.workloads as w
    w.names()                           # the families, phases and kernels
    result = w.run("gpt2:prefill:seq=128")  # a dict: cycles, latency, utilization, DRAM bytes, energy

run() profiles one call of the workload through torch.compile(backend="npu") (after a first call
that compiles it), or eagerly with compiled=False. It runs in the process's device: choose the chip
first (npusim.init(config=..., timing_only=True), or NPUSIM_CONFIG and NPUSIM_TIMING_ONLY=1). In
timing-only mode nothing holds data: a Llama-3-70B decode step needs device DRAM for its 141 GB of
weights (a config with dram.size_bytes large enough) but little host memory (docs/architects.md).
"""
import contextlib
import dataclasses
import os
import tempfile
from typing import Callable, Dict, List, Tuple

import torch

__all__ = ["Workload", "parse", "names", "run", "MODELS", "PHASES"]


@dataclasses.dataclass(frozen=True)
class ModelFamily:
    config: Callable[[], object]    # the transformers config, with the published sizes
    model: str                      # the transformers class that runs it
    phases: Tuple[str, ...]         # what run() can do with it
    defaults: Dict[str, int]


def _config(name: str, **sizes):
    def make():
        import transformers
        return getattr(transformers, name)(**sizes)
    return make


# Sizes from each model's published configuration (the Hugging Face config.json of the checkpoint).
_LLAMA_3_8B = dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                   num_key_value_heads=8, vocab_size=128256, max_position_embeddings=8192, rope_theta=500000.0)
_LLAMA_3_70B = dict(_LLAMA_3_8B, hidden_size=8192, intermediate_size=28672, num_hidden_layers=80, num_attention_heads=64)
_MIXTRAL_8X7B = dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                     num_key_value_heads=8, vocab_size=32000, num_local_experts=8, num_experts_per_tok=2,
                     max_position_embeddings=32768, rope_theta=1e6)
_LM_PHASES = ("prefill", "decode")
_LM_DEFAULTS = {"batch": 1, "seq": 128, "ctx": 1024}
MODELS: Dict[str, ModelFamily] = {
    "gpt2": ModelFamily(_config("GPT2Config"), "GPT2LMHeadModel", _LM_PHASES, _LM_DEFAULTS),
    "bert": ModelFamily(_config("BertConfig"), "BertModel", ("forward",), {"batch": 1, "seq": 128}),
    "llama-3-8b": ModelFamily(_config("LlamaConfig", **_LLAMA_3_8B), "LlamaForCausalLM", _LM_PHASES, _LM_DEFAULTS),
    "llama-3-70b": ModelFamily(_config("LlamaConfig", **_LLAMA_3_70B), "LlamaForCausalLM", _LM_PHASES, _LM_DEFAULTS),
    "mixtral-8x7b": ModelFamily(_config("MixtralConfig", **_MIXTRAL_8X7B), "MixtralForCausalLM", _LM_PHASES, _LM_DEFAULTS),
    "vit": ModelFamily(_config("ViTConfig"), "ViTModel", ("forward",), {"batch": 1}),
    "resnet-50": ModelFamily(_config("ResNetConfig"), "ResNetModel", ("forward",), {"batch": 1}),
}
PHASES = {"prefill": "the prompt's forward: input ids [batch, seq]",
          "decode": "one token's forward against a KV cache of ctx tokens: input ids [batch, 1]",
          "forward": "one forward: tokens [batch, seq], or images [batch, 3, 224, 224]"}
_DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


@dataclasses.dataclass(frozen=True)
class Workload:
    family: str                 # "gpt2", or "kernel" for a suite kernel
    phase: str                  # "prefill", "decode", "forward", or the kernel's name
    sizes: Tuple[Tuple[str, int], ...] = ()
    dtype: str = "bf16"

    @property
    def name(self) -> str:
        return ":".join([self.family, self.phase] + [f"{k}={v}" for k, v in self.sizes] +
                        ([f"dtype={self.dtype}"] if self.family != "kernel" and self.dtype != "bf16" else []))

    def size(self, key: str) -> int:
        return dict(self.sizes)[key]


def parse(spec: str) -> Workload:
    """A workload by name; ValueError, naming what is known, for anything else."""
    parts = spec.split(":")
    if parts[0] == "kernel":
        from .kernels import KERNELS
        name = ":".join(parts[1:])
        if name not in {k.name for k in KERNELS}:
            raise ValueError(f"workload {spec!r}: no suite kernel {name!r} (npusim.workloads.names() lists them)")
        return Workload("kernel", name)
    family = MODELS.get(parts[0])
    if family is None:
        raise ValueError(f"workload {spec!r}: unknown family {parts[0]!r} (families: {', '.join(MODELS)}, kernel)")
    phase = parts[1] if len(parts) > 1 and "=" not in parts[1] else family.phases[0]
    if phase not in family.phases:
        raise ValueError(f"workload {spec!r}: {parts[0]} has the phases {', '.join(family.phases)}, not {phase!r}")
    sizes, dtype = dict(family.defaults), "bf16"
    for item in parts[1 if "=" in (parts[1] if len(parts) > 1 else "") else 2:]:
        key, _, value = item.partition("=")
        if key == "dtype":
            if value not in _DTYPES:
                raise ValueError(f"workload {spec!r}: dtype is one of {', '.join(_DTYPES)}, not {value!r}")
            dtype = value
        elif key in sizes and value.isdigit() and int(value) > 0:
            sizes[key] = int(value)
        else:
            raise ValueError(f"workload {spec!r}: {item!r} is not one of {', '.join(f'{k}=N' for k in sizes)}, dtype=...")
    used = {"prefill": ("batch", "seq"), "decode": ("batch", "ctx"), "forward": ("batch", "seq")}[phase]
    return Workload(parts[0], phase, tuple((k, sizes[k]) for k in used if k in sizes), dtype)


def names() -> List[str]:
    """Every family with its phases, and every suite kernel, as parse() takes them."""
    from .kernels import KERNELS
    families = [f"{name}:{phase}" for name, family in MODELS.items() for phase in family.phases]
    return families + [f"kernel:{k.name}" for k in KERNELS]


def _build_model(w: Workload):
    """The model with its weights in device memory (no host copy), and its call's arguments."""
    import transformers
    family = MODELS[w.family]
    config = family.config()
    dtype = _DTYPES[w.dtype]
    with torch.device("meta"):
        model = getattr(transformers, family.model)(config).to(dtype)
    model = model.to_empty(device="npu").eval()
    batch = w.size("batch")
    if w.family in ("vit", "resnet-50"):
        return model, (torch.empty(batch, 3, 224, 224, dtype=dtype, device="npu"),), {}
    if w.phase in ("prefill", "forward"):
        ids = torch.zeros(batch, w.size("seq"), dtype=torch.long, device="npu")
        return model, (ids,), {}
    # decode: one token against a cache of ctx tokens (whose values are whatever device memory holds).
    ctx = w.size("ctx")
    cache = transformers.DynamicCache(config=config)
    heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    for layer in range(config.num_hidden_layers):
        kv = torch.empty(batch, heads, ctx, head_dim, dtype=dtype, device="npu")
        cache.update(kv, kv.clone(), layer)
    ids = torch.zeros(batch, 1, dtype=torch.long, device="npu")
    position = torch.full((batch, 1), ctx, dtype=torch.long, device="npu")
    return model, (ids,), {"cache": cache, "position_ids": position, "use_cache": False}


def _build_kernel(w: Workload):
    from .kernels import KERNELS
    (kernel,) = [k for k in KERNELS if k.name == w.phase]
    torch.manual_seed(0)
    case = kernel.build(False)
    return case.fn, tuple(t.to("npu") for t in case.args), {}


def _kernel_rooflines(trace_path: str) -> list:
    from npusim import trace
    from npusim.trace import analysis
    t = trace.load(trace_path)
    return [{"name": p.kernel.name, "kernel": p.kernel.kernel, "op": p.kernel.op, "layer": p.kernel.layer, "cycles": p.kernel.cycles,
             "macs": p.macs, "dram_bytes": p.dram_bytes, "elements": p.elements, "bound_cycles": p.bound_cycles, "binding": p.binding,
             "fraction_of_roofline": p.fraction_of_roofline} for p in analysis.roofline(t.raw, t.kernels)]


def run(spec, compiled: bool = True, kernel_rooflines: bool = False) -> dict:
    """Runs one call of the workload on this process's device and returns its figures: device cycles
    and seconds, kernel cycles and count, utilization per engine, DRAM bytes, energy per component,
    average power, and the config's area and design peak power. `kernel_rooflines`: also each kernel's
    roofline ("kernel_rooflines": a list of {name, kernel, op, layer, cycles, macs, dram_bytes, elements,
    bound_cycles, binding, fraction_of_roofline}), from a trace of the call (npusim.trace)."""
    import npusim
    w = parse(spec) if isinstance(spec, str) else spec
    fn, args, kwargs = _build_kernel(w) if w.family == "kernel" else _build_model(w)
    with tempfile.TemporaryDirectory() as folder:
        trace_path = os.path.join(folder, "call.pftrace") if kernel_rooflines else ""
        with torch.no_grad() if w.family != "kernel" else contextlib.nullcontext():
            call = torch.compile(fn, backend="npu", dynamic=False) if compiled else fn
            if compiled:
                call(*args, **kwargs)  # compiles (and runs) once; the profiled call below runs what it made
                npusim.synchronize()
            with npusim.profile(trace_path) as prof:
                call(*args, **kwargs)
        rooflines = _kernel_rooflines(trace_path) if kernel_rooflines else None
    energy = prof.energy
    extra = {"kernel_rooflines": rooflines} if kernel_rooflines else {}
    return {**extra,
        "workload": w.name,
        "device_cycles": prof.device_cycles,
        "latency_s": prof.device_cycles / (prof.chip["clock_mhz"] * 1e6),
        "kernel_cycles": sum(row[3] for row in prof.kernels),
        "kernels": len(prof.kernels),
        "fallbacks": sum(prof.fallbacks.values()),
        "dram_bytes": prof.counters.get("dram_read_bytes", 0) + prof.counters.get("dram_write_bytes", 0),
        "macs": prof.counters.get("macs", 0),
        "peak_macs_per_cycle": prof.chip["macs_per_cycle"],
        "dram_bytes_per_cycle": prof.chip["dram_bytes_per_cycle"],
        **{f"utilization_{k}": v for k, v in prof.utilization.items()},
        "energy_pj": energy["total_pj"],
        "dynamic_energy_pj": energy["dynamic_pj"],
        "leakage_energy_pj": energy["leakage_pj"],
        **{f"energy_{name}_pj": c["total_pj"] for name, c in energy["components"].items()},
        "average_power_w": energy["average_power_w"],
        "peak_power_w": energy["peak_power_w"],
        "area_mm2": energy["area_mm2"],
    }
