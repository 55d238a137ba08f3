#!/usr/bin/env bash
# The main job: set up, build (Release), and run kiln's tour: a kernel launch, a device
# graph recorded once and replayed, a function staged into MLIR, and a 2-layer
# transformer compiled and checked against the reference interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --preset release >/dev/null
tour=(01_launch_kernel 02_device_graph_replay 05_stage 06_compile_transformer)
cmake --build --preset release --target "${tour[@]/#/example_}" >/dev/null
for example in "${tour[@]}"; do
  echo "=== examples/${example}.cpp ==="
  "build/release/examples/example_${example}"
done
