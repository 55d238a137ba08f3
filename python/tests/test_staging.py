"""Weights and name scopes, subgraphs (function and decorator, shared caches), kiln.nn
(PyTorch's Linear layout too), weights from dicts and safetensors files."""

import json
import struct

import numpy
import pytest

import kiln
from kiln import DType, TensorLayout

rng = numpy.random.default_rng(3)


def f32(*dims):
    return TensorLayout(DType.float32, list(dims))


def save_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, array in tensors.items():
        data = numpy.ascontiguousarray(array, numpy.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def mlp(x):
    with kiln.name_scope("mlp"):
        h = kiln.relu(x @ kiln.weight("w1", f32(4, 8)))
        return h @ kiln.weight("w2", DType.float32, [8, 4])


def test_weights_are_named_by_their_scopes_and_bound_from_a_dict():
    staged = kiln.stage(mlp, prefix="model")(f32(2, 4))
    text = str(staged)
    assert '"model.mlp.w1"' in text and '"model.mlp.w2"' in text
    w1, w2 = rng.standard_normal((4, 8), numpy.float32), rng.standard_normal((8, 4), numpy.float32)
    compiled = kiln.CompiledCallable(staged, {"model.mlp.w1": w1, "model.mlp.w2": w2})
    x = rng.standard_normal((2, 4), numpy.float32)
    numpy.testing.assert_allclose(compiled(x), numpy.maximum(x @ w1, 0) @ w2, rtol=1e-5)
    stats = compiled.stats()
    assert stats["plans"] == 1 and stats["bodies_compiled"] >= 1


def test_missing_and_extra_weights_are_named():
    staged = kiln.stage(mlp)(f32(2, 4))
    with pytest.raises(kiln.UserError, match="mlp.w2"):
        kiln.CompiledCallable(staged, {"mlp.w1": numpy.zeros((4, 8), numpy.float32)})
    with pytest.raises(kiln.UserError, match="extra"):
        kiln.CompiledCallable(
            staged,
            {"mlp.w1": numpy.zeros((4, 8), numpy.float32), "mlp.w2": numpy.zeros((8, 4), numpy.float32), "extra": numpy.zeros(1, numpy.float32)},
        )
    with pytest.raises(kiln.UserError, match="dict of arrays"):
        kiln.CompiledCallable(staged, [1, 2])
    with pytest.raises(kiln.UserError, match="outside|no function is being staged"):
        kiln.weight("w", f32(2))


def test_weights_from_a_safetensors_file(tmp_path):
    w1, w2 = rng.standard_normal((4, 8), numpy.float32), rng.standard_normal((8, 4), numpy.float32)
    path = tmp_path / "mlp.safetensors"
    save_safetensors(path, {"mlp.w1": w1, "mlp.w2": w2})
    staged = kiln.stage(mlp)(f32(3, 4))
    x = rng.standard_normal((3, 4), numpy.float32)
    for weights in (str(path), path):  # a str or any os.PathLike
        numpy.testing.assert_allclose(kiln.CompiledCallable(staged, weights)(x), numpy.maximum(x @ w1, 0) @ w2, rtol=1e-5)
    with pytest.raises(kiln.UserError, match="nowhere.safetensors"):
        kiln.CompiledCallable(staged, str(tmp_path / "nowhere.safetensors"))


def block(x):
    return kiln.relu(x @ kiln.weight("w", f32(4, 4)))


def test_as_subgraph_as_a_function_shares_one_body_per_wrapper():
    layer = kiln.as_subgraph(block, name="block")

    def model(x):
        for i in range(3):
            with kiln.name_scope(f"layers.{i}"):
                x = layer(x)
        return x

    staged = kiln.stage(model)(f32(2, 4))
    assert staged.graph.graph_names == ["main", "block"]
    assert staged.graph.num_ops("block") < 6
    ws = {f"layers.{i}.w": rng.standard_normal((4, 4), numpy.float32) for i in range(3)}
    x = rng.standard_normal((2, 4), numpy.float32)
    expected = x
    for i in range(3):
        expected = numpy.maximum(expected @ ws[f"layers.{i}.w"], 0)
    numpy.testing.assert_allclose(kiln.CompiledCallable(staged, ws)(x), expected, rtol=1e-5)
    inlined = kiln.stage(model, subgraphs=False)(f32(2, 4))
    assert inlined.graph.graph_names == ["main"]
    numpy.testing.assert_allclose(kiln.CompiledCallable(inlined, ws)(x), expected, rtol=1e-5)


@kiln.as_subgraph
def scaled(x, factor):
    return x * factor


@kiln.as_subgraph(name="shift", prefix="s")
def shift(x):
    return x + kiln.weight("b", f32(4))


def test_as_subgraph_as_a_decorator_with_static_arguments_and_prefixes():
    def model(x):
        return scaled(x, 2.0), scaled(x, 2.0), scaled(x, 3.0), shift(x)

    staged = kiln.stage(model)(f32(4))
    names = staged.graph.graph_names
    assert names[0] == "main" and "shift" in names
    assert len(names) == 4  # one body per static factor, one for shift
    assert 'kiln.prefix = "s"' in str(staged) and 'name = "b"' in str(staged)
    b = numpy.arange(4, dtype=numpy.float32)
    x = numpy.ones(4, numpy.float32)
    out = kiln.CompiledCallable(staged, {"s.b": b})(x)
    for got, want in zip(out, (x * 2, x * 2, x * 3, x + b)):
        numpy.testing.assert_array_equal(got, want)
    assert isinstance(scaled, kiln.Subgraph) and shift.name == "shift" and shift.prefix == "s"


def test_a_subgraph_cache_shares_bodies_across_stage_calls():
    cache = kiln.SubgraphCache()
    layer = kiln.as_subgraph(block, name="block")
    enc = kiln.stage(layer, prefix="encoder", subgraph_cache=cache)(f32(2, 4))
    assert len(cache) == 1
    dec = kiln.stage(lambda x: layer(layer(x)), prefix="decoder", subgraph_cache=cache)(f32(2, 4))
    assert len(cache) == 1
    assert "block" in enc.graph.graph_names and "block" in dec.graph.graph_names
    cache.clear()
    assert len(cache) == 0


def test_nn_layers_match_numpy_including_pytorchs_linear_layout():
    def model(x, ids):
        h = kiln.nn.Embedding(10, 4, name="embed")(ids) + x
        h = kiln.nn.LayerNorm(4, name="ln")(h)
        h = kiln.nn.RMSNorm(4, name="rms")(h)
        h = kiln.nn.Linear(4, 6, name="kiln_fc")(h)
        return kiln.nn.Linear(6, 4, name="torch_fc", layout="torch")(h)

    staged = kiln.stage(model)(f32(3, 4), TensorLayout(DType.int64, [3]))
    w = {
        "embed.weight": rng.standard_normal((10, 4), numpy.float32),
        "ln.weight": rng.uniform(0.5, 1.5, 4).astype(numpy.float32),
        "ln.bias": rng.standard_normal(4).astype(numpy.float32),
        "rms.weight": rng.uniform(0.5, 1.5, 4).astype(numpy.float32),
        "kiln_fc.weight": rng.standard_normal((4, 6), numpy.float32),
        "kiln_fc.bias": rng.standard_normal(6).astype(numpy.float32),
        "torch_fc.weight": rng.standard_normal((4, 6), numpy.float32),  # [out, in]
        "torch_fc.bias": rng.standard_normal(4).astype(numpy.float32),
    }
    x, ids = rng.standard_normal((3, 4), numpy.float32), numpy.array([1, 7, 3])
    h = w["embed.weight"][ids] + x
    h = (h - h.mean(-1, keepdims=True)) / numpy.sqrt(h.var(-1, keepdims=True) + 1e-5) * w["ln.weight"] + w["ln.bias"]
    h = h / numpy.sqrt((h * h).mean(-1, keepdims=True) + 1e-6) * w["rms.weight"]
    h = h @ w["kiln_fc.weight"] + w["kiln_fc.bias"]
    expected = h @ w["torch_fc.weight"].T + w["torch_fc.bias"]
    numpy.testing.assert_allclose(kiln.CompiledCallable(staged, w)(x, ids), expected, rtol=1e-4, atol=1e-5)
    layer = kiln.nn.Linear(4, 6, layout="torch")
    assert (layer.in_features, layer.out_features, layer.layout, layer.bias) == (4, 6, "torch", True)
    with pytest.raises(kiln.UserError, match="layout 'tf'"):
        kiln.nn.Linear(4, 6, layout="tf")


def test_transformer_layers_stage_and_compile():
    blk = kiln.nn.TransformerBlock(16, 2, 32, name="blk")

    def model(x):
        x = kiln.nn.MultiHeadAttention(16, 2, name="attn0")(x)
        x = kiln.nn.MLP(16, 32, name="mlp0")(x)
        return kiln.as_subgraph(blk, name="block")(x)

    staged = kiln.stage(model)(TensorLayout(DType.float32, ["batch", "seq", 16]))
    assert staged.in_layouts[0].shape == ("batch", "seq", 16)
    names = [line.split('"')[1] for line in str(staged).splitlines() if "kiln.weight" in line and 'name = "' in line]
    weights = {}
    text = str(staged)
    import re

    for name, dims in re.findall(r'name = "([^"]+)"\} : \(\) -> tensor<([0-9x]+)xf32>', text):
        weights[name] = rng.standard_normal([int(d) for d in dims.split("x")]).astype(numpy.float32) * 0.1
    assert weights and names
    compiled = kiln.CompiledCallable(staged, weights)
    for shape in ((1, 5), (2, 3)):
        out = compiled(rng.standard_normal((*shape, 16), numpy.float32))
        assert out.shape == (*shape, 16) and numpy.isfinite(out).all()
    assert compiled.stats()["plans"] == 2


def test_subgraphs_and_stagers_in_cycles_are_collected():
    import gc
    import weakref

    def make():
        def body(x):
            return x * 2

        wrapper = kiln.as_subgraph(body)
        body.wrapper = wrapper  # a cycle: wrapper -> body -> wrapper
        stager = kiln.stage(lambda x: wrapper(x))
        body.stager = stager
        stager(f32(2))
        return weakref.ref(body)

    ref = make()
    gc.collect()
    assert ref() is None


def test_weights_borrowed_from_slices_and_strided_views_compute_right():
    big = rng.standard_normal(1 + 8 * 4).astype(numpy.float32)
    w_slice = big[1:].reshape(8, 4)  # contiguous, 4-byte aligned only: borrowed as it is
    assert kiln.asarray(w_slice).data_ptr == w_slice.ctypes.data
    w_strided = rng.standard_normal((8, 8)).astype(numpy.float32)[:, ::2]  # copied
    staged = kiln.stage(lambda x: (x @ kiln.weight("a", f32(8, 4)), x @ kiln.weight("b", f32(8, 4))))(f32(5, 8))
    x = rng.standard_normal((5, 8)).astype(numpy.float32)
    for prepack in (True, False):
        a, b = kiln.CompiledCallable(staged, {"a": w_slice, "b": w_strided}, prepack_weights=prepack)(x)
        numpy.testing.assert_allclose(a, x @ w_slice, rtol=1e-5, atol=1e-5)
        numpy.testing.assert_allclose(b, x @ w_strided, rtol=1e-5, atol=1e-5)


def test_python_exceptions_inside_staging_pass_through_and_leave_kiln_usable():
    def broken(x):
        y = x * 2
        raise KeyError("from the user's code")

    sub = kiln.as_subgraph(broken)
    for fn in (broken, lambda x: sub(x)):
        with pytest.raises(KeyError, match="from the user's code"):
            kiln.stage(fn)(f32(2))
    staged = kiln.stage(lambda x: x + 1)(f32(2))  # no frame or session is left behind
    numpy.testing.assert_array_equal(kiln.CompiledCallable(staged)(numpy.zeros(2, numpy.float32)), [1, 1])
    with pytest.raises(kiln.UserError, match="no function is being staged"):
        kiln.relu(kiln.Tensor(f32(2)))


def test_attention_runs_as_one_kernel_and_matches_numpy():
    # softmax(Q Kᵀ / 8) V over [batch, heads, seq, 16]: one kernel (stats), NumPy's values.
    def attention(q, k, v):
        return kiln.softmax(q @ kiln.transpose(k, -1, -2) * 0.125, -1) @ v

    staged = kiln.stage(attention)(f32(2, 3, 40, 16), f32(2, 3, 40, 16), f32(2, 3, 40, 16))
    compiled = kiln.CompiledCallable(staged, threads=1)
    q, k, v = (rng.standard_normal((2, 3, 40, 16)).astype(numpy.float32) for _ in range(3))
    scores = (q.astype(numpy.float64) @ k.swapaxes(-1, -2)) * 0.125
    p = numpy.exp(scores - scores.max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ v
    numpy.testing.assert_allclose(compiled(q, k, v), want, rtol=1e-5, atol=1e-6)
    assert compiled.stats()["attentions"] == 1
