"""kiln.as_subgraph: one traced body called at every repeat (a decorator or a function),
weights named by each call's scope."""

import numpy

import kiln
from kiln import DType, TensorLayout


@kiln.as_subgraph(name="block")
def block(x):
    return x + kiln.relu(x @ kiln.weight("w", TensorLayout(DType.float32, [16, 16])))


def model(x):
    for i in range(6):
        with kiln.name_scope(f"layers.{i}"):
            x = block(x)
    return x


staged = kiln.stage(model)(TensorLayout(DType.float32, [4, 16]))
print(staged.graph.graph_names, staged.graph.num_ops("block"), "ops in the body")
assert staged.graph.graph_names == ["main", "block"]
rng = numpy.random.default_rng(2)
weights = {f"layers.{i}.w": rng.standard_normal((16, 16), numpy.float32) * 0.1 for i in range(6)}
x = rng.standard_normal((4, 16), numpy.float32)
expected = x
for i in range(6):
    expected = expected + numpy.maximum(expected @ weights[f"layers.{i}.w"], 0)
numpy.testing.assert_allclose(kiln.CompiledCallable(staged, weights)(x), expected, rtol=1e-5)
print("ok")
