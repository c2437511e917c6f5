"""One training step of a small MLP on the npu, eager and compiled: device
cycles, kernels and CPU fallbacks (npusim.profile), and host wall time against
the same step on the CPU, measured in the same run.

    .venv/bin/python bench/torch_training_step.py [--config base] [--batch 64]
"""
import argparse
import time
import warnings

import torch
import torch.nn.functional as F

import npusim


def step(model, optimizer, x, y):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="base")
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    npusim.init(args.config)
    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    x, y = torch.randn(args.batch, 256), torch.randint(0, 10, (args.batch,))

    def mlp():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 10))

    cpu_model = mlp()
    cpu_opt = torch.optim.SGD(cpu_model.parameters(), lr=0.01)
    step(cpu_model, cpu_opt, x, y)
    start = time.perf_counter()
    for _ in range(10):
        step(cpu_model, cpu_opt, x, y)
    cpu_ms = (time.perf_counter() - start) / 10 * 1000
    print(f"MLP 256 -> 512 -> 10, batch {args.batch}, f32, SGD; chip config '{args.config}'")
    print(f"CPU: {cpu_ms:.2f} ms per step (host)")

    for mode in ("eager", "compiled"):
        model = mlp().to("npu")
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        run = torch.compile(model, backend="npu") if mode == "compiled" else model
        xs, ys = x.to("npu"), y.to("npu")
        step(run, optimizer, xs, ys).item()  # programs compiled, graphs traced
        with npusim.profile() as prof:
            start = time.perf_counter()
            step(run, optimizer, xs, ys).item()
            host_ms = (time.perf_counter() - start) * 1000
        print(f"npu {mode}: {prof.device_cycles} device cycles ({prof.microseconds(prof.device_cycles):.0f} us on the chip), "
              f"{len(prof.kernels)} kernels, {sum(prof.fallbacks.values())} CPU fallbacks "
              f"({', '.join(sorted(prof.fallbacks)) or 'none'}); host {host_ms:.1f} ms per step = {host_ms / cpu_ms:.0f}x the CPU")


if __name__ == "__main__":
    main()
