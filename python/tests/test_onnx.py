"""kiln.import_onnx: a model written with onnx.helper, imported, compiled and compared with
NumPy; its inputs listed; a broken file refused with its name."""

import numpy
import pytest

import kiln

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

rng = numpy.random.default_rng(5)


def write_model(path):
    w = rng.standard_normal((4, 3)).astype(numpy.float32)
    b = rng.standard_normal(3).astype(numpy.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Add", ["h", "b"], ["z"]),
        helper.make_node("Relu", ["z"], ["y"]),
        helper.make_node("ReduceSum", ["y"], ["s"], keepdims=0),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3]),
         helper.make_tensor_value_info("s", TensorProto.FLOAT, [])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, path)
    return w, b


def compile_nodes(tmp_path, name, nodes, x_shape, y_shape, weights):
    """Writes an opset-17 model of \p nodes (one float input x, one float output y, the
    \p weights dict as initializers) to tmp_path, imports it and compiles it."""
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
        [numpy_helper.from_array(v, n) for n, v in weights.items()],
    )
    path = str(tmp_path / f"{name}.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    model = kiln.import_onnx(path)
    return kiln.CompiledCallable(model.graph, model.weights)


def test_import_compile_and_call(tmp_path):
    path = str(tmp_path / "tiny.onnx")
    w, b = write_model(path)
    inputs = kiln.onnx_inputs(path)
    assert [name for name, _ in inputs] == ["x"]
    assert inputs[0][1].shape == ("batch", 4)
    model = kiln.import_onnx(path)
    assert model.input_names == ["x"] and model.output_names == ["y", "s"] and model.opset == 17
    assert set(model.weights) == {"w", "b"}
    compiled = kiln.CompiledCallable(model.graph, model.weights)
    for batch in (1, 3):
        x = rng.standard_normal((batch, 4)).astype(numpy.float32)
        y, s = compiled(x)
        expected = numpy.maximum(x @ w + b, 0)
        numpy.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-6)
        numpy.testing.assert_allclose(s, expected.sum(), rtol=1e-5)
    fixed = kiln.import_onnx(path, dims={"batch": 2})
    assert fixed.graph.in_layouts[0].shape == (2, 4)
    assert "MatMul" in kiln.onnx_supported_ops()


def test_broken_files_are_refused_with_their_name(tmp_path):
    path = tmp_path / "broken.onnx"
    path.write_bytes(b"\x08\x07garbage")
    with pytest.raises(kiln.UserError, match="broken.onnx"):
        kiln.import_onnx(str(path))
    with pytest.raises(kiln.UserError, match="missing.onnx"):
        kiln.import_onnx(str(tmp_path / "missing.onnx"))


def test_an_expansion_runs_as_one_kernel_and_matches_numpy(tmp_path):
    # MobileNet's block: a 1x1 conv, hard-swish, a 3x3 depthwise conv (stride 2), ReLU. kiln
    # runs both convs as one kernel (stats()["expansions"]); NumPy computes them apart.
    c, m = 8, 32
    w = rng.standard_normal((m, c, 1, 1)).astype(numpy.float32)
    b = rng.standard_normal(m).astype(numpy.float32)
    dw = rng.standard_normal((m, 1, 3, 3)).astype(numpy.float32)
    db = rng.standard_normal(m).astype(numpy.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["e"], kernel_shape=[1, 1]),
        helper.make_node("HardSwish", ["e"], ["h"]),
        helper.make_node("Conv", ["h", "dw", "db"], ["d"], kernel_shape=[3, 3], group=m,
                         strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["d"], ["y"]),
    ]
    compiled = compile_nodes(tmp_path, "expansion", nodes, ["batch", c, 14, 14],
                             ["batch", m, 7, 7], {"w": w, "b": b, "dw": dw, "db": db})
    x = rng.standard_normal((3, c, 14, 14)).astype(numpy.float32)
    (y,) = compiled(x)
    e = numpy.einsum("mc,nchw->nmhw", w[:, :, 0, 0], x) + b[None, :, None, None]
    h = e * numpy.clip(e / 6 + 0.5, 0, 1)
    padded = numpy.pad(h, ((0, 0), (0, 0), (1, 1), (1, 1)))
    d = numpy.zeros((3, m, 7, 7), numpy.float32) + db[None, :, None, None]
    for i in range(3):
        for j in range(3):
            d += dw[None, :, 0, i, j, None, None] * padded[:, :, i:i + 13:2, j:j + 13:2]
    numpy.testing.assert_allclose(y, numpy.maximum(d, 0), rtol=1e-4, atol=1e-4)
    assert compiled.stats()["expansions"] == 1


def test_a_squeeze_and_excitation_scale_runs_inside_the_1x1_conv_and_matches_numpy(tmp_path):
    # MobileNetV3's squeeze-and-excitation: the mean of each channel, two 1x1 convs (ReLU,
    # hard-sigmoid), the activation times that scale, then the block's 1x1 projection conv
    # with a residual add. kiln runs the multiply inside the projection conv
    # (stats()["scaled_inputs"]); NumPy computes each step apart.
    c, r, m = 32, 8, 32
    w1 = rng.standard_normal((r, c, 1, 1)).astype(numpy.float32)
    w2 = rng.standard_normal((c, r, 1, 1)).astype(numpy.float32)
    wp = rng.standard_normal((m, c, 1, 1)).astype(numpy.float32)
    bp = rng.standard_normal(m).astype(numpy.float32)
    nodes = [
        helper.make_node("GlobalAveragePool", ["x"], ["p"]),
        helper.make_node("Conv", ["p", "w1"], ["q"], kernel_shape=[1, 1]),
        helper.make_node("Relu", ["q"], ["a"]),
        helper.make_node("Conv", ["a", "w2"], ["t"], kernel_shape=[1, 1]),
        helper.make_node("HardSigmoid", ["t"], ["s"], alpha=1.0 / 6),
        helper.make_node("Mul", ["s", "x"], ["z"]),
        helper.make_node("Conv", ["z", "wp", "bp"], ["o"], kernel_shape=[1, 1]),
        helper.make_node("Add", ["o", "x"], ["y"]),
    ]
    compiled = compile_nodes(tmp_path, "squeeze_excitation", nodes, ["batch", c, 14, 14],
                             ["batch", m, 14, 14], {"w1": w1, "w2": w2, "wp": wp, "bp": bp})
    x = rng.standard_normal((3, c, 14, 14)).astype(numpy.float32)
    (y,) = compiled(x)
    p = x.mean(axis=(2, 3))
    a = numpy.maximum(p @ w1[:, :, 0, 0].T, 0)
    s = numpy.clip(a @ w2[:, :, 0, 0].T / 6 + 0.5, 0, 1)
    z = x * s[:, :, None, None]
    o = numpy.einsum("mc,nchw->nmhw", wp[:, :, 0, 0], z) + bp[None, :, None, None]
    numpy.testing.assert_allclose(y, o + x, rtol=1e-4, atol=1e-4)
    assert compiled.stats()["scaled_inputs"] == 1
