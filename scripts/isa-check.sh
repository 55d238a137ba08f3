#!/usr/bin/env bash
# kiln's test programs at every instruction-set level a machine offers (issue 25): its own
# level, then forced down with KILN_CPU_ISA to avx512 (an Ice Lake: no bf16 units, bf16
# matmuls emulated by f32 GEMMs, oneDNN capped alike), avx2 and base; the ASan+UBSan and
# TSan builds' programs at the machine's level. Then emulated bf16 against f32 on the
# 4-layer d_model-512 transformer at the avx512 level and at the machine's own, one
# thread, interleaved (bench/peers/kiln_ab.py), and the NumPy differential test where a
# python3 with NumPy is found. For a machine with a CPU this one lacks, such as the
# `device` tool's GPU machine (a Sapphire Rapids class Xeon with AMX) that has none of
# kiln's packages and no network:
#
#   scripts/isa-check.sh --pack [PRESET...]    here: builds the test programs of the
#                                              presets (default: release asan tsan, as
#                                              scripts/test.sh) and packs them, with the
#                                              libraries they link and ONNX's node tests,
#                                              into .gpu/kiln-isa.tar.xz
#   scripts/isa-check.sh --prebuilt ARCHIVE    there, in a copy of this repository
#
# Each (build, program, level) prints one line, PASS or FAIL with its log's tail; the
# script exits non-zero if anything failed. ISA_CHECK_PROGRAMS="a b" runs only those
# programs, ISA_CHECK_STEPS="tests bench numpy" (the default) only those steps.
set -euo pipefail
cd "$(dirname "$0")/.."
all_programs=(kiln_core_tests kiln_runtime_tests kiln_ir_tests kiln_stage_tests kiln_io_tests
  kiln_compiler_tests kiln_allocation_tests kiln_cli_tests kiln_onnx_tests kiln_onnx_node_tests)
read -r -a programs <<<"${ISA_CHECK_PROGRAMS:-${all_programs[*]}}"

if [ "${1:-}" = "--pack" ]; then
  shift
  presets=("$@")
  [ ${#presets[@]} -gt 0 ] || presets=(release asan tsan)
  scripts/setup.sh
  . scripts/cuda-toolkit.sh # KILN_CUDA_FLAG, as scripts/test.sh configures
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' EXIT
  mkdir -p "$stage/lib" "$stage/node"
  for preset in "${presets[@]}"; do
    dir=build/$preset
    cmake --preset "$preset" "$KILN_CUDA_FLAG" >/dev/null
    # The programs this configuration has (the sanitizers' builds leave some out).
    mapfile -t targets < <(ninja -C "$dir" -t targets all | cut -d: -f1 |
      grep -x -E "$(IFS='|'; echo "${all_programs[*]}")|kiln_cli")
    cmake --build "$dir" --target "${targets[@]}"
    mkdir -p "$stage/$preset/bin"
    for t in "${targets[@]}"; do
      b="$dir/tests/$t"
      [ "$t" = kiln_cli ] && b="$dir/bin/kiln"
      strip -o "$stage/$preset/bin/$(basename "$b")" "$b"
      ldd "$b" | awk '$3 ~ /^\// {print $3}' |
        grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' |
        while read -r lib; do cp -L -n "$lib" "$stage/lib/"; done
    done
    # kiln_cli_tests runs the kiln command at the path it was built with.
    [ ! -x "$dir/bin/kiln" ] || realpath "$dir/bin/kiln" >"$stage/$preset/kiln_cli_path"
  done
  cp -r .venv-test/lib/python3*/site-packages/onnx/backend/test/data/node/. "$stage/node/"
  git rev-parse HEAD >"$stage/commit"
  mkdir -p .gpu
  tar -C "$stage" -cJf .gpu/kiln-isa.tar.xz .
  echo "isa-check: .gpu/kiln-isa.tar.xz ($(du -h .gpu/kiln-isa.tar.xz | cut -f1)) with" \
    "${presets[*]}, built from" \
    "$(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' with uncommitted changes')"
  exit 0
fi

[ "${1:-}" = "--prebuilt" ] || { sed -n '2,21p' "$0"; exit 1; }
archive="${2:?isa-check: --prebuilt needs the archive that --pack wrote}"
start=$SECONDS
root=$(mktemp -d)
tar -C "$root" -xJf "$archive"
export LD_LIBRARY_PATH="$root/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
kiln="$root/release/bin/kiln"
echo "isa-check: prebuilt programs of commit $(cat "$root/commit")"
lscpu | grep -E '^(Model name|CPU\(s\)|CPU family|Model):' || true
echo "CPU flags of note: $(grep -o -w -E 'avx2|avx512f|avx512_bf16|amx_tile' /proc/cpuinfo |
  sort -u | paste -sd ' ')"
mapfile -t builds < <(cd "$root" && ls -d release asan tsan 2>/dev/null)
for build in "${builds[@]}"; do  # the path each kiln_cli_tests was built with
  [ -f "$root/$build/kiln_cli_path" ] || continue
  cli_path=$(cat "$root/$build/kiln_cli_path")
  if [ ! -x "$cli_path" ]; then
    mkdir -p "$(dirname "$cli_path")" 2>/dev/null && cp "$root/$build/bin/kiln" "$cli_path" ||
      echo "isa-check: cannot place kiln at $cli_path: $build's kiln_cli_tests will fail"
  fi
done
# As scripts/test.sh: impossible allocations are part of the tests.
export ASAN_OPTIONS="${ASAN_OPTIONS:-allocator_may_return_null=1:detect_leaks=1}"
export TSAN_OPTIONS="${TSAN_OPTIONS:-allocator_may_return_null=1:halt_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

logs="$root/logs"
mkdir -p "$logs"
run_one() {  # build program level: one line, PASS or FAIL
  local build=$1 program=$2 level=$3 log="$logs/$1.$2.$3.log" args=(--gtest_brief=1)
  [ -x "$root/$build/bin/$program" ] || return 0  # not in this build (as under ctest)
  [ "$program" = kiln_onnx_node_tests ] && args=("$root/node" tests/onnx/known_failures.txt)
  if (if [ "$level" = native ]; then unset KILN_CPU_ISA; else export KILN_CPU_ISA=$level; fi
    timeout 900 "$root/$build/bin/$program" "${args[@]}") >"$log" 2>&1; then
    echo "PASS  $build $program at $level ($(grep -o -E '^\[  SKIPPED \] [0-9]+' "$log" |
      grep -o -E '[0-9]+$' || echo 0) skipped)"
  else
    echo "FAIL  $build $program at $level (exit $?):"
    tail -25 "$log" | sed 's/^/      /'
  fi
}
export -f run_one
export root logs
status=0
steps=" ${ISA_CHECK_STEPS:-tests numpy bench} "
if [[ $steps == *" tests "* ]]; then
  echo "=== the test programs: release at each level, the sanitizers' at the machine's ==="
  for build in "${builds[@]}"; do
    levels=(native)
    [ "$build" = release ] && levels=(native avx512 avx2 base)
    for level in "${levels[@]}"; do
      for program in "${programs[@]}"; do echo "$build $program $level"; done
    done
  done | xargs -P 8 -L 1 bash -c 'run_one "$0" "$1" "$2"' | tee "$root/summary"
  if grep -q '^FAIL' "$root/summary"; then status=1; fi
  echo "isa-check: tests done in $((SECONDS - start)) s"
fi

if [[ $steps == *" bench "* ]]; then
  echo "=== emulated bf16 against f32: transformer 4 x d512, seq 128, one thread ==="
  model="$root/transformer.mlir"
  "$kiln" demo --layers 4 --dim 512 --heads 8 --seq 128 -n 1 -t 1 --emit-mlir "$model" >/dev/null
  for level in avx512 native; do
    echo "--- at $level (A: f32, B: --matmul-precision bf16) ---"
    (if [ "$level" != native ]; then export KILN_CPU_ISA=$level; fi
      "$kiln" bench "$model" -w "${model%.mlir}.safetensors" -i "${model%.mlir}.input.npy" -t 1 \
        -n 3 --reference-iterations 0 --matmul-precision bf16 2>&1 | grep -i -E 'cpu|bf16|matmul' || true
      taskset -c "$(($(nproc) - 1))" python3 bench/peers/kiln_ab.py --a "$kiln" --b "$kiln" \
        --b-options "--matmul-precision bf16" --rounds 12 --calls 15 -- "$model" \
        -w "${model%.mlir}.safetensors" -i "${model%.mlir}.input.npy" -t 1) ||
      { echo "isa-check: FAILED the bf16 benchmark at $level"; status=1; }
  done
fi
python=$(for p in python3 /opt/*/.venv/bin/python3; do
  command -v "$p" >/dev/null && "$p" -c 'import numpy' 2>/dev/null && { echo "$p"; break; }
done || true)
if [[ $steps != *" numpy "* ]]; then
  :
elif [ -n "$python" ]; then
  for level in native base; do
    echo "=== NumPy differential test at $level ($python) ==="
    isa=(); [ "$level" = base ] && isa=(--isa base)
    "$python" tests/numpy_diff/numpy_diff.py --kiln "$kiln" "${isa[@]}" 2>&1 | tail -6 ||
      { echo "isa-check: FAILED numpy_diff at $level"; status=1; }
  done
else
  echo "isa-check: no python3 with NumPy here: the NumPy differential test did not run"
fi

echo "isa-check: done in $((SECONDS - start)) s"
exit $status
