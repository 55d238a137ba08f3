#!/usr/bin/env python3
"""Compile time of kiln against JAX, torch.compile and MAX on stacks of N transformer
blocks (the model of transformer_peers.py with N layers, random weights, batch 1).

kiln's numbers come from bench_stage (stage + compile + plan of a stack of
kiln::nn.TransformerBlock, with shared subgraph bodies and inlined; medians after an
untimed warm-up in the same process). Each peer measures, in a process of its own per N:

  cold  the first compile in that process: JAX `jax.jit(model).lower(ids).compile()`
        (after the backend is up; no persistent compilation cache is configured);
        torch.compile's first call, with TORCHINDUCTOR_CACHE_DIR an empty temp dir;
        MAX's graph build + session.load, with MODULAR_CACHE_DIR an empty temp dir.
  warm  a second compile of the same model in the same process, from a new closure (JAX,
        torch) or a new graph (MAX), with every cache as the cold compile left it; for
        torch.compile after torch._dynamo.reset(), so that it compiles again rather than
        reuse the first compiled function.

torch.compile's steady call (median after the warm compile) is shown next to it. Every
measurement has a timeout (--timeout, from the end of the one before it); one that runs
out is reported as "timeout > N s" and the measurements after it in that process as not
run. The script pins itself, and so everything it starts, to --threads CPUs.

    taskset -c 0 build/peers-venv/bin/python bench/peers/compile_peers.py --threads 1
        [--blocks 1,8,32,128] [--dim 512] [--heads 8] [--seq 128] [--vocab 1000]
        [--timeout 300] [--iterations 5] [--bench-stage build/release/bench/bench_stage]
        [--max-python build/max-venv/bin/python] [--json out.json]
"""

import argparse
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

from transformer_peers import (DEFAULT_MAX_PYTHON, jax_ops, pin_threads, random_weights,
                               time_calls, torch_ops, transformer)

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_BENCH_STAGE = os.path.normpath(
    os.path.join(HERE, "..", "..", "build", "release", "bench", "bench_stage"))
MEASURES = ("cold", "warm")
COLUMNS = (("kiln subgraphs", "kiln", "subgraphs"), ("kiln inlined", "kiln", "inlined"),
           ("JAX cold", "jax", "cold"), ("JAX warm", "jax", "warm"),
           ("torch.compile cold", "torch.compile", "cold"),
           ("torch.compile warm", "torch.compile", "warm"),
           ("torch call", "torch.compile", "call"), ("MAX cold", "max", "cold"),
           ("MAX warm", "max", "warm"))


def report(measure, **values):
    """What a worker prints for each measurement as soon as it has it."""
    print("MEASURE " + json.dumps({"measure": measure, **values}), flush=True)


# ---- the workers: one system, one stack, in a process of their own ------------------


def jax_worker(weights, ids, args):
    import jax
    import jax.numpy as jnp

    p = {k: jnp.asarray(v) for k, v in weights.items()}
    ids_j = jnp.asarray(ids)  # the backend is up before the first compile is timed
    for measure in MEASURES:
        model = transformer(p, args, jax_ops())  # a new closure: jit's caches miss
        start = time.perf_counter()
        jax.jit(model).lower(ids_j).compile()
        report(measure, compile_ms=(time.perf_counter() - start) * 1e3,
               version="jax " + jax.__version__,
               compilation_cache_dir=jax.config.jax_compilation_cache_dir)


def torch_worker(weights, ids, args):
    import torch

    torch.set_num_threads(args.threads)
    p = {k: torch.from_numpy(v) for k, v in weights.items()}
    ids_t = torch.from_numpy(ids)
    with torch.inference_mode():
        for measure in MEASURES:
            torch._dynamo.reset()
            compiled = torch.compile(transformer(p, args, torch_ops()))
            start = time.perf_counter()
            compiled(ids_t)  # the first call compiles
            first_call_ms = (time.perf_counter() - start) * 1e3
            values = {"first_call_ms": first_call_ms, "version": "torch " + torch.__version__,
                      "cache_dir": os.environ.get("TORCHINDUCTOR_CACHE_DIR")}
            if measure == "warm":
                values["call_ms"] = time_calls(lambda: compiled(ids_t), args.iterations)
            report(measure, **values)


def worker(args):
    weights = random_weights(args.layers, args.dim, args.vocab)
    ids = np.random.default_rng(7).integers(0, args.vocab, (1, args.seq), dtype=np.int64)
    {"jax": jax_worker, "torch.compile": torch_worker}[args.worker](weights, ids, args)


# ---- the parent: runs the workers, bench_stage and max_peer.py ----------------------


def last_lines(text, count=5):
    return "\n".join(text.strip().splitlines()[-count:])


def run_measures(command, timeout, env=None):
    """Runs command, a worker that prints a MEASURE line per name in MEASURES in order, and
    returns {name: values}; each line has `timeout` seconds from the one before it (the
    first from the start). A timeout or an early exit is reported in the measure it hit,
    and the ones after it as not run."""
    results = {}
    with tempfile.TemporaryFile("w+") as stderr:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True,
                                env=env, start_new_session=True)
        lines = queue.Queue()

        def read():
            for line in proc.stdout:
                if line.startswith("MEASURE "):
                    lines.put(json.loads(line.removeprefix("MEASURE ")))
            lines.put(None)  # the worker closed its stdout: it ended

        threading.Thread(target=read, daemon=True).start()
        for measure in MEASURES:
            try:
                values = lines.get(timeout=timeout)
            except queue.Empty:
                os.killpg(proc.pid, signal.SIGKILL)
                results[measure] = {"error": f"timeout > {timeout:g} s"}
                break
            if values is None:
                proc.wait()
                stderr.seek(0)
                results[measure] = {"error": f"exited with {proc.returncode}:\n"
                                             + last_lines(stderr.read())}
                break
            results[measure] = values
        proc.wait()
    for measure in MEASURES:
        results.setdefault(measure, {"error": "not run"})
    return results


def peer_compiles(system, blocks, args):
    """The cold and warm compiles of one peer for a stack of `blocks`, each peer in a
    process of its own with a cache directory of its own."""
    common = ["--layers", str(blocks), "--dim", str(args.dim), "--heads", str(args.heads),
              "--seq", str(args.seq), "--vocab", str(args.vocab), "--threads", str(args.threads)]
    with tempfile.TemporaryDirectory(prefix="compile_peers_cache_") as cache:
        if system == "max":
            if not args.max_python or not os.path.exists(args.max_python):
                error = {"error": f"no MAX venv python at {args.max_python or DEFAULT_MAX_PYTHON}"}
                return {measure: error for measure in MEASURES}
            command = [args.max_python, os.path.join(HERE, "max_peer.py"), "--compile-only",
                       "--batch", "1", "--cache-dir", cache, *common]
            return run_measures(command, args.timeout)
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache)
        command = [sys.executable, os.path.abspath(__file__), "--worker", system,
                   "--iterations", str(args.iterations), *common]
        return run_measures(command, args.timeout, env)


def kiln_compiles(blocks, args):
    """bench_stage for one stack: {"subgraphs": entry, "inlined": entry}, where entry is
    bench_stage's JSON record plus total_ms = stage + compile + plan."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "stage.json")
        command = [args.bench_stage, "--blocks", str(blocks), "--dim", str(args.dim),
                   "--heads", str(args.heads), "--seq", str(args.seq), "--threads",
                   str(args.threads), "--reps", "5", "--compile-reps", "3", "--json", out]
        try:
            run = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
            if run.returncode != 0:
                raise RuntimeError(f"bench_stage exited with {run.returncode}:\n"
                                   + last_lines(run.stderr))
            with open(out) as f:
                records = json.load(f)["results"]
        except subprocess.TimeoutExpired:
            error = {"error": f"timeout > {args.timeout:g} s"}
            return {"subgraphs": error, "inlined": error}
        except (OSError, ValueError, KeyError, RuntimeError) as e:
            error = {"error": f"{type(e).__name__}: {e}"}
            return {"subgraphs": error, "inlined": error}
    results = {}
    for record in records:
        entry = dict(record)
        # Planning (memory plan + device-graph recording) happens on the first call: its
        # cost is the first call less a steady one.
        entry["plan_ms"] = max(0.0, entry["first_call_ms"] - entry["call_ms"])
        entry["total_ms"] = entry["stage_ms"] + entry["compile_ms"] + entry["plan_ms"]
        results["subgraphs" if record["subgraphs"] else "inlined"] = entry
    return results


def cell(values):
    """A table cell: milliseconds, or the error's first line."""
    if "error" in values:
        return values["error"].splitlines()[0]
    for key in ("total_ms", "compile_ms", "first_call_ms"):
        if key in values:
            return f"{values[key]:.1f}" + ("*" if "note" in values else "")
    raise KeyError(f"no time in {values}")


def print_table(rows, args):
    print(f"compile time, ms: stacks of transformer blocks, d_model {args.dim}, {args.heads} "
          f"heads, batch 1 x seq {args.seq}, vocab {args.vocab}, {args.threads} thread(s)")
    table = [["blocks", *(name for name, _, _ in COLUMNS)]]
    for row in rows:
        cells = [str(row["blocks"])]
        for _, system, measure in COLUMNS:
            if measure == "call":
                warm = row[system]["warm"]
                cells.append(f"{warm['call_ms']:.1f}" if "call_ms" in warm else "-")
            else:
                cells.append(cell(row[system][measure]))
        table.append(cells)
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    for r in table:
        print("  " + "  ".join(c.rjust(w) for c, w in zip(r, widths)))
    print("  kiln: stage + compile + plan, plan = first call - steady call (bench_stage "
          "medians after a warm-up, in-process; the blocks alone, without embedding and head)")
    print("  cold: first compile in a fresh process, empty compile caches "
          "(TORCHINDUCTOR_CACHE_DIR, MODULAR_CACHE_DIR temp dirs)")
    print("  warm: second compile in that process, of a new closure (JAX, torch; "
          "torch._dynamo.reset() first) or a new graph (MAX), caches as the first left them")
    print("  torch.compile: time of its first call (compile + one call); "
          "torch call: steady call after the warm compile")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--blocks", default="1,8,32,128", help="stack sizes, comma separated")
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--vocab", type=int, default=1000)
    parser.add_argument("--timeout", type=float, default=300,
                        help="seconds for each measurement")
    parser.add_argument("--iterations", type=int, default=5, help="timed torch calls")
    parser.add_argument("--bench-stage", default=DEFAULT_BENCH_STAGE)
    parser.add_argument("--max-python", help="python of the venv with MAX (default "
                        f"{DEFAULT_MAX_PYTHON} if it exists)",
                        default=DEFAULT_MAX_PYTHON if os.path.exists(DEFAULT_MAX_PYTHON) else None)
    parser.add_argument("--json")
    parser.add_argument("--worker", choices=("jax", "torch.compile"), help=argparse.SUPPRESS)
    parser.add_argument("--layers", type=int, help=argparse.SUPPRESS)  # the worker's stack
    args = parser.parse_args()

    pin_threads(args.threads)
    if args.worker:
        worker(args)
        return 0
    rows = []
    for blocks in (int(b) for b in args.blocks.split(",")):
        print(f"compile_peers: {blocks} block(s)", file=sys.stderr, flush=True)
        row = {"blocks": blocks, "kiln": kiln_compiles(blocks, args)}
        for system in ("jax", "torch.compile", "max"):
            row[system] = peer_compiles(system, blocks, args)
        rows.append(row)
    print_table(rows, args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"dim": args.dim, "heads": args.heads, "seq": args.seq, "batch": 1,
                       "vocab": args.vocab, "threads": args.threads, "timeout_s": args.timeout,
                       "cold": "first compile in a fresh process, empty compile caches",
                       "warm": "second compile in the same process, caches kept",
                       "results": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
