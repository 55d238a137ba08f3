"""The seed's example, word for word: it prints MLIR that mlir-opt accepts and computes
[0, 2, 4, 6]."""

import shutil
import subprocess

import numpy
import pytest

import kiln
from kiln import CPU, DType, Tensor, TensorLayout


def scale(x: Tensor) -> Tensor:
    return x * 2


def test_seed_example_prints_mlir_and_computes():
    staged = kiln.stage(scale)(TensorLayout(DType.float32, [4], CPU()))
    text = str(staged)
    assert text.startswith("module")
    assert '"kiln.mul"' in text
    compiled = kiln.CompiledCallable(staged)
    y = compiled(numpy.arange(4, dtype=numpy.float32))
    assert isinstance(y, numpy.ndarray)
    assert y.dtype == numpy.float32
    numpy.testing.assert_array_equal(y, [0, 2, 4, 6])


def test_seed_module_names_work_too():
    from kiln import compilation

    staged = compilation.stage(scale)(TensorLayout(DType.float32, [4], CPU()))
    y = compilation.CompiledCallable(staged)(numpy.ones(4, numpy.float32))
    numpy.testing.assert_array_equal(y, [2, 2, 2, 2])


@pytest.mark.skipif(shutil.which("mlir-opt-15") is None, reason="mlir-opt-15 not installed")
def test_printed_module_passes_mlir_opt():
    staged = kiln.stage(scale)(TensorLayout(DType.float32, [4], CPU()))
    result = subprocess.run(
        ["mlir-opt-15", "--allow-unregistered-dialect", "--mlir-print-debuginfo"],
        input=str(staged),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert "kiln.mul" in result.stdout
