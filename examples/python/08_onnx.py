"""An ONNX model (written here with onnx.helper) imported, compiled and called like an
ONNX Runtime session: inputs positionally, a list of outputs."""

import os
import tempfile

import numpy

import kiln

try:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError:
    raise SystemExit("this example needs the onnx package (pip install onnx)")

w = numpy.random.default_rng(5).standard_normal((4, 2)).astype(numpy.float32)
graph = helper.make_graph(
    [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Softmax", ["h"], ["y"], axis=-1)],
    "classifier",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 2])],
    [numpy_helper.from_array(w, "w")],
)
path = os.path.join(tempfile.mkdtemp(), "classifier.onnx")
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)

print(kiln.onnx_inputs(path))
model = kiln.import_onnx(path)
compiled = kiln.CompiledCallable(model.graph, model.weights)
(y,) = compiled(numpy.ones((3, 4), numpy.float32))
print(model.output_names, y)
assert y.shape == (3, 2) and numpy.allclose(y.sum(-1), 1)
