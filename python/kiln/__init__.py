"""kiln for Python: trace functions over tensors into a graph IR that prints as MLIR,
compile them into fast callables, and call them with NumPy arrays (docs/python.md).

    import numpy, kiln
    from kiln import DType, Tensor, TensorLayout, CPU

    def scale(x: Tensor) -> Tensor:
        return x * 2

    staged = kiln.stage(scale)(TensorLayout(DType.float32, [4], CPU()))
    print(staged)                                  # the MLIR of the whole module
    compiled = kiln.CompiledCallable(staged)
    y = compiled(numpy.arange(4, dtype=numpy.float32))   # array([0., 2., 4., 6.])

Everything here is kiln's C++ library (the extension module ``kiln._kiln``); the Python
files add only what is Python's own: indexing syntax, decorators, and NumPy conversions.
"""

import os as _os

from . import _kiln

# Ops staged from kiln's own Python files are located at the user's line, not here.
_kiln._set_package_dir(_os.path.dirname(__file__) + _os.sep)

from ._kiln import (  # noqa: E402
    Accelerator,
    CompiledCallable,
    CPU,
    CUDA,
    Device,
    DeviceError,
    DeviceMesh,
    DType,
    Error,
    InternalError,
    Module,
    OnnxModel,
    Partial,
    Replicated,
    Sharded,
    ShardedLayout,
    ShardedTensor,
    StagedGraph,
    Stager,
    Subgraph,
    SubgraphCache,
    Tensor,
    TensorLayout,
    TreeDef,
    UserError,
    abs,
    add,
    all_to_all,
    allgather,
    allreduce_sum,
    arange,
    argmax,
    asarray,
    avg_pool,
    bitwise_and,
    bitwise_not,
    bitwise_or,
    bitwise_xor,
    broadcast,
    broadcast_to,
    cast,
    ceil,
    concat,
    conv,
    conv_transpose,
    cos,
    cpu_device_count,
    cumsum,
    div,
    embedding,
    equal,
    erf,
    exp,
    floor,
    fmod,
    gather,
    gather_elements,
    gather_nd,
    gelu,
    greater,
    greater_equal,
    import_onnx,
    layer_norm,
    less,
    less_equal,
    log,
    log_softmax,
    matmul,
    max,
    max_pool,
    maximum,
    mean,
    min,
    minimum,
    mul,
    name_scope,
    neg,
    not_equal,
    onnx_inputs,
    onnx_supported_ops,
    permute,
    pow,
    prod,
    redistribute,
    reduce_scatter_sum,
    relu,
    reshape,
    resize,
    rms_norm,
    round,
    rsqrt,
    scatter_elements,
    scatter_nd,
    set_cpu_device_count,
    shard_tensor,
    shard_weights,
    sharded_weight,
    shift_left,
    shift_right,
    sigmoid,
    sign,
    silu,
    sin,
    slice,
    softmax,
    split,
    sqrt,
    stage,
    sub,
    sum,
    tan,
    tanh,
    top_k,
    transfer_to,
    transpose,
    tree_flatten,
    tree_unflatten,
    unshard,
    weight,
    where,
)
from . import nn  # noqa: E402
from ._arrays import constant, numpy_dtype  # noqa: E402


def as_subgraph(fn=None, *, name: str = "", prefix: str = ""):
    """Wraps fn so that its calls while staging become calls of one shared subgraph body
    (traced once per distinct argument structure and types). As a function,
    ``layer = kiln.as_subgraph(block, name="block")``, or as a decorator, with or without
    arguments: ``@kiln.as_subgraph`` / ``@kiln.as_subgraph(name="block")``. Calls share a
    body when they go through the same wrapper (or wrappers of one ``name``)."""
    if fn is None:
        return lambda f: Subgraph(f, name, prefix)
    return Subgraph(fn, name, prefix)


from . import compilation  # noqa: E402

__version__ = "0.1.0"
