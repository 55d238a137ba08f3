#!/usr/bin/env bash
# Installs the Debian packages kiln needs to build, test and benchmark, if missing.
# Idempotent and quick when everything is there (one dpkg query, no apt-get call).
# Works as root without prompts; as another user it uses sudo when available.
set -euo pipefail

packages=(
  build-essential cmake ninja-build g++ git
  libgtest-dev libgmock-dev libbenchmark-dev
  libtbb-dev  # benchmark peer: oneTBB flow graph
  mlir-15-tools  # mlir-opt-15 judges the printed IR (ctest label mlir)
  clang libclang-rt-14-dev  # libFuzzer for the IR parser fuzz target
  nlohmann-json3-dev  # safetensors headers, JSON output of the kiln command
  libcli11-dev  # the kiln command's option parsing
  libdnnl-dev  # oneDNN: f32 matmul
  libopenmpi-dev openmpi-bin  # collectives across processes (kiln_mpi; ctest label mpi)
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$status" = "installed" ] || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

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
echo "kiln setup: done" >&2
