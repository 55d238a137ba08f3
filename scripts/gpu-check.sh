#!/usr/bin/env bash
# The GPU checks of the CUDA work (issue 10), as one command for a machine with an NVIDIA
# GPU (the `device` tool's H200): builds the CUDA code paths, runs the CUDA backend's tests
# on the GPU (kiln_cuda_backend_tests: the Gpu/ instances; the FakeDriver/ ones run
# everywhere; they include compiled graphs on the GPU against the CPU), the tests labelled
# cuda and the NVRTC code-generation tests, then the launch benchmark (kiln's stream
# launches against its CUDA-graph replay, and the driver's own; then f32 GEMM TFLOP/s of
# cuBLAS directly against kiln's GEMM node and a compiled call) and the compiled
# transformer's call on the GPU next to the CPU's. Every step prints what ran and what
# skipped; about 5 minutes on a fresh 16-core machine (the build dominates).
#
#   scripts/gpu-check.sh [build-dir]     (default build/gpu)
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-build/gpu}"
# Packages: install what is missing when a package registry is reachable; a machine
# without network must already have them.
scripts/setup.sh || echo "gpu-check: could not install packages (offline?); building with what is here" >&2
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
start=$SECONDS
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_CUDA=ON -DKILN_BUILD_EXAMPLES=OFF \
  >/dev/null
cmake --build "$dir" --target kiln_cuda_backend_tests kiln_cuda_tests kiln_compiler_tests \
  bench_cuda_launch kiln_cli
echo "gpu-check: built in $((SECONDS - start)) s"
echo "=== the CUDA backend on the GPU and on the fake driver ==="
"$dir/tests/kiln_cuda_backend_tests" --gtest_brief=1
echo "=== CUDA tests (ctest -L cuda) ==="
ctest --test-dir "$dir" -L cuda --output-on-failure
echo "=== NVRTC code generation ==="
"$dir/tests/kiln_compiler_tests" --gtest_filter='CudaCodegen*:PtxCache*' --gtest_brief=1
echo "=== stream launches vs CUDA-graph replay; GEMM TFLOP/s ==="
"$dir/bench/bench_cuda_launch" --chains 10,100,1000 --reps 50
echo "=== compiled transformer (4 x d512, seq 128): GPU against CPU ==="
model="$dir/transformer.mlir"
"$dir/bin/kiln" demo --layers 4 --dim 512 --heads 8 --seq 128 -n 1 --emit-mlir "$model" \
  >/dev/null
for device in cuda:0 cpu:0; do
  "$dir/bin/kiln" bench "$model" -w "${model%.mlir}.safetensors" \
    -i "${model%.mlir}.input.npy" --device "$device" -n 50 --reference-iterations 0 | tail -3
done
echo "gpu-check: done in $((SECONDS - start)) s"
