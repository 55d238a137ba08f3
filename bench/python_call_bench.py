"""What a compiled call costs from Python on top of the same call from C++.

A compiled 16-float add (two inputs, one output) is called from Python (kiln's package:
tree match, arrays borrowed, GIL released, NumPy arrays out) and from C++
(CompiledCallable::run on the same borrowed inputs: the checked C++ call, timed inside the
extension), in interleaved rounds at one kernel thread. The C++ loop runs twice: back to
back, and with busy waits between calls as long as the Python caller's own overhead, so
that the runtime's stream thread is in the state a Python caller leaves it in (asleep
between calls or spinning). The overhead is Python's time minus that second C++ time.

    PYTHONPATH=build/release/python .venv-test/bin/python bench/python_call_bench.py
"""

import argparse
import statistics
import time

import numpy

import kiln
from kiln import DType, TensorLayout


def python_ns(compiled, args, n):
    start = time.perf_counter()
    for _ in range(n):
        compiled(*args)
    return (time.perf_counter() - start) / n * 1e9


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=20000)
    options = parser.parse_args()

    cases = {
        "add f32[16] + f32[16]": (
            lambda a, b: a + b,
            [TensorLayout(DType.float32, [16])] * 2,
            (numpy.ones(16, numpy.float32), numpy.ones(16, numpy.float32)),
        ),
        "tree {x, y, scale: 2.0} -> (sum, diff)": (
            lambda d: (d["x"] + d["y"] * d["scale"], d["x"] - d["y"]),
            [{"x": TensorLayout(DType.float32, [16]), "y": TensorLayout(DType.float32, [16]), "scale": 2.0}],
            ({"x": numpy.ones(16, numpy.float32), "y": numpy.ones(16, numpy.float32), "scale": 2.0},),
        ),
    }
    print(f"kiln Python call overhead: {options.rounds} interleaved rounds of {options.calls} calls, "
          "1 kernel thread; medians in ns per call")
    print(f"{'case':42} {'Python':>8} {'C++':>8} {'C++ at Python pace':>19} {'overhead':>9}")
    for name, (fn, layouts, args) in cases.items():
        compiled = kiln.CompiledCallable(kiln.stage(fn)(*layouts), threads=1)
        for _ in range(2000):
            compiled(*args)
        py, cpp, paced = [], [], []
        for _ in range(options.rounds):
            py.append(python_ns(compiled, args, options.calls))
            cpp.append(kiln._kiln._bench_cpp_call(compiled, args))
            gap = max(statistics.median(py) - statistics.median(cpp), 0.0)
            paced.append(kiln._kiln._bench_cpp_call(compiled, args, gap))
        p, c, q = statistics.median(py), statistics.median(cpp), statistics.median(paced)
        print(f"{name:42} {p:8.0f} {c:8.0f} {q:19.0f} {p - q:9.0f}")


if __name__ == "__main__":
    main()
