"""A real PyTorch model on the simulated NPU: a two-layer MLP with GELU and
one attention head (scores, softmax, weighted values), in bf16, checked
against the CPU in f32, with a trace of the chip and the driver.

    .venv/bin/python examples/torch/mlp.py [--config base] [--trace out/mlp.pftrace]
"""
import argparse
import math

import torch

import npusim


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="base", help="chip config: tiny, base, large, tpu_v4, tpu_v5e, tpu_v6e or a .pbtxt file")
    parser.add_argument("--trace", default="", help="write a trace of the chip and driver (.pftrace or .json)")
    args = parser.parse_args()
    npusim.init(args.config, args.trace)

    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256)).to(torch.bfloat16)
    x = torch.randn(64, 256, dtype=torch.bfloat16)
    reference = mlp.float()(x.float())
    y = mlp.to(torch.bfloat16).to("npu")(x.to("npu"))

    # Attention scores of one head: softmax(q k^T / sqrt(d)) v.
    q, k, v = (torch.randn(128, 64, dtype=torch.bfloat16) for _ in range(3))
    scores = torch.softmax((q.to("npu") @ k.to("npu").T) * (1 / math.sqrt(64)), dim=-1)
    attention = scores @ v.to("npu")
    attention_ref = torch.softmax((q.float() @ k.float().T) / math.sqrt(64), dim=-1) @ v.float()

    mlp_error = (y.cpu().float() - reference).abs().max().item()
    attention_error = (attention.cpu().float() - attention_ref).abs().max().item()
    print(f"MLP 64x256 -> 512 -> 256 (bf16): max |npu - cpu(f32)| = {mlp_error:.4f}")
    print(f"attention 128x128, d=64 (bf16): max |npu - cpu(f32)| = {attention_error:.4f}")
    print("kernels on the chip:", npusim.kernel_stats())
    print("ops on the CPU fallback:", npusim.fallback_stats())
    print(npusim.report(), end="")
    if args.trace:
        npusim.write_trace()
        print(f"trace: {args.trace} (open it in https://ui.perfetto.dev)")
    ok = mlp_error < 0.1 and attention_error < 0.05
    print("results match the CPU" if ok else "RESULTS DIFFER from the CPU")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
