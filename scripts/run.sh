#!/usr/bin/env bash
# The main job: set up, build the kiln command (Release), and run `kiln demo`: a GPT-style
# transformer staged with kiln::nn and subgraphs, compiled, run, checked against the
# reference interpreter, and timed. Arguments go to `kiln demo` (see `kiln demo --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
. scripts/cuda-toolkit.sh  # KILN_CUDA_FLAG
cmake --preset release "$KILN_CUDA_FLAG" >/dev/null
echo "kiln: building the kiln command (build/release/bin/kiln)..." >&2
cmake --build --preset release --target kiln_cli >/dev/null
exec build/release/bin/kiln demo "$@"
