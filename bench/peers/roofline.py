"""The machine's ceilings, timed in the same rounds as the systems a peer benchmark
compares, so that each system's time reads as a share of what this machine allows now:
`bench_ceiling --serve` (bench/ceiling_bench.cpp) measures the compute ceiling (f32 FMAs
on every thread; with --bf16, bf16 multiply-adds on AMX tiles) and the speed of reading a
buffer the size of the model's weights. A call's floor is the larger of its matmuls'
FLOPs at the compute ceiling and its weights' bytes at the reading speed (a roofline: no
system, however it schedules its work, computes the call faster, unless it skips work).
"""

import os

from served import ServedTimer, duration, median

# The ceiling probe that `cmake --build --preset release` builds.
DEFAULT_BENCH_CEILING = os.path.normpath(os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "release", "bench",
    "bench_ceiling"))


def goal_for(batch):
    """The speed-up over the fastest peer that issue 7 asks for: 1.5x at batch 1 (where
    per-call costs show), 1.0x above."""
    return 1.5 if batch == 1 else 1.0


def linear_work(weights, rows, bf16, skip=("embed.weight",)):
    """FLOPs and weight bytes of one call's Linear layers: each 2-D weight [k, n] (but those
    in `skip`, read otherwise) multiplies `rows` rows (2 rows k n FLOPs) and is read once
    (bf16: 2 bytes per element, as every system keeps such weights after converting them
    once); every other weight (biases, norms) is read once in f32."""
    flops, read = 0.0, 0
    for name, w in weights.items():
        if name in skip:
            continue
        if w.ndim == 2:
            flops += 2.0 * rows * w.shape[0] * w.shape[1]
            read += w.size * (2 if bf16 else 4)
        else:
            read += w.size * 4
    return {"flops": flops, "weight_bytes": read}


class Ceilings:
    """The two probes as served processes, or the reason they are not there (no
    bench_ceiling: build it; a CPU without AMX with --bf16)."""

    def __init__(self, path, threads, work, bf16):
        self.work, self.timers, self.probes, self.errors = work, {}, {}, {}
        if not path:
            self.errors["ceiling"] = "not measured (--ceiling '')"
            return
        if not os.path.exists(path):
            self.errors["ceiling"] = (f"not measured: no {path} (build it with `cmake --build "
                                      "--preset release --target bench_ceiling`)")
            return
        for name, flags in (("ceiling: compute", ["--probe", "amx" if bf16 else "fma"]),
                            ("ceiling: read",
                             ["--probe", "read", "--bytes", str(work["weight_bytes"])])):
            try:
                timer = ServedTimer([path, "--threads", str(threads), "--serve"] + flags,
                                    f"bench_ceiling {' '.join(flags)}")
            except Exception as e:  # noqa: BLE001 - reported with the table
                self.errors[name] = f"{type(e).__name__}: {e}"
                continue
            words = next((line.split(maxsplit=3) for line in timer.preamble
                          if line.startswith("work ")), None)
            if words is None or len(words) < 4:
                self.errors[name] = f"bench_ceiling said no 'work' line: {timer.preamble}"
                timer.close()
                continue
            self.timers[name] = timer
            self.probes[name] = {"work": float(words[1]), "unit": words[2], "what": words[3]}

    def close(self):
        for name, timer in self.timers.items():
            try:
                timer.close()
            except Exception as e:  # noqa: BLE001 - reported with the table
                self.errors.setdefault(name, f"{type(e).__name__}: {e}")

    def report(self, times, errors, results, goal):
        """Prints the ceilings, each system's share of the call's floor and what `goal`
        (the speed-up over the fastest peer the benchmark aims at) asks of the machine;
        `times` are the probes' interleaved times (ms), `results` the systems' ({name:
        {"call_ms": ...}}). Returns the same as a dict for --json."""
        out = {"flops": self.work["flops"], "weight_bytes": self.work["weight_bytes"]}
        rates = {}
        for name, probe in self.probes.items():
            if name in errors or not times.get(name):
                self.errors.setdefault(name, errors.get(name, "no calls timed"))
                continue
            rates[name] = probe["work"] / (median(times[name]) * 1e-3)
            out[name.split(": ")[1]] = {"what": probe["what"], "per_second": rates[name]}
        print(f"  per call: {self.work['flops'] / 1e6:.1f} MFLOP of matmuls, "
              f"{self.work['weight_bytes'] / 2**20:.1f} MiB of weights")
        for name, error in self.errors.items():
            print(f"  {name}: {error}")
        compute, read = rates.get("ceiling: compute"), rates.get("ceiling: read")
        if compute is None or read is None:
            return {**out, "errors": self.errors}
        floor_ms = max(self.work["flops"] / compute, self.work["weight_bytes"] / read) * 1e3
        print(f"  ceilings in the same rounds: {self.probes['ceiling: compute']['what']}: "
              f"{compute / 1e9:.0f} GFLOP/s; {self.probes['ceiling: read']['what']}: "
              f"{read / 1e9:.1f} GB/s -> a call's floor is {duration(floor_ms)}")
        shares = {name: floor_ms / r["call_ms"] for name, r in results.items() if "call_ms" in r}
        print("  share of the ceiling (the floor / the median call): " +
              ", ".join(f"{name} {100 * s:.0f} %" for name, s in shares.items()))
        out.update(floor_ms=floor_ms, share_of_floor=shares)
        peers = {name: r["call_ms"] for name, r in results.items()
                 if "call_ms" in r and name != "kiln"}
        if peers:
            fastest = min(peers, key=peers.get)
            goal_ms = peers[fastest] / goal
            need = floor_ms / goal_ms
            verdict = "beyond this machine's ceiling" if need > 1 else "within the ceiling"
            print(f"  the goal, {goal:g}x the fastest peer ({fastest}, "
                  f"{duration(peers[fastest])}): {duration(goal_ms)} a call, "
                  f"{100 * need:.0f} % of the ceiling: {verdict}")
            out["goal"] = {"speedup": goal, "fastest_peer": fastest, "call_ms": goal_ms,
                           "share_of_floor": need}
        return out
