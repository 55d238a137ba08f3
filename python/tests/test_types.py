"""The package's small types: devices, dtypes, layouts, the error hierarchy, and the
classes stage, import_onnx and tree_flatten return."""

import numpy
import pytest

import kiln
from kiln import DType, TensorLayout


def test_devices():
    assert str(kiln.CPU()) == "cpu:0" and str(kiln.CPU(2)) == "cpu:2"
    assert kiln.CUDA(1) == kiln.Accelerator(1) == kiln.Device("cuda:1")
    assert kiln.CUDA(1).kind == "cuda" and kiln.CUDA(1).index == 1
    assert kiln.Device("cpu") == kiln.CPU(0) and hash(kiln.Device("cpu:1")) == hash(kiln.CPU(1))
    assert repr(kiln.CPU(3)) == "Device('cpu:3')"
    with pytest.raises(kiln.UserError):
        kiln.Device("tpu:0")


def test_dtypes_and_layouts():
    assert DType.bfloat16.size_in_bytes == 2 and DType.int64.short_name == "i64"
    layout = TensorLayout(DType.float32, [2, "seq"], kiln.CPU(1))
    assert layout.shape == (2, "seq") and layout.rank == 2 and str(layout.device) == "cpu:1"
    assert layout == TensorLayout(DType.float32, (2, "seq"), kiln.CPU(1))
    assert str(layout) == "f32[2, seq] on cpu:1" and "TensorLayout(" in repr(layout)
    assert TensorLayout(DType.int8, [numpy.int64(3)]).shape == (3,)  # any __index__ int
    with pytest.raises(kiln.UserError, match="symbolic"):
        TensorLayout(DType.float32, [2.5])
    with pytest.raises(kiln.UserError):
        TensorLayout(DType.float32, [-1])
    t = kiln.Tensor(layout)
    assert t.kind == "placeholder" and t.data_ptr == 0 and t.layout == layout


def test_error_hierarchy():
    assert issubclass(kiln.UserError, kiln.Error) and issubclass(kiln.UserError, ValueError)
    assert issubclass(kiln.DeviceError, kiln.Error) and issubclass(kiln.DeviceError, RuntimeError)
    assert issubclass(kiln.InternalError, kiln.Error) and issubclass(kiln.InternalError, RuntimeError)
    assert issubclass(kiln.Error, Exception)


def test_returned_classes():
    stager = kiln.stage(lambda x: x + 1, name="entry")
    assert isinstance(stager, kiln.Stager)
    staged = stager(TensorLayout(DType.float32, [2]))
    assert isinstance(staged, kiln.StagedGraph) and isinstance(staged.graph, kiln.Module)
    assert staged.graph.entry == "entry" and "StagedGraph((Tensor) -> Tensor)" == repr(staged)
    with pytest.raises(kiln.UserError, match="no graph named 'nope'"):
        staged.graph.num_ops("nope")
    leaves, tree = kiln.tree_flatten([numpy.zeros(1)])
    assert isinstance(tree, kiln.TreeDef) and str(tree) == "[Tensor]" and hash(tree) == hash(kiln.tree_flatten([numpy.ones(1)])[1])
    assert kiln.OnnxModel.__name__ == "OnnxModel"  # instances: test_onnx.py
    compiled = kiln.CompiledCallable(staged)
    assert "kiln.add" in compiled.optimized() and "digraph" in compiled.plan_dot(numpy.ones(2, numpy.float32))
    assert compiled.in_tree == staged.in_tree and compiled.out_tree == staged.out_tree
    with pytest.raises(kiln.UserError, match="matmul_precision 'f8'"):
        kiln.CompiledCallable(staged, matmul_precision="f8")
    staged_mm = kiln.stage(lambda x: x @ kiln.weight("w", TensorLayout(DType.float32, [8, 8])))(TensorLayout(DType.float32, [8, 8]))
    w = numpy.eye(8, dtype=numpy.float32) * numpy.float32(1.00390625)  # not a bf16 number
    x = numpy.eye(8, dtype=numpy.float32)
    f32 = kiln.CompiledCallable(staged_mm, {"w": w}, threads=1)
    bf16 = kiln.CompiledCallable(staged_mm, {"w": w}, threads=1, matmul_precision="bf16")
    assert f32(x)[0, 0] == numpy.float32(1.00390625)
    assert bf16(x)[0, 0] == numpy.float32(1.0)  # the weight rounded to bfloat16
    assert bf16.stats()["bf16_matmuls"] == 1 and f32.stats()["bf16_matmuls"] == 0


def test_winograd_convs_option():
    layout = TensorLayout(DType.float32, [16, 16, 3, 3])
    staged = kiln.stage(lambda x: kiln.conv(x, kiln.weight("w", layout), pads=[1, 1, 1, 1]))(
        TensorLayout(DType.float32, [1, 16, 10, 10]))
    rng = numpy.random.default_rng(3)
    w = rng.uniform(-0.5, 0.5, (16, 16, 3, 3)).astype(numpy.float32)
    x = rng.uniform(-1, 1, (1, 16, 10, 10)).astype(numpy.float32)
    fast = kiln.CompiledCallable(staged, {"w": w}, threads=1)
    direct = kiln.CompiledCallable(staged, {"w": w}, threads=1, winograd_convs=False)
    a, b = fast(x), direct(x)
    numpy.testing.assert_allclose(a, b, rtol=0, atol=2e-6 * numpy.abs(b).max())
    # oneDNN 2.6's Winograd kernels run at the AVX-512 levels, kiln's own below them (25 2x2
    # tiles here); with AMX (not seen on this project's machines) a conv may stay direct,
    # which is right too.
    isa, ran = fast.stats()["isa"], fast.stats()["winograd_convs"]
    assert ran == (ran if isa == "amx" else 1)
    assert direct.stats()["winograd_convs"] == 0
