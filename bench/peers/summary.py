#!/usr/bin/env python3
"""One table of the model comparisons that transformer_peers.py and mlp_peers.py wrote as
JSON (scripts/bench-peers.sh runs it last): per model, precision, thread count and batch,
kiln's median call, the fastest peer's, kiln's speed-up over it against the goal (1.5x at
batch 1, 1.0x above), and, where the run timed the machine's ceiling (roofline.py), kiln's
share of it and the share the goal asks for. Markdown, so that it pastes into
docs/benchmarks.md.

    summary.py build/peers/transformer_t2_b1.json build/peers/mlp512_t1_b16.json ...
"""

import json
import sys

from roofline import goal_for
from served import duration


def model_name(run):
    if run.get("model") == "mlp":
        return f"MLP {run['layers']} x {run['hidden']}"
    return f"transformer {run['layers']} x {run['dim']}"


def row(run):
    """The table's cells for one comparison, or None when it is not one."""
    results = run.get("results")
    if not results:
        return None
    kiln = next((r for r in results if r["system"].startswith("kiln")), None)
    peers = [r for r in results if "call_ms" in r and not r["system"].startswith("kiln")]
    if kiln is None or "call_ms" not in kiln:
        return None
    goal = goal_for(run["batch"])
    cells = [model_name(run), "bf16" if run.get("bf16") else "f32", str(run["threads"]),
             str(run["batch"]), duration(kiln["call_ms"])]
    if peers:
        fastest = min(peers, key=lambda r: r["call_ms"])
        speedup = fastest["call_ms"] / kiln["call_ms"]
        cells += [f"{fastest['system']} {duration(fastest['call_ms'])}", f"{speedup:.2f}x",
                  f"{goal:g}x " + ("met" if speedup >= goal else "not met")]
    else:
        cells += ["no peer ran", "", f"{goal:g}x"]
    roof = run.get("roofline", {})
    if "floor_ms" in roof:
        cells += [f"{100 * roof['floor_ms'] / kiln['call_ms']:.0f} %",
                  f"{100 * roof['goal']['share_of_floor']:.0f} %" if "goal" in roof else ""]
    else:
        cells += ["not timed", ""]
    return cells


def main(paths):
    header = ["model", "precision", "threads", "batch", "kiln", "fastest peer",
              "kiln vs fastest", "goal", "kiln's share of the ceiling",
              "the goal's share of the ceiling"]
    rows = []
    for path in paths:
        try:
            with open(path) as f:
                cells = row(json.load(f))
        except (OSError, ValueError, KeyError) as e:
            print(f"summary.py: skipping {path}: {type(e).__name__}: {e}", file=sys.stderr)
            continue
        if cells is not None:
            rows.append(cells)
    if not rows:
        raise SystemExit("summary.py: no model comparison among " + " ".join(paths))
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header))
    for cells in rows:
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
