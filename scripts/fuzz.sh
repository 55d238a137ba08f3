#!/usr/bin/env bash
# Fuzzes the IR parser with libFuzzer (clang, ASan + UBSan) for a bounded time, starting
# from printed sample modules. Exits non-zero when the fuzzer finds a crash, a hang or a
# broken round trip; the input that did it is left in build/fuzz/ (crash-*, timeout-*).
#
#   scripts/fuzz.sh [seconds]    default 60
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
seconds="${1:-60}"

# Seeds: printed sample modules, written by the release build's tool.
cmake --preset release >/dev/null
cmake --build --preset release --target ir_write_samples
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz --target fuzz_ir_parser  # only what the fuzzer links
corpus=build/fuzz/corpus
rm -rf "$corpus/seeds"
mkdir -p "$corpus/found"
build/release/tests/ir_write_samples "$corpus/seeds"
echo "=== fuzzing the IR parser for ${seconds} s ==="
cd build/fuzz
./fuzz/fuzz_ir_parser -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -dict=../../fuzz/mlir.dict -print_final_stats=1 corpus/found corpus/seeds 2>&1 | tail -15
echo "=== fuzz: no crash in ${seconds} s ==="
