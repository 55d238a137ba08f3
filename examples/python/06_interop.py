"""Arrays in and out without copies: NumPy arrays are borrowed, results are NumPy arrays
over kiln's memory, DLPack both ways, bfloat16 through ml_dtypes."""

import ml_dtypes
import numpy

import kiln
from kiln import DType, TensorLayout

a = numpy.arange(8, dtype=numpy.float32)
t = kiln.asarray(a)  # borrowed: the same memory
assert t.data_ptr == a.ctypes.data
assert numpy.from_dlpack(t).ctypes.data == a.ctypes.data  # and out again through DLPack
print("borrowed:", t)

staged = kiln.stage(lambda x: x * 2 + 1)(TensorLayout(DType.bfloat16, [8]))
compiled = kiln.CompiledCallable(staged)
y = compiled(a.astype(ml_dtypes.bfloat16))
assert y.dtype == ml_dtypes.bfloat16 and not y.flags.owndata  # kiln's buffer, no copy
print("bf16 out:", y)

try:
    import torch  # optional: PyTorch tensors go in through DLPack

    out = kiln.CompiledCallable(kiln.stage(lambda x: x + 1)(TensorLayout(DType.float32, [3])))(torch.zeros(3))
    print("from torch:", torch.from_dlpack(out))
except ImportError:
    print("PyTorch not installed: skipped its part")
