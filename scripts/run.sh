#!/usr/bin/env bash
# The main job: set up, build (Release), and run kiln's demo.
# For now the demo launches a kernel on the CPU device and checks its result.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target example_01_launch_kernel
exec build/release/examples/example_01_launch_kernel "$@"
