"""Staged ops are located at the user's Python line: in the printed MLIR and in errors."""

import re

import numpy
import pytest

import kiln
from kiln import DType, TensorLayout

HERE = __file__


def line_of(marker):
    with open(HERE) as f:
        for number, line in enumerate(f, 1):
            if marker in line and "line_of(" not in line:
                return number
    raise AssertionError(marker)


def locs(staged, op):
    """(file, line) of every `op` in the printed module."""
    found = []
    for text in str(staged).splitlines():
        if f'"{op}"' in text:
            m = re.search(r'loc\("([^"]+)":(\d+):(\d+)\)', text)
            found.append((m.group(1), int(m.group(2))))
    return found


def model(x, w):
    y = kiln.matmul(x, w)  # MARK-matmul
    z = y[:, 1:3]  # MARK-index
    return kiln.relu(z) * 2  # MARK-relu


def test_ops_are_located_at_the_python_line_that_made_them():
    staged = kiln.stage(model)(TensorLayout(DType.float32, [2, 4]), TensorLayout(DType.float32, [4, 4]))
    assert locs(staged, "kiln.matmul") == [(HERE, line_of("MARK-matmul"))]
    # indexing is implemented in kiln's own Python file; its ops are the user's line
    assert locs(staged, "kiln.slice") == [(HERE, line_of("MARK-index"))]
    assert locs(staged, "kiln.relu") == [(HERE, line_of("MARK-relu"))]
    assert locs(staged, "kiln.mul") == [(HERE, line_of("MARK-relu"))]


def test_columns_point_into_the_line():
    staged = kiln.stage(model)(TensorLayout(DType.float32, [2, 4]), TensorLayout(DType.float32, [4, 4]))
    text = [t for t in str(staged).splitlines() if '"kiln.matmul"' in t][0]
    column = int(re.search(r":(\d+)\)$", text.strip()).group(1))
    with open(HERE) as f:
        source = f.read().splitlines()[line_of("MARK-matmul") - 1]
    assert source[column - 1 :].startswith("kiln.matmul(x, w)")


def bad(x, w):
    return x @ w  # MARK-bad


def test_staging_errors_name_the_python_line():
    with pytest.raises(kiln.UserError) as error:
        kiln.stage(bad)(TensorLayout(DType.float32, [2, 3]), TensorLayout(DType.float32, [4, 5]))
    message = str(error.value)
    assert f"{HERE}:{line_of('MARK-bad')}" in message
    assert "matmul" in message
    assert isinstance(error.value, ValueError)


def layer_user(x):
    return kiln.nn.Linear(4, 3, name="proj")(x)  # MARK-layer


def test_layer_ops_are_located_at_the_layer_call():
    staged = kiln.stage(layer_user)(TensorLayout(DType.float32, [2, 4]))
    lines = {line for _, line in locs(staged, "kiln.matmul") + locs(staged, "kiln.add")}
    assert lines == {line_of("MARK-layer")}
    assert all(f == HERE for f, _ in locs(staged, "kiln.matmul"))


def test_ops_outside_staging_say_so():
    with pytest.raises(kiln.UserError, match=f"{re.escape(HERE)}:\\d+.*no function is being staged"):
        kiln.relu(kiln.Tensor(TensorLayout(DType.float32, [2])))
