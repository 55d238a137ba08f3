"""Staged functions take and return trees: tuples, lists, dicts, None, NamedTuples and
dataclasses, with tensors as leaves and everything else static (compared exactly)."""

import dataclasses
from typing import NamedTuple

import numpy

import kiln
from kiln import DType, TensorLayout


@dataclasses.dataclass
class Params:
    weight: object
    bias: object
    activation: str  # static: part of the staged graph's identity


class Out(NamedTuple):
    y: object
    total: object


def layer(x, params: Params, extras):
    y = x @ params.weight + params.bias
    if params.activation == "relu":  # a Python decision, made while staging
        y = kiln.relu(y)
    return Out(y=y, total=kiln.sum(y) + extras["offset"])


f32 = lambda *dims: TensorLayout(DType.float32, list(dims))  # noqa: E731
staged = kiln.stage(layer)(f32(2, 3), Params(f32(3, 4), f32(4), "relu"), {"offset": f32()})
print("in :", staged.in_tree)
print("out:", staged.out_tree)

compiled = kiln.CompiledCallable(staged)
rng = numpy.random.default_rng(0)
x, w, b = rng.standard_normal((2, 3), numpy.float32), rng.standard_normal((3, 4), numpy.float32), numpy.ones(4, numpy.float32)
out = compiled(x, Params(w, b, "relu"), {"offset": numpy.float32(10)})
expected = numpy.maximum(x @ w + b, 0)
assert isinstance(out, Out)
numpy.testing.assert_allclose(out.y, expected, rtol=1e-5)
numpy.testing.assert_allclose(out.total, expected.sum() + 10, rtol=1e-5)

try:  # another static value than the staged one is refused, naming where it differs
    compiled(x, Params(w, b, "gelu"), {"offset": numpy.float32(10)})
except kiln.UserError as e:
    print("refused:", str(e).split(" (staged")[0])
