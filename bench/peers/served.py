"""Helpers the peer benchmarks share that need nothing beyond the standard library: a
child process that times calls on request, medians and durations."""

import subprocess
import tempfile

# A pause before each system's turn in a round, longer than the worker threads of the
# system before it spin before they sleep (OpenMP's, ONNX Runtime's): without it the next
# system, or the ceiling probe, would share the cores with them.
SETTLE_S = 0.05


def duration(ms):
    """ms as "12.34ms", or "56.7us" under a millisecond."""
    return f"{ms * 1e3:.1f}us" if ms < 1 else f"{ms:.2f}ms"


def median(values):
    values = sorted(values)
    return values[len(values) // 2]


class ServedTimer:
    """A child process that times calls on request (`kiln bench --serve`, `max_peer.py
    --serve`): it prints "ready" once set up; each line N written to it is answered with one
    line "times t1 ... tN" (milliseconds). The lines before "ready" are kept in
    `preamble`."""

    def __init__(self, command, what):
        self.what = what
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.stderr, text=True, bufsize=1)
        self.preamble = []
        while (line := self.process.stdout.readline()) != "ready\n":
            if not line:
                self.fail()
            self.preamble.append(line.rstrip("\n"))

    def fail(self):
        code = self.process.wait()
        self.stderr.seek(0)
        tail = "\n".join(self.stderr.read().strip().splitlines()[-5:])
        raise RuntimeError(f"{self.what} exited with {code}:\n{tail}")

    def __call__(self, n):
        self.process.stdin.write(f"{n}\n")
        words = self.process.stdout.readline().split()
        if not words or words[0] != "times":
            self.fail()
        return [float(w) for w in words[1:]]

    def close(self):
        self.process.stdin.close()
        self.process.stdout.read()
        if self.process.wait() != 0:
            self.fail()
