#!/usr/bin/env python3
"""Two kiln builds (or two sets of options) timed side by side, interleaved.

Each side runs as `kiln bench --serve` on the same model and inputs; the rounds alternate
which side goes first, with a pause before each turn and one untimed call, as
transformer_peers.py does for the peers. Prints each side's median call and the ratio.

    taskset -c 0-1 python3 bench/peers/kiln_ab.py --a /tmp/kiln_old --b build/release/bin/kiln \
      -- build/peers/mlp512.mlir -w build/peers/mlp512.safetensors \
         -i build/peers/mlp512.x_b16.npy -t 2
"""
import argparse
import statistics
import subprocess
import sys
import time


def start(kiln, args):
    p = subprocess.Popen([kiln, "bench", *args, "--reference-iterations", "0", "--serve"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    for line in p.stdout:
        if line.strip() == "ready":
            return p
    sys.exit(f"{kiln} ended before it was ready (exit {p.wait()})")


def turn(p, calls):
    time.sleep(0.05)
    p.stdin.write("1\n")
    p.stdout.readline()  # the untimed call
    p.stdin.write(f"{calls}\n")
    line = p.stdout.readline().split()
    if not line or line[0] != "times":
        sys.exit(f"unexpected answer from kiln bench --serve: {' '.join(line)}")
    return [float(t) for t in line[1:]]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", required=True, help="kiln binary A (the baseline)")
    ap.add_argument("--b", required=True, help="kiln binary B")
    ap.add_argument("--a-options", default="", help="extra options for A only")
    ap.add_argument("--b-options", default="", help="extra options for B only")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--calls", type=int, default=20, help="timed calls per side per round")
    ap.add_argument("args", nargs="+", help="kiln bench arguments shared by both sides")
    o = ap.parse_args()
    sides = {"A": start(o.a, o.args + o.a_options.split()),
             "B": start(o.b, o.args + o.b_options.split())}
    times = {"A": [], "B": []}
    for r in range(o.rounds):
        for name in (("A", "B") if r % 2 == 0 else ("B", "A")):
            times[name] += turn(sides[name], o.calls)
    for p in sides.values():
        p.stdin.close()
        p.wait()
    med = {k: statistics.median(v) for k, v in times.items()}
    for k in ("A", "B"):
        print(f"{k}: median {med[k]:.4f} ms over {len(times[k])} calls")
    print(f"B is {med['A'] / med['B']:.3f}x A")


if __name__ == "__main__":
    main()
