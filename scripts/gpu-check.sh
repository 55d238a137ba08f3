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
#   scripts/gpu-check.sh --prebuilt ARCHIVE
#
# --prebuilt runs what scripts/gpu-pack.sh built and packed elsewhere (for a GPU machine
# without kiln's packages or a network): it builds nothing, and finds the CUDA libraries
# kiln opens (NVRTC, cuBLAS, NCCL) wherever the machine keeps them.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
if [ "${1:-}" = "--prebuilt" ]; then
  archive="${2:?gpu-check: --prebuilt needs the archive scripts/gpu-pack.sh wrote}"
  root=$(mktemp -d)
  tar -C "$root" -xJf "$archive"
  echo "gpu-check: prebuilt binaries of commit $(cat "$root/commit")"
  bin="$root/bin"
  backend_tests="$bin/kiln_cuda_backend_tests" cuda_tests="$bin/kiln_cuda_tests"
  compiler_tests="$bin/kiln_compiler_tests" launch_bench="$bin/bench_cuda_launch" kiln="$bin/kiln"
  # The toolkit's and PyPI's CUDA libraries, where the loader would not find them itself.
  cuda_dirs=$(find /usr/local /usr/lib /opt \( -name 'libnvrtc.so*' -o \
    -name 'libcublas.so*' -o -name 'libnccl.so*' \) -printf '%h\n' 2>/dev/null | sort -u |
    paste -sd: || true)
  export LD_LIBRARY_PATH="$root/lib${cuda_dirs:+:$cuda_dirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "gpu-check: CUDA libraries from ${cuda_dirs:-the default paths}"
  work="$root"
else
  dir="${1:-build/gpu}"
  # Packages: install what is missing when a package registry is reachable; a machine
  # without network must already have them.
  scripts/setup.sh || echo "gpu-check: could not install packages (offline?); building with what is here" >&2
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_CUDA=ON \
    -DKILN_BUILD_EXAMPLES=OFF >/dev/null
  cmake --build "$dir" --target kiln_cuda_backend_tests kiln_cuda_tests kiln_compiler_tests \
    bench_cuda_launch kiln_cli
  echo "gpu-check: built in $((SECONDS - start)) s"
  backend_tests="$dir/tests/kiln_cuda_backend_tests" cuda_tests="$dir/tests/kiln_cuda_tests"
  compiler_tests="$dir/tests/kiln_compiler_tests" launch_bench="$dir/bench/bench_cuda_launch"
  kiln="$dir/bin/kiln" work="$dir"
fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
status=0
step() {  # runs a step; a failing one is reported and the rest still run
  echo "=== $1 ==="
  shift
  "$@" || { echo "gpu-check: FAILED (exit $?): $*"; status=1; }
}
step "the CUDA backend on the GPU (Gpu/) and on the fake driver" "$backend_tests" --gtest_brief=1
step "CUDA tests (the ctest label cuda)" "$cuda_tests" --gtest_brief=1
step "NVRTC code generation" "$compiler_tests" --gtest_filter='CudaCodegen*:PtxCache*' \
  --gtest_brief=1
step "stream launches vs CUDA-graph replay; GEMM TFLOP/s" "$launch_bench" --chains 10,100,1000 \
  --reps 50
echo "=== compiled transformer (4 x d512, seq 128): GPU against CPU ==="
model="$work/transformer.mlir"
"$kiln" demo --layers 4 --dim 512 --heads 8 --seq 128 -n 1 --emit-mlir "$model" >/dev/null
for device in cuda:0 cpu:0; do
  step "kiln bench on $device" "$kiln" bench "$model" -w "${model%.mlir}.safetensors" \
    -i "${model%.mlir}.input.npy" --device "$device" -n 50 --reference-iterations 0
done
echo "gpu-check: done in $((SECONDS - start)) s"
exit $status
