"""GPT-2 generates tokens through torch.compile on the simulated NPU.

A GPT-2 (transformers' GPT2LMHeadModel, random weights: nothing is
downloaded) is compiled with torch.compile(backend="npu") and generates a few
tokens greedily from a random prompt on the chip; the same model generates on
the CPU, and the tokens and logits are compared. The last step is profiled:
device time per layer and per op, utilization of the tensor cores, vector
units, DMA and DRAM, and the CPU fallbacks. A Perfetto trace of the chip and
the driver, and a text summary, are written.

    .venv/bin/python examples/torch/gpt2_generate.py [--size small|124M] [--tokens 4] [--config base]

The sequence is padded to a fixed length (prompt + new tokens) so the model
compiles once: GPT-2 is causal, so position p's logits do not depend on the
padding after it.
"""
import argparse
import pathlib
import time
import warnings

import torch

import npusim

SIZES = {
    # A reduced GPT-2 (the demo's default: a few minutes at most on a laptop-class CPU).
    "small": dict(n_layer=4, n_head=4, n_embd=256, vocab_size=4096, n_positions=256),
    # GPT-2 small, 124M parameters.
    "124M": dict(n_layer=12, n_head=12, n_embd=768, vocab_size=50257, n_positions=1024),
}


def generate(model, sequence: torch.Tensor, start: int, steps: int, device: str):
    """Greedy generation in place over a fixed-length, padded sequence, from position `start`; returns the last step's logits."""
    logits = None
    for position in range(start, start + steps):
        logits = model(sequence.to(device), use_cache=False).logits[:, position - 1].cpu().float()
        sequence[0, position] = int(logits.argmax(-1))
    return logits


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument("--tokens", type=int, default=4, help="tokens to generate")
    parser.add_argument("--prompt-length", type=int, default=12)
    parser.add_argument("--config", default="base", help="chip config: tiny, base, large, tpu_v4, tpu_v5e, tpu_v6e or a .pbtxt file")
    parser.add_argument("--out", default="out/gpt2", help="folder for the trace and the summary")
    args = parser.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    trace_path = out / "gpt2.pftrace"
    npusim.init(args.config, str(trace_path))
    warnings.filterwarnings("ignore", message="npusim: .* runs on the CPU")  # counted and reported below

    import transformers

    transformers.utils.logging.set_verbosity_error()
    config = transformers.GPT2Config(**SIZES[args.size], bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    cpu_model = transformers.GPT2LMHeadModel(config).eval()
    npu_model = transformers.GPT2LMHeadModel(config).eval()
    npu_model.load_state_dict(cpu_model.state_dict())
    npu_model = npu_model.to("npu")
    prompt = torch.randint(0, config.vocab_size, (1, args.prompt_length))
    if args.tokens < 1:
        raise SystemExit("--tokens: at least 1")
    parameters = sum(p.numel() for p in cpu_model.parameters())
    print(f"GPT-2 ({args.size}: {config.n_layer} layers, {config.n_embd} wide, {parameters / 1e6:.1f}M parameters), "
          f"prompt of {args.prompt_length} random tokens, {args.tokens} new tokens, chip config '{args.config}'")

    length, start = args.prompt_length + args.tokens, args.prompt_length
    with torch.no_grad():
        cpu_sequence = torch.zeros(1, length, dtype=torch.long)
        cpu_sequence[:, :start] = prompt
        began = time.perf_counter()
        cpu_logits = generate(cpu_model, cpu_sequence, start, args.tokens, "cpu")
        cpu_seconds = time.perf_counter() - began

        compiled = torch.compile(npu_model, backend="npu", fullgraph=True)
        npu_sequence = torch.zeros(1, length, dtype=torch.long)
        npu_sequence[:, :start] = prompt
        began = time.perf_counter()
        generate(compiled, npu_sequence, start, args.tokens - 1, "npu")
        with npusim.profile() as prof:  # the last step
            npu_logits = generate(compiled, npu_sequence, length - 1, 1, "npu")
        npu_seconds = time.perf_counter() - began
    cpu_tokens, npu_tokens = cpu_sequence[0, start:].tolist(), npu_sequence[0, start:].tolist()

    error = (npu_logits - cpu_logits).abs().max().item()
    same = npu_tokens == cpu_tokens
    lines = [
        f"tokens on the npu: {npu_tokens}",
        f"tokens on the cpu: {cpu_tokens}  ({'the same' if same else 'DIFFERENT'})",
        f"last step's logits: max |npu - cpu| = {error:.2e}",
        f"host wall time: npu (simulated, compile included) {npu_seconds:.1f} s, cpu eager {cpu_seconds:.2f} s",
        "",
        "the last step, on the chip:",
        prof.table(top=12),
    ]
    summary = "\n".join(lines)
    print(summary)
    (out / "gpt2_summary.txt").write_text(summary + "\n")
    npusim.write_trace()
    print(f"\ntrace: {trace_path} (open it in https://ui.perfetto.dev)\nsummary: {out / 'gpt2_summary.txt'}")
    if not same or error > 1e-3:
        raise SystemExit("the npu's tokens or logits differ from the cpu's")


if __name__ == "__main__":
    main()
