#!/usr/bin/env python3
"""The kiln command on ONNX models, as a user runs it, judged by ONNX's own reference
evaluator (onnx.reference, an independent implementation).

    cli_onnx_test.py --kiln build/release/bin/kiln

Builds small models with onnx.helper (a dense layer, GELU, LayerNormalization, a
Shape -> Gather -> Unsqueeze -> Concat -> Reshape chain over a dynamic batch dim,
Softmax), then checks that
* ``kiln run model.onnx --input x=x.npy`` matches onnx.reference at two batch sizes;
* ``kiln import model.onnx -o m.mlir`` writes m.mlir (inputs and outputs named) and
  m.safetensors, and ``kiln run m.mlir --weights m.safetensors`` gives the same outputs;
* an unsupported op fails with exit 2, naming every unsupported op and node at once;
* an unknown input name is a usage error naming the model's inputs.
Exit status 0 when every check passes.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def dense_model():
    rng = np.random.default_rng(0)
    inits = {
        "W": rng.standard_normal((8, 16)).astype(np.float32),
        "b": rng.standard_normal(16).astype(np.float32),
        "g": rng.uniform(0.5, 1.5, 16).astype(np.float32),
        "beta": rng.standard_normal(16).astype(np.float32),
        "zero": np.array([0], np.int64),
        "zero_scalar": np.array(0, np.int64),
        "tail": np.array([4, 4], np.int64),
    }
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h"], name="dense"),
        helper.make_node("Add", ["h", "b"], ["h2"]),
        helper.make_node("Gelu", ["h2"], ["h3"]),
        helper.make_node("LayerNormalization", ["h3", "g", "beta"], ["h4"], epsilon=1e-5),
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero_scalar"], ["batch"]),
        helper.make_node("Unsqueeze", ["batch", "zero"], ["batch1"]),
        helper.make_node("Concat", ["batch1", "tail"], ["shape"], axis=0),
        helper.make_node("Reshape", ["h4", "shape"], ["r"]),
        helper.make_node("Softmax", ["r"], ["probs"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "dense",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 4, 4])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    onnx.checker.check_model(model)
    return model


def position_model():
    """GPT-2's position ids and causal mask as torch.onnx.export writes them: a Range over
    the symbolic seq, CumSum, GatherND and GatherElements over index grids."""
    i64 = TensorProto.INT64
    inits = {"zero": np.array(0, np.int64), "one": np.array(1, np.int64),
             "one1": np.array([1], np.int64), "axis1": np.array(1, np.int64)}
    nodes = [
        helper.make_node("Shape", ["ids"], ["s"]),
        helper.make_node("Gather", ["s", "one"], ["seq"]),
        helper.make_node("Range", ["zero", "seq", "one"], ["pos"], name="arange"),
        helper.make_node("CumSum", ["ids", "axis1"], ["running"], reverse=1),
        helper.make_node("Unsqueeze", ["pos", "one1"], ["pos2"]),
        helper.make_node("GatherND", ["running", "pos2"], ["rows"]),  # running[pos]
        helper.make_node("Add", ["rows", "pos"], ["y0"]),
        helper.make_node("Unsqueeze", ["pos", "zero"], ["pos_row"]),
        helper.make_node("GatherElements", ["y0", "pos_row"], ["y"], axis=0),  # diagonal
    ]
    graph = helper.make_graph(
        nodes, "positions",
        [helper.make_tensor_value_info("ids", i64, ["seq", "seq"])],
        [helper.make_tensor_value_info("y", i64, [1, "seq"])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    onnx.checker.check_model(model)
    return model


def run(kiln, *args):
    return subprocess.run([kiln, *args], capture_output=True, text=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kiln", required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model = dense_model()
        path = os.path.join(tmp, "dense.onnx")
        onnx.save(model, path)
        reference = ReferenceEvaluator(model)
        for batch in (1, 5):
            x = np.random.default_rng(batch).standard_normal((batch, 8)).astype(np.float32)
            np.save(os.path.join(tmp, "x.npy"), x)
            expected = reference.run(None, {"x": x})[0]
            out = os.path.join(tmp, f"out{batch}")
            r = run(args.kiln, "run", path, "--input", "x=" + os.path.join(tmp, "x.npy"), "-o", out)
            check(r.returncode == 0, f"kiln run dense.onnx (batch {batch}) exits 0: {r.stderr.strip()}")
            if r.returncode == 0:
                got = np.load(os.path.join(out, "output0.npy"))
                err = float(np.max(np.abs(got - expected)) / np.max(np.abs(expected)))
                check(got.shape == expected.shape and err <= 1e-5,
                      f"batch {batch}: shape {got.shape}, relative error {err:.2e} vs onnx.reference")

        mlir = os.path.join(tmp, "m.mlir")
        r = run(args.kiln, "import", path, "-o", mlir)
        check(r.returncode == 0 and os.path.exists(os.path.join(tmp, "m.safetensors")),
              f"kiln import writes m.mlir and m.safetensors: {r.stdout.strip()} {r.stderr.strip()}")
        text = open(mlir).read() if os.path.exists(mlir) else ""
        check('{kiln.name = "x"}' in text and '{kiln.name = "probs"}' in text,
              "the module names its input x and output probs")
        r = run(args.kiln, "run", mlir, "--weights", os.path.join(tmp, "m.safetensors"),
                "--input", "x=" + os.path.join(tmp, "x.npy"), "-o", os.path.join(tmp, "outm"))
        check(r.returncode == 0, f"kiln run m.mlir --weights m.safetensors exits 0: {r.stderr.strip()}")
        if r.returncode == 0:
            same = np.array_equal(np.load(os.path.join(tmp, "outm", "output0.npy")),
                                  np.load(os.path.join(tmp, "out5", "output0.npy")))
            check(same, "the imported module computes what the ONNX file does, bit for bit")

        r = run(args.kiln, "run", path, "--input", "y=" + os.path.join(tmp, "x.npy"))
        check(r.returncode == 1 and "no argument named 'y'" in r.stderr and "takes x (" in r.stderr,
              f"an unknown input name is a usage error naming the inputs: {r.stderr.strip()}")

        r = run(args.kiln, "run", mlir, "--weights", os.path.join(tmp, "m.safetensors"))
        check(r.returncode == 2 and "missing input x (f32[batch, 8] on cpu:0)" in r.stderr
              and "--input NAME=FILE.npy" in r.stderr,
              f"a missing input is named as the model names it: {r.stderr.strip()}")

        bad = helper.make_model(helper.make_graph(
            [helper.make_node("Relu", ["x"], ["a"], name="ok"),
             helper.make_node("NonMaxSuppression", ["a"], ["b"], name="nms"),
             helper.make_node("StringNormalizer", ["b"], ["c"], name="sn")],
            "bad", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
            [helper.make_tensor_value_info("c", TensorProto.FLOAT, [2, 2])]),
            opset_imports=[helper.make_opsetid("", 17)])
        bad_path = os.path.join(tmp, "bad.onnx")
        onnx.save(bad, bad_path)
        r = run(args.kiln, "run", bad_path)
        check(r.returncode == 2
              and "ONNX op 'NonMaxSuppression' (opset 17) at node 'nms' is not supported" in r.stderr
              and "ONNX op 'StringNormalizer' (opset 17) at node 'sn' is not supported" in r.stderr,
              f"unsupported ops: exit 2, all named: {r.stderr.strip()}")

        # A Range over a symbolic dim: `kiln import` keeps seq symbolic (one module for
        # every seq); with --dim it folds; `kiln run model.onnx` fixes it from its inputs.
        pos = position_model()
        pos_path = os.path.join(tmp, "positions.onnx")
        onnx.save(pos, pos_path)
        symbolic = os.path.join(tmp, "p.mlir")
        r = run(args.kiln, "import", pos_path, "-o", symbolic)
        check(r.returncode == 0, f"kiln import keeps the symbolic seq: {r.stderr.strip()}")
        r = run(args.kiln, "import", pos_path, "-o", os.path.join(tmp, "p5.mlir"), "--dim",
                "seq=5")
        check(r.returncode == 0, f"kiln import --dim seq=5 exits 0: {r.stderr.strip()}")
        r = run(args.kiln, "import", pos_path, "-o", os.path.join(tmp, "p5.mlir"), "--dim",
                "sq=5")
        check(r.returncode == 2 and "no input has a symbolic dim named 'sq'" in r.stderr,
              f"--dim of a name no input has: exit 2, naming it: {r.stderr.strip()}")
        for n in (3, 6):
            ids = np.random.default_rng(n).integers(-50, 50, (n, n)).astype(np.int64)
            np.save(os.path.join(tmp, "ids.npy"), ids)
            expected = ReferenceEvaluator(pos).run(None, {"ids": ids})[0]
            for label, model in (("positions.onnx", pos_path), ("the symbolic p.mlir", symbolic)):
                out = os.path.join(tmp, f"pos{n}")
                r = run(args.kiln, "run", model, "--input",
                        "ids=" + os.path.join(tmp, "ids.npy"), "-o", out)
                check(r.returncode == 0, f"kiln run {label} (seq {n}) exits 0: {r.stderr.strip()}")
                if r.returncode == 0:
                    got = np.load(os.path.join(out, "output0.npy"))
                    check(got.shape == expected.shape and np.array_equal(got, expected),
                          f"{label}, seq {n}: kiln {got.tolist()} vs onnx.reference "
                          f"{expected.tolist()}")
    print(f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
