# Sourced by scripts/run.sh and scripts/test.sh: sets KILN_CUDA_FLAG to -DKILN_CUDA=ON where
# a CUDA toolkit is found (where CMake's FindCUDAToolkit looks: CUDAToolkit_ROOT, nvcc on
# PATH, /usr/local/cuda), else to -DKILN_CUDA=OFF, saying loudly that the CUDA backend and
# its emulated-GPU tests are then not built. KILN_CUDA=ON|OFF in the environment decides.
kiln_cuda_found() {
  [ -n "${CUDAToolkit_ROOT:-}" ] && [ -x "${CUDAToolkit_ROOT}/bin/nvcc" ] && return 0
  command -v nvcc >/dev/null 2>&1 && return 0
  [ -x /usr/local/cuda/bin/nvcc ]
}
if [ -n "${KILN_CUDA:-}" ]; then
  KILN_CUDA_FLAG="-DKILN_CUDA=${KILN_CUDA}"
elif kiln_cuda_found; then
  KILN_CUDA_FLAG="-DKILN_CUDA=ON"
else
  KILN_CUDA_FLAG="-DKILN_CUDA=OFF"
  cat >&2 <<'MSG'
kiln: *** no CUDA toolkit found: building WITHOUT the CUDA backend; its tests on the
kiln: *** emulated GPU do not run. Install the CUDA toolkit 12.4 or later (no GPU needed)
kiln: *** to build and test it; KILN_CUDA=OFF in the environment silences this notice.
MSG
fi
