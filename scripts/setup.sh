#!/usr/bin/env bash
# Idempotent setup: Debian packages, the repo-local virtual environment (.venv)
# with torch and the Python test tools. Fast when everything is already there.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

DEBIAN_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  libsystemc-dev
  libboost-program-options-dev
  libprotobuf-dev protobuf-compiler zlib1g-dev
  libgtest-dev googletest
  clang libclang-rt-dev
  python3-venv
)

missing=()
for pkg in "${DEBIAN_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# expecttest: torch.testing._internal (PyTorch's OpInfo samples, tests/python/test_opinfo.py) imports it.
# transformers: GPT-2 and BERT, with random weights (nothing is downloaded), for graph mode's tests and demo,
# and the configs of npusim.workloads' models.
# ray, optuna, pyarrow, plotly, tqdm, pyyaml: npu-sweep (sweeps as Ray tasks, NSGA-II search, results as
# Parquet, interactive reports, progress, specs); pyyaml also for torchgen, which the build runs over
# torch_bridge/npu_native_functions.yaml.
# perfetto (its compiled protos read .pftrace), duckdb, pandas: npu-trace. holistictraceanalysis checks
# torch.profiler's traces in the tests; installed without its dependencies (it asks for jupyterlab, which
# it does not import), with the ones it imports (pydot, psutil) listed here.
PYTHON_PACKAGES=(torch==2.13.0 pytest numpy expecttest transformers==5.24.0 matplotlib
                 ray==2.60.0 optuna==5.1.0 pyarrow==26.0.1 plotly==7.1.0 tqdm==4.70.1 pyyaml==6.0.4
                 perfetto==0.59.1 duckdb==2.0.1 pandas==3.1.1 pydot==4.0.1 psutil==7.2.2)
NO_DEPS_PACKAGES=(holistictraceanalysis==0.5.0)
VENV="$ROOT/.venv"
STAMP="$VENV/.npusim-setup-stamp"
WANT="${PYTHON_PACKAGES[*]} ${NO_DEPS_PACKAGES[*]}"
if [[ ! -x "$VENV/bin/python" ]]; then
  echo "setup: creating virtual environment at .venv"
  python3 -m venv "$VENV"
fi
if [[ ! -f "$STAMP" ]] || [[ "$(cat "$STAMP")" != "$WANT" ]]; then
  echo "setup: installing Python packages: $WANT"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q "${PYTHON_PACKAGES[@]}"
  "$VENV/bin/python" -m pip install -q --no-deps "${NO_DEPS_PACKAGES[@]}"
  echo "$WANT" > "$STAMP"
fi
# The npusim package (torch_bridge/python), editable: its extension module
# npusim._C is built into it by scripts/build.sh.
if ! "$VENV/bin/python" -m pip show -q npusim > /dev/null 2>&1 || [[ ! -x "$VENV/bin/npu-sweep" ]] || [[ ! -x "$VENV/bin/npu-trace" ]]; then
  echo "setup: installing the npusim package (editable)"
  "$VENV/bin/python" -m pip install -q --no-build-isolation --no-deps -e "$ROOT/torch_bridge/python"
fi
echo "setup: ok"
