"""Pytrees: every container kind round-trips, static values compare exactly, and calls
return the staged function's output structure."""

import dataclasses
import enum
import math
import struct
from typing import NamedTuple

import numpy
import pytest

import kiln
from kiln import DType, TensorLayout


class Pair(NamedTuple):
    a: object
    b: object


@dataclasses.dataclass
class Block:
    w: object
    scale: float
    name: str = "block"


@dataclasses.dataclass(frozen=True)
class Frozen:
    x: object
    n: int


class Color(enum.Enum):
    RED = 1
    BLUE = 2


def arr(*values):
    return numpy.array(values, dtype=numpy.float32)


def test_every_container_round_trips():
    value = {
        "t": (arr(1), [arr(2), None]),
        "p": Pair(arr(3), 7),
        "d": Block(arr(4), 0.5),
        "f": Frozen(arr(5), 3),
        "e": Color.BLUE,
        "s": "text",
        "b": b"\x00\x01",
        "flag": True,
    }
    leaves, tree = kiln.tree_flatten(value)
    assert tree.num_leaves == 5
    assert len(leaves) == 5
    assert tree.leaf_paths() == ["d.w", "f.x", "p.a", "t.0", "t.1.0"]  # dict keys sorted
    back = kiln.tree_unflatten(tree, leaves)
    assert back.keys() == value.keys()
    assert isinstance(back["p"], Pair) and back["p"].b == 7
    assert isinstance(back["d"], Block) and back["d"].scale == 0.5 and back["d"].name == "block"
    assert isinstance(back["f"], Frozen) and back["f"].n == 3
    assert back["t"][1][1] is None and isinstance(back["t"], tuple) and isinstance(back["t"][1], list)
    assert back["e"] is Color.BLUE and back["s"] == "text" and back["b"] == b"\x00\x01"
    assert back["flag"] is True
    for leaf, original in zip(kiln.tree_flatten(back)[0], leaves):
        assert leaf is original
    assert kiln.tree_flatten(back)[1] == tree


@pytest.mark.parametrize(
    "a,b",
    [
        (1.0, 1),  # float vs int
        (0.0, -0.0),  # signed zeros differ
        (1234567.0, 1234568.0),
        (True, 1),  # bool is not int
        ("a", "b"),
        (Color.RED, Color.BLUE),
        (
            struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000001))[0],
            struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000002))[0],
        ),  # NaNs with other bits
    ],
)
def test_static_values_compare_exactly(a, b):
    ta = kiln.tree_flatten((a,))[1]
    tb = kiln.tree_flatten((b,))[1]
    assert ta != tb
    assert ta.difference(tb).startswith("at 0")
    assert kiln.tree_flatten((a,))[1] == ta  # and equal to itself


def test_nan_equals_the_same_nan():
    nan = float("nan")
    assert kiln.tree_flatten((nan,))[1] == kiln.tree_flatten((math.nan,))[1]


def test_values_kiln_cannot_compare_are_refused_with_their_path():
    with pytest.raises(kiln.UserError, match=r"the object at x\.1 is neither"):
        kiln.tree_flatten({"x": [1, object()]})
    with pytest.raises(kiln.UserError, match="dict keys must be str"):
        kiln.tree_flatten({1: arr(1)})
    leaves, tree = kiln.tree_flatten([arr(1)])
    with pytest.raises(kiln.UserError, match="2 leaves for a tree of 1"):
        tree.unflatten(leaves * 2)


def test_staged_trees_and_call_structure():
    def f(inputs, block: Block, scale, mode):
        x, rest = inputs["x"], inputs["rest"]
        y = x * block.scale + rest[0]
        if mode == "twice":
            y = y * 2
        return {"y": y, "pair": Pair(y + 1, scale), "none": None, "list": [y * scale]}

    layout = TensorLayout(DType.float32, [3])
    staged = kiln.stage(f)({"x": layout, "rest": [layout]}, Block(layout, 0.5), 3, "twice")
    assert staged.in_tree.num_leaves == 3
    assert staged.in_tree.leaf_paths() == ["0.rest.0", "0.x", "1.w"]
    assert staged.out_tree.leaf_paths() == ["list.0", "pair.a", "y"]
    assert len(staged.in_layouts) == 3 and staged.in_layouts[0] == layout
    assert [str(l) for l in staged.out_layouts] == ["f32[3] on cpu:0"] * 3
    assert staged.signal_device_ids == ()
    assert staged.signal_buffer_index is None

    compiled = kiln.CompiledCallable(staged)
    x, r = arr(1, 2, 3), arr(10, 20, 30)
    out = compiled({"x": x, "rest": [r]}, Block(arr(9, 9, 9), 0.5), 3, "twice")
    expected = (x * 0.5 + r) * 2
    assert set(out) == {"y", "pair", "none", "list"}
    numpy.testing.assert_allclose(out["y"], expected)
    assert isinstance(out["pair"], Pair) and out["pair"].b == 3
    numpy.testing.assert_allclose(out["pair"].a, expected + 1)
    assert out["none"] is None and isinstance(out["list"], list)
    numpy.testing.assert_allclose(out["list"][0], expected * 3)

    with pytest.raises(kiln.UserError, match=r"at 3: static value 'twice' vs 'once'"):
        compiled({"x": x, "rest": [r]}, Block(arr(9, 9, 9), 0.5), 3, "once")
    with pytest.raises(kiln.UserError, match=r"at 1\.scale: static value 0\.5 vs 0\.25"):
        compiled({"x": x, "rest": [r]}, Block(arr(9, 9, 9), 0.25), 3, "twice")
    with pytest.raises(kiln.UserError, match="input leaf '0.x' has 2 at axis 0"):
        compiled({"x": arr(1, 2), "rest": [r]}, Block(arr(9, 9, 9), 0.5), 3, "twice")


def test_results_must_be_tensors():
    with pytest.raises(kiln.UserError, match="the result at 1 is a numpy.ndarray"):
        kiln.stage(lambda x: (x, numpy.ones(2)))(TensorLayout(DType.float32, [2]))
