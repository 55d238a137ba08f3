"""Stage a Python function into MLIR, compile it, call it with a NumPy array (the seed)."""

import numpy

import kiln
from kiln import CPU, DType, Tensor, TensorLayout


def scale(x: Tensor) -> Tensor:
    return x * 2


staged = kiln.stage(scale)(TensorLayout(DType.float32, [4], CPU()))
print(staged)  # the MLIR of the whole module; each op's loc is this file and line
compiled = kiln.CompiledCallable(staged)
y = compiled(numpy.arange(4, dtype=numpy.float32))
print(y)  # [0. 2. 4. 6.]
assert y.tolist() == [0, 2, 4, 6]
