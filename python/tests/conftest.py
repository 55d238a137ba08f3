"""Shared helpers for kiln's Python tests (run by ctest, label python: scripts/test.sh)."""

import numpy
import pytest

import kiln
from kiln import DType, TensorLayout


@pytest.fixture
def f32():
    """TensorLayout of float32 with the given dims."""
    return lambda *dims: TensorLayout(DType.float32, list(dims))


def compile_and_call(fn, *args, weights=None, **options):
    """Stages fn over the arrays' layouts, compiles it and calls it with the arrays."""
    layouts = [
        TensorLayout(kiln.asarray(a).dtype, list(numpy.shape(a))) if _is_array(a) else a
        for a in args
    ]
    staged = kiln.stage(fn)(*layouts)
    return kiln.CompiledCallable(staged, weights, **options)(*args)


def _is_array(a):
    return isinstance(a, numpy.ndarray)
