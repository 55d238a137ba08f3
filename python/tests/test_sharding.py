"""Sharded callables on virtual CPU devices: meshes, placements, sharded weights,
redistribute, and the concrete helpers, against NumPy."""

import numpy
import pytest

import kiln
from kiln import DType, DeviceMesh, Partial, Replicated, Sharded, ShardedLayout, ShardedTensor

rng = numpy.random.default_rng(11)


@pytest.fixture
def four_devices():
    previous = kiln.cpu_device_count()
    kiln.set_cpu_device_count(4)
    yield
    kiln.set_cpu_device_count(previous)


def test_mesh_and_layouts(four_devices):
    mesh = DeviceMesh({"dp": 2, "tp": 2})
    assert mesh.size == 4 and mesh.axes == [("dp", 2), ("tp", 2)]
    assert mesh.axis("tp") == 1 and mesh.coords(3) == [1, 1] and mesh.group(0, 1) == [0, 1]
    assert [str(d) for d in mesh.devices] == ["cpu:0", "cpu:1", "cpu:2", "cpu:3"]
    layout = ShardedLayout(DType.float32, [8, 6], mesh, [Sharded(0), Replicated()])
    assert layout.shard(2).shape == (4, 6) and str(layout.shard(2).device) == "cpu:2"
    assert layout.offsets(2) == [4, 0]
    assert len(layout.shards()) == 4 and layout.shards()[0].kind == "placeholder"
    assert layout.with_placement(1, Sharded(1)).placements == [Sharded(0), Sharded(1)]
    assert "mesh[dp=2, tp=2]" in str(layout)
    with pytest.raises(kiln.UserError):
        DeviceMesh({"dp": 3}, [kiln.CPU(0), kiln.CPU(1)])


def test_tensor_parallel_mlp_matches_numpy(four_devices):
    mesh = DeviceMesh([("tp", 4)])
    x_layout = ShardedLayout(DType.float32, [2, 8], mesh, [Replicated()])
    w1_layout = ShardedLayout(DType.float32, [8, 16], mesh, [Sharded(1)])
    w2_layout = ShardedLayout(DType.float32, [16, 8], mesh, [Sharded(0)])

    def model(shards):
        x = ShardedTensor(shards, x_layout)
        h = (x @ kiln.sharded_weight("w1", w1_layout)).relu()  # column-parallel
        y = h @ kiln.sharded_weight("w2", w2_layout)  # row-parallel: Partial
        assert y.layout.placements == [Partial()]
        return kiln.redistribute(y, [Replicated()]).shards

    staged = kiln.stage(model)(x_layout.shards())
    assert staged.signal_device_ids == (0, 1, 2, 3)
    assert "kiln.allreduce_sum" in str(staged)
    w1 = rng.standard_normal((8, 16), numpy.float32)
    w2 = rng.standard_normal((16, 8), numpy.float32)
    weights = {**kiln.shard_weights("w1", w1, w1_layout), **kiln.shard_weights("w2", w2, w2_layout)}
    compiled = kiln.CompiledCallable(staged, weights)
    x = rng.standard_normal((2, 8), numpy.float32)
    outs = compiled(kiln.shard_tensor(x, x_layout))
    expected = numpy.maximum(x @ w1, 0) @ w2
    assert len(outs) == 4
    for out in outs:
        numpy.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_sharded_elementwise_reshape_sum_and_round_trips(four_devices):
    mesh = DeviceMesh({"dp": 2, "tp": 2})
    layout = ShardedLayout(DType.float32, [4, 6], mesh, [Sharded(0), Sharded(1)])

    def model(a_shards, b_shards):
        a, b = ShardedTensor(a_shards, layout), ShardedTensor(b_shards, layout)
        c = (a + b) * 2.0 - b * a
        d = c.gelu().reshape([4, 6]).sum(1)
        return kiln.redistribute(c, [Replicated(), Replicated()]).shards, kiln.redistribute(d, [Replicated(), Replicated()]).shards

    staged = kiln.stage(model)(layout.shards(), layout.shards())
    a = rng.standard_normal((4, 6), numpy.float32)
    b = rng.standard_normal((4, 6), numpy.float32)
    c_shards, d_shards = kiln.CompiledCallable(staged)(kiln.shard_tensor(a, layout), kiln.shard_tensor(b, layout))
    c = (a + b) * 2 - b * a
    from math import erf, sqrt

    gelu = numpy.vectorize(lambda v: 0.5 * v * (1 + erf(v / sqrt(2))))(c)
    numpy.testing.assert_allclose(c_shards[3], c, rtol=1e-5, atol=1e-5)
    numpy.testing.assert_allclose(d_shards[0], gelu.sum(1), rtol=1e-4, atol=1e-4)
    pieces = kiln.shard_tensor(a, layout)
    assert [p.shape for p in pieces] == [(2, 3)] * 4
    numpy.testing.assert_array_equal(kiln.unshard(pieces, layout), a)


def test_collectives_and_transfers_as_functions(four_devices):
    from kiln import TensorLayout

    layouts = [TensorLayout(DType.float32, [2, 3], kiln.CPU(i)) for i in range(2)]

    def model(shards):
        return (
            kiln.allreduce_sum(shards), kiln.allgather(shards, 0), kiln.reduce_scatter_sum(shards, 0),
            kiln.all_to_all(shards, 1, 0) if False else kiln.all_to_all([kiln.slice(s, 1, 0, 2) for s in shards], 1, 0),
            kiln.transfer_to(shards[0], kiln.CPU(1)), kiln.broadcast(shards[1], [kiln.CPU(0), kiln.CPU(1)]),
        )

    staged = kiln.stage(model)(layouts)
    a, b = rng.standard_normal((2, 3), numpy.float32), rng.standard_normal((2, 3), numpy.float32)
    summed, gathered, scattered, a2a, moved, bcast = kiln.CompiledCallable(staged)([a, b])
    for s in summed:
        numpy.testing.assert_allclose(s, a + b, rtol=1e-6)
    for g in gathered:
        numpy.testing.assert_array_equal(g, numpy.concatenate([a, b]))
    numpy.testing.assert_allclose(scattered[0], (a + b)[:1], rtol=1e-6)
    numpy.testing.assert_allclose(scattered[1], (a + b)[1:], rtol=1e-6)
    numpy.testing.assert_array_equal(a2a[0], numpy.concatenate([a[:, :1], b[:, :1]]))
    numpy.testing.assert_array_equal(moved, a)
    for x in bcast:
        numpy.testing.assert_array_equal(x, b)
