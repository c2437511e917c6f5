"""npusim.workloads: named workloads built from configs alone. Names parse (and bad ones say what is
known); a model runs from its config with no weights on the host, in bounded host memory; suite kernels
run as workloads. Each run is a process of its own (its chip is chosen once per process)."""
import json
import subprocess
import sys

import pytest

import npusim.workloads as workloads

RUN = """
import json, resource, sys
import npusim, npusim.workloads
npusim.init(config=sys.argv[1], timing_only=True)
result = npusim.workloads.run(sys.argv[2], compiled=sys.argv[3] == "compiled")
result["max_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps(result))
"""


def run(config, workload, mode="eager", timeout=900):
    result = subprocess.run([sys.executable, "-c", RUN, config, workload, mode], capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_names_parse_with_defaults_and_sizes():
    assert workloads.parse("gpt2").name == "gpt2:prefill:batch=1:seq=128"
    assert workloads.parse("llama-3-8b:decode:batch=8:ctx=2048").name == "llama-3-8b:decode:batch=8:ctx=2048"
    assert workloads.parse("bert:forward:seq=64:dtype=f32").name == "bert:forward:batch=1:seq=64:dtype=f32"
    assert workloads.parse("kernel:mm 4096^3 bf16").phase == "mm 4096^3 bf16"
    names = workloads.names()
    assert {"gpt2:prefill", "gpt2:decode", "llama-3-70b:decode", "mixtral-8x7b:prefill", "resnet-50:forward", "vit:forward",
            "bert:forward"} <= set(names)
    assert sum(name.startswith("kernel:") for name in names) >= 40


@pytest.mark.parametrize("spec, message", [
    ("gpt3", "unknown family 'gpt3'"),
    ("gpt2:train", "has the phases prefill, decode"),
    ("gpt2:prefill:seq=0", "'seq=0' is not one of"),
    ("gpt2:prefill:dtype=f64", "dtype is one of bf16, f16, f32"),
    ("kernel:mm 3^3", "no suite kernel 'mm 3^3'"),
])
def test_bad_names_say_what_is_known(spec, message):
    with pytest.raises(ValueError, match=message.replace("^", r"\^")):
        workloads.parse(spec)


def test_an_8b_llm_decode_step_runs_from_its_config_without_weights_on_the_host():
    # 16 GB of bf16 weights in device memory that holds nothing (timing only), none on the host.
    result = run("large", "llama-3-8b:decode:batch=1:ctx=128")
    assert result["fallbacks"] == 0 and result["kernels"] > 32 * 5
    assert result["max_rss_bytes"] < 2 << 30, result["max_rss_bytes"]
    # A decode step reads every weight once: 2 bytes x 8.0 G parameters, and the KV cache.
    assert 15.0e9 < result["dram_bytes"] < 17.5e9
    assert result["energy_pj"] > 0 and result["latency_s"] > result["dram_bytes"] / (1536e9)


@pytest.mark.parametrize("workload", ["gpt2:decode:batch=2:ctx=64", "bert:forward:seq=32", "kernel:softmax(dim=-1) 4096x4096 f32"])
def test_workloads_compile_and_run_on_the_chip(workload):
    result = run("base", workload, "compiled")
    assert result["fallbacks"] == 0 and result["device_cycles"] > 0 and result["kernels"] > 0
    assert result["area_mm2"] > 0 and result["average_power_w"] < result["peak_power_w"]


@pytest.mark.slow
def test_a_70b_llm_decode_step_runs_in_under_4_gb_of_host_memory():
    """The issue's bar: large with 256 GiB of DRAM for Llama-3-70B's 141 GB of bf16 weights. CI skips it
    (about 150 s of host time, 4,191 kernels); the 8B test above, which CI runs, checks the same property
    (no weight on the host) with 16 GB of weights in under 2 GiB of host memory."""
    from npusim import _C
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".pbtxt", delete=False) as f:
        f.write(_C.chip_config_text("large", ["dram.size_bytes=274877906944"]))
    result = run(f.name, "llama-3-70b:decode:batch=1:ctx=128", timeout=1800)
    assert result["fallbacks"] == 0
    assert result["max_rss_bytes"] < 4 << 30, result["max_rss_bytes"]
    assert 139e9 < result["dram_bytes"] < 145e9
