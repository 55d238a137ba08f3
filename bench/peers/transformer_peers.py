#!/usr/bin/env python3
"""kiln against the systems a user would pick instead, on the same transformer, weights
and inputs, at the same thread count (the process pins itself to the first --threads CPUs
it may run on, so that JAX's thread pool, sized by the affinity, has as many).

The calls are timed interleaved, in rounds (each round times a few calls of every system,
in an order that rotates), so that every system sees the same machine load: kiln runs as
`kiln bench --serve` and MAX as `max_peer.py --serve`, child processes that time calls on
request; the others run in this process. A system's turn starts after a short pause (so
that the previous system's spinning worker threads have gone to sleep) with one untimed
call (its weights back in cache). Each system's time is the median of its timed calls.

The model is the one `kiln demo --emit-mlir PREFIX.mlir` writes (a GPT-style stack of
kiln::nn.TransformerBlock: pre-norm LayerNorm, multi-head attention without a mask,
tanh-GELU MLP, a final RMSNorm and a bias-free LM head), rebuilt here in each peer from
PREFIX.safetensors. Each peer's output is compared with kiln's; a peer that is not
installed or fails is reported with its error, not skipped silently. MAX runs in its own
venv (--max-python) through max_peer.py.

With --bf16 every system multiplies its Linear layers in bfloat16 with f32 sums, in its
own way: kiln with --matmul-precision bf16, PyTorch (eager and torch.compile) under
torch.autocast("cpu", torch.bfloat16) (which also takes attention's matmuls to bf16), JAX
and MAX with the layers' operands cast to bf16 (JAX: f32 results through
preferred_element_type; MAX: bf16 results cast back); ONNX Runtime's CPU provider has no
bf16 MatMul and is reported as not run. Outputs then agree within bf16's error: the
check allows 5 % of the output's largest magnitude.

    transformer_peers.py --kiln build/release/bin/kiln --prefix /tmp/m --layers 4 --dim 512
        --heads 8 --batch 1 --seq 128 --threads 2 [--iterations 20] [--rounds 10]
        [--json out.json] [--max-python build/max-venv/bin/python] [--bf16]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import types

import numpy as np

import roofline
from served import SETTLE_S, ServedTimer, duration, median  # noqa: F401 (max_peer.py imports median)

# MAX is installed in a venv of its own, apart from the other peers; max_peer.py runs there.
# The default is the one scripts/bench-peers.sh installs.
DEFAULT_MAX_PYTHON = os.path.normpath(os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "max-venv", "bin", "python"))


def load_weights(path):
    from safetensors.numpy import load_file
    return load_file(path)


def random_weights(layers, dim, vocab, seed=0):
    """Random weights with the names and shapes of PREFIX.safetensors (MLP hidden 4 * dim),
    for measuring compile times without a weights file."""
    shapes = {"embed.weight": (vocab, dim), "final_norm.weight": (dim,),
              "lm_head.weight": (dim, vocab)}
    for i in range(layers):
        pre = f"layers.{i}"
        for norm in ("norm1", "norm2"):
            shapes[f"{pre}.{norm}.weight"] = shapes[f"{pre}.{norm}.bias"] = (dim,)
        for proj in ("q", "k", "v", "o"):
            shapes[f"{pre}.attn.{proj}.weight"] = (dim, dim)
            shapes[f"{pre}.attn.{proj}.bias"] = (dim,)
        shapes[f"{pre}.mlp.w1.weight"], shapes[f"{pre}.mlp.w1.bias"] = (dim, 4 * dim), (4 * dim,)
        shapes[f"{pre}.mlp.w2.weight"], shapes[f"{pre}.mlp.w2.bias"] = (4 * dim, dim), (dim,)
    rng = np.random.default_rng(seed)
    return {name: rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
            for name, shape in shapes.items()}


def pin_threads(threads):
    """Restricts this process, and the processes it starts, to the first `threads` CPUs it
    may run on, for the libraries that size their thread pools by the CPU affinity."""
    cpus = sorted(os.sched_getaffinity(0))
    if threads > len(cpus):
        raise SystemExit(f"--threads {threads}, but only {len(cpus)} CPU(s) allowed")
    os.sched_setaffinity(0, cpus[:threads])


def time_each(fn, iterations):
    """Milliseconds of each of `iterations` calls of fn."""
    times = []
    for _ in range(iterations):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return times


def time_calls(fn, iterations):
    """The median of `iterations` timed calls of fn, after one to warm up."""
    fn()
    return median(time_each(fn, iterations))


def interleave(timers, iterations, rounds):
    """Times `iterations` calls of every system in timers ({name: fn(n) -> n times in ms}),
    spread over `rounds` rounds; the order of the systems rotates from round to round, and
    each turn starts with a pause and an untimed call. A system that fails is dropped with
    its error. Returns {name: [ms, ...]} and {name: error}."""
    per_round = max(1, -(-iterations // rounds))
    times, errors = {name: [] for name in timers}, {}
    names = list(timers)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            if name in errors or len(times[name]) >= iterations:
                continue
            time.sleep(SETTLE_S)
            try:
                timers[name](1)
                times[name] += timers[name](min(per_round, iterations - len(times[name])))
            except Exception as e:  # noqa: BLE001 - reported, not hidden
                errors[name] = f"{type(e).__name__}: {e}"
    return times, errors


# ---- the model, once, over a small set of array operations --------------------------


def transformer(p, args, ops):
    """The kiln demo model over the weights p; ops supplies what differs between array
    libraries: embed(table, ids) gathers rows, heads(t) swaps axes 1 and 2, last_two(t)
    swaps the last two axes, softmax, gelu_tanh, layer_norm(x, w, b, eps), mean_last(t)
    (keeping the axis) and rsqrt."""
    head_dim = args.dim // args.heads

    def linear(x, prefix, bias=True):
        y = ops.dense(x, p[prefix + ".weight"])
        return y + p[prefix + ".bias"] if bias else y

    def attention(x, prefix):
        b, s, _ = x.shape
        q, k, v = (ops.heads(linear(x, prefix + n).reshape((b, s, args.heads, head_dim)))
                   for n in (".q", ".k", ".v"))
        scores = (q @ ops.last_two(k)) * (1.0 / np.sqrt(head_dim))
        context = ops.heads(ops.softmax(scores) @ v)
        return linear(context.reshape((b, s, args.dim)), prefix + ".o")

    def model(ids):
        x = ops.embed(p["embed.weight"], ids)
        for i in range(args.layers):
            pre = f"layers.{i}"
            n1 = ops.layer_norm(x, p[pre + ".norm1.weight"], p[pre + ".norm1.bias"], 1e-5)
            h = x + attention(n1, pre + ".attn")
            n2 = ops.layer_norm(h, p[pre + ".norm2.weight"], p[pre + ".norm2.bias"], 1e-5)
            x = h + linear(ops.gelu_tanh(linear(n2, pre + ".mlp.w1")), pre + ".mlp.w2")
        x = x * ops.rsqrt(ops.mean_last(x * x) + 1e-6) * p["final_norm.weight"]
        return linear(x, "lm_head", bias=False)

    return model


def jax_ops(bf16=False):
    """transformer()'s ops in jax.numpy; with bf16, Linear layers multiply bf16 operands
    into f32 results."""
    import jax
    import jax.numpy as jnp

    def dense(x, w):
        if not bf16:
            return x @ w
        return jnp.matmul(x.astype(jnp.bfloat16), w.astype(jnp.bfloat16),
                          preferred_element_type=jnp.float32)

    def mean_last(t):
        return t.mean(-1, keepdims=True)

    def layer_norm(x, w, b, eps):
        mean = mean_last(x)
        return (x - mean) / jnp.sqrt(mean_last((x - mean) ** 2) + eps) * w + b

    return types.SimpleNamespace(
        embed=lambda table, ids: table[ids], heads=lambda t: t.transpose(0, 2, 1, 3),
        last_two=lambda t: t.swapaxes(-1, -2), softmax=lambda t: jax.nn.softmax(t, axis=-1),
        gelu_tanh=lambda t: jax.nn.gelu(t, approximate=True), layer_norm=layer_norm,
        mean_last=mean_last, rsqrt=jax.lax.rsqrt, relu=jax.nn.relu, dense=dense)


def torch_ops():
    """transformer()'s ops in torch."""
    import torch
    import torch.nn.functional as F

    return types.SimpleNamespace(
        embed=lambda table, ids: table[ids], heads=lambda t: t.transpose(1, 2),
        last_two=lambda t: t.transpose(-1, -2), softmax=lambda t: torch.softmax(t, dim=-1),
        gelu_tanh=lambda t: F.gelu(t, approximate="tanh"),
        layer_norm=lambda x, w, b, eps: F.layer_norm(x, (x.shape[-1],), w, b, eps),
        mean_last=lambda t: t.mean(-1, keepdim=True), rsqrt=torch.rsqrt, relu=torch.relu,
        dense=lambda x, w: x @ w)  # in bf16 under torch.autocast


def jax_peer(build, weights, x, bf16=False):
    """jax.jit of build(weights, jax_ops()) on the input x."""
    import jax
    import jax.numpy as jnp

    model = build({k: jnp.asarray(v) for k, v in weights.items()}, jax_ops(bf16))

    x_j = jnp.asarray(x)
    start = time.perf_counter()
    compiled = jax.jit(model).lower(x_j).compile()
    compile_ms = (time.perf_counter() - start) * 1e3
    out = np.asarray(compiled(x_j))
    return {"compile_ms": compile_ms, "output": out, "version": "jax " + jax.__version__,
            "timer": lambda n: time_each(lambda: compiled(x_j).block_until_ready(), n)}


def torch_peers(build, weights, x, threads, bf16=False):
    """PyTorch eager and torch.compile (inductor) of build(weights, torch_ops()) on x; with
    bf16, under torch.autocast("cpu", torch.bfloat16)."""
    import contextlib

    import torch

    torch.set_num_threads(threads)
    f32_model = build({k: torch.from_numpy(v) for k, v in weights.items()}, torch_ops())

    def model(t):
        with (torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()):
            return f32_model(t).float()

    x_t = torch.from_numpy(x)
    def timer(fn):
        def time_n(n):
            with torch.inference_mode():
                return time_each(fn, n)
        return time_n

    results = {}
    with torch.inference_mode():
        out = model(x_t).numpy()
        results["torch eager"] = {"compile_ms": 0.0, "output": out, "timer": timer(
            lambda: model(x_t)), "version": f"torch {torch.__version__} eager"}
        try:
            compiled = torch.compile(model)
            start = time.perf_counter()
            out = compiled(x_t).numpy()  # the first call compiles
            compile_ms = (time.perf_counter() - start) * 1e3
            compiled(x_t)  # and a second one, to warm up
            results["torch.compile"] = {
                "compile_ms": compile_ms, "output": out, "timer": timer(lambda: compiled(x_t)),
                "version": f"torch {torch.__version__} compile"}
        except Exception as e:  # noqa: BLE001 - reported, not hidden
            results["torch.compile"] = {"error": f"{type(e).__name__}: {e}"}
    return results


class OnnxGraph:
    """An ONNX graph being built: the weights as initializers, op() adds a node and
    returns its output's name, const() adds a constant."""

    def __init__(self, weights):
        from onnx import numpy_helper

        self.nodes, self.inits = [], [numpy_helper.from_array(v, k) for k, v in weights.items()]
        self.counter = 0

    def name(self, stem):
        self.counter += 1
        return f"{stem}_{self.counter}"

    def const(self, value, dtype=np.float32):
        from onnx import numpy_helper

        n = self.name("c")
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), n))
        return n

    def op(self, kind, inputs, **attrs):
        from onnx import helper

        out = self.name(kind.lower())
        self.nodes.append(helper.make_node(kind, inputs, [out], **attrs))
        return out


def onnxruntime_peer(graph, result, x_name, x, dims, threads):
    """ONNX Runtime (CPU provider, `threads` intra-op threads) on the graph whose input is
    x_name (x's dtype, with the named dims `dims`) and whose output is `result`."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    graph.nodes.append(helper.make_node("Identity", [result], ["output"]))
    model = helper.make_model(helper.make_graph(
        graph.nodes, "kiln_peer",
        [helper.make_tensor_value_info(x_name, helper.np_dtype_to_tensor_dtype(x.dtype), dims)],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, None)], graph.inits),
        opset_imports=[helper.make_opsetid("", 17)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    start = time.perf_counter()
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    compile_ms = (time.perf_counter() - start) * 1e3
    out = session.run(None, {x_name: x})[0]
    return {"compile_ms": compile_ms, "output": out, "version": "onnxruntime " + ort.__version__,
            "timer": lambda n: time_each(lambda: session.run(None, {x_name: x}), n)}


def transformer_onnx(weights, ids, args):
    """The transformer as an ONNX graph, in ONNX Runtime."""
    graph = OnnxGraph(weights)
    op, const = graph.op, graph.const
    head_dim = args.dim // args.heads

    def linear(x, prefix, bias=True):
        y = op("MatMul", [x, prefix + ".weight"])
        return op("Add", [y, prefix + ".bias"]) if bias else y

    def gelu_tanh(x):
        inner = op("Mul", [op("Add", [x, op("Mul", [op("Mul", [op("Mul", [x, x]), x]),
                                                    const(0.044715)])]),
                           const(0.7978845608028654)])
        return op("Mul", [op("Mul", [x, const(0.5)]), op("Add", [op("Tanh", [inner]), const(1.0)])])

    def attention(x, prefix):
        shape4 = const([0, 0, args.heads, head_dim], np.int64)

        def split(t):
            return op("Transpose", [op("Reshape", [t, shape4])], perm=[0, 2, 1, 3])

        q, k, v = (split(linear(x, prefix + n)) for n in (".q", ".k", ".v"))
        kt = op("Transpose", [k], perm=[0, 1, 3, 2])
        scores = op("Mul", [op("MatMul", [q, kt]), const(1.0 / np.sqrt(head_dim))])
        context = op("MatMul", [op("Softmax", [scores], axis=-1), v])
        merged = op("Reshape", [op("Transpose", [context], perm=[0, 2, 1, 3]),
                                const([0, 0, args.dim], np.int64)])
        return linear(merged, prefix + ".o")

    x = op("Gather", ["embed.weight", "ids"], axis=0)
    for i in range(args.layers):
        pre = f"layers.{i}"
        n1 = op("LayerNormalization", [x, pre + ".norm1.weight", pre + ".norm1.bias"],
                axis=-1, epsilon=1e-5)
        h = op("Add", [x, attention(n1, pre + ".attn")])
        n2 = op("LayerNormalization", [h, pre + ".norm2.weight", pre + ".norm2.bias"],
                axis=-1, epsilon=1e-5)
        m = linear(gelu_tanh(linear(n2, pre + ".mlp.w1")), pre + ".mlp.w2")
        x = op("Add", [h, m])
    ms = op("ReduceMean", [op("Mul", [x, x])], axes=[-1], keepdims=1)
    normed = op("Mul", [op("Div", [x, op("Sqrt", [op("Add", [ms, const(1e-6)])])]),
                        "final_norm.weight"])
    logits = op("MatMul", [normed, "lm_head.weight"])
    return onnxruntime_peer(graph, logits, "ids", ids, ["batch", "seq"], args.threads)


def max_peer(input_path, args, model_flags):
    """MAX, which lives in its own venv: max_peer.py run by args.max_python on the same
    weights and input, with the model's flags (model_flags: "--model X --layers N ...");
    see that script for how it builds and times the model."""
    if not args.max_python or not os.path.exists(args.max_python):
        raise FileNotFoundError(f"no MAX venv python at {args.max_python or DEFAULT_MAX_PYTHON}"
                                " (scripts/bench-peers.sh installs it; or pass --max-python)")
    tmp = tempfile.TemporaryDirectory()
    out, result = os.path.join(tmp.name, "output.npy"), os.path.join(tmp.name, "max.json")
    command = [args.max_python, os.path.join(os.path.dirname(__file__), "max_peer.py"),
               "--prefix", args.prefix, "--input", input_path, "--out", out, "--json", result,
               "--serve", "--batch", str(args.batch), "--threads", str(args.threads)]
    command += model_flags
    timer = ServedTimer(command, "max_peer.py")

    def finish():
        with tmp:
            timer.close()
            with open(result) as f:
                r = json.load(f)
            r["output"] = np.load(out)
            r.pop("call_ms", None)  # this script's own median, of the calls it kept
        return r

    return {"timer": timer, "finish": finish}


def kiln_result(args, input_path):
    """kiln bench --serve (timed calls on request), and kiln run for the output."""
    out = args.prefix + ".bench.json"
    precision = ["--matmul-precision", "bf16" if args.bf16 else "f32"]
    command = [args.kiln, "bench", args.prefix + ".mlir", "--weights", args.prefix + ".safetensors",
               "--input", "arg0=" + input_path, "--threads", str(args.threads),
               "--reference-iterations", "0", "--json", out, "--serve"] + precision
    timer = ServedTimer(command, "kiln bench --serve")

    def finish():
        timer.close()
        with open(out) as f:
            bench = json.load(f)
        outdir = args.prefix + ".kiln_out"
        subprocess.run([args.kiln, "run", args.prefix + ".mlir", "--weights",
                        args.prefix + ".safetensors", "--input", "arg0=" + input_path, "--threads",
                        str(args.threads), "--output", outdir] + precision, check=True,
                       stdout=subprocess.DEVNULL)
        return {"compile_ms": bench["compile_ms"], "version": "kiln bf16" if args.bf16 else "kiln",
                "output": np.load(os.path.join(outdir, "output0.npy"))}

    return {"timer": timer, "finish": finish}


def add_common_flags(parser):
    """The flags every model's comparison takes."""
    for flag, kind in (("--kiln", str), ("--prefix", str), ("--batch", int), ("--threads", int)):
        parser.add_argument(flag, type=kind, required=True)
    parser.add_argument("--iterations", type=int, default=20, help="timed calls per system")
    parser.add_argument("--rounds", type=int, default=5,
                        help="the timed calls are spread over this many interleaved rounds")
    parser.add_argument("--json")
    parser.add_argument("--bf16", action="store_true",
                        help="Linear layers in bfloat16 in every system (see above)")
    parser.add_argument("--max-python", help="python of the venv with MAX (default "
                        f"{DEFAULT_MAX_PYTHON} if it exists)",
                        default=DEFAULT_MAX_PYTHON if os.path.exists(DEFAULT_MAX_PYTHON) else None)
    parser.add_argument("--ceiling", default=roofline.DEFAULT_BENCH_CEILING,
                        help="bench_ceiling, timed in the same rounds for the machine's "
                        f"ceilings ('' to skip; default {roofline.DEFAULT_BENCH_CEILING})")


def start_peers(build, onnx, weights, x, input_path, args, max_flags):
    """Every system, set up on the same weights and input x (saved at input_path): kiln,
    JAX, ONNX Runtime (onnx(weights, x, args) builds the graph), PyTorch eager and
    torch.compile (build(p, ops) is the model over an array library's ops), and MAX
    (max_peer.py with max_flags). A system that fails to set up is an {"error": ...}."""
    entries = {"kiln": kiln_result(args, input_path)}
    for peer, fn in (("jax.jit", lambda: jax_peer(build, weights, x, args.bf16)),
                     ("onnxruntime", lambda: onnx(weights, x, args))):
        if peer == "onnxruntime" and args.bf16:
            entries[peer] = {"error": "not run: the CPU execution provider has no bf16 MatMul"}
            continue
        try:
            entries[peer] = fn()
        except Exception as e:  # noqa: BLE001 - every failure is reported
            entries[peer] = {"error": f"{type(e).__name__}: {e}"}
    try:
        entries.update(torch_peers(build, weights, x, args.threads, args.bf16))
    except Exception as e:  # noqa: BLE001 - every failure is reported
        entries["torch"] = {"error": f"{type(e).__name__}: {e}"}
    try:
        entries["max"] = max_peer(input_path, args, max_flags + (["--bf16"] if args.bf16 else []))
    except Exception as e:  # noqa: BLE001 - every failure is reported
        entries["max"] = {"error": f"{type(e).__name__}: {e}"}
    return entries


def compare(entries, args, title, config, work):
    """Times every system's calls interleaved, with the machine's ceilings (see
    roofline.py; `work` is a call's {"flops", "weight_bytes"}), prints the table under
    `title`, writes --json (with `config`, the model's sizes); returns the exit code: 1 if
    a peer's output differs from kiln's by more than 1e-3 (with --bf16: 5 % of the
    output's largest magnitude)."""
    ceilings = roofline.Ceilings(args.ceiling, args.threads, work, args.bf16)
    timers = {name: e["timer"] for name, e in entries.items() if "timer" in e}
    times, errors = interleave({**timers, **ceilings.timers}, args.iterations, args.rounds)
    ceilings.close()
    results = {}
    for name, e in entries.items():
        r = {k: v for k, v in e.items() if k not in ("timer", "finish")}
        try:
            r.update(e["finish"]() if "finish" in e else {})
        except Exception as ex:  # noqa: BLE001 - every failure is reported
            errors.setdefault(name, f"{type(ex).__name__}: {ex}")
        if name in errors:
            r = {"error": errors[name]}
        elif "error" not in r:
            r["call_ms"], r["calls"] = median(times[name]), len(times[name])
        results[name] = r
    if "error" in results["kiln"]:
        raise SystemExit("kiln failed: " + results["kiln"]["error"])

    kiln = results["kiln"]
    if args.bf16:
        title += ", Linear layers in bf16"
    print(f"{title}, {args.threads} thread(s); "
          f"{args.iterations} calls each, interleaved in {args.rounds} rounds")
    print(f"  {'system':<30} {'compile':>10} {'median call':>12} {'kiln speed-up':>14}"
          f" {'max |diff| vs kiln':>19}")
    table = []
    for peer, r in results.items():
        if "error" in r:
            print(f"  {peer:<30} " + r["error"].replace("\n", "\n" + " " * 33))
            table.append({"system": peer, "error": r["error"]})
            continue
        diff = float(np.max(np.abs(r["output"].astype(np.float64) - kiln["output"])))
        speedup = r["call_ms"] / kiln["call_ms"]
        print(f"  {r['version']:<30} {r['compile_ms']:>8.1f}ms {duration(r['call_ms']):>12}"
              f" {speedup:>13.2f}x {diff:>19.2e}")
        table.append({"system": r["version"], "compile_ms": r["compile_ms"],
                      "call_ms": r["call_ms"], "kiln_speedup": speedup, "max_abs_diff": diff,
                      **{k: r[k] for k in ("threads_note", "max_threads") if k in r}})
    ceiling = ceilings.report(times, errors, results, roofline.goal_for(args.batch))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**config, "batch": args.batch, "threads": args.threads, "bf16": args.bf16,
                       "iterations": args.iterations, "rounds": args.rounds,
                       "results": table, "roofline": ceiling}, f, indent=2)
    limit = 0.05 * float(np.max(np.abs(kiln["output"]))) if args.bf16 else 1e-3
    bad = [t for t in table if "max_abs_diff" in t and t["max_abs_diff"] > limit]
    return 1 if bad else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_flags(parser)
    for flag in ("--layers", "--dim", "--heads", "--seq"):
        parser.add_argument(flag, type=int, required=True)
    parser.add_argument("--vocab", type=int)
    args = parser.parse_args()
    pin_threads(args.threads)  # before any peer is imported: thread pools follow the affinity

    weights = load_weights(args.prefix + ".safetensors")
    vocab = weights["embed.weight"].shape[0]
    ids = np.random.default_rng(7).integers(0, vocab, (args.batch, args.seq), dtype=np.int64)
    ids_path = f"{args.prefix}.ids_b{args.batch}.npy"
    np.save(ids_path, ids)
    max_flags = ["--model", "transformer"]
    for flag in ("layers", "dim", "heads", "seq"):
        max_flags += [f"--{flag}", str(getattr(args, flag))]
    entries = start_peers(lambda p, ops: transformer(p, args, ops), transformer_onnx, weights,
                          ids, ids_path, args, max_flags)
    title = (f"transformer: {args.layers} layers, d_model {args.dim}, {args.heads} heads, "
             f"batch {args.batch} x seq {args.seq}")
    work = roofline.linear_work(weights, args.batch * args.seq, args.bf16)
    work["flops"] += args.layers * 2 * (2.0 * args.batch * args.seq * args.seq * args.dim)
    return compare(entries, args, title, {"layers": args.layers, "dim": args.dim,
                                          "heads": args.heads, "seq": args.seq}, work)


if __name__ == "__main__":
    sys.exit(main())
