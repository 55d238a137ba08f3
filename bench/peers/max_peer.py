#!/usr/bin/env python3
"""MAX (Modular's `max` package) as a peer: the transformer of transformer_peers.py (or,
with --model mlp, the MLP of mlp_peers.py) built with MAX's graph API (max.graph) and run
on the CPU by max.engine. MAX lives in its own venv (build/max-venv), so
transformer_peers.py, mlp_peers.py and compile_peers.py run this script with that venv's
python and read what it writes.

The graph takes the token ids [batch, seq] (int64) as its input, or the MLP's features
[batch, dim] (float32); the weights are graph weights (max.graph.Weight), bound at
session.load through weights_registry rather than baked into the graph as constants.
compile_ms is the graph build (build_ms) plus session.load, which compiles (load_ms);
call_ms the median of timed calls after one warm-up, each call including the copy of the
output out to numpy.

Threads: InferenceSession(num_threads=N) aborts the process in max 26.7.0 and the
MODULAR_RUNTIME_NUM_THREADS setting does not change the worker count, but MAX's worker
pool follows the process's CPU affinity; so --threads N restricts this process to the
first N CPUs it may run on before max is imported. The JSON reports the threads MAX named
"🔥 Thread<i>" (its worker pools) at the end: N after a compile that hit MAX's cache, one
more after a cold compile, all on the N CPUs.

    max_peer.py --prefix P --layers 4 --dim 512 --heads 8 --seq 128 --batch 1 --threads 2
        --input P.ids_b1.npy --out out.npy --json max.json [--iterations 20 | --serve]
    max_peer.py --model mlp --prefix P --layers 4 --dim 512 --hidden 512 --batch 1
        --threads 2 --input P.x_b1.npy --out out.npy [--json max.json] [--serve]
    max_peer.py --compile-only --layers 32 --dim 512 --heads 8 --seq 128 --batch 1
        --vocab 1000 --threads 1 [--cache-dir DIR] [--json max.json]

--compile-only builds the model with random weights of the right shapes (no safetensors
file), compiles it twice in this process, a cold compile and then a warm one (a new graph,
with MAX's compile cache as the first left it), and prints one line per compile,
"MEASURE {json}"; --cache-dir points MAX's compile cache (MODULAR_CACHE_DIR) at DIR, an
empty one for a cold first compile.
"""

import argparse
import importlib.metadata
import json
import os
import sys
import time
import types

import numpy as np

from mlp_peers import mlp
from transformer_peers import (load_weights, median, pin_threads, random_weights, time_calls,
                               time_each, transformer)

THREADS_NOTE = ("InferenceSession(num_threads=N) aborts in max 26.7.0 ('AsyncRT::"
                "getOrCreateCPUDevice called requesting different options') and "
                "MODULAR_RUNTIME_NUM_THREADS leaves the worker count as it is; MAX sizes its "
                "worker pool by the CPU affinity, so this process is pinned to N CPUs")


def max_threads():
    """The threads of MAX's pools in this process (named '🔥 Thread<i>')."""
    count = 0
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/comm") as f:
                count += f.read().startswith("\N{FIRE} Thread")
        except OSError:  # the thread ended while we looked
            pass
    return count


def max_ops(bf16=False):
    from max.dtype import DType
    from max.graph import ops

    def dense(x, w):
        if not bf16:
            return x @ w
        return ops.cast(ops.cast(x, DType.bfloat16) @ ops.cast(w, DType.bfloat16), DType.float32)

    return types.SimpleNamespace(
        embed=lambda table, ids: ops.gather(table, ids, axis=0),
        heads=lambda t: ops.transpose(t, 1, 2), last_two=lambda t: ops.transpose(t, -1, -2),
        softmax=lambda t: ops.softmax(t, axis=-1),
        gelu_tanh=lambda t: ops.gelu(t, approximate="tanh"),
        layer_norm=lambda x, w, b, eps: ops.layer_norm(x, w, b, epsilon=eps),
        mean_last=lambda t: ops.mean(t, axis=-1), rsqrt=ops.rsqrt, relu=ops.relu, dense=dense)


def compile_model(session, weights, args):
    """Builds the graph (weights as max.graph.Weight, the ids or features as the input)
    and loads it into session; returns the model and the milliseconds of each step and of
    both."""
    from max.dtype import DType
    from max.graph import DeviceRef, Graph, TensorType, Weight

    device = DeviceRef.CPU()
    start = time.perf_counter()
    graph_weights = {name: Weight(name, DType.float32, value.shape, device)
                     for name, value in weights.items()}
    if args.model == "mlp":
        input_type = TensorType(DType.float32, (args.batch, args.dim), device)
        model = mlp(graph_weights, args, max_ops(args.bf16))
    else:
        input_type = TensorType(DType.int64, (args.batch, args.seq), device)
        model = transformer(graph_weights, args, max_ops(args.bf16))
    with Graph("kiln_" + args.model, input_types=[input_type]) as graph:
        graph.output(model(graph.inputs[0].tensor))
    built = time.perf_counter()
    model = session.load(graph, weights_registry=weights)
    end = time.perf_counter()
    return model, {"compile_ms": (end - start) * 1e3, "build_ms": (built - start) * 1e3,
                   "load_ms": (end - built) * 1e3}


def version():
    return "max " + importlib.metadata.version("max")


def new_session():
    from max.driver import CPU
    from max.engine import InferenceSession

    return InferenceSession(devices=[CPU()])


def run_peer(args):
    """The model from PREFIX.safetensors on the input in --input: output, compile and
    call."""
    from max.driver import Buffer

    weights = load_weights(args.prefix + ".safetensors")
    x = np.load(args.input)
    shape = (args.batch, args.dim) if args.model == "mlp" else (args.batch, args.seq)
    if x.shape != shape:
        raise SystemExit(f"max_peer.py: {args.input} has shape {x.shape}, expected {shape}")
    session = new_session()
    model, times = compile_model(session, weights, args)
    x_buffer = Buffer.from_numpy(x)

    def call():
        return model.execute(x_buffer)[0].to_numpy()

    np.save(args.out, call())
    if args.serve:
        call_ms = median(serve(call))
    else:
        call_ms = time_calls(call, args.iterations)
    return {**times, "call_ms": call_ms,
            "weights": "graph weights (max.graph.Weight) bound at load (weights_registry)"}


def serve(call):
    """--serve: prints "ready", then answers each line N on stdin with "times" and the
    milliseconds of N calls, until end of input (as `kiln bench --serve`). Returns them all."""
    print("ready", flush=True)
    all_times = []
    for line in sys.stdin:
        times = time_each(call, int(line))
        all_times += times
        print("times " + " ".join(f"{t:.6f}" for t in times), flush=True)
    return all_times


def compile_only(args):
    """Cold then warm compile of the model with random weights; prints each as it ends."""
    weights = random_weights(args.layers, args.dim, args.vocab)
    session = new_session()
    result = {}
    for measure in ("cold", "warm"):
        _, times = compile_model(session, weights, args)
        result[measure] = {**times, "version": version(),
                           "cache_dir": os.environ.get("MODULAR_CACHE_DIR")}
        print("MEASURE " + json.dumps({"measure": measure, **result[measure]}), flush=True)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=("transformer", "mlp"), default="transformer")
    for flag in ("--layers", "--dim", "--batch", "--threads"):
        parser.add_argument(flag, type=int, required=True)
    for flag in ("--heads", "--seq", "--hidden", "--outputs"):
        parser.add_argument(flag, type=int, help="the transformer's (heads, seq) or the "
                            "MLP's (hidden, outputs)")
    parser.add_argument("--compile-only", action="store_true")
    parser.add_argument("--prefix", help="the model's weights are PREFIX.safetensors")
    parser.add_argument("--input", help="the transformer's token ids, int64 [batch, seq], or "
                        "the MLP's features, float32 [batch, dim] (.npy)")
    parser.add_argument("--out", help="where the output goes (.npy)")
    parser.add_argument("--vocab", type=int, default=1000, help="with --compile-only")
    parser.add_argument("--cache-dir", help="with --compile-only: MAX's compile cache")
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--serve", action="store_true",
                        help="time calls on request instead of --iterations (see serve())")
    parser.add_argument("--json")
    parser.add_argument("--bf16", action="store_true",
                        help="Linear layers multiply bf16 operands (cast in the graph)")
    args = parser.parse_args()
    if not args.compile_only and not (args.prefix and args.input and args.out):
        parser.error("--prefix, --input and --out are required without --compile-only")
    if args.compile_only and args.model == "mlp":
        parser.error("--compile-only builds the transformer")
    for flag in ("hidden", "outputs") if args.model == "mlp" else ("heads", "seq"):
        if getattr(args, flag) is None:
            parser.error(f"--model {args.model} needs --{flag}")

    pin_threads(args.threads)  # before max is imported: its worker pool follows the affinity
    if args.cache_dir:
        os.environ["MODULAR_CACHE_DIR"] = args.cache_dir
    result = compile_only(args) if args.compile_only else run_peer(args)
    result.update({"version": version(),
                   "threads": args.threads, "max_threads": max_threads(),
                   "threads_note": THREADS_NOTE})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
