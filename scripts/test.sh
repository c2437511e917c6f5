#!/usr/bin/env bash
# README command 2: set up, build and run every test.
#   1. the C++ test suites (GoogleTest through ctest, each test case its own test)
#   2. the same suites built with clang under AddressSanitizer + UndefinedBehaviorSanitizer,
#      and the libFuzzer targets, each fuzzing for NPUSIM_FUZZ_SECONDS (default 60)
#   3. the Python tests, once the project has any (tests/python)
# Exits non-zero when any test fails.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

bash scripts/setup.sh

echo "== build (gcc) and test =="
bash scripts/build.sh default
(cd build && ctest --output-on-failure -j"$(nproc)")

echo "== build (clang, ASan + UBSan, fuzzers) and test =="
bash scripts/build.sh sanitize
(cd build-sanitize && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j"$(nproc)")

if [[ -d tests/python ]]; then
  echo "== Python tests (the npu PyTorch device) =="
  .venv/bin/python -m pytest -q tests/python
fi
echo "== all tests passed =="
