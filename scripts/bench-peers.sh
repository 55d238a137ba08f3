#!/usr/bin/env bash
# kiln against PyTorch (eager, torch.compile), JAX (jax.jit), ONNX Runtime and MAX on the
# same GPT-style transformer, weights and inputs (4 layers, d_model 512, 8 heads, seq 128),
# and on a plain MLP, at batch 1 and 16, on every core and on one. Installs the peers from PyPI into
# build/peers-venv (network needed; torch alone is ≈ 3 GB) and MAX into a venv of its own,
# build/max-venv; then kernels against PyTorch's and compile time against JAX,
# torch.compile and MAX; then the ONNX model zoo against ONNX Runtime, OpenVINO, PyTorch
# eager and torch.compile.
# Writes build/peers/*.json and build/peers/zoo_t*.md. See bench/peers/README.md.
# The bf16 comparisons run only on a CPU with bf16 units (AVX512-BF16 or AMX): elsewhere
# PyTorch's bf16 matmuls take oneDNN's reference kernels (4.4 s a call for the batch-1
# transformer on an AVX2-only AMD EPYC, 80x its f32 time) and they alone would take hours.
# KILN_PEERS_BF16=1 runs them anyway, KILN_PEERS_BF16=0 never.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if ! python3 -m venv --help >/dev/null 2>&1; then
  apt-get install -y -qq python3-venv >/dev/null
fi
. scripts/cuda-toolkit.sh  # KILN_CUDA_FLAG
cmake --preset release "$KILN_CUDA_FLAG" >/dev/null
cmake --build --preset release --target kiln_cli bench_kernels bench_stage bench_ceiling >/dev/null
venv=build/peers-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
# torch from PyPI is the CUDA build (≈ 3 GB with its NVIDIA libraries); it runs on the CPU.
"$venv/bin/pip" install -q --disable-pip-version-check numpy safetensors jax onnx onnxruntime torch
max_venv=build/max-venv
[ -x "$max_venv/bin/python" ] || python3 -m venv "$max_venv"
"$max_venv/bin/pip" install -q --disable-pip-version-check max numpy safetensors
mkdir -p build/peers
bf16=${KILN_PEERS_BF16:-}
if [ -z "$bf16" ]; then
  if grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo; then
    bf16=1
  else
    bf16=0
    echo "kiln bench-peers: this CPU has no bf16 units (AVX512-BF16, AMX):" \
      "the bf16 comparisons are skipped (KILN_PEERS_BF16=1 runs them)" >&2
  fi
fi
case "$bf16" in
  0 | 1) ;;
  *) echo "kiln bench-peers: KILN_PEERS_BF16 is '$bf16'; use 1 (run the bf16 comparisons)," \
       "0 (skip them) or leave it unset (run them where the CPU has bf16 units)" >&2
     exit 2 ;;
esac
precisions=(f32)
if [ "$bf16" = 1 ]; then precisions+=(bf16); fi
kiln=build/release/bin/kiln
echo "kiln bench-peers: writing the model and its weights (kiln demo --emit-mlir)" >&2
"$kiln" demo --layers 4 --dim 512 --heads 8 --seq 128 --batch 1 --vocab 1000 -n 1 \
  --emit-mlir build/peers/transformer.mlir >/dev/null
cores=$(nproc)
runs=()  # the comparisons' JSON files, for the summary table at the end
for threads in "$cores" 1; do
  for batch in 1 16; do
    taskset -c "0-$((threads - 1))" "$venv/bin/python" bench/peers/transformer_peers.py \
      --kiln "$kiln" --prefix build/peers/transformer --layers 4 --dim 512 --heads 8 \
      --batch "$batch" --seq 128 --threads "$threads" --iterations 30 --rounds 10 \
      --max-python "$max_venv/bin/python" \
      --json "build/peers/transformer_t${threads}_b${batch}.json"
    runs+=("build/peers/transformer_t${threads}_b${batch}.json")
    echo
  done
done
# A plain MLP (512 -> 4 x 512 -> 10, and the same 256 wide), where a batch-1 call is
# short enough for the systems' per-call costs to show; 1000 calls each in 10 rounds.
for threads in "$cores" 1; do
  for width in 512 256; do
    for batch in 1 16; do
      taskset -c "0-$((threads - 1))" "$venv/bin/python" bench/peers/mlp_peers.py \
        --kiln "$kiln" --prefix "build/peers/mlp$width" --layers 4 --dim "$width" \
        --hidden "$width" --outputs 10 --batch "$batch" --threads "$threads" \
        --iterations 1000 --rounds 10 --max-python "$max_venv/bin/python" \
        --json "build/peers/mlp${width}_t${threads}_b${batch}.json"
      runs+=("build/peers/mlp${width}_t${threads}_b${batch}.json")
      echo
    done
  done
done
# Linear layers in bfloat16 in every system (kiln --matmul-precision bf16, torch.autocast,
# bf16 operands in JAX and MAX; ONNX Runtime has no bf16 MatMul on the CPU).
for threads in "$cores" 1; do
  [ "$bf16" = 1 ] || break
  for batch in 1 16; do
    taskset -c "0-$((threads - 1))" "$venv/bin/python" bench/peers/transformer_peers.py \
      --kiln "$kiln" --prefix build/peers/transformer --layers 4 --dim 512 --heads 8 \
      --batch "$batch" --seq 128 --threads "$threads" --iterations 30 --rounds 10 \
      --max-python "$max_venv/bin/python" --bf16 \
      --json "build/peers/transformer_bf16_t${threads}_b${batch}.json"
    runs+=("build/peers/transformer_bf16_t${threads}_b${batch}.json")
    echo
    taskset -c "0-$((threads - 1))" "$venv/bin/python" bench/peers/mlp_peers.py \
      --kiln "$kiln" --prefix build/peers/mlp512 --layers 4 --dim 512 --hidden 512 \
      --outputs 10 --batch "$batch" --threads "$threads" --iterations 1000 --rounds 10 \
      --max-python "$max_venv/bin/python" --bf16 --json "build/peers/mlp512_bf16_t${threads}_b${batch}.json"
    runs+=("build/peers/mlp512_bf16_t${threads}_b${batch}.json")
    echo
  done
done
# Kernels (GELU, SiLU, softmax, matmul) against PyTorch's, at each thread count.
for threads in "$cores" 1; do
  taskset -c "0-$((threads - 1))" "$venv/bin/python" bench/peers/kernels_peers.py \
    --bench-kernels build/release/bench/bench_kernels --threads "$threads" \
    --json "build/peers/kernels_t${threads}.json"
  echo
done
# Compile time against JAX, torch.compile and MAX (KILN_COMPILE_BLOCKS=1,8,32,128 adds the
# 128-block stack: about 15 more minutes on two cores).
taskset -c 0 "$venv/bin/python" bench/peers/compile_peers.py --threads 1 \
  --blocks "${KILN_COMPILE_BLOCKS:-1,8,32}" --max-python "$max_venv/bin/python" \
  --json build/peers/compile_t1.json
echo
# The ONNX model zoo (ResNet-18, MobileNetV3-Small, GPT-2, all-MiniLM-L6-v2, Llama; issue
# 28) imported from .onnx files: kiln against ONNX Runtime, OpenVINO, PyTorch eager and
# torch.compile, same threads, at batch 1 and at a serving batch (16 x 128 tokens, 8
# images), in f32 and with bf16 matmuls. Uses the zoo's own pinned virtual environment
# (.venv-zoo, scripts/onnx-zoo.sh).
for threads in "$cores" 1; do
  for precision in "${precisions[@]}"; do
    flag=()
    [ "$precision" = bf16 ] && flag=(--bf16)
    taskset -c "0-$((threads - 1))" scripts/onnx-zoo.sh --bench --threads "$threads" \
      --rounds 3 --iterations 5 "${flag[@]}" | tee "build/peers/zoo_t${threads}_${precision}.md"
    echo
  done
done
echo "kiln against the fastest peer, and against the machine's ceiling (bench/peers/roofline.py):"
python3 bench/peers/summary.py "${runs[@]}"
