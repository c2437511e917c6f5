"""Ctrl-C while the host waits for the device: KeyboardInterrupt long before
the queued work could have finished (the wait looks for signals every 50 ms
of host time: docs/torch.md), the queued work cancelled (the device reset),
and the device usable afterwards, twice: in an ATen op's wait (.cpu()) and in
torch.npu.synchronize(). In a subprocess of its own (a long queue of work on
a fresh device, and a real SIGINT to the process). The latency itself is
printed, not asserted: tests do not time the host."""
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import os, signal, threading, time
    import torch
    import npusim

    # Python leaves SIGINT ignored when it starts so (a background job of a shell without job control):
    # the test is of the device's wait, so it takes Ctrl-C as a terminal would deliver it.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    NPU = torch.device("npu")
    a = torch.randn(1024, 1024).bfloat16().to(NPU)
    b = torch.randn(1024, 1024).bfloat16().to(NPU)
    (a @ b).cpu()                                  # compiled and loaded
    start = time.monotonic()
    expected = (a @ b).cpu()
    one = time.monotonic() - start
    sent = []
    def interrupt():
        time.sleep(0.5)
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)
    outs = [a @ b for _ in range(400)]            # queued: far more than a second of host time
    threading.Thread(target=interrupt).start()
    try:
        outs[-1].cpu()
        print("NOT INTERRUPTED")
    except KeyboardInterrupt:
        print(f"interrupted after {time.monotonic() - sent[-1]:.3f} s; one matmul took {one:.3f} s")
    outs = [a @ b for _ in range(400)]
    threading.Thread(target=interrupt).start()
    try:
        torch.npu.synchronize()
        print("NOT INTERRUPTED")
    except KeyboardInterrupt:
        print(f"interrupted in synchronize after {time.monotonic() - sent[-1]:.3f} s")
    # The device works after the resets: the same product again, and an elementwise op, as before.
    assert torch.equal((a @ b).cpu(), expected)
    x = torch.arange(12.0).view(3, 4)
    assert torch.equal((x.to(NPU) * 2).cpu(), x * 2)
    print("device ok;", [line for line in npusim.report().splitlines() if line.startswith("resets:")][0])
    """
)


def test_ctrl_c_interrupts_a_wait_and_the_device_keeps_working():
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert "NOT INTERRUPTED" not in lines, result.stdout
    interrupted = [line for line in lines if line.startswith("interrupted after")]
    assert interrupted, result.stdout + result.stderr[-3000:]
    seconds, one_matmul = float(interrupted[0].split()[2]), float(interrupted[0].split()[-2])
    assert seconds < 400 * one_matmul / 10, interrupted[0]  # the queue had 400 matmuls; a tenth of them at most ran
    assert any(line.startswith("interrupted in synchronize") for line in lines), result.stdout
    # A reset for each, which dropped the queued matmuls.
    assert any(line.startswith("device ok; resets: 2 (last: queue 0: submissions") and line.endswith("abandoned)") for line in lines), result.stdout
    print("\n".join(lines))
