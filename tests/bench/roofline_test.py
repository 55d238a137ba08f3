#!/usr/bin/env python3
"""bench_ceiling's served protocol and its errors, the roofline arithmetic of
bench/peers/roofline.py that the peer benchmarks print and summary.py's table rows (no timing is asserted: only that
the probes answer, with positive times, and that the report follows from the numbers).

    roofline_test.py BENCH_CEILING BENCH_PEERS_DIR
"""

import contextlib
import io
import subprocess
import sys
import types
import unittest

BENCH_CEILING, PEERS = sys.argv[1], sys.argv[2]
sys.path.insert(0, PEERS)

import roofline  # noqa: E402  (the path first)
import summary  # noqa: E402


def fake_weight(*shape):
    size = 1
    for d in shape:
        size *= d
    return types.SimpleNamespace(ndim=len(shape), shape=shape, size=size)


class Probe(unittest.TestCase):
    def serve(self, *flags):
        process = subprocess.Popen([BENCH_CEILING, "--serve", *flags], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, text=True)
        out, _ = process.communicate("3\n1\n", timeout=120)
        self.assertEqual(process.returncode, 0)
        return out.splitlines()

    def check_served(self, lines, unit, amount=None):
        work = lines[0].split(maxsplit=3)
        self.assertEqual(work[0], "work")
        self.assertEqual(work[2], unit)
        if amount is not None:
            self.assertEqual(float(work[1]), amount)
        self.assertGreater(float(work[1]), 0)
        self.assertEqual(lines[1], "ready")
        times = [line.split() for line in lines[2:]]
        self.assertEqual([t[0] for t in times], ["times", "times"])
        self.assertEqual([len(t) - 1 for t in times], [3, 1])  # one time per call asked for
        for t in times:
            self.assertTrue(all(float(x) > 0 for x in t[1:]))

    def test_fma_and_read_answer_each_request_with_that_many_times(self):
        self.check_served(self.serve("--probe", "fma", "--threads", "2"), "flop")
        # 64 KiB in whole 64-byte lines per thread, read in whole passes of 64 MiB a call.
        lines = self.serve("--probe", "read", "--bytes", "65536", "--threads", "2")
        self.check_served(lines, "byte", amount=65536.0 * 1024)
        self.assertIn("reading 0.1 MiB", lines[0])

    def test_bad_arguments_name_the_flag_and_exit_1(self):
        for flags, says in ((["--probe", "gpu"], "--probe must be fma, amx or read, not 'gpu'"),
                            (["--probe", "read", "--bytes", "12"], "--bytes must be at least"),
                            (["--probe", "fma", "--threads", "0"], "--threads must be"),
                            (["--probe"], "incomplete argument '--probe'")):
            run = subprocess.run([BENCH_CEILING, *flags], capture_output=True, text=True)
            self.assertEqual(run.returncode, 1, flags)
            self.assertIn(says, run.stderr)


class Roofline(unittest.TestCase):
    def test_linear_work_counts_matmul_flops_and_bytes(self):
        weights = {"embed.weight": fake_weight(1000, 8), "l.weight": fake_weight(8, 16),
                   "l.bias": fake_weight(16)}
        self.assertEqual(roofline.linear_work(weights, 4, False),
                         {"flops": 2.0 * 4 * 8 * 16, "weight_bytes": 8 * 16 * 4 + 16 * 4})
        # bf16: the matrices at two bytes an element, the rest in f32; nothing skipped.
        self.assertEqual(roofline.linear_work(weights, 1, True, skip=()),
                         {"flops": 2.0 * (1000 * 8 + 8 * 16),
                          "weight_bytes": (1000 * 8 + 8 * 16) * 2 + 16 * 4})

    def ceilings(self, flops, weight_bytes):
        c = roofline.Ceilings("", 1, {"flops": flops, "weight_bytes": weight_bytes}, False)
        self.assertIn("not measured", c.errors["ceiling"])
        c.errors = {}
        c.probes = {"ceiling: compute": {"work": 1e9, "unit": "flop", "what": "fma"},
                    "ceiling: read": {"work": 1e9, "unit": "byte", "what": "read"}}
        return c

    def report(self, c, times, results, goal):
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            out = c.report(times, {}, results, goal)
        return out, printed.getvalue()

    def test_the_floor_is_the_slower_of_computing_and_reading(self):
        # 100 GFLOP/s and 10 GB/s: 2 GFLOP take 20 ms, 100 MB 10 ms -> 20 ms.
        c = self.ceilings(2e9, 1e8)
        times = {"ceiling: compute": [10.0, 10.0, 12.0], "ceiling: read": [100.0]}
        results = {"kiln": {"call_ms": 25.0}, "peer": {"call_ms": 40.0}}
        out, printed = self.report(c, times, results, 1.5)
        self.assertAlmostEqual(out["floor_ms"], 20.0)
        self.assertAlmostEqual(out["share_of_floor"]["kiln"], 0.8)
        self.assertAlmostEqual(out["share_of_floor"]["peer"], 0.5)
        # 1.5x the peer is 26.7 ms: 75 % of the ceiling's speed.
        self.assertEqual(out["goal"]["fastest_peer"], "peer")
        self.assertAlmostEqual(out["goal"]["share_of_floor"], 0.75)
        self.assertIn("within the ceiling", printed)
        # Reading bound instead: 100 MB at 1 GB/s is 100 ms, beyond a 1.5x goal of 40 ms.
        times["ceiling: read"] = [1000.0]
        out, printed = self.report(self.ceilings(2e9, 1e8), times, results, 1.5)
        self.assertAlmostEqual(out["floor_ms"], 100.0)
        self.assertIn("beyond this machine's ceiling", printed)

    def test_a_missing_probe_is_reported_not_guessed(self):
        c = self.ceilings(1e9, 1e6)
        out, printed = self.report(c, {"ceiling: compute": [1.0]}, {"kiln": {"call_ms": 1}}, 1)
        self.assertNotIn("floor_ms", out)
        self.assertIn("ceiling: read: no calls timed", printed)


class Summary(unittest.TestCase):
    def run_of(self, batch, kiln_ms, peer_ms, roof=None):
        return {"layers": 4, "dim": 512, "batch": batch, "threads": 2, "bf16": False,
                "results": [{"system": "kiln", "call_ms": kiln_ms},
                            {"system": "slow", "call_ms": 3 * peer_ms},
                            {"system": "fast", "call_ms": peer_ms},
                            {"system": "broken", "error": "did not install"}],
                **({"roofline": roof} if roof else {})}

    def test_a_row_compares_kiln_with_the_fastest_peer_against_the_goal(self):
        cells = summary.row(self.run_of(1, 10.0, 14.0))
        self.assertEqual(cells[:8], ["transformer 4 x 512", "f32", "2", "1", "10.00ms",
                                     "fast 14.00ms", "1.40x", "1.5x not met"])
        self.assertEqual(cells[8], "not timed")
        roof = {"floor_ms": 5.0, "goal": {"share_of_floor": 0.25}}
        cells = summary.row(self.run_of(16, 10.0, 10.5, roof))
        self.assertEqual(cells[6:], ["1.05x", "1x met", "50 %", "25 %"])

    def test_other_json_is_not_a_row(self):
        self.assertIsNone(summary.row({"kernels": []}))
        self.assertIsNone(summary.row({"batch": 1, "results": [{"system": "kiln",
                                                                 "error": "failed"}]}))


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
