#!/usr/bin/env bash
# Device graphs against Taskflow, oneTBB and OpenMP: build, cache hit and replay of every
# DAG shape of bench_graph_peers, at 1 and 2 threads, on a quiet machine and with a
# process spinning on the last core. Writes build/peers/graph_peers_{quiet,busy}.txt/json.
#
#   TASKFLOW_DIR=/path/to/taskflow scripts/bench-graphs.sh [--samples 7]
#
# Taskflow is header-only and not packaged by Debian 12: fetch its source (a release tag
# of github.com/taskflow/taskflow) outside this repository and name it in TASKFLOW_DIR;
# without it the Taskflow rows read "not available in this build".
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
. scripts/cuda-toolkit.sh  # KILN_CUDA_FLAG
cmake --preset release "$KILN_CUDA_FLAG" ${TASKFLOW_DIR:+-DTASKFLOW_DIR="$TASKFLOW_DIR"} >/dev/null
cmake --build --preset release --target bench_graph_peers >/dev/null
mkdir -p build/peers
bench=build/release/bench/bench_graph_peers
last=$(($(nproc) - 1))
echo "kiln bench-graphs: quiet machine" >&2
"$bench" "$@" --json build/peers/graph_peers_quiet.json | tee build/peers/graph_peers_quiet.txt
echo "kiln bench-graphs: a process spinning on core $last" >&2
"$bench" "$@" --busy-core "$last" --json build/peers/graph_peers_busy.json |
  tee build/peers/graph_peers_busy.txt
