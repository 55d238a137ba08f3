"""x[...] as NumPy and PyTorch users write it, staged and compared with NumPy."""

import numpy
import pytest

import kiln
from kiln import DType, TensorLayout

A = numpy.arange(2 * 3 * 4, dtype=numpy.float32).reshape(2, 3, 4)
KEYS = [
    0, -1, (1, 2), (slice(None), 1), (slice(None), slice(1, 3)), (Ellipsis, 2), (Ellipsis, None),
    (None, 0), (0, Ellipsis, slice(None, None, 2)), (slice(-2, None), -2, slice(1, None)),
    (slice(None), slice(None, 10)), numpy.array([1, 0, 1]), (slice(None), numpy.array([[0, 2], [1, 1]])),
    (0, numpy.array([2, 0])), (numpy.array([1, 1]), 2),
]


@pytest.mark.parametrize("key", KEYS, ids=[repr(k).replace(" ", "") for k in KEYS])
def test_indexing_matches_numpy(key):
    staged = kiln.stage(lambda x: x[key])(TensorLayout(DType.float32, [2, 3, 4]))
    out = kiln.CompiledCallable(staged)(A)
    numpy.testing.assert_array_equal(out, A[key])


def test_indexing_with_a_traced_index_tensor():
    staged = kiln.stage(lambda x, i: x[:, i])(TensorLayout(DType.float32, [2, 3, 4]), TensorLayout(DType.int64, [2]))
    ids = numpy.array([2, 0])
    numpy.testing.assert_array_equal(kiln.CompiledCallable(staged)(A, ids), A[:, ids])


def test_symbolic_axes_index_at_run_time():
    layout = TensorLayout(DType.float32, [2, "seq", 4])
    staged = kiln.stage(lambda x: (x[:, 0], x[:, -1], x[:, :, 1:], x[None, :, :]))(layout)
    assert staged.out_layouts[3].shape == (1, 2, "seq", 4)
    compiled = kiln.CompiledCallable(staged)
    for seq in (3, 5):
        x = numpy.arange(2 * seq * 4, dtype=numpy.float32).reshape(2, seq, 4)
        first, last, rest, lifted = compiled(x)
        numpy.testing.assert_array_equal(first, x[:, 0])
        numpy.testing.assert_array_equal(last, x[:, -1])
        numpy.testing.assert_array_equal(rest, x[:, :, 1:])
        numpy.testing.assert_array_equal(lifted, x[None])
    with pytest.raises(kiln.DeviceError, match="test_indexing.py:"):
        compiled(numpy.zeros((2, 0, 4), numpy.float32))  # x[:, 0] of an empty axis
    with pytest.raises(kiln.UserError, match=r"axis 1 is symbolic \(seq\)"):
        kiln.stage(lambda x: x[:, 1:])(layout)


def test_bad_indices_are_refused():
    layout = TensorLayout(DType.float32, [2, 3, 4])
    with pytest.raises(IndexError, match="index 3 is out of range for axis 1 of size 3"):
        kiln.stage(lambda x: x[:, 3])(layout)
    with pytest.raises(kiln.UserError, match="4 indices for a tensor of rank 3"):
        kiln.stage(lambda x: x[0, 0, 0, 0])(layout)
    with pytest.raises(kiln.UserError, match="positive steps"):
        kiln.stage(lambda x: x[::-1])(layout)
    with pytest.raises(kiln.UserError, match="bool mask"):
        kiln.stage(lambda x: x[x > 1])(layout)
    with pytest.raises(kiln.UserError, match="one tensor index"):
        kiln.stage(lambda x: x[numpy.array([0]), numpy.array([1])])(layout)
    with pytest.raises(kiln.UserError, match="move the indexed dims to the front"):
        kiln.stage(lambda x: x[0, :, numpy.array([3, 0])])(layout)
    with pytest.raises(kiln.UserError, match="one \\.\\.\\."):
        kiln.stage(lambda x: x[..., ...])(layout)
