#!/usr/bin/env python3
"""kiln's CPU kernels against PyTorch's, in one run at one thread count: GELU (erf), SiLU
and softmax (rows of 1024) in elements per second, f32 matmul N x N x N in GFLOP/s.

kiln's numbers come from `bench_kernels --json` (kernel time from the profiler: copying
inputs into a plan is not counted); PyTorch's are median times of the op called on a
tensor of the same size with `torch.set_num_threads(threads)` (allocation of the result
included, as a PyTorch user pays it; matmul writes into a preallocated `out=`). Both take
--reps calls per kernel; the two alternate over --rounds rounds (kiln, PyTorch, kiln, ...)
and each number is the median over the rounds, so that both see the same machine load (a
single sub-millisecond matmul swings by 2x on a shared machine).

    kernels_peers.py --bench-kernels build/release/bench/bench_kernels --threads 2
        [--elements 16777216] [--sizes 256,512,1024,2048] [--reps 20] [--rounds 3]
        [--json out.json]
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time

from served import median


def median_seconds(fn, reps):
    fn()  # warm up
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return median(times)


def kiln_results(args):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([args.bench_kernels, "--threads", str(args.threads), "--elements",
                        str(args.elements), "--sizes", args.sizes, "--reps", str(args.reps),
                        "--json", out.name],
                       check=True, stdout=subprocess.DEVNULL)
        with open(out.name) as f:
            rows = json.load(f)["results"]
    return {r["name"]: r["kiln"] for r in rows if r["section"] in ("activation", "matmul")}


def torch_results(args):
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(args.threads)
    cols = 1024
    x = torch.empty(args.elements // cols, cols).uniform_(-4, 4)
    ops = {"gelu": lambda: F.gelu(x), "silu": lambda: F.silu(x),
           "softmax": lambda: torch.softmax(x, dim=-1)}
    out = {"version": torch.__version__}
    with torch.inference_mode():
        for name, fn in ops.items():
            out[name] = x.numel() / median_seconds(fn, args.reps) / 1e9
        for n in (int(s) for s in args.sizes.split(",")):
            a, b, c = torch.rand(n, n), torch.rand(n, n), torch.empty(n, n)
            seconds = median_seconds(lambda: torch.matmul(a, b, out=c), args.reps)
            out[f"N={n}"] = 2 * n**3 / seconds / 1e9
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench-kernels", required=True)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--elements", type=int, default=16 * 1024 * 1024)
    parser.add_argument("--sizes", default="256,512,1024,2048")
    parser.add_argument("--reps", type=int, default=20, help="calls per kernel and round")
    parser.add_argument("--rounds", type=int, default=3, help="kiln and PyTorch alternate")
    parser.add_argument("--json")
    args = parser.parse_args()

    kiln_rounds, torch_rounds = [], []
    for _ in range(max(1, args.rounds)):
        kiln_rounds.append(kiln_results(args))
        try:
            torch_rounds.append(torch_results(args))
        except Exception as e:  # noqa: BLE001 - reported, not hidden
            print(f"PyTorch failed: {type(e).__name__}: {e}")
            return 1
    kiln = {k: median([r[k] for r in kiln_rounds]) for k in kiln_rounds[0]}
    torch = {k: (median([r[k] for r in torch_rounds]) if k != "version" else v)
             for k, v in torch_rounds[0].items()}
    print(f"kernels vs PyTorch {torch['version']}, {args.threads} thread(s), "
          f"{args.elements} elements, median of {len(kiln_rounds)} alternating rounds")
    print(f"  {'kernel':<10} {'kiln':>10} {'PyTorch':>10} {'unit':<14} {'kiln / PyTorch':>14}")
    table = []
    for name, value in kiln.items():
        unit = "GFLOP/s" if name.startswith("N=") else "G elements/s"
        ratio = value / torch[name]
        print(f"  {name:<10} {value:>10.2f} {torch[name]:>10.2f} {unit:<14} {ratio:>13.2f}x")
        table.append({"kernel": name, "kiln": value, "torch": torch[name], "unit": unit,
                      "kiln_vs_torch": ratio})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "elements": args.elements,
                       "torch": torch["version"], "results": table}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
