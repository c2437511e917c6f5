"""A process forked after the npu device was opened (a DataLoader worker started with 'fork', say)
cannot use it: the simulated chip runs on a thread of the process that opened it, and fork() copies
only the calling thread. The child gets a clear RuntimeError instead of waiting forever,
torch.npu._is_in_bad_fork() says so, the child exits cleanly, and the parent keeps its device. Runs
in a fresh process (one simulated chip per process)."""
import subprocess
import sys

SCRIPT = r"""
import os, sys, torch, npusim
torch.manual_seed(0)
a, b = torch.randn(96, 80), torch.randn(80, 72)
assert torch.allclose((a.to("npu") @ b.to("npu")).cpu(), a @ b, rtol=1e-5, atol=1e-5)
assert not torch.npu._is_in_bad_fork()
child = os.fork()
if child == 0:
    code = 0
    if not torch.npu._is_in_bad_fork():
        code = 10
    try:
        a.to("npu")
        code = 11
    except RuntimeError as error:
        if "fork()" not in str(error):
            print(error, file=sys.stderr)
            code = 12
    sys.exit(code)  # a normal exit: atexit handlers run (the trace writer must stay quiet)
_, status = os.waitpid(child, 0)
assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
assert torch.allclose((a.to("npu") @ b.to("npu")).cpu(), a @ b, rtol=1e-5, atol=1e-5)
print("ok")
"""


def test_a_forked_child_is_told_it_cannot_use_the_device():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok")
    assert "Exception ignored" not in done.stderr, done.stderr[-3000:]
