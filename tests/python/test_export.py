"""torch.export programs as deployment packages: npusim.export.compile, the
same package run in Python (npusim.export.run) and by npu-run with no Python,
and what cannot be packaged.

Tolerances: f32 as in test_graph_mode.py (rtol/atol 1e-5); bf16 2e-2.
Python and npu-run runs are compared bit for bit and cycle for cycle, each in
a fresh process (a fresh device: the cycles of a run depend on the device's
state, such as which DRAM rows are open).
"""

import os
import pathlib
import re
import subprocess
import sys
import warnings

import pytest
import torch

import npusim

ROOT = pathlib.Path(__file__).resolve().parents[2]
NPU_RUN = ROOT / "build" / "bin" / "npu-run"


@pytest.fixture(autouse=True)
def _quiet():
    warnings.simplefilter("ignore")


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(approximate="tanh"), torch.nn.LayerNorm(128),
                               torch.nn.Linear(128, 16), torch.nn.ReLU()).eval()


def test_an_exported_model_runs_from_its_package_in_python_and_in_npu_run(tmp_path):
    model, x = mlp(), torch.randn(8, 64)
    package = tmp_path / "mlp.npupkg"
    summary = npusim.export.compile(torch.export.export(model, (x,)), package)
    info = npusim.export.info(package)
    assert info["launches"] == 3, summary  # gemm+gelu, layer norm, gemm+relu: fused as in graph mode
    assert [(name, dtype, shape) for name, dtype, shape in info["inputs"]] == [("input", "f32", [8, 64])]
    outputs, cycles = npusim.export.run(package, x)
    torch.testing.assert_close(outputs[0], model(x), rtol=1e-5, atol=1e-5)
    assert cycles > 0

    # The same package, each path in a fresh process: identical bytes and cycles.
    npusim.export.save_raw(x, tmp_path / "x.bin")
    python = subprocess.run(
        [sys.executable, "-c",
         "import sys, torch, npusim\n"
         f"x = npusim.export.load_raw({str(tmp_path / 'x.bin')!r}, torch.float32, (8, 64))\n"
         f"(y,), cycles = npusim.export.run({str(package)!r}, x)\n"
         f"npusim.export.save_raw(y, {str(tmp_path / 'y_python.bin')!r})\n"
         "print('cycles', cycles)\n"],
        capture_output=True, text=True, check=True)
    native = subprocess.run([str(NPU_RUN), str(package), "--input", f"input={tmp_path / 'x.bin'}", "--output",
                             f"output0={tmp_path / 'y_native.bin'}"], capture_output=True, text=True, check=True)
    python_cycles = int(re.search(r"cycles (\d+)", python.stdout).group(1))
    native_cycles = int(re.search(r"run 0: (\d+) cycles", native.stdout).group(1))
    assert python_cycles == native_cycles
    assert (tmp_path / "y_python.bin").read_bytes() == (tmp_path / "y_native.bin").read_bytes()
    torch.testing.assert_close(npusim.export.load_raw(tmp_path / "y_native.bin", torch.float32, (8, 16)), model(x),
                               rtol=1e-5, atol=1e-5)


def test_bf16_models_and_several_outputs(tmp_path):
    class TwoHeads(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = torch.nn.Linear(32, 48)
            self.head = torch.nn.Linear(48, 8)

        def forward(self, x):
            h = torch.nn.functional.silu(self.body(x))
            return self.head(h), h.t()

    torch.manual_seed(1)
    model, x = TwoHeads().to(torch.bfloat16).eval(), torch.randn(5, 32, dtype=torch.bfloat16)
    package = tmp_path / "two.npupkg"
    npusim.export.compile(torch.export.export(model, (x,)), package)
    (head, h_t), _ = npusim.export.run(package, x)
    expected_head, expected_h_t = model.float()(x.float())
    assert head.dtype == torch.bfloat16 and h_t.shape == (48, 5)
    torch.testing.assert_close(head.float(), expected_head, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(h_t.float(), expected_h_t, rtol=2e-2, atol=2e-2)


def test_intermediates_share_buffers_in_the_memory_plan(tmp_path):
    class Chain(torch.nn.Module):
        def forward(self, x):
            for _ in range(4):
                x = torch.tanh(torch.exp(-torch.relu(x)))
            return x

    x = torch.randn(64, 64)
    package = tmp_path / "chain.npupkg"
    npusim.export.compile(torch.export.export(Chain(), (x,)), package)
    info = npusim.export.info(package)
    assert info["launches"] == 16
    assert info["buffers"] < info["logical_buffers"]  # 15 intermediates, never more than two alive at once
    assert info["buffers"] <= 4
    (y,), _ = npusim.export.run(package, x)
    torch.testing.assert_close(y, Chain()(x), rtol=1e-5, atol=1e-5)


def test_what_needs_python_at_run_time_cannot_be_packaged(tmp_path):
    class WithAFallback(torch.nn.Module):
        def forward(self, x):
            return torch.i0(torch.relu(x) + 1)  # (i0: a CPU fallback, no npu kernel)

    with pytest.raises(RuntimeError, match=r"cannot be replayed without Python:\s+aten::i0"):
        npusim.export.compile(torch.export.export(WithAFallback(), (torch.randn(4, 4),)), tmp_path / "no.npupkg")
    assert not (tmp_path / "no.npupkg").exists()
    # The device is still usable, and the next capture starts clean.
    npusim.export.compile(torch.export.export(mlp(), (torch.randn(2, 64),)), tmp_path / "yes.npupkg")


def test_npu_run_says_what_is_wrong(tmp_path):
    package = tmp_path / "mlp.npupkg"
    npusim.export.compile(torch.export.export(mlp(), (torch.randn(2, 64),)), package)
    missing = subprocess.run([str(NPU_RUN), str(package)], capture_output=True, text=True)
    assert missing.returncode == 1 and "no --input for input: f32[2,64]" in missing.stderr
    (tmp_path / "short.bin").write_bytes(b"\0" * 12)
    short = subprocess.run([str(NPU_RUN), str(package), "-i", f"input={tmp_path / 'short.bin'}"], capture_output=True, text=True)
    assert short.returncode == 1 and "is 512 bytes, got 12" in short.stderr
    info = subprocess.run([str(NPU_RUN), str(package), "--info"], capture_output=True, text=True, check=True)
    assert "3 kernel launches" in info.stdout and "memory plan" in info.stdout
    (tmp_path / "junk.npupkg").write_bytes(b"junk")
    junk = subprocess.run([str(NPU_RUN), str(tmp_path / "junk.npupkg"), "--info"], capture_output=True, text=True)
    assert junk.returncode == 1 and "not a package" in junk.stderr
    assert os.path.exists(NPU_RUN)


def test_resnet18_runs_from_its_package_in_npu_run(tmp_path):
    """The project's ResNet-18 (examples/torch/resnet.py, quarter width, 32x32): convolutions, batch norm,
    pooling, all in one package; npu-run gives the Python path's bytes."""
    sys.path.insert(0, str(ROOT / "examples" / "torch"))
    try:
        import resnet
    finally:
        sys.path.pop(0)
    torch.manual_seed(0)
    model = resnet.ResNet18(num_classes=10, width=16).eval()
    resnet.randomize_batch_norm(model)
    x = torch.randn(1, 3, 32, 32)
    package = tmp_path / "resnet.npupkg"
    npusim.export.compile(torch.export.export(model, (x,)), package)
    (y,), cycles = npusim.export.run(package, x)
    with torch.no_grad():
        expected = model(x)
    torch.testing.assert_close(y, expected, rtol=1e-4, atol=1e-4 * expected.abs().max().item())
    npusim.export.save_raw(x, tmp_path / "x.bin")
    npusim.export.save_raw(y, tmp_path / "y_python.bin")
    native = subprocess.run([str(NPU_RUN), str(package), "--input", f"x={tmp_path / 'x.bin'}", "--output",
                             f"output0={tmp_path / 'y_native.bin'}"], capture_output=True, text=True)
    assert native.returncode == 0, native.stderr
    assert (tmp_path / "y_native.bin").read_bytes() == (tmp_path / "y_python.bin").read_bytes()


def test_save_raw_writes_whole_files_and_replaces_no_directory(tmp_path):
    x = torch.arange(6, dtype=torch.float32)
    npusim.export.save_raw(x, tmp_path / "x.bin")
    assert npusim.export.load_raw(tmp_path / "x.bin", torch.float32, [6]).equal(x)
    (tmp_path / "dir").mkdir()
    with pytest.raises(RuntimeError, match="not a regular file"):
        npusim.export.save_raw(x, tmp_path / "dir")
    assert (tmp_path / "dir").is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir", "x.bin"]  # no temporary left behind


class _TokenModel(torch.nn.Module):
    """A language model's shape of inputs: int64 token ids, a cast of a float input, a keyword argument."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Embedding(50, 16)
        self.head = torch.nn.Linear(16, 50)

    def forward(self, ids, bias=None):
        h = self.embed(ids)
        if bias is not None:
            h = h + bias.float()  # a cast of an input: its graph asserts the input's device (the CPU)
        return self.head(h)


def test_token_ids_casts_and_keyword_inputs_are_packaged(tmp_path):
    """int64 token ids are the package's i32 input (widened on the chip), a cast of an input runs on the chip
    (the exported graph's CPU device checks are dropped), and inputs given by keyword are package inputs too;
    npu-run from C++ gives the CPU's logits."""
    model = _TokenModel().eval()
    ids, bias = torch.randint(0, 50, (2, 5)), torch.randn(2, 5, 16).to(torch.bfloat16)
    package = tmp_path / "tokens.npupkg"
    npusim.export.compile(torch.export.export(model, (ids,), {"bias": bias}), package)
    info = npusim.export.info(package)
    assert [(name, dtype) for name, dtype, _ in info["inputs"]] == [("ids", "i32"), ("bias", "bf16")]
    expected = model(ids, bias=bias)
    (logits,), _ = npusim.export.run(package, ids, bias)
    torch.testing.assert_close(logits, expected, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="outside int32's range"):
        npusim.export.run(package, ids + 2**40, bias)
    npusim.export.save_raw(ids.to(torch.int32), tmp_path / "ids.bin")
    npusim.export.save_raw(bias, tmp_path / "bias.bin")
    subprocess.run([str(NPU_RUN), str(package), "--input", f"ids={tmp_path / 'ids.bin'}", "--input", f"bias={tmp_path / 'bias.bin'}",
                    "--output", f"output0={tmp_path / 'logits.bin'}"], capture_output=True, text=True, check=True)
    torch.testing.assert_close(npusim.export.load_raw(tmp_path / "logits.bin", torch.float32, (2, 5, 50)), expected, rtol=1e-5, atol=1e-5)


def test_a_llama_decode_step_package_generates_the_tokens_of_transformers_generate(tmp_path):
    """transformers' Llama (tiny, random weights, grouped-query attention) as a decode step over a static
    KV cache (npusim.llm.DecodeStep): its package keeps the cache between runs (state), and generating from
    it, in Python and in npu-run from C++ alone, gives the tokens of model.generate on the CPU. A position
    past the cache faults on the chip and is said so."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model = transformers.LlamaForCausalLM(config).eval().requires_grad_(False)
    prompt = torch.randint(0, 256, (1, 6))
    expected = model.generate(prompt, max_new_tokens=8, do_sample=False)[0, 6:].tolist()
    step = npusim.llm.DecodeStep(model, max_len=16)
    program = torch.export.export(step, (), {"input_ids": torch.zeros(1, 1, dtype=torch.long), "cache_position": torch.tensor([0])})
    package = tmp_path / "decode.npupkg"
    summary = npusim.export.compile(program, package)
    assert "state: 4 buffers" in summary  # the keys and values of the 2 layers
    tokens, cycles = npusim.export.generate(package, prompt[0].tolist(), 8)
    assert tokens == expected
    assert len(cycles) == 6 + 8 - 1 and all(c > 0 for c in cycles)
    # The cache starts from what it held when exported (zeros), not from whatever device memory the runner's
    # buffers get: NaNs left there once made every logit NaN (a masked position's 0 times a stale NaN).
    garbage = torch.full((1 << 22,), float("nan"), device="npu")
    torch.npu.synchronize()
    del garbage
    assert npusim.export.generate(package, prompt[0].tolist(), 8)[0] == expected
    run = subprocess.run([str(NPU_RUN), str(package), "--generate", "8", "--prompt", ",".join(map(str, prompt[0].tolist()))],
                         capture_output=True, text=True, check=True)
    assert run.stdout.splitlines()[-1] == "tokens: " + " ".join(map(str, expected))
    # 6 + 12 - 1 runs: the 17th (position 16) is past the 16 positions the cache holds.
    past = subprocess.run([str(NPU_RUN), str(package), "--generate", "12", "--prompt", ",".join(map(str, prompt[0].tolist()))],
                          capture_output=True, text=True)
    assert past.returncode == 1 and "gather index 16 out of range (0..15)" in past.stderr, past.stderr
    bad = subprocess.run([str(NPU_RUN), str(package), "--generate", "2", "--prompt", "3,x"], capture_output=True, text=True)
    assert bad.returncode == 1 and "expected token ids separated by commas or spaces (column 3)" in bad.stderr, bad.stderr
    not_a_step = tmp_path / "tokens.npupkg"
    npusim.export.compile(torch.export.export(_TokenModel().eval(), (torch.randint(0, 50, (2, 5)),)), not_a_step)
    with pytest.raises(RuntimeError, match="not a decode step"):
        npusim.export.generate(not_a_step, [1, 2], 2)


def _tiny_llama():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return transformers.LlamaForCausalLM(config).eval().requires_grad_(False)


def _weights_bytes(summary):
    return int(re.search(r"weights \d+ buffers, (\d+) bytes", summary).group(1))


def test_a_llama_package_with_prefill_and_decode_methods_generates_the_tokens_of_transformers_generate(tmp_path):
    """Prefill (4 tokens a run) and decode exported from one npusim.llm.DecodeStep and compiled into one
    package: the two methods share the weights (stored once) and the KV cache (state written by prefill,
    read by decode). Generating runs the prompt through prefill a chunk at a time and its rest through
    decode, and gives model.generate's tokens, for a prompt of whole chunks and one with a remainder, in
    Python and in npu-run."""
    model = _tiny_llama()
    step = npusim.llm.DecodeStep(model, max_len=24)
    decode = torch.export.export(step, (), {"input_ids": torch.zeros(1, 1, dtype=torch.long), "cache_position": torch.tensor([0])})
    prefill = torch.export.export(step, (), {"input_ids": torch.zeros(1, 4, dtype=torch.long), "cache_position": torch.arange(4)})
    both, decode_only = tmp_path / "llama.npupkg", tmp_path / "decode.npupkg"
    summary = npusim.export.compile({"prefill": prefill, "decode": decode}, both)
    assert "method prefill:" in summary and "method decode:" in summary and "state: 4 buffers" in summary, summary
    assert _weights_bytes(summary) == _weights_bytes(npusim.export.compile(decode, decode_only)), summary  # weights once
    info = npusim.export.info(both)
    assert list(info["methods"]) == ["prefill", "decode"]
    assert info["methods"]["prefill"]["inputs"] == [("input_ids", "i32", [1, 4]), ("cache_position", "i32", [4])]
    for prompt_length, prefill_runs in ((8, 2), (7, 1)):
        prompt = torch.randint(0, 256, (1, prompt_length))
        expected = model.generate(prompt, max_new_tokens=6, do_sample=False)[0, prompt_length:].tolist()
        tokens, cycles = npusim.export.generate(both, prompt[0].tolist(), 6)
        assert tokens == expected, prompt_length
        prompt_runs = prefill_runs + prompt_length - 4 * prefill_runs
        assert len(cycles) == prompt_runs + 6 - 1 and all(c > 0 for c in cycles)
        run = subprocess.run([str(NPU_RUN), str(both), "--generate", "6", "--prompt", ",".join(map(str, prompt[0].tolist()))],
                             capture_output=True, text=True, check=True)
        assert run.stdout.splitlines()[-1] == "tokens: " + " ".join(map(str, expected))
        assert f"in {prompt_runs} run(s) ({prefill_runs} of method prefill)" in run.stdout, run.stdout
    # The prefill of a whole prompt costs fewer cycles than its tokens one at a time.
    prompt = torch.randint(0, 256, (8,)).tolist()
    _, with_prefill = npusim.export.generate(both, prompt, 1)
    _, without = npusim.export.generate(decode_only, prompt, 1)
    assert len(with_prefill) == 2 and len(without) == 8 and sum(with_prefill) < sum(without)
    # One method of the package, by name, in Python and in npu-run.
    ids, positions = torch.tensor([prompt[:4]]), torch.arange(4)
    (logits,), _ = npusim.export.run(both, ids, positions, method="prefill")
    assert logits.shape == (1, 4, 256)
    with pytest.raises(ValueError, match="no method 'encode'"):
        npusim.export.run(both, ids, positions, method="encode")
    npusim.export.save_raw(ids.to(torch.int32), tmp_path / "ids.bin")
    npusim.export.save_raw(positions.to(torch.int32), tmp_path / "positions.bin")
    run = subprocess.run([str(NPU_RUN), str(both), "--method", "prefill", "--input", f"input_ids={tmp_path / 'ids.bin'}",
                          "--input", f"cache_position={tmp_path / 'positions.bin'}", "--output", f"output0={tmp_path / 'logits.bin'}"],
                         capture_output=True, text=True, check=True)
    assert torch.equal(npusim.export.load_raw(tmp_path / "logits.bin", torch.float32, (1, 4, 256)), logits)
    bad = subprocess.run([str(NPU_RUN), str(both), "--method", "encode", "--input", f"input_ids={tmp_path / 'ids.bin'}"],
                         capture_output=True, text=True)
    assert bad.returncode == 1 and "no method 'encode' (its methods: prefill, decode)" in bad.stderr, bad.stderr
