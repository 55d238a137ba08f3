#!/usr/bin/env bash
# Builds what scripts/gpu-check.sh runs, here, and packs it for a GPU machine that has the
# NVIDIA driver and CUDA toolkit but none of kiln's Debian packages and no network (the
# `device` tool's H200): the test and benchmark binaries, the kiln command, and the shared
# libraries they link beyond the C library (oneDNN, protobuf, ONNX's protos, libgomp,
# libstdc++), in one compressed archive. On that machine:
#
#   scripts/gpu-check.sh --prebuilt .gpu/kiln-gpu.tar.xz
#
# kiln opens the driver, NVRTC, cuBLAS and NCCL at run time, so nothing of CUDA is packed.
#
#   scripts/gpu-pack.sh [build-dir] [out-dir]     (defaults build/gpu and .gpu)
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-build/gpu}"
out="${2:-.gpu}"
targets=(kiln_cuda_backend_tests kiln_cuda_tests kiln_compiler_tests bench_cuda_launch kiln_cli)
scripts/setup.sh
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_CUDA=ON -DKILN_BUILD_EXAMPLES=OFF \
  >/dev/null
cmake --build "$dir" --target "${targets[@]}"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
binaries=("$dir/tests/kiln_cuda_backend_tests" "$dir/tests/kiln_cuda_tests"
  "$dir/tests/kiln_compiler_tests" "$dir/bench/bench_cuda_launch" "$dir/bin/kiln")
for b in "${binaries[@]}"; do
  strip -o "$stage/bin/$(basename "$b")" "$b"
  # Every library it links but the C library's own (which the GPU machine has, newer).
  ldd "$b" | awk '$3 ~ /^\// {print $3}' |
    grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' |
    while read -r lib; do cp -L -n "$lib" "$stage/lib/"; done
done
mkdir -p "$out"
git rev-parse HEAD >"$stage/commit"
tar -C "$stage" -cJf "$out/kiln-gpu.tar.xz" .
echo "gpu-pack: $out/kiln-gpu.tar.xz ($(du -h "$out/kiln-gpu.tar.xz" | cut -f1)), built from" \
  "$(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' with uncommitted changes')"
