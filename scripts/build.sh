#!/usr/bin/env bash
# Configures and builds one build tree with CMake + Ninja (+ ccache).
#   scripts/build.sh            -> build/           (gcc, RelWithDebInfo)
#   scripts/build.sh sanitize   -> build-sanitize/  (clang, ASan + UBSan, libFuzzer targets)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# Paths under the checkout are hashed relative to it, and the build directory is
# left out of the hash (ccache adds it for -g builds), so a fresh clone elsewhere
# (CI) reuses the compile cache of earlier builds. (The debug info then names the
# directory of whichever build compiled an object first.)
export CCACHE_BASEDIR="$ROOT"
export CCACHE_NOHASHDIR=1

case "${1:-default}" in
  default)
    BUILD_DIR=build
    ARGS=()
    # The PyTorch bridge builds against the .venv's torch (scripts/setup.sh installs it).
    # (Without autoloading npusim itself, whose extension this build makes.)
    if [[ -x "$ROOT/.venv/bin/python" ]]; then
      TORCH_CMAKE="$(TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$ROOT/.venv/bin/python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')"
      ARGS=("-DCMAKE_PREFIX_PATH=$TORCH_CMAKE" "-DPython3_EXECUTABLE=$ROOT/.venv/bin/python" -DNPUSIM_REQUIRE_TORCH=ON)
    fi
    ;;
  sanitize)
    BUILD_DIR=build-sanitize
    ARGS=(-DCMAKE_CXX_COMPILER=clang++ -DNPUSIM_FUZZ=ON "-DNPUSIM_FUZZ_SECONDS=${NPUSIM_FUZZ_SECONDS:-60}")
    ;;
  *)
    echo "usage: scripts/build.sh [default|sanitize]" >&2
    exit 2
    ;;
esac

cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${ARGS[@]}" > "$BUILD_DIR.configure.log" 2>&1 \
  || { cat "$BUILD_DIR.configure.log"; exit 1; }
cmake --build "$BUILD_DIR" -- -j"$(nproc)"
