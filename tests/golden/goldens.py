"""Golden regressions, as gem5 and DRAMSys keep them: the cycles and statistics
of the examples, of a set of compiler kernels and of two models, stored in
tests/golden/*.txt. tests/python/test_goldens.py fails when any value moves;
a change that moves them on purpose updates the goldens in the same commit,
with the reason in its message:

    .venv/bin/python tests/golden/goldens.py --update    # rewrite the goldens
    .venv/bin/python tests/golden/goldens.py             # compare, print a diff

examples.txt: every example (examples/*.s) through npu-sim, timing-only, on
`tiny` and `base` with DMA timed per request and per window (every integer
statistic: cycles, per engine instructions, busy and stall cycles, DRAM and
NoC counts), and on `large` (cycles). kernels.txt and models.txt: PyTorch ops
and models on `base` through the npu device (each in a process of its own,
for a fresh device), each kernel's device cycles as npusim.profile times them.
"""
import argparse
import difflib
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN_DIR = os.path.join(ROOT, "tests", "golden")
BIN = os.path.join(ROOT, "build", "bin")
EXAMPLES = ["gemm", "layernorm_rows", "noc_ring", "softmax_rows", "transpose_dma", "transpose_vtrans"]


def _flatten_stats(stats):
    """The integer statistics of an npu-sim --stats file, one 'key = value' line each (zero stalls left out)."""
    lines = [f"cycles = {stats['cycles']}", f"macs = {stats['macs']}"]
    for core in stats["cores"]:
        prefix = f"core{core['core']}"
        for key in ("macs", "vector_elements", "finish_cycle", "scratchpad_read_bytes", "scratchpad_write_bytes",
                    "accumulator_read_bytes", "accumulator_write_bytes"):
            lines.append(f"{prefix}.{key} = {core[key]}")
        for engine in core["engines"]:
            name = f"{prefix}.{engine['name'].replace(' ', '_')}"
            lines.append(f"{name}.instructions = {engine['instructions']}")
            lines.append(f"{name}.busy_cycles = {engine['busy_cycles']}")
            for stall, cycles in sorted(engine["stall_cycles"].items()):
                if cycles:
                    lines.append(f"{name}.stall.{stall} = {cycles}")
    for channel in stats["dram_channels"]:
        for key in ("read_bytes", "write_bytes", "row_hits", "row_closed", "row_conflicts", "refreshes", "busy_cycles"):
            lines.append(f"dram{channel['channel']}.{key} = {channel[key]}")
    for link in stats["noc_links"]:
        if link["bytes"]:
            lines.append(f"noc{link['link']}.bytes = {link['bytes']}")
            lines.append(f"noc{link['link']}.busy_cycles = {link['busy_cycles']}")
    return lines


def _run(command, **kwargs):
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr[-2000:]}")
    return result.stdout


def examples():
    lines = []
    with tempfile.TemporaryDirectory() as scratch:
        for name in EXAMPLES:
            program = os.path.join(scratch, name + ".npubin")
            _run([os.path.join(BIN, "npu-as"), os.path.join(ROOT, "examples", name + ".s"), "-o", program])
            for preset, timings, full in (("tiny", ("request", "window"), True), ("base", ("request", "window"), True),
                                          ("large", ("request", "window"), False)):
                for timing in timings:
                    stats_path = os.path.join(scratch, "stats.json")
                    result = subprocess.run([os.path.join(BIN, "npu-sim"), "--config", preset, "--dma-timing", timing, "--timing-only",
                                             program, "--stats", stats_path], capture_output=True, text=True)
                    if result.returncode != 0:  # (noc_ring needs more cores than tiny has): the error is the golden
                        lines.append(f"{name} {preset} {timing}: exit {result.returncode}: {result.stderr.strip()}")
                        continue
                    with open(stats_path) as f:
                        stats = json.load(f)
                    flat = _flatten_stats(stats) if full else [f"cycles = {stats['cycles']}"]
                    lines += [f"{name} {preset} {timing}: {line}" for line in flat]
    return lines


# Run in a fresh process each: a list of (label, code) whose kernels are profiled one label at a time.
KERNELS = """
import torch, torch.nn.functional as F, npusim
torch.manual_seed(0)
N = torch.device("npu")
def rand(*shape, dtype=torch.bfloat16):
    return torch.randn(*shape).to(dtype).to(N)
cases = {
    "matmul 512x768x1024 bf16": lambda: rand(512, 1024) @ rand(1024, 768),
    "matmul decode 8x1024x2048 bf16": lambda: rand(8, 1024) @ rand(1024, 2048),
    "matmul 256^3 f32": lambda: rand(256, 256, dtype=torch.float32) @ rand(256, 256, dtype=torch.float32),
    "bmm transposed 12x128x64": lambda: torch.bmm(rand(12, 128, 64), rand(12, 128, 64).transpose(1, 2)),
    "softmax 1024x1024 f32": lambda: torch.softmax(rand(1024, 1024, dtype=torch.float32), -1),
    "layer_norm 512x768 f32": lambda: F.layer_norm(rand(512, 768, dtype=torch.float32), (768,)),
    "transpose 12x256x256 bf16": lambda: rand(12, 256, 256).transpose(1, 2).contiguous(),
    "add 1M f32": lambda: rand(1 << 20, dtype=torch.float32) + rand(1 << 20, dtype=torch.float32),
    "gelu 512x3072 bf16": lambda: F.gelu(rand(512, 3072)),
    "conv 3x3 2x64x28x28": lambda: F.conv2d(rand(2, 64, 28, 28), rand(64, 64, 3, 3), padding=1),
    "sdpa 1x12x256x64 causal": lambda: F.scaled_dot_product_attention(rand(1, 12, 256, 64), rand(1, 12, 256, 64), rand(1, 12, 256, 64), is_causal=True),
}
for label, make in cases.items():
    torch.npu.synchronize()
    with npusim.profile() as prof:
        make()
    for layer, op, kernel, cycles in prof.kernels:
        print(f"{label}: {op} {kernel} = {cycles}")
"""

MODELS = """
import torch, npusim
from transformers import GPT2Config, GPT2LMHeadModel

def profile(label, model, x):
    # Compiled, warmed up once, then one forward profiled: each kernel's device cycles, and their sum.
    compiled = torch.compile(model.to("npu"), backend="npu")
    with torch.no_grad():
        compiled(x.to("npu"))
        torch.npu.synchronize()
        with npusim.profile() as prof:
            compiled(x.to("npu"))
    for layer, op, kernel, cycles in prof.kernels:
        print(f"{label}: {layer} {op} {kernel} = {cycles}")
    print(f"{label}: total kernel cycles = {sum(row[3] for row in prof.kernels)}")

torch.manual_seed(0)
config = GPT2Config(n_layer=2, n_head=4, n_embd=128, vocab_size=512, n_positions=64)
profile("gpt2 2x128", GPT2LMHeadModel(config).eval(), torch.randint(0, 512, (1, 32)))

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Conv2d(3, 32, 3, stride=2, padding=1)
        self.bn = torch.nn.BatchNorm2d(32)
        self.b = torch.nn.Conv2d(32, 64, 3, padding=1)
        self.fc = torch.nn.Linear(64, 10)
    def forward(self, x):
        x = torch.relu(self.bn(self.a(x)))
        x = torch.nn.functional.max_pool2d(torch.relu(self.b(x)), 2)
        return self.fc(x.mean((2, 3)))
profile("cnn", Net().eval(), torch.randn(2, 3, 64, 64))
"""


def _python(code):
    env = dict(os.environ, NPUSIM_CONFIG="base", NPUSIM_STRICT="0")
    env.pop("NPUSIM_TRACE", None)
    return _run([sys.executable, "-c", code], env=env, timeout=900).splitlines()


SETS = {
    "examples": examples,
    "kernels": lambda: _python(KERNELS),
    "models": lambda: _python(MODELS),
}


def path_of(name):
    return os.path.join(GOLDEN_DIR, name + ".txt")


def check(name):
    """The diff between the stored golden and a fresh run ('' when they agree)."""
    fresh = SETS[name]()
    with open(path_of(name)) as f:
        stored = f.read().splitlines()
    return "\n".join(difflib.unified_diff(stored, fresh, f"tests/golden/{name}.txt (stored)", "this build", lineterm="", n=1))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--update", action="store_true", help="rewrite the goldens from this build")
    parser.add_argument("sets", nargs="*", default=list(SETS), help=f"which: {', '.join(SETS)} (default: all)")
    args = parser.parse_args()
    moved = False
    for name in args.sets:
        if args.update:
            lines = SETS[name]()
            with open(path_of(name), "w") as f:
                f.write("\n".join(lines) + "\n")
            print(f"{path_of(name)}: {len(lines)} values")
        else:
            diff = check(name)
            print(diff if diff else f"{name}: every value as stored")
            moved |= bool(diff)
    return 1 if moved else 0


if __name__ == "__main__":
    sys.exit(main())
