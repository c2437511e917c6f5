"""Device cycles of whole models through torch.compile(backend="npu"), timing-only:
what the compiler's kernels add up to on real networks (issue 34 reports these
before and after a change of the compiler).

    .venv/bin/python bench/models.py [--config base|large|FILE] [--dtype f32|bf16] [--only REGEX] [--json OUT]

Models (random weights, eval mode, batch 1): ResNet-18 and MobileNet-v3 Large
on a 224x224 image (examples/torch/resnet.py, mobilenet.py), GPT-2 124M and
BERT-base (transformers) on 128 tokens, in f32 as their checkpoints are, or
with --dtype bf16 their weights and float inputs in bf16 (as for inference).
Each runs in a process of its own (one simulated device per process): one
run to compile, then one profiled run. Printed per model: device cycles (the
chip's cycle counter over the run), the cycles of its kernels summed, the
number of kernels, DRAM bytes, and the ops that took the most cycles.
"""
import argparse
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = ["resnet18", "mobilenet_v3", "gpt2", "bert"]
NAMES = {"resnet18": "ResNet-18 1x3x224x224", "mobilenet_v3": "MobileNet-v3 Large 1x3x224x224",
         "gpt2": "GPT-2 124M, 128 tokens", "bert": "BERT-base, 128 tokens"}


def build(name):
    import torch
    sys.path.insert(0, os.path.join(ROOT, "examples", "torch"))
    torch.manual_seed(0)
    if name == "resnet18":
        import resnet
        return resnet.ResNet18().eval(), (torch.randn(1, 3, 224, 224),)
    if name == "mobilenet_v3":
        import mobilenet
        return mobilenet.MobileNetV3().eval(), (torch.randn(1, 3, 224, 224),)
    import transformers
    if name == "gpt2":
        config = transformers.GPT2Config(n_layer=12, n_head=12, n_embd=768, vocab_size=50257, n_positions=1024)
        model = transformers.GPT2LMHeadModel(config).eval()
    else:
        config = transformers.BertConfig(num_hidden_layers=12, num_attention_heads=12, hidden_size=768,
                                         intermediate_size=3072, vocab_size=30522)
        model = transformers.BertModel(config).eval()
    model.config.use_cache = False
    return model, (torch.randint(0, config.vocab_size, (1, 128)),)


def run_one(name, config, dtype):
    import torch
    import npusim
    npusim.init(config=config, timing_only=True)
    model, inputs = build(name)
    if dtype == "bf16":
        model = model.to(torch.bfloat16)
        inputs = [t.to(torch.bfloat16) if t.is_floating_point() else t for t in inputs]
    model = model.to("npu")
    inputs = [t.to("npu") for t in inputs]
    with torch.no_grad():
        compiled = torch.compile(model, backend="npu")
        compiled(*inputs)
        npusim.synchronize()
        with npusim.profile() as prof:
            compiled(*inputs)
    top = sorted(prof.ops.items(), key=lambda kv: -kv[1].cycles)[:6]
    return {"model": name, "device_cycles": prof.device_cycles, "kernel_cycles": sum(row[3] for row in prof.kernels),
            "kernels": len(prof.kernels), "dram_bytes": prof.counters["dram_read_bytes"] + prof.counters["dram_write_bytes"],
            "fallbacks": sum(prof.fallbacks.values()), "top_ops": [(op, s.calls, s.cycles) for op, s in top]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="base")
    parser.add_argument("--dtype", default="f32", choices=["f32", "bf16"], help="the models' weights and float inputs")
    parser.add_argument("--only", help="only the models whose name matches this regular expression")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # (the child process: one model, JSON on stdout)
    args = parser.parse_args(argv)
    if args.one:
        print("RESULT " + json.dumps(run_one(args.one, args.config, args.dtype)))
        return 0
    results = []
    for name in MODELS:
        if args.only and not re.search(args.only, name):
            continue
        child = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", name, "--config", args.config, "--dtype", args.dtype],
                               capture_output=True, text=True)
        line = next((l for l in child.stdout.splitlines() if l.startswith("RESULT ")), None)
        if child.returncode != 0 or line is None:
            print(f"{NAMES[name]}: failed ({child.returncode})\n{child.stderr[-3000:]}", file=sys.stderr)
            return 1
        r = json.loads(line[len("RESULT "):])
        results.append(r)
        print(f"{NAMES[name]:32} {r['device_cycles']:>12} device cycles, {r['kernel_cycles']:>12} in {r['kernels']:>5} kernels, "
              f"{r['dram_bytes'] / 2**20:8.1f} MiB DRAM{', ' + str(r['fallbacks']) + ' CPU fallbacks' if r['fallbacks'] else ''}")
        print("    " + "; ".join(f"{op} x{calls}: {cycles}" for op, calls, cycles in r["top_ops"]), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"config": args.config, "dtype": args.dtype, "models": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
