"""Graph mode's static memory plan: intermediates in the cores' SRAM pools
(npusim.init(sram_pool=...)). Each case runs in a process of its own, because
the pool is chosen when the device opens."""
import json
import os
import subprocess
import sys

import pytest

_MODEL = r"""
import json, sys, torch, npusim
npusim.init("base", sram_pool=int(sys.argv[1]))
torch.manual_seed(0)

class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up, self.down, self.norm = torch.nn.Linear(96, 200), torch.nn.Linear(200, 96), torch.nn.LayerNorm(96)

    def forward(self, x):
        for _ in range(3):
            x = x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))
        return x.softmax(-1)

model, x = Mlp(), torch.randn(70, 96)
expected = model(x)
compiled = torch.compile(model.to("npu"), backend="npu", fullgraph=True)
mode = sys.argv[2]
if mode == "full_pools":
    # Someone else holds most of every pool: the plan's allocations find no room and go to DRAM.
    previous = npusim._C.set_sram_placement(True)
    held = [torch.empty(int(sys.argv[1]) - 4096, dtype=torch.uint8, device="npu") for _ in range(4)]
    npusim._C.set_sram_placement(previous)
    assert npusim.sram_stats()["allocations"] == 4
with torch.no_grad():
    y = compiled(x.to("npu"))
    npusim.synchronize()
    before = npusim._C.device_counters()
    y = compiled(x.to("npu"))
    npusim.synchronize()
    after = npusim._C.device_counters()
report = npusim.backend.reports()[-1]
stats = npusim.sram_stats()
print(json.dumps({
    "error": (y.cpu() - expected).abs().max().item(),
    "output_address": y.data_ptr(),
    "cycles": after["cycle"] - before["cycle"],
    "dram_bytes": after["dram_read_bytes"] + after["dram_write_bytes"] - before["dram_read_bytes"] - before["dram_write_bytes"],
    "planned": report.sram_values,
    "planned_peak": report.sram_peak_bytes,
    "sram_in_use_after": stats["allocated_bytes"] - (4 * (int(sys.argv[1]) - 4096) if mode == "full_pools" else 0),
    "sram_allocations_total": stats["total_allocations"],
}))
"""

_TRAIN = r"""
import json, sys, torch, npusim
npusim.init("base", sram_pool=int(sys.argv[1]))
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 64), torch.nn.LayerNorm(64))
x = torch.randn(40, 64)
model(x).square().mean().backward()
expected = [p.grad.clone() for p in model.parameters()]
model.zero_grad()
npu_model = model.to("npu")
for p in npu_model.parameters():
    p.grad = None
torch.compile(npu_model, backend="npu", fullgraph=True)(x.to("npu")).square().mean().backward()
errors = [(p.grad.cpu() - e).abs().max().item() for p, e in zip(npu_model.parameters(), expected)]
kinds = {r.kind: r.sram_values for r in npusim.backend.reports()}
print(json.dumps({"grad_error": max(errors), "planned": kinds, "sram_in_use_after": npusim.sram_stats()["allocated_bytes"]}))
"""


def _run(script, pool, *args):
    result = subprocess.run([sys.executable, "-c", script, str(pool), *args], capture_output=True, text=True, timeout=600,
                            env={**os.environ, "NPUSIM_SRAM_POOL": ""})
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_intermediates_in_sram_cut_dram_traffic_and_keep_the_results():
    without = _run(_MODEL, 0, "plain")
    pool = 64 << 10
    with_pool = _run(_MODEL, pool, "plain")
    assert without["planned"] == 0 and without["sram_allocations_total"] == 0
    assert with_pool["planned"] > 0
    assert 0 < with_pool["planned_peak"] <= 4 * pool
    assert with_pool["error"] < 1e-4 and without["error"] < 1e-4
    # The kernels read and write the planned intermediates over the NoC, not DRAM.
    assert with_pool["dram_bytes"] < 0.8 * without["dram_bytes"], (with_pool, without)
    assert with_pool["sram_allocations_total"] > 0
    # The output is returned to the caller: it stays in DRAM (window addresses start at 2^48, pointers 2^48 above).
    assert with_pool["output_address"] < 2**49
    # Every planned intermediate was freed when the graph was done with it.
    assert with_pool["sram_in_use_after"] == 0


def test_a_pool_fuller_than_planned_means_dram_not_an_error():
    pool = 64 << 10
    result = _run(_MODEL, pool, "full_pools")
    assert result["planned"] > 0
    assert result["error"] < 1e-4
    assert result["sram_in_use_after"] == 0


def test_a_training_step_plans_its_backward_and_keeps_saved_activations_in_dram():
    result = _run(_TRAIN, 64 << 10)
    assert result["grad_error"] < 1e-4
    # Saved activations are the forward graph's outputs: never planned; the backward's own intermediates are.
    assert result["planned"]["backward"] > 0
    assert result["sram_in_use_after"] == 0


def test_a_pool_that_is_not_whole_bank_rows_is_refused():
    result = subprocess.run([sys.executable, "-c", "import torch, npusim; npusim.init('base', sram_pool=1000); torch.ones(1).to('npu')"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert "multiple of 4096 bytes" in result.stderr, result.stderr[-2000:]
