#!/usr/bin/env bash
# Installs the Debian packages kiln needs to build, test and benchmark, if missing.
# Idempotent and quick when everything is there (one dpkg query, no apt-get call).
# Works as root without prompts; as another user it uses sudo when available.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build g++ git
  libgtest-dev libgmock-dev libbenchmark-dev
  libtbb-dev  # benchmark peer: oneTBB flow graph
  mlir-15-tools  # mlir-opt-15 judges the printed IR (ctest label mlir)
  clang libclang-rt-14-dev  # libFuzzer for the IR parser fuzz target
  nlohmann-json3-dev  # safetensors headers, JSON output of the kiln command
  libcli11-dev  # the kiln command's option parsing
  libdnnl-dev  # oneDNN: f32 matmul
  libonnx-dev libprotobuf-dev protobuf-compiler  # ONNX import (kiln_onnx)
  libopenmpi-dev openmpi-bin  # collectives across processes (kiln_mpi; ctest label mpi)
  python3-venv python3-pip  # the test virtual environment (NumPy for the differential test)
)

# The tests' Python packages, from PyPI into a project-local virtual environment
# (.venv-test/; ctest finds it there). Only when missing: a set-up that is there is quick.
setup_test_venv() {
  local venv=.venv-test
  # onnx: the ONNX backend node tests' data (ctest label onnx). nanobind, ml_dtypes and
  # pytest: the Python package (python/; built in the Release build, ctest label python).
  if ! "$venv/bin/python" -c "import numpy, onnx, nanobind, ml_dtypes, pytest" \
      >/dev/null 2>&1; then
    echo "kiln setup: creating $venv (NumPy, onnx, nanobind, ml_dtypes, pytest from PyPI)" >&2
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "numpy>=1.26,<3" \
      "onnx==1.17.0" "nanobind>=2.4,<3" "ml_dtypes>=0.4" "pytest>=8"
  fi
}

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$status" = "installed" ] || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  setup_test_venv
  exit 0
fi

echo "kiln setup: installing ${missing[*]}" >&2
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
  else
    echo "kiln setup: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
else
  SUDO=()
fi
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
setup_test_venv
echo "kiln setup: done" >&2
