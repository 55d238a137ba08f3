#!/usr/bin/env bash
# Builds and runs the whole test suite: the Release build (g++), then the same tests under
# ASan+UBSan (clang, a build that holds the libFuzzer targets too) and under TSan (g++),
# then fuzzes the IR parser, the shape rules and planner, and the ONNX importer in the
# ASan build for KILN_FUZZ_SECONDS each (default 60), then installs the Python package with
# pip into a fresh virtual environment and runs its tests against it.
# Exits non-zero if anything fails.
#
#   scripts/test.sh            all three configurations, the fuzzer and the pip install
#   scripts/test.sh release    only the named stages: the presets release, debug, asan,
#                              tsan, fuzz (which builds what it needs of asan), and pip
#                              (`pip install .` into a fresh virtual environment, then the
#                              seed example and the pytest suite against the installed
#                              package: scripts/python-install-check.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
. scripts/cuda-toolkit.sh  # KILN_CUDA_FLAG

presets=("$@")
[ ${#presets[@]} -gt 0 ] || presets=(release asan tsan fuzz pip)

export CTEST_PARALLEL_LEVEL="${CTEST_PARALLEL_LEVEL:-2}"
# Impossible allocations are part of the tests: let the sanitizers return null for them.
export ASAN_OPTIONS="${ASAN_OPTIONS:-allocator_may_return_null=1:detect_leaks=1}"
export TSAN_OPTIONS="${TSAN_OPTIONS:-allocator_may_return_null=1:halt_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

for preset in "${presets[@]}"; do
  if [ "$preset" = pip ]; then
    scripts/python-install-check.sh
    continue
  fi
  if [ "$preset" = fuzz ]; then
    scripts/fuzz.sh "${KILN_FUZZ_SECONDS:-60}" ir_parser shapes onnx
    continue
  fi
  echo "=== kiln tests: ${preset} ==="
  start=$SECONDS
  extra=()
  # The Python package and its pytest suite (ctest label python) in the Release build, with
  # the Python of .venv-test (nanobind, NumPy, ml_dtypes, pytest: scripts/setup.sh).
  [ "$preset" = release ] && extra=(-DKILN_PYTHON=ON "-DPython_EXECUTABLE=$PWD/.venv-test/bin/python")
  cmake --preset "$preset" "$KILN_CUDA_FLAG" "${extra[@]}" >/dev/null
  cmake --build --preset "$preset"
  ctest --preset "$preset"
  echo "=== ${preset}: passed in $((SECONDS - start)) s (${KILN_CUDA_FLAG#-D}) ==="
done
