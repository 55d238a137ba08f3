#!/usr/bin/env bash
# Checks the Python package as a user installs it: `pip install .` into a fresh virtual
# environment (the build in a fresh folder), then, from outside the repository, the seed
# example (its MLIR through mlir-opt-15, its result [0, 2, 4, 6]) and the pytest suite
# against the installed package. `scripts/test.sh pip` runs it.
#
#   scripts/python-install-check.sh [WORKDIR]     (default: a temporary folder, removed)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
work=${1:-$(mktemp -d)}
[ $# -ge 1 ] || trap 'rm -rf "$work"' EXIT
mkdir -p "$work"
echo "kiln python-install-check: pip install . into $work/venv" >&2
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
start=$SECONDS
# A fresh build folder: nothing of an earlier build is reused.
"$work/venv/bin/python" -m pip install -q --disable-pip-version-check \
  --config-settings=build-dir="$work/build" "$repo[test]"
echo "kiln python-install-check: installed in $((SECONDS - start)) s" >&2

cd "$work"
cat > seed.py <<'PY'
import numpy
import kiln
from kiln import DType, Tensor, TensorLayout, CPU

def scale(x: Tensor) -> Tensor:
    return x * 2

staged = kiln.stage(scale)(TensorLayout(DType.float32, [4], CPU()))
print(staged)
compiled = kiln.CompiledCallable(staged)
y = compiled(numpy.arange(4, dtype=numpy.float32))
assert y.tolist() == [0, 2, 4, 6], y
print("result", y.tolist(), "from", kiln.__file__)
PY
"$work/venv/bin/python" seed.py > seed.out
grep -q "^result \[0.0, 2.0, 4.0, 6.0\] from $work/venv/" seed.out
sed '/^result/d' seed.out | mlir-opt-15 --allow-unregistered-dialect > /dev/null
echo "kiln python-install-check: the seed example prints MLIR that mlir-opt-15 accepts and computes [0, 2, 4, 6]" >&2
ls "$work"/venv/lib/python3*/site-packages/kiln/_kiln.pyi "$work"/venv/lib/python3*/site-packages/kiln/py.typed > /dev/null
"$work/venv/bin/python" -m pytest -q -p no:cacheprovider "$repo/python/tests"
echo "kiln python-install-check: passed" >&2
