#!/usr/bin/env bash
# README command 1: set up, build, and run the main demo.
# Until a PyTorch model runs on the simulated chip, the demo is the ISA toolchain end to end: assemble
# the 4-core double-buffered GEMM, show what the program contains, and prove that its disassembly
# reassembles to the same bytes; then show how a mistake in the source is reported.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

bash scripts/setup.sh
bash scripts/build.sh default

BIN="$ROOT/build/bin"
OUT="$ROOT/out/demo"
mkdir -p "$OUT"

echo
echo "== 1. Assemble examples/gemm_4core.s =="
"$BIN/npu-as" examples/gemm_4core.s -o "$OUT/gemm_4core.npubin"
echo "wrote $OUT/gemm_4core.npubin ($(stat -c %s "$OUT/gemm_4core.npubin") bytes)"

echo
echo "== 2. What the program contains (npu-objdump, first 60 lines) =="
"$BIN/npu-objdump" "$OUT/gemm_4core.npubin" > "$OUT/gemm_4core.listing.txt"
head -n 60 "$OUT/gemm_4core.listing.txt"
echo "... full listing: $OUT/gemm_4core.listing.txt"

echo
echo "== 3. Disassemble to plain assembly and reassemble =="
"$BIN/npu-objdump" --asm "$OUT/gemm_4core.npubin" > "$OUT/gemm_4core.roundtrip.s"
"$BIN/npu-as" "$OUT/gemm_4core.roundtrip.s" -o "$OUT/gemm_4core.roundtrip.npubin"
if cmp -s "$OUT/gemm_4core.npubin" "$OUT/gemm_4core.roundtrip.npubin"; then
  echo "byte-identical: $OUT/gemm_4core.roundtrip.npubin"
else
  echo "ROUND TRIP FAILED" >&2
  exit 1
fi

echo
echo "== 4. Every example assembles =="
for source in examples/*.s; do
  name="$(basename "$source" .s)"
  "$BIN/npu-as" "$source" -o "$OUT/$name.npubin"
  instructions=$("$BIN/npu-objdump" "$OUT/$name.npubin" | grep -c '^  [0-9a-f]\{6\}:  [0-9a-f]\{16\}' || true)
  printf '  %-24s %5d instructions\n' "$name" "$instructions"
done

echo
echo "== 5. A mistake in the source is reported with its position (expected to fail) =="
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
echo "demo finished: outputs in $OUT"
