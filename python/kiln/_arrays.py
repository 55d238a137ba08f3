"""NumPy conversions that are NumPy's own (the array side of kiln.constant). NumPy is
imported when first needed, so that importing kiln needs only the extension (the wheel's
build imports it to generate the type stubs)."""

from ._kiln import DType, asarray


def numpy_dtype(dtype: DType):
    """The NumPy dtype of a kiln DType (bfloat16: ml_dtypes.bfloat16)."""
    import numpy
    if dtype == DType.bfloat16:
        import ml_dtypes

        return numpy.dtype(ml_dtypes.bfloat16)
    return numpy.dtype(
        {
            DType.float32: numpy.float32,
            DType.float16: numpy.float16,
            DType.float64: numpy.float64,
            DType.int8: numpy.int8,
            DType.uint8: numpy.uint8,
            DType.int32: numpy.int32,
            DType.int64: numpy.int64,
            DType.bool: numpy.bool_,
        }[dtype]
    )


def constant(values, dtype: "DType | None" = None):
    """Host values (an array, a nested list, a number) as a concrete kiln.Tensor, converted
    to ``dtype`` by NumPy's rules if given (a list of Python floats is float64 otherwise, as
    in NumPy). Used inside a staged function, it is a constant of the graph."""
    import numpy
    array = numpy.asarray(values, dtype=None if dtype is None else numpy_dtype(dtype))
    return asarray(numpy.ascontiguousarray(array))
