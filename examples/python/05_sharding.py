"""A tensor-parallel MLP over 4 virtual CPU devices: sharded layouts, sharded weights and
the collective that a Partial result needs."""

import numpy

import kiln
from kiln import DType, DeviceMesh, Replicated, Sharded, ShardedLayout, ShardedTensor

kiln.set_cpu_device_count(4)  # cpu:0 ... cpu:3 share this machine's cores
mesh = DeviceMesh({"tp": 4})
x_layout = ShardedLayout(DType.float32, [2, 32], mesh, [Replicated()])
w1_layout = ShardedLayout(DType.float32, [32, 64], mesh, [Sharded(1)])  # column-parallel
w2_layout = ShardedLayout(DType.float32, [64, 32], mesh, [Sharded(0)])  # row-parallel


def mlp(x_shards):
    x = ShardedTensor(x_shards, x_layout)
    h = (x @ kiln.sharded_weight("w1", w1_layout)).relu()
    y = h @ kiln.sharded_weight("w2", w2_layout)  # Partial: each device holds a summand
    return kiln.redistribute(y, [Replicated()]).shards  # allreduce_sum


staged = kiln.stage(mlp)(x_layout.shards())
print("devices with collectives:", staged.signal_device_ids)
rng = numpy.random.default_rng(3)
w1, w2 = rng.standard_normal((32, 64), numpy.float32), rng.standard_normal((64, 32), numpy.float32)
weights = {**kiln.shard_weights("w1", w1, w1_layout), **kiln.shard_weights("w2", w2, w2_layout)}
compiled = kiln.CompiledCallable(staged, weights)
x = rng.standard_normal((2, 32), numpy.float32)
outs = compiled(kiln.shard_tensor(x, x_layout))
for out in outs:
    numpy.testing.assert_allclose(out, numpy.maximum(x @ w1, 0) @ w2, rtol=1e-4, atol=1e-4)
print(len(outs), "replicas agree with NumPy")
