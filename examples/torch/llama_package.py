"""A Llama generates tokens from its deployment package, in npu-run, with no Python.

transformers' LlamaForCausalLM (a small random one: nothing is downloaded) becomes
a step over a static KV cache (npusim.llm.DecodeStep), exported (torch.export)
twice, as prefill over the prompt's tokens and as decode of one token, and both
are compiled into one package whose methods share the weights and whose state is
the cache; npu-run --generate then runs the greedy loop from C++ alone. The tokens
are compared with model.generate on the CPU.

    .venv/bin/python examples/torch/llama_package.py [--tokens 8] [--prompt-length 6] [--prefill-tokens P] [--out out/llama]
"""
import argparse
import pathlib
import subprocess
import warnings

import torch
import transformers

import npusim

ROOT = pathlib.Path(__file__).resolve().parents[2]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=8, help="new tokens to generate")
    parser.add_argument("--prompt-length", type=int, default=6)
    parser.add_argument("--prefill-tokens", type=int, help="tokens of a prefill run (default: the prompt's length; 0: no prefill method)")
    parser.add_argument("--out", default="out/llama", help="folder for the package")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model = transformers.LlamaForCausalLM(config).eval().requires_grad_(False)
    prompt = torch.randint(0, config.vocab_size, (1, args.prompt_length))
    expected = model.generate(prompt, max_new_tokens=args.tokens, do_sample=False)[0, args.prompt_length:].tolist()

    step = npusim.llm.DecodeStep(model, max_len=args.prompt_length + args.tokens)
    decode = torch.export.export(step, (), {"input_ids": torch.zeros(1, 1, dtype=torch.long), "cache_position": torch.tensor([0])})
    methods = {"decode": decode}
    prefill_tokens = args.prompt_length if args.prefill_tokens is None else args.prefill_tokens
    if prefill_tokens > 0:
        methods = {"prefill": torch.export.export(step, (), {"input_ids": torch.zeros(1, prefill_tokens, dtype=torch.long),
                                                             "cache_position": torch.arange(prefill_tokens)}), **methods}
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    package = out / "llama.npupkg"
    print(npusim.export.compile(methods, package))
    command = [str(ROOT / "build" / "bin" / "npu-run"), str(package), "--generate", str(args.tokens),
               "--prompt", ",".join(map(str, prompt[0].tolist()))]
    print("$", " ".join(command))
    run = subprocess.run(command, capture_output=True, text=True, check=True)
    print(run.stdout, end="")
    tokens = [int(t) for t in run.stdout.splitlines()[-1].split()[1:]]
    print("model.generate on the CPU:", " ".join(map(str, expected)))
    if tokens != expected:
        raise SystemExit("npu-run's tokens differ from the CPU's")
    print("the same tokens")


if __name__ == "__main__":
    main()
