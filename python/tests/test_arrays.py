"""Arrays in and out: NumPy and DLPack without copies (checked by pointer), every dtype,
bf16 through ml_dtypes, and clear errors for what kiln cannot take."""

import ml_dtypes
import numpy
import pytest

import kiln
from kiln import DType, TensorLayout

DTYPES = [
    (numpy.float32, DType.float32),
    (numpy.float64, DType.float64),
    (numpy.float16, DType.float16),
    (ml_dtypes.bfloat16, DType.bfloat16),
    (numpy.int8, DType.int8),
    (numpy.uint8, DType.uint8),
    (numpy.int32, DType.int32),
    (numpy.int64, DType.int64),
    (numpy.bool_, DType.bool),
]


class DLPackOnly:
    """An array that offers only DLPack (as PyTorch and JAX tensors do)."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_numpy_arrays_are_borrowed_without_a_copy():
    a = numpy.arange(12, dtype=numpy.float32).reshape(3, 4)
    t = kiln.asarray(a)
    assert t.data_ptr == a.ctypes.data
    assert t.shape == (3, 4) and t.dtype == DType.float32 and t.kind == "concrete"
    back = t.numpy()
    assert back.ctypes.data == a.ctypes.data  # and out again, over the same memory
    numpy.testing.assert_array_equal(back, a)
    del a, back  # the tensor keeps the memory alive
    numpy.testing.assert_array_equal(t.numpy(), numpy.arange(12).reshape(3, 4))


def test_dlpack_objects_are_borrowed_without_a_copy():
    a = numpy.arange(6, dtype=numpy.int64)
    t = kiln.asarray(DLPackOnly(a))
    assert t.data_ptr == a.ctypes.data and t.dtype == DType.int64
    # and kiln tensors export DLPack: NumPy (or PyTorch) reads them in place
    b = numpy.from_dlpack(t)
    assert b.ctypes.data == a.ctypes.data


def test_strided_and_misaligned_arrays_are_copied():
    a = numpy.arange(16, dtype=numpy.float32).reshape(4, 4)
    view = a[:, ::2]
    t = kiln.asarray(view)
    assert t.data_ptr != a.ctypes.data
    numpy.testing.assert_array_equal(t.numpy(), view)
    raw = numpy.zeros(17, dtype=numpy.uint8)
    misaligned = raw[1:].view(numpy.float32)
    t = kiln.asarray(misaligned)
    assert t.data_ptr % 4 == 0
    numpy.testing.assert_array_equal(t.numpy(), misaligned)


def test_read_only_arrays_are_taken():
    a = numpy.ones(3, numpy.float32)
    a.flags.writeable = False
    assert kiln.asarray(a).data_ptr == a.ctypes.data


@pytest.mark.parametrize("np_dtype,dtype", DTYPES)
def test_every_dtype_round_trips_through_a_compiled_call(np_dtype, dtype):
    values = numpy.array([0, 1, 3, 5], dtype=numpy.float64)
    a = (values > 2) if dtype == DType.bool else values.astype(np_dtype)
    assert kiln.asarray(a).dtype == dtype
    staged = kiln.stage(lambda x: kiln.where(x == x, x, x))(TensorLayout(dtype, [4]))
    out = kiln.CompiledCallable(staged)(a)
    assert out.dtype == numpy.dtype(np_dtype)
    numpy.testing.assert_array_equal(out.astype(numpy.float64), a.astype(numpy.float64))


def test_bf16_arithmetic_matches_ml_dtypes():
    a = numpy.array([1.5, -2.25, 3.0078125, 1e-3], dtype=ml_dtypes.bfloat16)
    b = numpy.array([0.5, 4.0, -1.0, 7.0], dtype=ml_dtypes.bfloat16)
    staged = kiln.stage(lambda x, y: x * y + x)(TensorLayout(DType.bfloat16, [4]), TensorLayout(DType.bfloat16, [4]))
    out = kiln.CompiledCallable(staged)(a, b)
    assert out.dtype == ml_dtypes.bfloat16
    # each op rounds to bf16, as ml_dtypes' own arithmetic does
    expected = (a.astype(numpy.float32) * b.astype(numpy.float32)).astype(ml_dtypes.bfloat16)
    expected = (expected.astype(numpy.float32) + a.astype(numpy.float32)).astype(ml_dtypes.bfloat16)
    numpy.testing.assert_array_equal(out.view(numpy.uint16), expected.view(numpy.uint16))


def test_compiled_outputs_are_numpy_arrays_over_kiln_memory():
    staged = kiln.stage(lambda x: x + 1)(TensorLayout(DType.float32, [1000]))
    compiled = kiln.CompiledCallable(staged)
    out = compiled(numpy.zeros(1000, numpy.float32))
    assert not out.flags.owndata and out.base is not None  # no copy: kiln's buffer, kept alive
    assert out.flags.writeable
    assert kiln.asarray(out).data_ptr == out.ctypes.data
    second = compiled(numpy.ones(1000, numpy.float32))
    assert second.ctypes.data != out.ctypes.data  # each call's result is its own
    numpy.testing.assert_array_equal(out, 1)
    numpy.testing.assert_array_equal(second, 2)


def test_unsupported_arrays_are_refused_clearly():
    with pytest.raises(kiln.UserError, match="no dtype for int16"):
        kiln.asarray(numpy.ones(3, numpy.int16))
    with pytest.raises(kiln.UserError, match="no dtype for complex64"):
        kiln.asarray(numpy.ones(3, numpy.complex64))
    with pytest.raises(kiln.UserError, match="a str is not an array"):
        kiln.asarray("text")
    staged = kiln.stage(lambda x: x * 2)(TensorLayout(DType.float32, [2]))
    compiled = kiln.CompiledCallable(staged)
    with pytest.raises(kiln.UserError, match=r"input leaf '0' is f64\[2\].*takes f32\[2\]"):
        compiled(numpy.ones(2))


def test_constant_converts_with_numpys_rules():
    t = kiln.constant([1, 2, 3])
    assert t.dtype == DType.int64
    t = kiln.constant([[1, 2]], DType.float32)
    assert t.dtype == DType.float32 and t.shape == (1, 2)
    t = kiln.constant([1.5], DType.bfloat16)
    assert t.numpy().dtype == ml_dtypes.bfloat16
    assert kiln.numpy_dtype(DType.int8) == numpy.int8
