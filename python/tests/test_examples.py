"""Every file in examples/python/ runs to the end (each asserts what it shows)."""

import os
import pathlib
import subprocess
import sys

import pytest

EXAMPLES = sorted((pathlib.Path(__file__).resolve().parents[2] / "examples" / "python").glob("*.py"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs(path):
    assert EXAMPLES, "no examples found"
    result = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, env=os.environ)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "nanobind: leaked" not in result.stderr, result.stderr  # every object was freed
