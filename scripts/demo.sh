#!/usr/bin/env bash
# README command 1: set up, build, and run the main demo.
# First GPT-2 generates tokens through torch.compile on the simulated chip (checked against the CPU,
# profiled per op and layer, with a Perfetto trace and a text summary); then a model exported with
# torch.export runs from its deployment package through npu-run, with no Python; then a small model in
# eager mode; then two GEMMs from two command queues through the driver; then the toolchain and the chip
# end to end: assemble the multi-core double-buffered GEMM, show what the program contains, prove that its
# disassembly reassembles to the same bytes, run it on the simulated 4-core chip with a trace, run every
# example, and show how a mistake in the source and a device fault are reported.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

bash scripts/setup.sh
bash scripts/build.sh default

BIN="$ROOT/build/bin"
OUT="$ROOT/out/demo"
mkdir -p "$OUT"

echo
echo "== 1. GPT-2 generates through torch.compile on the simulated chip =="
.venv/bin/python examples/torch/gpt2_generate.py --config base --out "$OUT/gpt2"

echo
echo "== 1b. A model exported with torch.export, run from its package by npu-run (no Python) =="
.venv/bin/python - "$OUT" <<'PY'
import sys, warnings, torch, npusim
out = sys.argv[1]
warnings.filterwarnings("ignore")
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(approximate="tanh"), torch.nn.LayerNorm(256),
                            torch.nn.Linear(256, 64)).eval()
x = torch.randn(16, 64)
print(npusim.export.compile(torch.export.export(model, (x,)), f"{out}/mlp.npupkg"), end="")
npusim.export.save_raw(x, f"{out}/mlp_x.bin")
npusim.export.save_raw(model(x).detach(), f"{out}/mlp_y_cpu.bin")
PY
"$BIN/npu-run" "$OUT/mlp.npupkg" --input "input=$OUT/mlp_x.bin" --output "output0=$OUT/mlp_y.bin"
.venv/bin/python -c "
import sys, torch, npusim
y, ref = (npusim.export.load_raw(f, torch.float32, (16, 64)) for f in sys.argv[1:3])
print(f'npu-run output against the CPU: max |difference| = {(y - ref).abs().max().item():.2e}')
" "$OUT/mlp_y.bin" "$OUT/mlp_y_cpu.bin"

echo
echo "== 1c. A PyTorch model in eager mode (the npu device), with its trace =="
.venv/bin/python examples/torch/mlp.py --config base --trace "$OUT/torch_mlp.pftrace"

echo
echo "== 1d. ResNet-18 (224x224) through torch.compile on the simulated chip =="
.venv/bin/python examples/torch/resnet.py --config base --trace "$OUT/resnet18.pftrace"
echo "-- where its time went, from the trace alone (npu-trace; docs/analysts.md):"
.venv/bin/npu-trace summary "$OUT/resnet18.pftrace" --top 5
.venv/bin/npu-trace critical-path "$OUT/resnet18.pftrace" | tail -n 4

echo
echo "== 1e. A Llama's prefill and decode steps as a package: npu-run generates its tokens with no Python =="
.venv/bin/python examples/torch/llama_package.py --out "$OUT/llama"

echo
echo "== 2. Through the driver: two GEMMs at once from two command queues on disjoint cores =="
"$BIN/npu-as" examples/gemm.s -o "$OUT/gemm_queues.npubin"
"$BIN/npu-example-gemm-queues" "$OUT/gemm_queues.npubin" --trace "$OUT/gemm_queues.pftrace"

echo
echo "== 3. Assemble examples/gemm.s =="
"$BIN/npu-as" examples/gemm.s -o "$OUT/gemm.npubin"
echo "wrote $OUT/gemm.npubin ($(stat -c %s "$OUT/gemm.npubin") bytes)"

echo
echo "== 4. What the program contains (npu-objdump, first 60 lines) =="
"$BIN/npu-objdump" "$OUT/gemm.npubin" > "$OUT/gemm.listing.txt"
head -n 60 "$OUT/gemm.listing.txt"
echo "... full listing: $OUT/gemm.listing.txt"

echo
echo "== 5. Disassemble to plain assembly and reassemble =="
"$BIN/npu-objdump" --asm "$OUT/gemm.npubin" > "$OUT/gemm.roundtrip.s"
"$BIN/npu-as" "$OUT/gemm.roundtrip.s" -o "$OUT/gemm.roundtrip.npubin"
if cmp -s "$OUT/gemm.npubin" "$OUT/gemm.roundtrip.npubin"; then
  echo "byte-identical: $OUT/gemm.roundtrip.npubin"
else
  echo "ROUND TRIP FAILED" >&2
  exit 1
fi

echo
echo "== 6. Run it on the simulated base chip (4 cores, 128x128 arrays), with a trace =="
"$BIN/npu-sim" --config base "$OUT/gemm.npubin" --trace "$OUT/gemm.pftrace" --stats "$OUT/gemm.stats.json"
echo "trace: $OUT/gemm.pftrace (open it in https://ui.perfetto.dev)"
echo "statistics: $OUT/gemm.stats.json"

echo
echo "== 7. Every example on the base chip =="
for source in examples/*.s; do
  name="$(basename "$source" .s)"
  "$BIN/npu-as" "$source" -o "$OUT/$name.npubin"
  "$BIN/npu-sim" --config base "$OUT/$name.npubin" --stats "$OUT/$name.stats.json" > /dev/null
  cycles=$(grep -m1 '"cycles"' "$OUT/$name.stats.json" | tr -dc '0-9')
  printf '  %-24s %9s cycles\n' "$name" "$cycles"
done

echo
echo "== 8. A mistake in the source is reported with its position (expected to fail) =="
cat > "$OUT/mistake.s" <<'ASM'
.input x, f32, 64
.code 0
    la r1, x
    v.ad f32, full, r1, r1, r1, r2, r3
    li r2, 0x1_0000_0000
    jmp done
ASM
if "$BIN/npu-as" "$OUT/mistake.s" -o "$OUT/mistake.npubin"; then
  echo "the bad source assembled?" >&2
  exit 1
fi

echo
echo "== 9. A program that reads outside device memory faults the chip (expected to fail) =="
cat > "$OUT/fault.s" <<'ASM'
.code 0
    li r1, 1
    shli r1, r1, 40          # 1 TiB: past the end of DRAM
    li r2, 256
    dma.ld ch0, r0, r1, r2, r0, r0, r0, r0, r0, r0
    halt
ASM
"$BIN/npu-as" "$OUT/fault.s" -o "$OUT/fault.npubin"
if "$BIN/npu-sim" --config base "$OUT/fault.npubin" --trace "$OUT/fault.pftrace"; then
  echo "the bad program ran?" >&2
  exit 1
fi
echo "(the trace up to the fault is still written: $OUT/fault.pftrace)"
echo
echo "demo finished: outputs in $OUT"
