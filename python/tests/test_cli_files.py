"""Files made in Python for the kiln command: a staged module's MLIR and an
ml_dtypes.bfloat16 .npy input (skipped where the command is not built: KILN_CLI)."""

import os
import subprocess

import ml_dtypes
import numpy
import pytest

import kiln
from kiln import DType, TensorLayout

CLI = os.environ.get("KILN_CLI")


@pytest.mark.skipif(not CLI, reason="KILN_CLI (the kiln command) not given")
def test_kiln_run_reads_a_python_module_and_a_bf16_npy(tmp_path):
    staged = kiln.stage(lambda x: x * 2 + 1)(TensorLayout(DType.bfloat16, ["n"]))
    (tmp_path / "m.mlir").write_text(str(staged))
    x = numpy.array([0.5, -3, 7.25, 100], dtype=ml_dtypes.bfloat16)
    numpy.save(tmp_path / "x.npy", x)  # descr '<V2'
    result = subprocess.run([CLI, "run", "m.mlir", "-i", "x.npy", "-o", "out"], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    out = numpy.load(tmp_path / "out" / "output0.npy")  # bf16 is written as f32, exactly
    expected = kiln.CompiledCallable(staged)(x)
    numpy.testing.assert_array_equal(out, expected.astype(numpy.float32))
    numpy.testing.assert_array_equal(out, (x.astype(numpy.float32) * 2 + 1).astype(ml_dtypes.bfloat16).astype(numpy.float32))
