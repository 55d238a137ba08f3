"""Weights by dotted name: kiln.nn layers, name scopes, and PyTorch's Linear layout, bound
from a dict of arrays (read in place, not copied)."""

import numpy

import kiln
from kiln import DType, TensorLayout


def model(x):
    with kiln.name_scope("encoder"):
        h = kiln.nn.Linear(8, 16, name="fc1")(x)  # encoder.fc1.weight [8, 16], .bias
        h = kiln.gelu(h)
        h = kiln.nn.Linear(16, 8, name="fc2", layout="torch")(h)  # weight [8, 16] as torch stores it
    return kiln.nn.LayerNorm(8, name="norm")(h)


staged = kiln.stage(model)(TensorLayout(DType.float32, ["batch", 8]))
rng = numpy.random.default_rng(1)
weights = {
    "encoder.fc1.weight": rng.standard_normal((8, 16), numpy.float32) * 0.3,
    "encoder.fc1.bias": numpy.zeros(16, numpy.float32),
    "encoder.fc2.weight": rng.standard_normal((8, 16), numpy.float32) * 0.3,
    "encoder.fc2.bias": numpy.zeros(8, numpy.float32),
    "norm.weight": numpy.ones(8, numpy.float32),
    "norm.bias": numpy.zeros(8, numpy.float32),
}
compiled = kiln.CompiledCallable(staged, weights)
for batch in (1, 5):  # one module, any batch: a plan per distinct shape
    y = compiled(rng.standard_normal((batch, 8), numpy.float32))
    print(batch, y.shape, float(numpy.abs(y.mean(-1)).max()))
    assert y.shape == (batch, 8) and numpy.abs(y.mean(-1)).max() < 1e-5
print(compiled.stats()["plans"], "plans")
