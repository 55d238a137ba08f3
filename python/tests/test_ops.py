"""Every op function and Tensor operator, staged, compiled and compared with NumPy."""

import math

import numpy
import pytest

import kiln
from kiln import DType, TensorLayout

rng = numpy.random.default_rng(7)
X = rng.uniform(0.5, 2.0, (3, 4)).astype(numpy.float32)
Y = rng.uniform(0.5, 2.0, (3, 4)).astype(numpy.float32)
S = rng.standard_normal((3, 4)).astype(numpy.float32)  # signed
I = numpy.array([[5, -3, 7, 0], [1, 2, -8, 4], [9, -1, 3, 6]], dtype=numpy.int64)
erf = numpy.vectorize(math.erf)


def run(fn, *arrays):
    layouts = [TensorLayout(kiln.asarray(a).dtype, list(a.shape)) for a in arrays]
    staged = kiln.stage(fn)(*layouts)
    return kiln.CompiledCallable(staged)(*arrays)


UNARY = {
    "neg": (kiln.neg, numpy.negative, S),
    "abs": (kiln.abs, numpy.abs, S),
    "exp": (kiln.exp, numpy.exp, S),
    "log": (kiln.log, numpy.log, X),
    "sqrt": (kiln.sqrt, numpy.sqrt, X),
    "rsqrt": (kiln.rsqrt, lambda a: 1 / numpy.sqrt(a), X),
    "tanh": (kiln.tanh, numpy.tanh, S),
    "erf": (kiln.erf, erf, S),
    "sin": (kiln.sin, numpy.sin, S),
    "cos": (kiln.cos, numpy.cos, S),
    "tan": (kiln.tan, numpy.tan, S),
    "sign": (kiln.sign, numpy.sign, S),
    "floor": (kiln.floor, numpy.floor, S * 3),
    "ceil": (kiln.ceil, numpy.ceil, S * 3),
    "round": (kiln.round, numpy.round, S * 3),
    "sigmoid": (kiln.sigmoid, lambda a: 1 / (1 + numpy.exp(-a)), S),
    "relu": (kiln.relu, lambda a: numpy.maximum(a, 0), S),
    "silu": (kiln.silu, lambda a: a / (1 + numpy.exp(-a)), S),
    "gelu": (kiln.gelu, lambda a: 0.5 * a * (1 + erf(a / math.sqrt(2))), S),
    "bitwise_not": (kiln.bitwise_not, numpy.invert, I),
    "softmax": (kiln.softmax, lambda a: numpy.exp(a) / numpy.exp(a).sum(-1, keepdims=True), S),
    "log_softmax": (kiln.log_softmax, lambda a: a - numpy.log(numpy.exp(a).sum(-1, keepdims=True)), S),
    "transpose": (kiln.transpose, numpy.transpose, S),
    "cast": (lambda a: kiln.cast(a, DType.int32), lambda a: a.astype(numpy.int32), S * 5),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name):
    fn, ref, a = UNARY[name]
    numpy.testing.assert_allclose(run(fn, a), ref(a), rtol=2e-6, atol=2e-6)


BINARY = {
    "add": (kiln.add, numpy.add, X, Y),
    "sub": (kiln.sub, numpy.subtract, X, Y),
    "mul": (kiln.mul, numpy.multiply, X, Y),
    "div": (kiln.div, numpy.divide, X, Y),
    "pow": (kiln.pow, numpy.power, X, Y),
    "maximum": (kiln.maximum, numpy.maximum, S, Y),
    "minimum": (kiln.minimum, numpy.minimum, S, Y),
    "fmod": (kiln.fmod, numpy.fmod, S * 5, Y),
    "equal": (kiln.equal, numpy.equal, I, I.T.copy().reshape(3, 4)),
    "not_equal": (kiln.not_equal, numpy.not_equal, I, I * 0),
    "less": (kiln.less, numpy.less, S, Y),
    "less_equal": (kiln.less_equal, numpy.less_equal, I, I * 0),
    "greater": (kiln.greater, numpy.greater, S, Y),
    "greater_equal": (kiln.greater_equal, numpy.greater_equal, I, I * 0),
    "bitwise_and": (kiln.bitwise_and, numpy.bitwise_and, I, I * 3),
    "bitwise_or": (kiln.bitwise_or, numpy.bitwise_or, I, I * 3),
    "bitwise_xor": (kiln.bitwise_xor, numpy.bitwise_xor, I, I * 3),
    "shift_left": (kiln.shift_left, numpy.left_shift, I, numpy.abs(I) % 4),
    "shift_right": (kiln.shift_right, numpy.right_shift, I, numpy.abs(I) % 4),
    "matmul": (kiln.matmul, numpy.matmul, X, Y.T.copy()),
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary(name):
    fn, ref, a, b = BINARY[name]
    numpy.testing.assert_allclose(run(fn, a, b), ref(a, b), rtol=2e-6, atol=2e-6)


def test_operators_with_tensors_and_scalars_on_either_side():
    def f(a, b):
        return (
            a + b, a - b, a * b, a / b, a ** 2, 2 ** a, -a, abs(a), a @ b.T,
            1 + a, 1 - a, 2 * a, 1 / a, a < b, a <= b, a > b, a >= b, a == b, a != b,
            a > 1, 1 < a, a == 1.0,
        )

    out = run(f, X, Y)
    a, b = X, Y
    ref = (
        a + b, a - b, a * b, a / b, a ** 2, 2 ** a, -a, abs(a), a @ b.T,
        1 + a, 1 - a, 2 * a, 1 / a, a < b, a <= b, a > b, a >= b, a == b, a != b,
        a > 1, 1 < a, a == 1.0,
    )
    assert len(out) == len(ref)
    for got, want in zip(out, ref):
        numpy.testing.assert_allclose(got, want, rtol=2e-6)


def test_integer_operators_and_pytorch_scalar_rules():
    def f(i):
        return i & 6, i | 1, i ^ 3, ~i, i << 1, i >> 1, 7 & i, i * 2, i * 0.5, i + True

    out = run(f, I)
    ref = (I & 6, I | 1, I ^ 3, ~I, I << 1, I >> 1, 7 & I, I * 2, I * 0.5, I + 1)
    for got, want in zip(out, ref):
        numpy.testing.assert_array_equal(got, want)
    assert out[7].dtype == numpy.int64  # an int scalar keeps the integer dtype
    assert out[8].dtype == numpy.float32  # a float scalar makes it float32, as in PyTorch


def test_scalars_that_do_not_fit_are_refused():
    with pytest.raises(kiln.UserError, match="does not fit the i8 tensor"):
        kiln.stage(lambda x: x + 300)(TensorLayout(DType.int8, [2]))
    with pytest.raises(kiln.UserError, match="2\\^53 or more"):
        kiln.stage(lambda x: x + 2**60)(TensorLayout(DType.int64, [2]))
    with pytest.raises(kiln.UserError, match="does not fit in int64"):
        kiln.stage(lambda x: x + 2**70)(TensorLayout(DType.int64, [2]))


def test_python_only_operators_are_refused_with_the_fix():
    with pytest.raises(kiln.UserError, match="kiln.fmod"):
        kiln.stage(lambda x: x % 2)(TensorLayout(DType.float32, [2]))
    with pytest.raises(kiln.UserError, match="floor"):
        kiln.stage(lambda x: x // 2)(TensorLayout(DType.float32, [2]))
    with pytest.raises(kiln.UserError, match="no truth value"):
        kiln.stage(lambda x: x if x else x)(TensorLayout(DType.float32, [2]))


def test_reductions_and_normalisation():
    gamma = numpy.linspace(0.5, 1.5, 4, dtype=numpy.float32)
    beta = numpy.linspace(-1, 1, 4, dtype=numpy.float32)

    def f(x, g, b):
        return (
            kiln.sum(x), kiln.sum(x, 1), kiln.mean(x, [0], keepdim=True), kiln.max(x, 0),
            kiln.min(x, 1), kiln.prod(x, 1), kiln.argmax(x, 1), x.sum(0), x.mean(),
            kiln.layer_norm(x, g, b, 1e-5), kiln.rms_norm(x, g, 1e-6), kiln.cumsum(x, 1),
            kiln.cumsum(x, 1, exclusive=True, reverse=True),
        )

    out = run(f, S, gamma, beta)
    mu, var = S.mean(-1, keepdims=True), S.var(-1, keepdims=True)
    rev = numpy.flip(numpy.cumsum(numpy.flip(S, 1), 1), 1) - S
    ref = (
        S.sum(), S.sum(1), S.mean(0, keepdims=True), S.max(0), S.min(1), S.prod(1),
        S.argmax(1), S.sum(0), S.mean(), (S - mu) / numpy.sqrt(var + 1e-5) * gamma + beta,
        S / numpy.sqrt((S * S).mean(-1, keepdims=True) + 1e-6) * gamma, numpy.cumsum(S, 1), rev,
    )
    for got, want in zip(out, ref):
        numpy.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_shapes_and_indexing_ops():
    ids = numpy.array([2, 0], dtype=numpy.int64)

    def f(x, i):
        parts = kiln.split(x, [1, 3], 1)
        values, indices = kiln.top_k(x, 2, 1)
        return (
            kiln.reshape(x, [4, 3]), x.reshape(2, 6), kiln.permute(x, [1, 0]),
            kiln.transpose(x, 0, 1), x.T, kiln.broadcast_to(x[0], [2, 4]),
            kiln.slice(x, 1, 1, 4, 2), kiln.concat([x, x], 0), parts[0], parts[1],
            kiln.gather(x, i, 1), kiln.embedding(x, i), values, indices, x.astype(DType.float64),
            x.permute(1, 0), x.transpose(0, 1),
        )

    out = run(f, S, ids)
    top = numpy.argsort(-S, 1, kind="stable")[:, :2]
    ref = (
        S.reshape(4, 3), S.reshape(2, 6), S.T, S.T, S.T, numpy.broadcast_to(S[0], (2, 4)),
        S[:, 1:4:2], numpy.concatenate([S, S]), S[:, :1], S[:, 1:], S[:, ids], S[ids],
        numpy.take_along_axis(S, top, 1), top, S.astype(numpy.float64), S.T, S.T,
    )
    for got, want in zip(out, ref):
        numpy.testing.assert_allclose(got, want, rtol=1e-6)


def test_element_and_nd_gathers_and_scatters():
    idx = numpy.array([[0, 3], [1, 1], [2, 0]], dtype=numpy.int64)
    upd = numpy.ones((3, 2), numpy.float32)
    nd = numpy.array([[0, 1], [2, 3]], dtype=numpy.int64)
    nd_upd = numpy.array([10, 20], numpy.float32)

    def f(x, i, u, n, nu):
        return (
            kiln.gather_elements(x, i, 1), kiln.scatter_elements(x, i, u, 1),
            kiln.scatter_elements(x, i, u, 1, reduction="add"), kiln.gather_nd(x, n),
            kiln.scatter_nd(x, n, nu),
        )

    out = run(f, S, idx, upd, nd, nd_upd)
    se = S.copy()
    numpy.put_along_axis(se, idx, upd, 1)
    sa = S.copy()
    for r in range(3):
        for c in range(2):
            sa[r, idx[r, c]] += 1
    snd = S.copy()
    snd[0, 1], snd[2, 3] = 10, 20
    ref = (numpy.take_along_axis(S, idx, 1), se, sa, S[nd[:, 0], nd[:, 1]], snd)
    for got, want in zip(out, ref):
        numpy.testing.assert_allclose(got, want, rtol=1e-6)


def test_where_and_arange_and_constants():
    table = numpy.array([1.0, 2.0, 3.0, 4.0], numpy.float32)

    def f(x):
        c = kiln.constant(table)
        return kiln.where(x > 0, x, 0.0), kiln.where(x > 0, 1.0, x), kiln.arange(4), kiln.arange(1, 7, 2), x + c, x + table

    out = run(f, S)
    ref = (numpy.where(S > 0, S, 0), numpy.where(S > 0, 1, S), numpy.arange(4), numpy.arange(1, 7, 2), S + table, S + table)
    for got, want in zip(out, ref):
        numpy.testing.assert_allclose(got, want)


def test_windows_and_resize():
    img = rng.standard_normal((1, 2, 5, 5)).astype(numpy.float32)
    w = rng.standard_normal((3, 2, 3, 3)).astype(numpy.float32)
    bias = numpy.array([1, 2, 3], numpy.float32)

    def f(x, w, b, wt):
        return (
            kiln.conv(x, w, b, pads=[1, 1, 1, 1]), kiln.conv(x, w, strides=[2, 2]),
            kiln.max_pool(x, [2, 2], strides=[2, 2]), kiln.avg_pool(x, [5, 5]),
            kiln.resize(x, [-1, -1, 10, 10], mode="nearest"),
            kiln.conv_transpose(x, wt),
        )

    out = run(f, img, w, bias, w.transpose(1, 0, 2, 3).copy())

    def conv(x, w, pad, stride):
        x = numpy.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
        k = w.shape[-1]
        n = (x.shape[-1] - k) // stride + 1
        o = numpy.zeros((1, w.shape[0], n, n), numpy.float64)
        for i in range(n):
            for j in range(n):
                patch = x[:, :, i * stride : i * stride + k, j * stride : j * stride + k]
                o[0, :, i, j] = numpy.tensordot(w, patch[0], axes=([1, 2, 3], [0, 1, 2]))
        return o

    def conv_t(x, w):  # w [C, M, K, K]
        k = w.shape[-1]
        o = numpy.zeros((1, w.shape[1], x.shape[2] + k - 1, x.shape[3] + k - 1))
        for i in range(x.shape[2]):
            for j in range(x.shape[3]):
                o[0, :, i : i + k, j : j + k] += numpy.tensordot(x[0, :, i, j], w, axes=(0, 0))
        return o

    pooled = img[:, :, :4, :4].reshape(1, 2, 2, 2, 2, 2).max(axis=(3, 5))
    ref = (
        conv(img, w, 1, 1) + bias.reshape(1, 3, 1, 1), conv(img, w, 0, 2), pooled,
        img.mean(axis=(2, 3), keepdims=True), img.repeat(2, 2).repeat(2, 3), conv_t(img, w.transpose(1, 0, 2, 3)),
    )
    for got, want in zip(out, ref):
        numpy.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
