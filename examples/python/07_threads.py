"""Compiled calls release the GIL: Python threads run several callables at once."""

import threading
import time

import numpy

import kiln
from kiln import DType, TensorLayout

n = 384
staged = kiln.stage(lambda a, b: kiln.relu(a @ b) @ b)(TensorLayout(DType.float32, [n, n]), TensorLayout(DType.float32, [n, n]))
callables = [kiln.CompiledCallable(staged, threads=1) for _ in range(2)]
a = numpy.random.default_rng(4).standard_normal((n, n), numpy.float32)
for c in callables:
    c(a, a)  # plan each once


def work(c):
    for _ in range(10):
        c(a, a)


start = time.perf_counter()
for c in callables:
    work(c)
one_by_one = time.perf_counter() - start
threads = [threading.Thread(target=work, args=(c,)) for c in callables]
start = time.perf_counter()
for t in threads:
    t.start()
for t in threads:
    t.join()
together = time.perf_counter() - start
print(f"two callables one after the other {one_by_one:.3f} s, from two threads {together:.3f} s")
assert kiln._kiln._last_call_held_gil() == 0
