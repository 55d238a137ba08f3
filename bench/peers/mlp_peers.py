#!/usr/bin/env python3
"""kiln against the same peers as transformer_peers.py on a plain MLP, the model whose
batch-1 calls are small enough for per-call overheads to show: features [batch, dim],
then --layers hidden layers relu(x W + b) of width --hidden, then a linear head to
--outputs. All systems run on the same weights and input, at the same thread count (pinned
to the first --threads CPUs, as transformer_peers.py does), timed interleaved as transformer_peers.py does.

This script writes the model for kiln itself: PREFIX.mlir (kiln's MLIR text form, a
dynamic batch), PREFIX.safetensors (deterministic weights: W ~ U(±1/√fan_in), b ~
U(±0.02)) and PREFIX.x_b<batch>.npy (the input, N(0, 1)).

    mlp_peers.py --kiln build/release/bin/kiln --prefix build/peers/mlp --layers 4
        --dim 512 --hidden 512 --outputs 10 --batch 1 --threads 2 [--iterations 200]
        [--rounds 10] [--json out.json] [--max-python build/max-venv/bin/python] [--bf16]
"""

import argparse
import sys

import numpy as np


def mlp(p, args, ops):
    """The MLP over the weights p; ops.relu and ops.dense (x @ w) are the array
    library's."""

    def model(x):
        for i in range(args.layers):
            x = ops.relu(ops.dense(x, p[f"layers.{i}.weight"]) + p[f"layers.{i}.bias"])
        return ops.dense(x, p["head.weight"]) + p["head.bias"]

    return model


def layer_sizes(args):
    """(name, fan_in, fan_out) of each linear layer, in order."""
    widths = [args.dim] + [args.hidden] * args.layers + [args.outputs]
    names = [f"layers.{i}" for i in range(args.layers)] + ["head"]
    return list(zip(names, widths[:-1], widths[1:]))


def make_weights(args, seed=0):
    rng = np.random.default_rng(seed)
    weights = {}
    for name, fan_in, fan_out in layer_sizes(args):
        bound = 1 / np.sqrt(fan_in)
        weights[name + ".weight"] = rng.uniform(-bound, bound, (fan_in, fan_out)).astype(np.float32)
        weights[name + ".bias"] = rng.uniform(-0.02, 0.02, (fan_out,)).astype(np.float32)
    return weights


def module_text(args):
    """The MLP in kiln's MLIR text form: the batch is a dynamic dim named `batch`."""

    def tensor(*dims):
        shape = "x".join("?" if d == "batch" else str(d) for d in dims)
        if "batch" in dims:
            return f"tensor<{shape}xf32, #kiln.tensor<[{', '.join(map(str, dims))}]>>"
        return f"tensor<{shape}xf32>"

    lines, x, values = [], "%arg0", 0

    def op(text):
        nonlocal values
        lines.append(f"    %{values} = {text}")
        values += 1
        return f"%{values - 1}"

    for name, fan_in, fan_out in layer_sizes(args):
        w = op(f'"kiln.weight"() {{name = "{name}.weight"}} : () -> {tensor(fan_in, fan_out)}')
        b = op(f'"kiln.weight"() {{name = "{name}.bias"}} : () -> {tensor(fan_out)}')
        rows_in, rows_out = tensor("batch", fan_in), tensor("batch", fan_out)
        y = op(f'"kiln.matmul"({x}, {w}) : ({rows_in}, {tensor(fan_in, fan_out)}) -> {rows_out}')
        x = op(f'"kiln.add"({y}, {b}) : ({rows_out}, {tensor(fan_out)}) -> {rows_out}')
        if name != "head":
            x = op(f'"kiln.relu"({x}) : ({rows_out}) -> {rows_out}')
    result = tensor("batch", args.outputs)
    return ('module attributes {kiln.device = "cpu:0", kiln.entry = @main} {\n'
            f"  func.func @main(%arg0: {tensor('batch', args.dim)}) -> {result} {{\n"
            + "\n".join(lines) + f"\n    return {x} : {result}\n  }}\n}}\n")


def mlp_onnx(weights, x, args):
    """The MLP as an ONNX graph, in ONNX Runtime."""
    from transformer_peers import OnnxGraph, onnxruntime_peer

    graph = OnnxGraph(weights)
    h = "x"
    for name, _, _ in layer_sizes(args):
        h = graph.op("Add", [graph.op("MatMul", [h, name + ".weight"]), name + ".bias"])
        if name != "head":
            h = graph.op("Relu", [h])
    return onnxruntime_peer(graph, h, "x", x, ["batch", args.dim], args.threads)


def main():
    from safetensors.numpy import save_file
    from roofline import linear_work
    from transformer_peers import add_common_flags, compare, pin_threads, start_peers

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_flags(parser)
    for flag, default in (("--layers", 4), ("--dim", 512), ("--hidden", 512), ("--outputs", 10)):
        parser.add_argument(flag, type=int, default=default)
    args = parser.parse_args()
    for flag in ("layers", "dim", "hidden", "outputs", "batch", "threads"):
        if getattr(args, flag) < (0 if flag == "layers" else 1):
            parser.error(f"--{flag} must be positive, not {getattr(args, flag)}")
    pin_threads(args.threads)  # before any peer is imported: thread pools follow the affinity

    weights = make_weights(args)
    with open(args.prefix + ".mlir", "w") as f:
        f.write(module_text(args))
    save_file(weights, args.prefix + ".safetensors")
    x = np.random.default_rng(7).standard_normal((args.batch, args.dim), dtype=np.float32)
    x_path = f"{args.prefix}.x_b{args.batch}.npy"
    np.save(x_path, x)

    max_flags = ["--model", "mlp"]
    for flag in ("layers", "dim", "hidden", "outputs"):
        max_flags += [f"--{flag}", str(getattr(args, flag))]
    entries = start_peers(lambda p, ops: mlp(p, args, ops), mlp_onnx, weights, x, x_path, args,
                          max_flags)
    title = (f"MLP: {args.dim} -> {args.layers} x {args.hidden} (relu) -> {args.outputs}, "
             f"batch {args.batch}")
    return compare(entries, args, title, {"model": "mlp", "layers": args.layers, "dim": args.dim,
                                          "hidden": args.hidden, "outputs": args.outputs},
                   linear_work(weights, args.batch, args.bf16, skip=()))


if __name__ == "__main__":
    sys.exit(main())
