#!/usr/bin/env python3
"""Host overhead of one small eager op on the npu device: a 1-element add, timed on
the host while the chip runs nothing else (kernels are queued; the simulated time
they take is excluded by timing only the submissions), against the same op on the
CPU, measured in the same run.

Target (issue: PyTorch eager device): at most 50 us per op.

Usage: .venv/bin/python bench/torch_overhead.py [--ops 1000] [--config base]
"""
import argparse
import time

import torch

import npusim


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # At most what one command ring (64 KiB, 44 bytes per launch) holds: past that the
    # submissions would wait for the device, and simulated time would enter the timing.
    parser.add_argument("--ops", type=int, default=1000)
    parser.add_argument("--config", default="base")
    args = parser.parse_args()
    npusim.init(args.config)

    a_cpu, b_cpu = torch.ones(1), torch.ones(1)
    a, b = a_cpu.to("npu"), b_cpu.to("npu")
    for _ in range(20):  # warm up: compile the kernel once, load the program once
        a + b
    torch.npu.synchronize()

    start = time.perf_counter()
    for _ in range(args.ops):
        a + b
    npu_us = (time.perf_counter() - start) / args.ops * 1e6
    torch.npu.synchronize()  # the queued kernels run here, outside the timing

    start = time.perf_counter()
    for _ in range(args.ops):
        a_cpu + b_cpu
    cpu_us = (time.perf_counter() - start) / args.ops * 1e6

    print(f"1-element add, {args.ops} ops, config {args.config}:")
    print(f"  npu: {npu_us:.1f} us of host time per op (target <= 50 us: {'met' if npu_us <= 50 else 'NOT met'})")
    print(f"  cpu: {cpu_us:.1f} us per op (reference, same run); npu / cpu = {npu_us / cpu_us:.1f}x")
    print(f"  kernels launched: {npusim.kernel_stats()}, fallbacks: {npusim.fallback_stats()}")


if __name__ == "__main__":
    main()
