#!/usr/bin/env bash
# Fuzzes kiln with libFuzzer for a bounded time per target, in the 'asan' build (clang,
# ASan + UBSan), which the test suite's sanitizer stage builds too. Exits non-zero when a
# fuzzer finds a crash, a hang or a broken property; the input that did it is left in
# build/asan/ (crash-*, timeout-*): copy it into fuzz/regressions/<target>/ once
# the bug is fixed, and the test suite replays it from then on.
#
#   scripts/fuzz.sh [seconds] [target ...]    default: 60 s, ir_parser
#
# Targets (fuzz/<target>_fuzz.cpp):
#   ir_parser  the IR text parser (seeds: the printed sample modules)
#   compile    modules that parse and verify, compiled and called against the reference
#              interpreter (seeds: the sample modules and fuzz/regressions/compile)
#   loaders    .npy and safetensors readers (seeds: fuzz/seeds/loaders)
#   shapes     shape rules, verifier and planner on graphs built through the IR API with
#              extreme dims and attributes (seeds: fuzz/seeds/shapes)
#   onnx       the ONNX importer on the bytes as a model (seeds: fuzz/seeds/onnx and
#              fuzz/regressions/onnx)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(ir_parser)
for target in "${targets[@]}"; do
  case "$target" in
    ir_parser | compile | loaders | shapes | onnx) ;;
    *)
      echo "fuzz.sh: no target '$target'; the targets are ir_parser, compile, loaders, shapes, onnx" >&2
      exit 2
      ;;
  esac
done

# Seeds: printed sample modules, written by the release build's tool.
. scripts/cuda-toolkit.sh  # KILN_CUDA_FLAG
cmake --preset release "$KILN_CUDA_FLAG" >/dev/null
cmake --build --preset release --target ir_write_samples
cmake --preset asan "$KILN_CUDA_FLAG" >/dev/null
cmake --build --preset asan --target "${targets[@]/#/fuzz_}"  # only what the fuzzers link
corpus=build/asan/corpus
rm -rf "$corpus/seeds"
build/release/tests/ir_write_samples "$corpus/seeds"
export ASAN_OPTIONS="${ASAN_OPTIONS:-allocator_may_return_null=1}"

for target in "${targets[@]}"; do
  case "$target" in
    ir_parser) found="$corpus/found" seeds=("$corpus/seeds") ;;  # found: kept as it was
    compile) found="$corpus/compile" seeds=("$corpus/seeds" fuzz/regressions/compile) ;;
    loaders) found="$corpus/loaders" seeds=(fuzz/seeds/loaders) ;;
    shapes) found="$corpus/shapes" seeds=(fuzz/seeds/shapes) ;;
    onnx) found="$corpus/onnx" seeds=(fuzz/seeds/onnx fuzz/regressions/onnx) ;;
  esac
  dict=()  # MLIR's tokens help the text targets
  [ "$target" = loaders ] || [ "$target" = shapes ] || [ "$target" = onnx ] ||
    dict=(-dict=../../fuzz/mlir.dict)
  mkdir -p "$found"
  echo "=== fuzzing ${target} for ${seconds} s ==="
  (cd build/asan && "./fuzz/fuzz_${target}" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=4096 "${dict[@]}" -print_final_stats=1 \
    "../../$found" "${seeds[@]/#/../../}" 2>&1 | tail -15)
done
echo "=== fuzz: no crash in ${seconds} s per target (${targets[*]}) ==="
