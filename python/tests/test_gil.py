"""Compiled calls release the GIL: Python threads call several callables at once."""

import threading

import numpy

import kiln
from kiln import DType, TensorLayout


def test_calls_run_without_the_gil_and_threads_call_at_once():
    n = 256
    staged = kiln.stage(lambda a, b: kiln.relu(a @ b) @ b)(
        TensorLayout(DType.float32, [n, n]), TensorLayout(DType.float32, [n, n])
    )
    callables = [kiln.CompiledCallable(staged, threads=1) for _ in range(2)]
    rng = numpy.random.default_rng(0)
    inputs = [(rng.standard_normal((n, n), numpy.float32), rng.standard_normal((n, n), numpy.float32)) for _ in range(2)]
    expected = [numpy.maximum(a @ b, 0) @ b for a, b in inputs]
    errors = []
    barrier = threading.Barrier(2)

    def worker(i):
        try:
            barrier.wait()
            for _ in range(20):
                out = callables[i](*inputs[i])
                numpy.testing.assert_allclose(out, expected[i], rtol=1e-4, atol=1e-3)
        except Exception as e:  # reported below, in the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert kiln._kiln._last_call_held_gil() == 0  # the kernels ran with the GIL released


def test_one_callable_from_two_threads_is_serialised_and_right():
    staged = kiln.stage(lambda x: x * 3)(TensorLayout(DType.float32, [64]))
    compiled = kiln.CompiledCallable(staged)
    results = {}

    def worker(i):
        results[i] = [compiled(numpy.full(64, i, numpy.float32)) for _ in range(50)]

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, outs in results.items():
        for out in outs:
            numpy.testing.assert_array_equal(out, numpy.full(64, 3 * i))
