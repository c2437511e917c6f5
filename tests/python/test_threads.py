"""Many host threads on the npu device at once: every result checked.

The driver, the runtime's program cache, the compiler's cache and the
allocator are shared by all threads (docs/torch.md, "Threads"). Each thread
runs the same sequence of ops on shapes that change every few steps, so that
the threads compile the same op at the same moment (the race that once gave
one thread's launch another kernel's program), while tensors are allocated
and freed under them.

Integers are checked bit for bit; f32 elementwise results exactly; matmul and
softmax within torch.testing's f32 tolerances, scaled for the bf16 parts the
chip multiplies f32 in.
"""
import os
import threading

import torch

NPU = torch.device("npu")
THREADS = 8
OPS_PER_THREAD = int(os.environ.get("NPUSIM_THREAD_STRESS_OPS", "1000"))


def _one_op(step, generator):
    """Runs op number `step` on the npu and on the CPU; returns (what, npu result, CPU result, exact)."""
    kind = step % 6
    rows = 3 + (step // 6) % 7          # a new shape every six ops: the threads compile it together
    cols = 5 + (step // 42) % 5
    if kind == 0:
        a = torch.randint(-1000, 1000, (rows, cols), dtype=torch.int32, generator=generator)
        b = torch.randint(-1000, 1000, (cols,), dtype=torch.int32, generator=generator)
        return "int32 a * b + a", (a.to(NPU) * b.to(NPU) + a.to(NPU)).cpu(), a * b + a, True
    if kind == 1:
        a = torch.randn(rows, cols, generator=generator)
        b = torch.randn(rows, cols, generator=generator)
        return "f32 a + b", (a.to(NPU) + b.to(NPU)).cpu(), a + b, True
    if kind == 2:
        a = torch.randn(rows, 16, generator=generator)
        b = torch.randn(16, cols, generator=generator)
        return "f32 matmul", (a.to(NPU) @ b.to(NPU)).cpu(), a @ b, False
    if kind == 3:
        a = torch.randn(rows, cols * 3, generator=generator)
        return "softmax", torch.softmax(a.to(NPU), dim=-1).cpu(), torch.softmax(a, dim=-1), False
    if kind == 4:
        a = torch.randint(-100, 100, (rows, cols), dtype=torch.int32, generator=generator)
        return "int32 sum(dim=1)", a.to(NPU).sum(dim=1).cpu(), a.sum(dim=1), True
    a = torch.randn(cols, rows, generator=generator)
    return "transpose copy", a.to(NPU).t().contiguous().cpu(), a.t().contiguous(), True


def test_threads_running_mixed_ops_all_get_right_results():
    failures, errors = [], []
    start = threading.Barrier(THREADS)

    def worker(index):
        generator = torch.Generator().manual_seed(1000 + index)
        try:
            start.wait()
            for step in range(OPS_PER_THREAD):
                what, got, want, exact = _one_op(step, generator)
                ok = torch.equal(got, want) if exact else torch.allclose(got, want, rtol=2e-2, atol=2e-2)
                if not ok:
                    failures.append(f"thread {index} step {step} ({what}): max difference "
                                    f"{(got.double() - want.double()).abs().max().item()}")
        except Exception as error:  # a launch that fails is a failure too
            errors.append(f"thread {index}: {type(error).__name__}: {error}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, "\n".join(errors[:10])
    assert not failures, f"{len(failures)} of {THREADS * OPS_PER_THREAD} results wrong:\n" + "\n".join(failures[:10])
