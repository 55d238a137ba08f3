#!/usr/bin/env python3
"""Differential test of kiln's ops against NumPy, with PyTorch's semantics.

Usage::

    numpy_diff.py --kiln build/release/bin/kiln [--seed N] [--cases-per-op K]
                  [--workdir DIR] [--op NAME ...] [--mode compiled|reference|both]
                  [--jobs J] [--kiln-threads T] [--max-reports R]
                  [--isa base|avx2|avx512|avx512_bf16|amx]

For every op x dtype the harness prints one module in kiln's MLIR generic form (see
docs/text-format.md) whose @main takes several independent cases as separate arguments
and returns their results, writes the inputs as .npy files, runs
``kiln run m.mlir -i argN=... -o DIR`` (compiled) and/or the same with ``--reference``,
and compares every output with what NumPy computes.  Exit status 0 when no unexpected
difference was found, 1 otherwise; the last line of output is ``N passed, M failed``
(one check = one case in one mode; a case passes when all its outputs match).
``--op`` takes op names with or without the ``kiln.`` prefix (``add``, ``kiln.cast``,
``gelu``); cases are seeded from (seed, op, dtype), so a filtered run reproduces the
cases of the full run.  Needs only NumPy (>= 1.22) and the standard library.
If a module is refused or crashes, each of its cases is rerun alone so that the report
names the case.  ``--workdir`` keeps the modules, inputs and outputs of a run (default:
a temporary directory, removed at the end).

Coverage
--------
* element-wise: add sub mul div pow maximum minimum fmod (NumPy broadcasting),
  bitwise_and/or/xor/not and shift_left/right on integers, eq ne lt le gt
  ge, where, exp log sqrt rsqrt tanh erf sigmoid silu gelu (erf and tanh forms) sin cos
  tan, neg abs relu sign floor ceil round, and cast between every pair of the 9 dtypes;
* reductions: reduce_sum/mean/max/min/prod (random axis sets, keepdim), argmax, softmax,
  log_softmax, layer_norm, rms_norm;
* data movement: reshape, transpose, broadcast_to, slice (steps, clamping stops),
  concat, split, gather (i32 and i64 indices), gather_elements and gather_nd (negative
  indices, batch dims); cumsum (exclusive, reverse); matmul (rank-1 operands, broadcast
  batch dims, every numeric dtype);
* every dtype that kiln's verifier accepts for the op (f32 f16 bf16 f64 i8 u8 i32 i64
  bool); random shapes of rank 0-4 with dims of size 0 and 1; edge values mixed into the
  random data (NaN, +-inf, +-0, denormals, huge and tiny magnitudes, exp's range edges,
  values that round differently when rounded twice, integers near +-2^63, 2^53+-1,
  2^24+-1, the i32/i8/u8 limits), and for binary ops a grid of every pair of edge
  values;
* refusals: reduce_max/min and argmax over an empty axis, and reduce_mean of integers,
  must be refused: exit status 2 with a "kiln: error" message naming the op (at
  verification or when the call runs; a crash, exit 3 or success is a failure).

bf16 cannot be passed as .npy: a bf16 argument is an f32 argument holding
bf16-representable values followed by ``kiln.cast`` to bf16 in the module; bf16
results are returned as they are (kiln writes them as f32).

Expected values
---------------
NumPy computes in float64 on the exact input values and rounds once to the result dtype
(round-to-nearest-even; bf16 and int->float rounding are done here bit-exactly, never
by rounding twice).  Where NumPy and PyTorch differ, PyTorch wins:

* maximum/minimum/relu/reduce_max/reduce_min propagate NaN; argmax is the index of the
  first NaN if any, else of the first maximum; -0.0 + 0.0 is +0.0;
* integer add/sub/mul/pow/neg/abs and sums wrap around (two's complement); comparisons
  of integers are exact; integer pow with a negative exponent follows PyTorch's powi
  (1 -> 1, -1 -> +-1, anything else -> 0); integer div truncates toward zero (as
  ``torch.div(rounding_mode="trunc")``; kiln's div keeps the integer dtype);
* silu and gelu of -inf are NaN (as PyTorch's formulas give);
* casts: float->float and int->float round once; in-range float->int truncates toward
  zero; x->bool is x != 0 (NaN -> true); int->int wraps;
* reduce_sum over an empty axis is 0, reduce_mean over one is NaN;
* argmax of bool (which PyTorch lacks) is the index of the first true, else 0.

Where PyTorch leaves a result undefined and kiln defines it (docs/ops.md, "Numerics"),
kiln's rule is the expectation (section KILN-DEFINED NUMERICS below; counted as
"kiln-defined" in the summary, and a FAIL on such an element names the rule):

* (a) float->int casts (i8, u8, i32, i64) of NaN give 0; of +-inf and of values whose
  truncation toward zero is out of range saturate at the target's min/max (u8: any
  negative value gives 0);
* (b) integer division by zero gives 0;
* (c) INT_MIN / -1 wraps to INT_MIN (the quotient wrapped to the dtype's width: i8
  -128 / -1 = -128, i32 and i64 alike).

Left open, as kiln leaves them unspecified too: the sign of a zero result of
maximum/minimum(+0.0, -0.0), of reduce_max/min over +0.0 and -0.0, and of relu(-0.0)
(either sign is accepted); float sums/means whose row's sum of magnitudes exceeds the
accumulator's range (where f32 overflow depends on the order of summation: not compared,
counted as "undefined" in the summary).  Norm and matmul inputs contain no values above
1e15 for the same reason.

Tolerances
----------
* exact (bit for bit; NaN matches any NaN; the sign of zero is checked): data movement,
  comparisons, where, casts, neg/abs/relu, maximum/minimum, reduce_max/min, argmax,
  every integer op (the kiln-defined rules included), and add/sub/mul/div/sqrt of floats
  (IEEE operations, correctly rounded in every float dtype since f32 or f64 arithmetic
  rounded to the result dtype is innocuous double rounding for them);
* transcendental ops (exp log rsqrt tanh erf sigmoid silu gelu sin cos tan pow): |got - want| <=
  max(4 ulp(want), 1e-6 |want|) for f32, (4 ulp, 1e-14) for f64, and for f16/bf16 the
  f32 bound plus 1 ulp of the result dtype.  Two ops add an absolute term for their
  output scale, as PyTorch's own f32 formulas lose it: sigmoid 1.2e-38 (it underflows
  where exp(-x) overflows), silu and gelu 1e-7 * max(1, |x|) (1e-15 for f64).
  Elements whose input is +-0, +-inf or NaN are compared exactly;
* reductions, softmax, log_softmax, norms, matmul: rel 1e-5 (1e-12 for f64) of the
  row's scale (sum of |x| for sums, |x| mean for means, max |result| of the row for
  softmax (at least 1 for log_softmax), max over the row of |xhat*gamma| + |beta| for
  norms, |a| @ |b| for matmul) plus 1 ulp of the result dtype; NaN and infinities must
  match in kind and sign.
* Denormals: ulps are absolute at the bottom of the range (4 ulp is 5.6e-45 in f32), so
  flushing a denormal result to zero, or any normal-range result, is a difference.
  Only sigmoid, silu and gelu (the absolute terms above) and the reductions (row scale)
  accept a flushed result.

Intended deviations of kiln from these rules go into EXPECTED_DIFFERENCES below (op,
dtypes, condition, reason); a difference matching an entry is reported as expected
and does not fail the run.

Running
-------
``--isa LEVEL`` runs kiln with ``KILN_CPU_ISA=LEVEL`` (base, avx2, avx512, avx512_bf16,
amx: that instruction-set level's kernels, capped at the CPU's level; base is the
portable loops); without it the kiln runs inherit this process's environment.  The
summary line names the level asked for and, from ``kiln bench``'s header, the level
kiln's kernels ran at (the reference mode does not depend on it).
``--jobs`` kiln processes run at a time (default: the number of CPUs), each with
``--threads 1`` (``--kiln-threads``).  The default run (seed 0, 8 random cases per op and
dtype besides the fixed edge cases: 341 modules, about 6500 checks in both modes)
takes about 8-10 s on 2 cores, a third of it building the cases.  The report prints one
``FAIL`` line per differing output (``--max-reports`` bounds how many are shown), then
the distinct difference classes (op, dtype, kind: the modes it shows in), then totals.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

# Intended deviations: (op, dtypes, condition, reason).  op is the reported op name
# ("kiln.add", "kiln.cast f32->i8"), dtypes a tuple of kiln dtypes or "*", condition a
# function (ctx) -> bool array over the output (ctx.inputs: the inputs broadcast to the
# output for element-wise ops, else as given; ctx.expected, ctx.got: float64 arrays).
EXPECTED_DIFFERENCES: list[tuple[str, object, Callable, str]] = []

# ---------------------------------------------------------------------------------------
# dtypes

FLOATS = ("f32", "f16", "bf16", "f64")
INTS = ("i8", "u8", "i32", "i64")
NUMERIC = FLOATS + INTS
ALL = NUMERIC + ("bool",)
MLIR = {"f32": "f32", "f16": "f16", "bf16": "bf16", "f64": "f64", "i8": "i8", "u8": "ui8",
        "i32": "i32", "i64": "i64", "bool": "i1"}
STORAGE = {"f32": np.float32, "f16": np.float16, "bf16": np.float32, "f64": np.float64,
           "i8": np.int8, "u8": np.uint8, "i32": np.int32, "i64": np.int64, "bool": np.bool_}
# precision (bits, with the implicit one), smallest normal exponent, largest finite value
FMT = {"f16": (11, -14, 65504.0), "bf16": (8, -126, 3.3895313892515355e38),
       "f32": (24, -126, 3.4028234663852886e38), "f64": (53, -1022, 1.7976931348623157e308)}
MIN_NORMAL = {"f16": 2.0 ** -14, "bf16": 2.0 ** -126, "f32": 2.0 ** -126, "f64": 2.0 ** -1022}
BITS = {"i8": 8, "u8": 8, "i32": 32, "i64": 64}


def is_float(kdt):
    return kdt in FLOATS


def round_float(x, kdt):
    """float64 values rounded once (nearest-even) to kdt, as kdt's storage array."""
    x = np.asarray(x, np.float64)
    if kdt == "f64":
        return x.copy()
    if kdt in ("f32", "f16"):  # NumPy rounds f64 -> f16 directly (self_check checks)
        with np.errstate(all="ignore"):
            return x.astype(STORAGE[kdt])
    p, emin, fmax = FMT[kdt]
    out = x.copy()
    m = np.isfinite(x) & (x != 0)
    if m.any():
        v = x[m]
        _, e = np.frexp(v)
        q = np.maximum(e.astype(np.int64) - p, emin - p + 1)
        r = np.ldexp(np.rint(np.ldexp(v, -q)), q)
        out[m] = np.where(np.abs(r) > fmax, np.copysign(np.inf, v), r)
    return out.astype(np.float32)


def ulp(values, kdt):
    """Absolute spacing of kdt at |values| (the smallest spacing below the normal range)."""
    p, emin, _ = FMT[kdt]
    a = np.abs(np.asarray(values, np.float64))
    a = np.where(np.isfinite(a), a, 0.0)
    _, e = np.frexp(a)
    return np.ldexp(1.0, np.maximum(e.astype(np.int64) - p, emin - p + 1))


def int_to_float(x, kdt):
    """Integers rounded once to the float dtype kdt (exact integer arithmetic)."""
    p, _, fmax = FMT[kdt]
    flat = np.asarray(x).reshape(-1).tolist()
    out = np.empty(len(flat), np.float64)
    for i, v in enumerate(flat):
        v = int(v)
        a = abs(v)
        n = a.bit_length()
        if n > p:
            s = n - p
            q, rem, half = a >> s, a & ((1 << s) - 1), 1 << (s - 1)
            if rem > half or (rem == half and q & 1):
                q += 1
            a = q << s
        f = float(a)
        if f > fmax:
            f = math.inf
        out[i] = -f if v < 0 else f
    return round_float(out.reshape(np.shape(x)), kdt)


def float_to_int(x64, kdt):
    """(values, defined by PyTorch): truncation toward zero; where that is NaN, +-inf or
    outside kdt's range PyTorch leaves the result undefined and kiln's rule applies
    (kiln_float_to_int, in the kiln-defined numerics section)."""
    info = np.iinfo(STORAGE[kdt])
    with np.errstate(all="ignore"):
        t = np.trunc(x64)
        ok = np.isfinite(x64) & (t >= float(info.min)) & (t < float(info.max) + 1.0)
    return kiln_float_to_int(x64, kdt), ok


# =======================================================================================
# KILN-DEFINED NUMERICS: where PyTorch leaves a result undefined, kiln defines it, and
# these functions are the expectation (kiln's intended differences from PyTorch; see
# docs/ops.md, section "Numerics", and, in the sources, include/kiln/core/dtype.hpp
# (convert_element) and include/kiln/compiler/reference.hpp).  Elements whose value comes
# from one of these rules are counted as "kiln-defined" in the summary, and a FAIL on one
# says which rule it is.
#
#  (a) float -> integer cast (every integer target: i8, u8, i32, i64): truncate toward
#      zero, then saturate at the target's [min, max]; NaN gives 0, +inf max, -inf min.
#      For u8 every negative value (-0.5 truncates to 0 anyway) saturates to 0.
#  (b) integer division by zero gives 0 (any dividend, 0 / 0 included).
#  (c) INT_MIN / -1 wraps: the quotient -INT_MIN is computed in 64-bit two's complement
#      and wrapped to the dtype's width like every integer result: i64 -2^63 / -1 = -2^63,
#      i32 -2^31 / -1 = -2^31, i8 -128 / -1 = -128 (u8 has no -1).
#
# Still unspecified: the sign of a zero from maximum/minimum(+0.0, -0.0), reduce_max/min
# over +0.0 and -0.0, and relu(-0.0) (either sign accepted: Out.zero_sign_free); float
# sums/means whose row's sum of magnitudes overflows the accumulator, where the result
# depends on summation order (not compared: Out.skip, "undefined" in the summary).
# =======================================================================================

KILN_RULE_CAST = 'kiln-defined rule (a): float->int truncates, saturates, NaN -> 0'
KILN_RULE_DIV0 = 'kiln-defined rule (b): integer x / 0 = 0'
KILN_RULE_DIVMIN = 'kiln-defined rule (c): INT_MIN / -1 wraps to INT_MIN'
KILN_RULE_FMOD0 = 'kiln-defined rule (d): integer x fmod 0 = 0 (and x fmod -1 = 0)'
KILN_RULE_SHIFT = 'kiln-defined rule (e): a shift count outside [0, 63] shifts every bit out'


def kiln_float_to_int(x64, kdt):
    """Rule (a): float64 values cast to the integer dtype kdt as kiln does."""
    info = np.iinfo(STORAGE[kdt])
    x64 = np.asarray(x64, np.float64)
    with np.errstate(all="ignore"):
        t = np.trunc(x64)
        hi = t >= float(info.max) + 1.0   # exact in float64 for every kdt; +inf included
        lo = t < float(info.min)          # -inf included
        mid = np.isfinite(t) & ~hi & ~lo  # NaN is in none of the three: 0
        out = np.where(mid, t, 0).astype(STORAGE[kdt])
    out[hi] = info.max
    out[lo] = info.min
    return out


def kiln_int_fmod(a, b, kdt):
    """(remainder, rule (d) mask): C's % on integers, x fmod 0 = 0 and x fmod -1 = 0."""
    shape = np.broadcast_shapes(np.shape(a), np.shape(b))
    A = np.broadcast_to(a, shape).astype(np.int64)
    B = np.broadcast_to(b, shape).astype(np.int64)
    rule = (B == 0) | (B == -1)
    r = np.fmod(A, np.where(rule, 1, B))   # NumPy's fmod: the sign of the dividend
    return np.where(rule, 0, r).astype(STORAGE[kdt]), B == 0


def kiln_shift(op, a, b, kdt):
    """(result, rule (e) mask): a << b wrapped to kdt, a >> b arithmetic (u8: logical, as
    its values are not negative); counts outside [0, 63] give 0 (-1 for a negative a >> b)."""
    shape = np.broadcast_shapes(np.shape(a), np.shape(b))
    A = np.broadcast_to(a, shape).astype(np.int64)
    B = np.broadcast_to(b, shape).astype(np.int64)
    out_of_range = (B < 0) | (B > 63)
    Bs = np.where(out_of_range, 0, B)
    if op == "shift_left":
        r = (A.view(np.uint64) << Bs.view(np.uint64)).view(np.int64)
        r = np.where(out_of_range, 0, r)
    else:
        r = np.where(out_of_range, np.where(A < 0, -1, 0), A >> Bs)
    return r.astype(STORAGE[kdt]), out_of_range


def kiln_int_div(a, b, kdt):
    """(quotient, rule (b) mask, rule (c) mask): integer a / b (broadcast) as kiln does:
    truncation toward zero (torch.div(rounding_mode="trunc")), x / 0 = 0 (b), and
    INT_MIN / -1 wrapping (c); the result is wrapped to kdt's width."""
    shape = np.broadcast_shapes(np.shape(a), np.shape(b))
    A = np.broadcast_to(a, shape).astype(np.int64)
    B = np.broadcast_to(b, shape).astype(np.int64)
    zero, minus1 = B == 0, B == -1
    Bs = np.where(zero | minus1, 1, B)     # no division by 0 or -1 below
    q = np.floor_divide(A, Bs)
    r = A - q * Bs
    q = q + ((r != 0) & ((A < 0) != (Bs < 0)))
    with np.errstate(all="ignore"):
        neg = (np.uint64(0) - A.view(np.uint64)).view(np.int64)  # -A, wrapping at 64 bits
    q = np.where(minus1, neg, q)
    q = np.where(zero, 0, q)
    wraps = minus1 & (A == np.iinfo(STORAGE[kdt]).min) if kdt != "u8" else np.zeros(shape, bool)
    # astype wraps int64 to the narrower width (two's complement), as kiln stores it
    return q.astype(STORAGE[kdt]), zero, wraps


def to_f64(a):
    return np.asarray(a).astype(np.float64)


def wrap_int(values, kdt):
    """Python ints wrapped (two's complement) to kdt."""
    bits = BITS[kdt]
    out = []
    for v in values:
        v &= (1 << bits) - 1
        if kdt != "u8" and v >= 1 << (bits - 1):
            v -= 1 << bits
        out.append(v)
    return out


def powi(a, b, kdt):
    """PyTorch's integer pow (wrap-around; negative exponents as torch's powi)."""
    shape = np.broadcast_shapes(a.shape, b.shape)
    av = np.broadcast_to(a, shape).reshape(-1).tolist()
    bv = np.broadcast_to(b, shape).reshape(-1).tolist()
    mod = 1 << BITS[kdt]
    res = []
    for x, y in zip(av, bv):
        x, y = int(x), int(y)
        if y < 0:
            r = 1 if x == 1 else ((-1 if (-y) % 2 else 1) if x == -1 else 0)
        else:
            r = pow(x, y, mod)
        res.append(r)
    return np.array(wrap_int(res, kdt), dtype=STORAGE[kdt]).reshape(shape)


def ttype(kdt, shape):
    return "tensor<" + "".join(f"{d}x" for d in shape) + MLIR[kdt] + ">"


def tname(kdt, shape):
    return f"{kdt}[{', '.join(map(str, shape))}]"


# ---------------------------------------------------------------------------------------
# module text


class DT:
    def __init__(self, kdt):
        self.kdt = kdt


class SH:
    def __init__(self, dims):
        self.dims = list(dims)


def fmt_attr(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, float):
        r = repr(v)
        if "e" in r and "." not in r:
            r = r.replace("e", ".0e")
        elif "." not in r and "e" not in r:
            r += ".0"
        return r
    if isinstance(v, str):
        return '"' + v + '"'
    if isinstance(v, DT):
        return MLIR[v.kdt]
    if isinstance(v, SH):
        return "#kiln.shape<[" + ", ".join(map(str, v.dims)) + "]>"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(fmt_attr(e) for e in v) + "]"
    raise TypeError(v)


@dataclass
class Val:
    name: str
    kdt: str
    shape: tuple


class Builder:
    def __init__(self):
        self.args, self.data, self.body, self.rets = [], [], [], []
        self.n = 0

    def arg(self, kdt, data):
        if kdt == "bf16":  # bf16 arrives as f32 and is cast inside the module
            a = self.arg("f32", np.asarray(data, np.float32))
            return self.op("kiln.cast", [a], {"dtype": DT("bf16")}, [("bf16", a.shape)])[0]
        name = f"%arg{len(self.args)}"
        self.args.append((name, ttype(kdt, data.shape)))
        self.data.append(np.array(data, dtype=STORAGE[kdt], order="C"))
        return Val(name, kdt, tuple(data.shape))

    def op(self, opname, operands, attrs, results):
        base = f"%{self.n}"
        self.n += 1
        names = [base] if len(results) == 1 else [f"{base}#{i}" for i in range(len(results))]
        lhs = base if len(results) == 1 else f"{base}:{len(results)}"
        text = ""
        if attrs:
            text = " {" + ", ".join(f"{k} = {fmt_attr(v)}" for k, v in sorted(attrs.items())) + "}"
        ins = ", ".join(ttype(v.kdt, v.shape) for v in operands)
        outs = [ttype(k, s) for k, s in results]
        out = outs[0] if len(outs) == 1 else "(" + ", ".join(outs) + ")"
        self.body.append(f'    {lhs} = "{opname}"({", ".join(v.name for v in operands)}){text}'
                         f" : ({ins}) -> {out}")
        return [Val(nm, k, tuple(s)) for nm, (k, s) in zip(names, results)]

    def text(self):
        args = ", ".join(f"{n}: {t}" for n, t in self.args)
        rtypes = [ttype(v.kdt, v.shape) for v in self.rets]
        sig = rtypes[0] if len(rtypes) == 1 else "(" + ", ".join(rtypes) + ")"
        lines = ['module attributes {kiln.device = "cpu:0", kiln.entry = @main} {',
                 f"  func.func @main({args}) -> {sig} {{"]
        lines += self.body
        lines.append("    return " + ", ".join(v.name for v in self.rets) + " : "
                     + ", ".join(rtypes))
        lines += ["  }", "}", ""]
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# cases


@dataclass
class Out:
    """One result of a case and how to compare it."""
    expected: np.ndarray           # storage dtype of kdt (bf16: float32)
    kdt: str
    tol: Optional[np.ndarray] = None     # None: exact; else absolute tolerance per element
    strict: Optional[np.ndarray] = None  # with tol: elements compared exactly
    skip: Optional[np.ndarray] = None    # undefined: not compared
    kiln_rule: Optional[dict] = None     # rule name -> mask of elements kiln's rule defines
    zero_sign_free: Optional[np.ndarray] = None  # either sign of zero accepted
    label: str = ""                # reported op name, when not the case's (casts)
    inputs_at: Optional[Callable] = None   # output index -> "a=..., b=..."
    detail: Optional[Callable] = None      # (index, kiln's value, expected value) -> text
    cond_inputs: Optional[list] = None     # inputs for EXPECTED_DIFFERENCES conditions


@dataclass
class Case:
    op: str
    kdt: str
    desc: str
    inputs: list                    # [(name, kdt, storage array)]
    emit: Optional[Callable]        # (builder, [Val]) -> [Val]
    outs: list = field(default_factory=list)
    error: Optional[str] = None     # the case must be refused; text the message must hold
    group: str = ""


def fmt_val(v):
    v = np.asarray(v)
    if v.dtype == np.bool_:
        return "true" if bool(v) else "false"
    if v.dtype.kind in "iu":
        return str(int(v))
    f = float(v)
    if f == 0:
        return "-0.0" if math.copysign(1.0, f) < 0 else "0.0"
    return str(v[()])


def fmt_row(a, limit=10):
    a = np.asarray(a).reshape(-1)
    s = ", ".join(fmt_val(x) for x in a[:limit])
    if a.size > limit:
        s += f", ... ({a.size} values)"
    return "[" + s + "]"


def elementwise_inputs_at(names, arrays, shape):
    def at(idx):
        return ", ".join(f"{n}={fmt_val(np.broadcast_to(a, shape)[idx])}"
                         for n, a in zip(names, arrays))
    return at


def cond_broadcast(arrays, shape):
    return [to_f64(np.broadcast_to(a, shape)) for a in arrays]


# ---------------------------------------------------------------------------------------
# random data

NAN, INF = float("nan"), float("inf")
F_COMMON = [NAN, INF, -INF, -0.0, 0.0, 1.0, -1.0, 0.5, -0.5, 2.0, 3.0, -3.0, 1e-7, 1e-30,
            -1e-30, 1e-20, 1e20, -87.5, -100.0, -104.0, 88.7, 89.0, 127.9, -128.9, 255.9,
            256.0, -0.9, 0.9, 10.0, -10.0]
F32_EXTRA = [1e-40, -1e-40, 1.4e-45, -1.4e-45, 1.1754944e-38, 3e38, -3e38, 3.4028235e38,
             -3.4028235e38, 16777215.0, 16777217.0, 16777218.0, 2147483520.0, 2147483648.0,
             -2147483648.0, float(2 ** 63 - 2 ** 39), -(2.0 ** 63), 2.0 ** 63,
             1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, 1.0 + 2 ** -11]
F64_EXTRA = [1e308, -1e308, 5e-324, -5e-324, 2.2250738585072014e-308, 1e-310, 3e38, 1e-40,
             2.0 ** 53, 2.0 ** 53 + 2, float(2 ** 53 - 1), float(2 ** 63 - 1024), -(2.0 ** 63),
             2.0 ** 63, 2147483647.0, 2147483647.9, -2147483648.9, 1 + 2 ** -8 + 2 ** -40,
             1 + 2 ** -11 + 2 ** -40, 1 + 2 ** -24 + 2 ** -60, 3.4028235677973366e38,
             3.4028235e38, 65519.99, 65520.0, 709.7, 710.0, -745.0, -750.0, -708.0,
             1.1754942e-38, 7e-46]
F16_EXTRA = [6e-8, -6e-8, 3e-8, 1e-5, -1e-5, 6.1035e-5, 65504.0, -65504.0, 2048.0, 2049.0,
             2050.0, -11.5, -17.0, -16.0, 11.08, 11.1, 65519.0, 1e-4, 1.0 + 2 ** -11]
BF16_EXTRA = [1e-40, -1e-40, 9.2e-41, 1.1754944e-38, 3e38, -3e38, 3.3895e38, 1.0 + 2 ** -8,
              256.0, 257.0, -2147483648.0, float(2 ** 63 - 2 ** 55), -(2.0 ** 63)]
I64_EDGES = [0, 1, -1, 2, -2, 3, 127, 128, -128, -129, 255, 256, 2 ** 24 - 1, 2 ** 24,
             2 ** 24 + 1, 2 ** 31 - 1, 2 ** 31, -2 ** 31, -2 ** 31 - 1, 2 ** 32, 2 ** 53 - 1,
             2 ** 53, 2 ** 53 + 1, -(2 ** 53 + 1), 2 ** 60 + 2 ** 36 + 1, 2 ** 62, 2 ** 63 - 1,
             2 ** 63 - 2, -2 ** 63, -2 ** 63 + 1, 3037000499, 3037000500, 65505, 65520]
I32_EDGES = [0, 1, -1, 2, -2, 3, 127, 128, -128, -129, 255, 256, 2 ** 24 - 1, 2 ** 24,
             2 ** 24 + 1, 2 ** 31 - 1, 2 ** 31 - 2, -2 ** 31, -2 ** 31 + 1, 46340, 46341,
             65535, 65536, 65520]
I8_EDGES = [0, 1, -1, 2, -2, 3, 127, 126, -128, -127, 11, 12, -12]
U8_EDGES = [0, 1, 2, 3, 127, 128, 254, 255, 15, 16]
INT_EDGES = {"i64": I64_EDGES, "i32": I32_EDGES, "i8": I8_EDGES, "u8": U8_EDGES}
MODERATE_EDGES = [NAN, INF, -INF, -0.0, 0.0, 1e-40, 1.0, -1.0]


def dedupe_float(values, kdt):
    r = round_float(np.array(values, np.float64), kdt)
    seen, keep = set(), []
    for v in r:
        key = "nan" if np.isnan(v) else (float(v), math.copysign(1.0, float(v)))
        if key not in seen:
            seen.add(key)
            keep.append(v)
    return np.array(keep, dtype=STORAGE[kdt])


def edges(kdt):
    if kdt == "bool":
        return np.array([False, True])
    if kdt in INTS:
        return np.array(INT_EDGES[kdt], dtype=STORAGE[kdt])
    extra = {"f32": F32_EXTRA, "f64": F64_EXTRA + F32_EXTRA, "f16": F16_EXTRA,
             "bf16": BF16_EXTRA + F32_EXTRA}[kdt]
    return dedupe_float(F_COMMON + extra, kdt)


EXP_RANGE = {"f32": (-110.0, 92.0), "bf16": (-110.0, 92.0), "f16": (-20.0, 12.0),
             "f64": (-760.0, 715.0)}


def pick(rng, pools, weights, n):
    """n values, each from one of the pools (arrays of n candidates) by weight."""
    which = rng.choice(len(pools), size=n, p=np.array(weights) / sum(weights))
    out = np.empty(n, dtype=np.result_type(*[p.dtype for p in pools]))
    for i, p in enumerate(pools):
        out[which == i] = p[which == i]
    return out


def values(rng, kdt, shape, profile="general"):
    n = int(np.prod(shape, dtype=np.int64))
    if kdt == "bool":
        return (rng.random(n) < 0.5).reshape(shape)
    if profile == "all_edges":  # every edge value (when there is room), in random order
        return np.resize(rng.permutation(edges(kdt)), n).reshape(shape)
    if kdt in INTS:
        info = np.iinfo(STORAGE[kdt])
        full = rng.integers(int(info.min), int(info.max), size=n, endpoint=True,
                            dtype=np.int64 if kdt != "u8" else np.int64)
        lo = 0 if kdt == "u8" else -5
        small = rng.integers(lo, 6, size=n)
        e = edges(kdt).astype(np.int64)
        edge = e[rng.integers(0, len(e), size=n)]
        if profile == "edges":
            out = pick(rng, [edge, full], [0.8, 0.2], n)
        elif profile == "exponent":
            lo = 0 if kdt == "u8" else -3
            pools = [rng.integers(0, 9, n), rng.integers(lo, 0, n) if lo < 0 else
                     rng.integers(0, 3, n), rng.integers(9, 71, n), edge]
            out = pick(rng, pools, [0.5, 0.1, 0.2, 0.2], n)
        elif profile == "moderate":  # matmul operands: wrap-around still likely for i64
            out = pick(rng, [full, small, edge], [0.3, 0.5, 0.2], n)
        else:
            out = pick(rng, [full, small, edge], [0.35, 0.35, 0.3], n)
        return out.astype(STORAGE[kdt]).reshape(shape)
    # floats
    mag = 10.0 ** rng.uniform(-3, 3, n)
    normal = rng.standard_normal(n) * mag
    unif = rng.uniform(-3, 3, n)
    halves = rng.integers(-8, 9, n) * 0.5
    e = to_f64(edges(kdt))
    edge = e[rng.integers(0, len(e), size=n)]
    if profile == "exp":
        lo, hi = EXP_RANGE[kdt]
        out = pick(rng, [rng.uniform(lo, hi, n), normal, halves, edge], [0.45, 0.2, 0.1, 0.25], n)
    elif profile == "positive":
        p, emin, _ = FMT[kdt]
        tiny = 10.0 ** rng.uniform(math.log10(2.0 ** (emin - p + 1)), math.log10(2.0 ** emin) + 1, n)
        out = pick(rng, [np.abs(normal), np.abs(unif), tiny, edge], [0.4, 0.15, 0.1, 0.35], n)
    elif profile == "moderate":
        m = np.array(MODERATE_EDGES)
        soft = m[rng.integers(0, len(m), size=n)]
        out = pick(rng, [rng.standard_normal(n) * 10.0 ** rng.uniform(-1, 1, n), halves, soft],
                   [0.85, 0.1, 0.05], n)
    elif profile == "finite":  # moderate without non-finite values
        out = pick(rng, [rng.standard_normal(n) * 10.0 ** rng.uniform(-1, 1, n), halves],
                   [0.9, 0.1], n)
    elif profile == "exponent":
        out = pick(rng, [rng.integers(-3, 4, n).astype(float), halves, rng.uniform(-4, 4, n),
                         edge], [0.3, 0.15, 0.25, 0.3], n)
    elif profile == "edges":
        out = pick(rng, [edge, normal], [0.8, 0.2], n)
    elif profile == "ties":
        out = pick(rng, [halves, edge, normal], [0.6, 0.2, 0.2], n)
    else:
        out = pick(rng, [normal, unif, halves, edge], [0.35, 0.15, 0.15, 0.35], n)
    return round_float(out, kdt).reshape(shape)


DIMS = [1, 1, 2, 3, 3, 4, 5, 7]


def rand_shape(rng, min_rank=0, max_rank=4, max_elems=240, zero_prob=0.07, nonzero=(),
               min_elems=0):
    while True:
        r = int(rng.integers(min_rank, max_rank + 1))
        dims = [0 if rng.random() < zero_prob else int(rng.choice(DIMS)) for _ in range(r)]
        for a in nonzero:
            if a < r and dims[a] == 0:
                dims[a] = 2
        if min_elems <= int(np.prod(dims, dtype=np.int64)) <= max_elems:
            return tuple(dims)


def operand_shape(rng, out):
    """A shape that broadcasts to out: some leading dims dropped, some dims 1."""
    k = int(rng.integers(0, len(out) + 1)) if rng.random() < 0.35 else 0
    s = list(out[k:])
    for i in range(len(s)):
        if rng.random() < 0.25:
            s[i] = 1
    return tuple(s)


def tol_array(expected64, kdt, rel, ulps, absolute=0.0, scale=None):
    """max(ulps ulp(kdt), rel * scale, absolute), scale defaulting to |expected|."""
    e = np.asarray(expected64, np.float64)
    s = np.abs(e) if scale is None else scale
    with np.errstate(all="ignore"):
        return np.maximum(np.maximum(ulps * ulp(e, kdt), rel * s), absolute)


def compute_dtype_tol(kdt):
    """(ulps, rel, ulp-format) for transcendental results computed in f32/f64."""
    return (4, 1e-14, "f64") if kdt == "f64" else (4, 1e-6, "f32")


# ---------------------------------------------------------------------------------------
# element-wise


BINARY = ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "fmod")
BITWISE = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or,
           "bitwise_xor": np.bitwise_xor, "shift_left": None, "shift_right": None}
COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
           "gt": np.greater, "ge": np.greater_equal}


def binary_expected(op, kdt, a, b):
    shape = np.broadcast_shapes(a.shape, b.shape)
    out = Out(expected=None, kdt=kdt)
    with np.errstate(all="ignore"):
        if is_float(kdt):
            A, B = to_f64(a), to_f64(b)
            f = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
                 "pow": np.power, "maximum": np.maximum, "minimum": np.minimum,
                 "fmod": np.fmod}[op]
            e = f(A, B)
            out.expected = round_float(e, kdt)
            if op in ("maximum", "minimum"):
                Ab, Bb = np.broadcast_to(A, shape), np.broadcast_to(B, shape)
                out.zero_sign_free = (Ab == 0) & (Bb == 0) & (np.signbit(Ab) != np.signbit(Bb))
            if op == "pow":
                ulps, rel, fmt = compute_dtype_tol(kdt)
                e64 = to_f64(out.expected)
                t = tol_array(e, fmt, rel, ulps)
                if kdt in ("f16", "bf16"):
                    t = t + ulp(e64, kdt)
                out.tol = t
                Ab, Bb = np.broadcast_to(A, shape), np.broadcast_to(B, shape)
                special = lambda v: ~np.isfinite(v) | (v == 0)
                out.strict = special(Ab) | special(Bb) | (np.abs(Ab) == 1) | ~np.isfinite(e)
        else:
            t = STORAGE[kdt]
            if op in ("add", "sub", "mul"):
                f = {"add": np.add, "sub": np.subtract, "mul": np.multiply}[op]
                out.expected = f(a, b).astype(t)
            elif op == "maximum":
                out.expected = np.maximum(a, b)
            elif op == "minimum":
                out.expected = np.minimum(a, b)
            elif op == "pow":
                out.expected = powi(a, b, kdt)
            elif op == "div":
                out.expected, div0, divmin = kiln_int_div(a, b, kdt)
                out.kiln_rule = {KILN_RULE_DIV0: div0, KILN_RULE_DIVMIN: divmin}
            elif op == "fmod":
                out.expected, mod0 = kiln_int_fmod(a, b, kdt)
                out.kiln_rule = {KILN_RULE_FMOD0: mod0}
            elif op in ("shift_left", "shift_right"):
                out.expected, wide = kiln_shift(op, a, b, kdt)
                out.kiln_rule = {KILN_RULE_SHIFT: wide}
            elif op in BITWISE:
                out.expected = BITWISE[op](a, b).astype(t)
    out.expected = np.asarray(out.expected).reshape(shape)
    return out


def binary_case(op, kdt, a, b, note):
    out = binary_expected(op, kdt, a, b)
    shape = out.expected.shape
    out.inputs_at = elementwise_inputs_at(["a", "b"], [a, b], shape)
    out.cond_inputs = cond_broadcast([a, b], shape)
    return Case(f"kiln.{op}", kdt, f"{note}a: {tname(kdt, a.shape)}, b: {tname(kdt, b.shape)}",
                [("a", kdt, a), ("b", kdt, b)],
                lambda bl, v, op=op, shape=shape: bl.op(f"kiln.{op}", v, {}, [(kdt, shape)]),
                [out])


def gen_binary(op, kdt, rng, k):
    e = edges(kdt)
    cases = []
    if op == "pow" and kdt in INTS:
        exps = np.array([0, 1, 2, 3, 7, 8, 31, 32, 62, 63, 64, 100, -1, -2, -3]
                        if kdt != "u8" else [0, 1, 2, 3, 7, 8, 31, 32, 63, 64, 100, 255],
                        dtype=STORAGE[kdt])
        cases.append(binary_case(op, kdt, e.reshape(-1, 1), exps, "edge grid, "))
    elif op in ("shift_left", "shift_right"):
        counts = np.array([0, 1, 2, 7, 8, 31, 32, 63, 64, 100] +
                          ([] if kdt == "u8" else [-1, -64]), dtype=STORAGE[kdt])
        cases.append(binary_case(op, kdt, e.reshape(-1, 1), counts, "edge grid, "))
    elif op == "pow":
        exps = dedupe_float([0.0, -0.0, 1.0, -1.0, 2.0, 3.0, -3.0, 0.5, -0.5, 1 / 3, 2.5, 10.0,
                             100.0, -100.0, INF, -INF, NAN, 1e-40, 127.0, 1e-7], kdt)
        cases.append(binary_case(op, kdt, e.reshape(-1, 1), exps, "edge grid, "))
    else:
        cases.append(binary_case(op, kdt, e.reshape(-1, 1), e, "edge grid, "))
    for _ in range(k):
        out = rand_shape(rng)
        sa, sb = operand_shape(rng, out), operand_shape(rng, out)
        if rng.random() < 0.5:
            sa, sb = sb, sa
        a = values(rng, kdt, sa)
        b = values(rng, kdt, sb, "exponent" if op == "pow" else "general")
        cases.append(binary_case(op, kdt, a, b, ""))
    return cases


def compare_case(op, kdt, a, b, note):
    shape = np.broadcast_shapes(a.shape, b.shape)
    e = COMPARE[op](a, b)
    out = Out(np.asarray(e, np.bool_).reshape(shape), "bool",
              inputs_at=elementwise_inputs_at(["a", "b"], [a, b], shape),
              cond_inputs=cond_broadcast([a, b], shape))
    return Case(f"kiln.{op}", kdt, f"{note}a: {tname(kdt, a.shape)}, b: {tname(kdt, b.shape)}",
                [("a", kdt, a), ("b", kdt, b)],
                lambda bl, v: bl.op(f"kiln.{op}", v, {}, [("bool", shape)]), [out])


def gen_compare(op, kdt, rng, k):
    e = edges(kdt)
    cases = [compare_case(op, kdt, e.reshape(-1, 1), e, "edge grid, ")]
    for _ in range(k):
        out = rand_shape(rng)
        sa, sb = operand_shape(rng, out), operand_shape(rng, out)
        a = values(rng, kdt, sa, "ties")
        b = values(rng, kdt, sb, "ties")
        cases.append(compare_case(op, kdt, a, b, ""))
    return cases


def where_case(kdt, c, a, b, note):
    shape = np.broadcast_shapes(c.shape, a.shape, b.shape)
    e = np.where(c, a, b).astype(STORAGE[kdt]).reshape(shape)
    out = Out(e, kdt, inputs_at=elementwise_inputs_at(["cond", "a", "b"], [c, a, b], shape),
              cond_inputs=cond_broadcast([c, a, b], shape))
    return Case("kiln.where", kdt, f"{note}cond: {tname('bool', c.shape)}, a: "
                f"{tname(kdt, a.shape)}, b: {tname(kdt, b.shape)}",
                [("cond", "bool", c), ("a", kdt, a), ("b", kdt, b)],
                lambda bl, v: bl.op("kiln.where", v, {}, [(kdt, shape)]), [out])


def gen_where(op, kdt, rng, k):
    e = edges(kdt)
    c = rng.random(len(e)) < 0.5
    cases = [where_case(kdt, c, e, e[::-1].copy(), "edges, ")]
    for _ in range(k):
        out = rand_shape(rng)
        shapes = [operand_shape(rng, out) for _ in range(3)]
        cases.append(where_case(kdt, values(rng, "bool", shapes[0]), values(rng, kdt, shapes[1]),
                                values(rng, kdt, shapes[2]), ""))
    return cases


def erfc(x):
    return np.vectorize(math.erfc, otypes=[np.float64])(x) if x.size else x.copy()


UNARY_FLOAT = ("exp", "log", "sqrt", "rsqrt", "tanh", "erf", "sigmoid", "silu", "gelu",
               "gelu_tanh", "sin", "cos", "tan")
UNARY_PROFILE = {"exp": "exp", "log": "positive", "sqrt": "positive", "rsqrt": "positive",
                 "tanh": "general", "erf": "general", "sigmoid": "exp", "silu": "exp",
                 "gelu": "general", "gelu_tanh": "general", "sin": "general",
                 "cos": "general", "tan": "general"}


def unary_float_expected(op, x):
    with np.errstate(all="ignore"):
        if op == "exp":
            return np.exp(x)
        if op == "log":
            return np.log(x)
        if op == "sqrt":
            return np.sqrt(x)
        if op == "rsqrt":
            return 1.0 / np.sqrt(x)
        if op == "tanh":
            return np.tanh(x)
        if op in ("sin", "cos", "tan"):  # NumPy's in double: the C library's
            return getattr(np, op)(x)
        if op == "erf":  # math.erf: the C library's, in double
            return np.vectorize(math.erf, otypes=[np.float64])(x) if x.size else x.copy()
        if op == "sigmoid":
            return 1.0 / (1.0 + np.exp(-x))
        if op == "silu":
            return x / (1.0 + np.exp(-x))
        if op == "gelu":
            return 0.5 * x * erfc(-x / math.sqrt(2.0))
        if op == "gelu_tanh":
            return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    raise KeyError(op)


def unary_float_case(op, kdt, x, note, attrs):
    X = to_f64(x)
    e = unary_float_expected(op, X)
    exp = round_float(e, kdt).reshape(x.shape)
    out = Out(exp, kdt, inputs_at=elementwise_inputs_at(["x"], [x], x.shape),
              cond_inputs=[X])
    if op != "sqrt":
        ulps, rel, fmt = compute_dtype_tol(kdt)
        absolute = 0.0
        if op == "sigmoid":
            absolute = MIN_NORMAL["f64" if kdt == "f64" else "f32"]
        elif op in ("silu", "gelu", "gelu_tanh"):
            absolute = (1e-15 if kdt == "f64" else 1e-7) * np.maximum(1.0, np.abs(X))
        t = tol_array(e, fmt, rel, ulps, absolute)
        if kdt in ("f16", "bf16"):
            t = t + ulp(exp, kdt)
        out.tol = t
        out.strict = ~np.isfinite(X) | (X == 0)
    name = "kiln.gelu" if op.startswith("gelu") else f"kiln.{op}"
    label = name + (f" [approximate={attrs['approximate']}]" if "approximate" in attrs else "")
    return Case(label, kdt, f"{note}x: {tname(kdt, x.shape)}", [("x", kdt, x)],
                lambda bl, v: bl.op(name, v, attrs, [(kdt, x.shape)]), [out])


def gen_unary_float(op, kdt, rng, k):
    variants = [{}]
    if op == "gelu":
        variants = [{}, {"approximate": "none"}]
    elif op == "gelu_tanh":
        variants = [{"approximate": "tanh"}]
    cases = []
    for attrs in variants:
        cases.append(unary_float_case(op, kdt, edges(kdt), "edges, ", attrs))
        prof = UNARY_PROFILE[op]
        cases.append(unary_float_case(op, kdt, values(rng, kdt, (200,), prof), "", attrs))
        for _ in range(k):
            cases.append(unary_float_case(op, kdt, values(rng, kdt, rand_shape(rng), prof), "",
                                          attrs))
    return cases


def unary_numeric_case(op, kdt, x, note):
    with np.errstate(all="ignore"):
        if op == "neg":
            e = np.negative(x)
        elif op == "abs":
            e = np.abs(x)
        elif op == "sign":
            e = np.sign(x)
        elif op == "bitwise_not":
            e = np.invert(x)
        elif op in ("floor", "ceil", "round"):  # integers come back as they are
            e = x.copy() if not is_float(kdt) else {"floor": np.floor, "ceil": np.ceil,
                                                    "round": np.rint}[op](x)
        else:
            e = np.maximum(x, np.zeros((), x.dtype))
    out = Out(np.asarray(e).astype(STORAGE[kdt]).reshape(x.shape), kdt,
              inputs_at=elementwise_inputs_at(["x"], [x], x.shape), cond_inputs=[to_f64(x)])
    if op in ("relu", "sign") and is_float(kdt):
        out.zero_sign_free = to_f64(x) == 0
    return Case(f"kiln.{op}", kdt, f"{note}x: {tname(kdt, x.shape)}", [("x", kdt, x)],
                lambda bl, v: bl.op(f"kiln.{op}", v, {}, [(kdt, x.shape)]), [out])


def gen_unary_numeric(op, kdt, rng, k):
    cases = [unary_numeric_case(op, kdt, edges(kdt), "edges, ")]
    for _ in range(k):
        cases.append(unary_numeric_case(op, kdt, values(rng, kdt, rand_shape(rng)), ""))
    return cases


def cast_expected(src, dst, x):
    """(expected storage array, mask of elements PyTorch defines, or None: all)."""
    if dst == "bool":
        return (to_f64(x) != 0) if is_float(src) else (np.asarray(x) != 0), None
    if src == "bool":
        return x.astype(STORAGE[dst]), None
    if is_float(src):
        X = to_f64(x)
        if is_float(dst):
            return round_float(X, dst), None
        return float_to_int(X, dst)
    if is_float(dst):
        return int_to_float(x, dst), None
    return x.astype(STORAGE[dst]), None


def cast_case(src, x, note):
    outs = []
    for dst in ALL:
        e, ok = cast_expected(src, dst, x)
        outs.append(Out(np.asarray(e).astype(STORAGE[dst]).reshape(x.shape), dst,
                        kiln_rule=None if ok is None else {KILN_RULE_CAST: ~ok},
                        label=f"kiln.cast {src}->{dst}",
                        inputs_at=elementwise_inputs_at(["x"], [x], x.shape),
                        cond_inputs=[to_f64(x)]))

    def emit(bl, v):
        return [bl.op("kiln.cast", v, {"dtype": DT(dst)}, [(dst, x.shape)])[0] for dst in ALL]

    return Case("kiln.cast", src, f"{note}x: {tname(src, x.shape)} -> every dtype",
                [("x", src, x)], emit, outs)


def gen_cast(op, kdt, rng, k):
    cases = [cast_case(kdt, edges(kdt), "edges, ")]
    if is_float(kdt):  # values around each integer type's range, fractional ones
        extra = []
        for t in INTS:
            info = np.iinfo(STORAGE[t])
            lo, hi = float(info.min), float(info.max)
            extra.append(rng.uniform(lo * 1.05 - 2, hi * 1.05 + 2, 24))
            extra.append(np.array([lo, hi, lo - 1, hi + 1, lo + 0.5, hi - 0.5, lo - 0.5,
                                   hi + 0.5, np.nextafter(hi + 1, 0), np.nextafter(lo, 0)]))
        extra.append(rng.uniform(-3, 3, 24))
        v = round_float(np.concatenate(extra), kdt)
        cases.append(cast_case(kdt, v, "near integer limits, "))
    elif kdt in INTS:
        info = np.iinfo(STORAGE[kdt])
        near = []
        for c in [0, 2 ** 24, 2 ** 53, 2 ** 60, 2 ** 62, int(info.max), int(info.min), 2048,
                  65504, 256, 2 ** 31]:
            for d in range(-3, 4):
                near.append(c + d)
        near += [(1 << s) + (1 << (s - 24)) + 1 for s in range(30, 63)]
        near += [(1 << s) + (1 << (s - 8)) + 1 for s in range(10, 63)]
        near += [-(1 << s) - (1 << (s - 24)) for s in range(30, 63)]
        near = [v for v in near if info.min <= v <= info.max]
        cases.append(cast_case(kdt, np.array(sorted(set(near)), dtype=STORAGE[kdt]),
                               "near rounding boundaries, "))
    for _ in range(k):
        cases.append(cast_case(kdt, values(rng, kdt, rand_shape(rng)), ""))
    return cases


# ---------------------------------------------------------------------------------------
# reductions


def reduced_inputs_at(x, axes, keepdim):
    def at(idx):
        sel, j = [], 0
        for d in range(x.ndim):
            if d in axes:
                sel.append(slice(None))
                if keepdim:
                    j += 1
            else:
                sel.append(idx[j])
                j += 1
        return "reduced values " + fmt_row(x[tuple(sel)])
    return at


def reduce_case(op, kdt, x, axes_attr, keepdim, note):
    axes = tuple(sorted(a % x.ndim for a in axes_attr))
    kd = bool(keepdim)
    X = to_f64(x)
    shape = np.sum(np.zeros(x.shape), axis=axes, keepdims=kd).shape
    out = Out(None, kdt, inputs_at=reduced_inputs_at(x, axes, kd), cond_inputs=[x])
    with np.errstate(all="ignore"):
        if op in ("reduce_sum", "reduce_mean"):
            if is_float(kdt):
                e = np.sum(X, axis=axes, keepdims=kd)
                scale = np.sum(np.abs(X), axis=axes, keepdims=kd)
                n = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
                if op == "reduce_mean":
                    e = e / n if n else np.full(e.shape, np.nan)
                    scale = scale / max(n, 1)
                acc_max = FMT["f64" if kdt == "f64" else "f32"][2]
                out.skip = np.sum(np.where(np.isfinite(X), np.abs(X), 0), axis=axes,
                                  keepdims=kd) > acc_max
                out.expected = round_float(e, kdt)
                rel = 1e-12 if kdt == "f64" else 1e-5
                out.tol = rel * np.where(np.isfinite(scale), scale, 0) + ulp(e, kdt)
            else:
                if kdt == "u8":
                    e = np.sum(x.astype(np.uint64), axis=axes, keepdims=kd)
                else:
                    e = np.sum(x.astype(np.int64), axis=axes, keepdims=kd)
                out.expected = e.astype(STORAGE[kdt])
        elif op == "reduce_prod":
            if is_float(kdt):
                e = np.prod(X, axis=axes, keepdims=kd)
                out.expected = round_float(e, kdt)
                # Products in double in kiln's order and NumPy's agree unless a partial
                # product can leave double's range, which depends on the order.
                lg = np.where(np.isfinite(X) & (X != 0), np.abs(np.log2(np.abs(
                    np.where(np.isfinite(X) & (X != 0), X, 1)))), 0)
                out.skip = np.sum(lg, axis=axes, keepdims=kd) > 1000
                out.tol = 1e-12 * np.where(np.isfinite(e), np.abs(e), 0) + ulp(e, kdt)
            else:
                wide = np.uint64 if kdt == "u8" else np.int64
                out.expected = np.prod(x.astype(wide), axis=axes, keepdims=kd).astype(STORAGE[kdt])
        else:
            f = np.max if op == "reduce_max" else np.min
            if is_float(kdt):
                e = f(X, axis=axes, keepdims=kd)
                out.expected = round_float(e, kdt)
                has_pos = np.any((X == 0) & ~np.signbit(X), axis=axes, keepdims=kd)
                has_neg = np.any((X == 0) & np.signbit(X), axis=axes, keepdims=kd)
                out.zero_sign_free = has_pos & has_neg & (e == 0)
            else:
                out.expected = f(x, axis=axes, keepdims=kd)
    out.expected = np.asarray(out.expected).astype(STORAGE[kdt]).reshape(shape)
    attrs = {"axes": list(axes_attr)}
    if keepdim is not None:
        attrs["keepdim"] = keepdim
    return Case(f"kiln.{op}", kdt, f"{note}x: {tname(kdt, x.shape)}, axes={list(axes_attr)}"
                f"{'' if keepdim is None else f', keepdim={keepdim}'}", [("x", kdt, x)],
                lambda bl, v: bl.op(f"kiln.{op}", v, attrs, [(kdt, shape)]), [out])


def rand_axes(rng, rank):
    n = int(rng.integers(1, rank + 1))
    axes = sorted(rng.choice(rank, size=n, replace=False).tolist())
    axes = [a - rank if rng.random() < 0.3 else a for a in axes]
    if rng.random() < 0.3:
        rng.shuffle(axes)
    return [int(a) for a in axes]


def gen_reduce(op, kdt, rng, k):
    cases = []
    needs_nonempty = op in ("reduce_max", "reduce_min")
    e = edges(kdt)
    cases.append(reduce_case(op, kdt, e, [0], None, "edges, "))
    if not needs_nonempty:
        cases.append(reduce_case(op, kdt, values(rng, kdt, (2, 0, 3)), [1], None, "empty axis, "))
        cases.append(reduce_case(op, kdt, values(rng, kdt, (0,)), [0], True, "empty axis, "))
    if is_float(kdt):  # one row per edge value among ordinary ones
        rows = np.repeat(values(rng, kdt, (1, 6), "finite"), len(e), axis=0)
        rows[:, 2] = e
        cases.append(reduce_case(op, kdt, rows, [1], False, "edge rows, "))
    for i in range(k + 2):
        prof = "moderate" if i % 2 else "general"
        while True:
            shape = rand_shape(rng, min_rank=1)
            axes = rand_axes(rng, len(shape))
            if not needs_nonempty or all(shape[a] > 0 for a in axes):
                break
        keep = [None, True, False][int(rng.integers(0, 3))]
        cases.append(reduce_case(op, kdt, values(rng, kdt, shape, prof), axes, keep, ""))
    return cases


def argmax_case(kdt, x, axis, keepdim, note):
    ax = axis % x.ndim
    with np.errstate(all="ignore"):
        if is_float(kdt):
            X = to_f64(x)
            nan = np.isnan(X)
            e = np.where(np.any(nan, axis=ax), np.argmax(nan, axis=ax),
                         np.argmax(np.where(nan, -np.inf, X), axis=ax))
        else:
            e = np.argmax(x, axis=ax)
    if keepdim:
        e = np.expand_dims(e, ax)
    e = np.asarray(e, np.int64)
    attrs = {"axis": axis}
    if keepdim is not None:
        attrs["keepdim"] = keepdim
    out = Out(e, "i64", inputs_at=reduced_inputs_at(x, (ax,), bool(keepdim)), cond_inputs=[x])

    def detail(idx, got, want):
        row = np.moveaxis(x, ax, -1)[tuple(i for d, i in enumerate(idx) if not (keepdim and d == ax))]
        g = int(got)
        gv = fmt_val(row[g]) if 0 <= g < row.size else "out of range"
        return f"x[{g}] (kiln's) = {gv}, x[{int(want)}] (expected) = {fmt_val(row[int(want)])}"
    out.detail = detail
    return Case("kiln.argmax", kdt, f"{note}x: {tname(kdt, x.shape)}, axis={axis}"
                f"{'' if keepdim is None else f', keepdim={keepdim}'}", [("x", kdt, x)],
                lambda bl, v: bl.op("kiln.argmax", v, attrs, [("i64", e.shape)]), [out])


def gen_argmax(op, kdt, rng, k):
    e = edges(kdt)
    cases = [argmax_case(kdt, e, 0, None, "edges, "),
             argmax_case(kdt, e[::-1].copy(), -1, True, "edges reversed, ")]
    if is_float(kdt):
        rows = np.repeat(values(rng, kdt, (1, 5), "ties"), len(e), axis=0)
        rows[:, 3] = e
        cases.append(argmax_case(kdt, rows, 1, False, "edge rows, "))
    for _ in range(k + 2):
        while True:
            shape = rand_shape(rng, min_rank=1)
            axis = int(rng.integers(0, len(shape)))
            if shape[axis] > 0:
                break
        if rng.random() < 0.3:
            axis -= len(shape)
        keep = [None, True, False][int(rng.integers(0, 3))]
        cases.append(argmax_case(kdt, values(rng, kdt, shape, "ties"), axis, keep, ""))
    return cases


def gen_reduce_errors(op, kdt, rng, k):
    """Reductions kiln must refuse: max/min/argmax over an empty axis, mean of integers."""
    x = np.zeros((2, 0, 3), dtype=STORAGE[kdt])
    short = op.replace("_errors", "")
    if short == "argmax":
        attrs, shape = {"axis": 1}, (2, 3)
        rdt = "i64"
        desc = f"x: {tname(kdt, x.shape)}, axis=1 (empty)"
    elif short == "reduce_mean":
        x = np.ones((2, 3), dtype=STORAGE[kdt])
        attrs, shape, rdt = {"axes": [1]}, (2,), kdt
        desc = f"x: {tname(kdt, x.shape)}, axes=[1] (integer mean)"
    else:
        attrs, shape, rdt = {"axes": [1]}, (2, 3), kdt
        desc = f"x: {tname(kdt, x.shape)}, axes=[1] (empty)"
    return [Case(f"kiln.{short}", kdt, desc, [("x", kdt, x)],
                 lambda bl, v: bl.op(f"kiln.{short}", v, attrs, [(rdt, shape)]), [],
                 error=short)]


def softmax_case(op, kdt, x, axis, note):
    ax = axis % x.ndim
    X = to_f64(x)
    with np.errstate(all="ignore"):
        if x.shape[ax] == 0:
            e = X.copy()
        else:
            m = np.max(X, axis=ax, keepdims=True)
            z = X - m
            s = np.sum(np.exp(z), axis=ax, keepdims=True)
            e = np.exp(z) / s if op == "softmax" else z - np.log(s)
        rowscale = np.max(np.where(np.isfinite(e), np.abs(e), 0), axis=ax, keepdims=True,
                          initial=0.0)
        if op == "log_softmax":
            rowscale = np.maximum(rowscale, 1.0)
    rel = 1e-12 if kdt == "f64" else 1e-5
    out = Out(round_float(e, kdt), kdt, tol=rel * rowscale + ulp(e, kdt),
              inputs_at=reduced_inputs_at(x, (ax,), True), cond_inputs=[X])
    return Case(f"kiln.{op}", kdt, f"{note}x: {tname(kdt, x.shape)}, axis={axis}",
                [("x", kdt, x)],
                lambda bl, v: bl.op(f"kiln.{op}", v, {"axis": axis}, [(kdt, x.shape)]), [out])


def gen_softmax(op, kdt, rng, k):
    e = edges(kdt)
    fin = to_f64(e)[np.isfinite(to_f64(e))]
    rows = np.repeat(values(rng, kdt, (1, 6), "finite"), len(e), axis=0)
    rows[:, 1] = e
    cases = [softmax_case(op, kdt, rows, -1, "edge rows, ")]
    # rows of huge and tiny spread, and a row of one value
    spread = np.stack([values(rng, kdt, (8,), "finite") * s for s in (1e2, 1e3, 1e-3)])
    cases.append(softmax_case(op, kdt, round_float(spread, kdt), 1, "wide rows, "))
    cases.append(softmax_case(op, kdt, round_float(np.array([[fin.max()] * 4, [-INF] * 4,
                                                             [INF, 1, 2, 3], [-INF, 0, -INF, 1]]),
                                                   kdt), 1, "special rows, "))
    for i in range(k + 1):
        shape = rand_shape(rng, min_rank=1)
        axis = int(rng.integers(0, len(shape)))
        if rng.random() < 0.4:
            axis -= len(shape)
        cases.append(softmax_case(op, kdt, values(rng, kdt, shape, "moderate" if i % 2 else
                                                  "finite"), axis, ""))
    return cases


def norm_case(op, kdt, x, gamma, beta, eps, note):
    X, G = to_f64(x), to_f64(gamma)
    B = to_f64(beta) if beta is not None else np.zeros_like(G)
    n = x.shape[-1]
    with np.errstate(all="ignore"):
        if n == 0:
            e = X.copy()
            scale = np.zeros(X.shape[:-1] + (1,))
        else:
            mean = np.zeros(X.shape[:-1] + (1,)) if op == "rms_norm" else \
                np.mean(X, axis=-1, keepdims=True)
            var = np.mean((X - mean) ** 2, axis=-1, keepdims=True)
            xhat = (X - mean) / np.sqrt(var + eps)
            e = xhat * G + B
            mag = np.abs(xhat * G) + np.abs(B)
            scale = np.max(np.where(np.isfinite(mag), mag, 0), axis=-1, keepdims=True)
    rel = 1e-12 if kdt == "f64" else 1e-5
    out = Out(round_float(e, kdt), kdt, tol=rel * scale + ulp(e, kdt), cond_inputs=[X])

    def at(idx):
        s = "row " + fmt_row(x[idx[:-1]]) + f", gamma={fmt_val(gamma[idx[-1]])}"
        if beta is not None:
            s += f", beta={fmt_val(beta[idx[-1]])}"
        return s
    out.inputs_at = at
    inputs = [("x", kdt, x), ("gamma", kdt, gamma)] + ([("beta", kdt, beta)] if beta is not None
                                                       else [])
    return Case(f"kiln.{op}", kdt, f"{note}x: {tname(kdt, x.shape)}, eps={eps}", inputs,
                lambda bl, v: bl.op(f"kiln.{op}", v, {"eps": eps}, [(kdt, x.shape)]), [out])


def gen_norm(op, kdt, rng, k):
    cases = []
    e = edges(kdt)
    e = e[~(np.abs(to_f64(e)) >= 1e15)]  # keeps NaN and drops huge values, then add +-inf
    e = np.concatenate([e, np.array([INF, -INF], dtype=STORAGE[kdt])])
    n = 6
    rows = np.repeat(values(rng, kdt, (1, n), "finite"), len(e), axis=0)
    rows[:, 2] = e

    def params(n):
        g = round_float(rng.uniform(0.5, 1.5, n) * rng.choice([-1, 1], n), kdt)
        b = round_float(rng.standard_normal(n) * 0.1, kdt) if op == "layer_norm" else None
        return g, b

    g, b = params(n)
    cases.append(norm_case(op, kdt, rows, g, b, 1e-5, "edge rows, "))
    special = np.array([[3.0] * n, [0.0] * n, [1e-40] * n, [-0.0] * n,
                        list(1000.0 + np.arange(n) * 1e-2), list(np.arange(n) * 1e6)])
    g, b = params(n)
    cases.append(norm_case(op, kdt, round_float(special, kdt), g, b, 1e-6, "special rows, "))
    for i in range(k + 1):
        shape = rand_shape(rng, min_rank=1, max_rank=3)
        if rng.random() < 0.8 and shape[-1] == 0:
            shape = shape[:-1] + (4,)
        x = values(rng, kdt, shape, "moderate" if i % 2 else "finite")
        if rng.random() < 0.5 and x.size:
            off = round_float(rng.uniform(-50, 50), "f64")
            x = round_float(to_f64(x) + off, kdt)
        g, b = params(shape[-1])
        eps = float(rng.choice([1e-5, 1e-6, 0.1]))
        cases.append(norm_case(op, kdt, x, g, b, eps, ""))
    return cases


# ---------------------------------------------------------------------------------------
# matmul


def matmul_case(kdt, a, b, note):
    with np.errstate(all="ignore"):
        if is_float(kdt):
            A, B = to_f64(a), to_f64(b)
            e = np.matmul(A, B)
            scale = np.matmul(np.abs(np.where(np.isfinite(A), A, 0)),
                              np.abs(np.where(np.isfinite(B), B, 0)))
            rel = 1e-12 if kdt == "f64" else 1e-5
            out = Out(round_float(e, kdt), kdt, tol=rel * scale + ulp(e, kdt))
        else:
            t = np.uint64 if kdt == "u8" else np.int64
            e = np.matmul(a.astype(t), b.astype(t)).astype(STORAGE[kdt])
            out = Out(np.asarray(e), kdt)
    a2 = a if a.ndim > 1 else a[None, :]
    b2 = b if b.ndim > 1 else b[:, None]
    batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    A2 = np.broadcast_to(a2, batch + a2.shape[-2:])
    B2 = np.broadcast_to(b2, batch + b2.shape[-2:])

    def at(idx):
        idx = list(idx)
        j = idx.pop() if b.ndim > 1 else 0
        i = idx.pop() if a.ndim > 1 else 0
        bi = tuple(idx)
        return f"a row {fmt_row(A2[bi + (i,)])}, b column {fmt_row(B2[bi + (slice(None), j)])}"
    out.inputs_at = at
    out.cond_inputs = [a, b]
    shape = out.expected.shape
    return Case("kiln.matmul", kdt, f"{note}a: {tname(kdt, a.shape)}, b: {tname(kdt, b.shape)}",
                [("a", kdt, a), ("b", kdt, b)],
                lambda bl, v: bl.op("kiln.matmul", v, {}, [(kdt, shape)]), [out])


def gen_matmul(op, kdt, rng, k):
    cases = []
    sizes = [0, 1, 2, 3, 5, 8]
    prof = "finite"
    for i in range(k + 4):
        m, kk, n = (int(rng.choice(sizes)) for _ in range(3))
        form = i % 6
        if form == 0:
            sa, sb = (m, kk), (kk, n)
        elif form == 1:
            sa, sb = (kk,), (kk, n)
        elif form == 2:
            sa, sb = (m, kk), (kk,)
        elif form == 3:
            sa, sb = (kk,), (kk,)
        elif form == 4:
            bt = rand_shape(rng, min_rank=1, max_rank=2, max_elems=6, zero_prob=0.05)
            sa, sb = operand_shape(rng, bt) + (m, kk), operand_shape(rng, bt) + (kk, n)
        else:
            sa, sb = (2, m, kk), (kk, n)
        a = values(rng, kdt, sa, "moderate" if (i % 3 == 2 and is_float(kdt)) else
                   ("moderate" if not is_float(kdt) else prof))
        b = values(rng, kdt, sb, "moderate" if not is_float(kdt) else prof)
        cases.append(matmul_case(kdt, a, b, ""))
    # a row of edge values against ordinary columns
    e = edges(kdt)
    if is_float(kdt):
        e = e[~(np.abs(to_f64(e)) > 1e15)]
    cases.append(matmul_case(kdt, e.reshape(-1, 1), values(rng, kdt, (1, 3), "finite"),
                             "edges as a column, "))
    if kdt in INTS:  # sums that wrap around
        big = np.array(INT_EDGES[kdt][-8:], dtype=STORAGE[kdt])
        cases.append(matmul_case(kdt, big.reshape(2, 4), big[::-1].copy().reshape(4, 2),
                                 "large integers, "))
    return cases


# ---------------------------------------------------------------------------------------
# data movement: expected values and where each output element came from


def movement_case(op, kdt, inputs, f, attrs, results, note):
    """inputs: [(name, kdt, array)]; f(list of arrays) -> list of arrays (NumPy's op)."""
    arrays = [a for _, _, a in inputs]
    expected = f(arrays)
    # the same op on tagged positions: which input element each output element is
    tags = [np.arange(a.size, dtype=np.int64).reshape(a.shape) + (i << 40)
            for i, a in enumerate(arrays)]
    data_n = 1 if op != "concat" else len(arrays)
    tagged = f(tags[:data_n] + [arrays[i] for i in range(data_n, len(arrays))])
    outs = []
    for r, (e, t) in enumerate(zip(expected, tagged)):
        rdt = results[r][0]

        def at(idx, t=t):
            tag = int(t[idx])
            i, flat = tag >> 40, tag & ((1 << 40) - 1)
            src = arrays[i]
            pos = np.unravel_index(flat, src.shape) if src.ndim else ()
            return (f"{inputs[i][0]}{list(int(p) for p in pos)}="
                    f"{fmt_val(src.reshape(-1)[flat])}")
        outs.append(Out(np.asarray(e).astype(STORAGE[rdt]), rdt, inputs_at=at,
                        cond_inputs=arrays))
    desc = note + ", ".join(f"{n}: {tname(k, a.shape)}" for n, k, a in inputs)
    if attrs:
        desc += " " + ", ".join(f"{k}={fmt_attr(v)}" for k, v in sorted(attrs.items()))
    return Case(f"kiln.{op}", kdt, desc, inputs,
                lambda bl, v: bl.op(f"kiln.{op}", v, attrs, results), outs)


def factor_shape(rng, shape):
    """A random shape with as many elements as shape."""
    dims = [d for d in shape if d != 1]
    rng.shuffle(dims)
    out = []
    for d in dims:
        if out and rng.random() < 0.4:
            out[-1] *= d
        else:
            out.append(d)
    while len(out) < 4 and rng.random() < 0.3:
        out.insert(int(rng.integers(0, len(out) + 1)), 1)
    return tuple(out)


def gen_movement(op, kdt, rng, k):
    cases = []
    for i in range(k + 2):
        prof = "all_edges" if i == 0 else "general"
        big = dict(min_rank=2, min_elems=60, zero_prob=0) if i == 0 else {}
        if op == "reshape":
            x = values(rng, kdt, rand_shape(rng, **big), prof)
            to = factor_shape(rng, x.shape)
            cases.append(movement_case(op, kdt, [("x", kdt, x)], lambda a, to=to: [a[0].reshape(to)],
                                       {"shape": SH(to)}, [(kdt, to)], ""))
        elif op == "transpose":
            x = values(rng, kdt, rand_shape(rng, **big), prof)
            perm = [int(p) for p in rng.permutation(x.ndim)]
            attr = [p - x.ndim if rng.random() < 0.3 else p for p in perm]
            to = tuple(x.shape[p] for p in perm)
            cases.append(movement_case(op, kdt, [("x", kdt, x)],
                                       lambda a, perm=perm: [np.transpose(a[0], perm)],
                                       {"perm": attr}, [(kdt, to)], ""))
        elif op == "broadcast_to":
            to = rand_shape(rng, **big)
            x = values(rng, kdt, to if i == 0 else operand_shape(rng, to), prof)
            cases.append(movement_case(op, kdt, [("x", kdt, x)],
                                       lambda a, to=to: [np.broadcast_to(a[0], to)],
                                       {"shape": SH(to)}, [(kdt, to)], ""))
        elif op == "slice":
            x = values(rng, kdt, rand_shape(rng, **big), prof)
            starts, stops, steps, sl = [], [], [], []
            for n in x.shape:
                s = int(rng.integers(0, n + 1))
                r = rng.random()
                stop = (2 ** 63 - 1 if r < 0.2 else s + int(rng.integers(-1, n + 3)))
                stop = max(stop, 0)
                st = int(rng.integers(1, 4))
                starts.append(s), stops.append(stop), steps.append(st)
                sl.append(slice(s, max(min(stop, n), s), st))
            to = x[tuple(sl)].shape
            cases.append(movement_case(op, kdt, [("x", kdt, x)],
                                       lambda a, sl=tuple(sl): [a[0][sl]],
                                       {"starts": starts, "stops": stops, "steps": steps},
                                       [(kdt, to)], ""))
        elif op == "concat":
            base = list(rand_shape(rng, **(big or dict(min_rank=1))))
            axis = int(rng.integers(0, len(base)))
            xs = []
            for j in range(int(rng.integers(1, 5))):
                s = list(base)
                s[axis] = int(rng.choice([0, 1, 2, 3]))
                xs.append((f"x{j}", kdt, values(rng, kdt, tuple(s), prof)))
            attr_axis = axis - len(base) if rng.random() < 0.3 else axis
            to = np.concatenate([a for _, _, a in xs], axis=axis).shape
            cases.append(movement_case(op, kdt, xs,
                                       lambda a, axis=axis: [np.concatenate(a, axis=axis)],
                                       {"axis": attr_axis}, [(kdt, to)], ""))
        elif op == "split":
            x = values(rng, kdt, rand_shape(rng, **(big or dict(min_rank=1))), prof)
            axis = int(rng.integers(0, x.ndim))
            n = x.shape[axis]
            parts = int(rng.integers(1, 5))
            cuts = sorted(int(c) for c in rng.integers(0, n + 1, parts - 1))
            sizes = [b - a for a, b in zip([0] + cuts, cuts + [n])]
            bounds = np.cumsum(sizes)[:-1].tolist()
            shapes = []
            for s in sizes:
                sh = list(x.shape)
                sh[axis] = s
                shapes.append((kdt, tuple(sh)))
            attr_axis = axis - x.ndim if rng.random() < 0.3 else axis
            cases.append(movement_case(op, kdt, [("x", kdt, x)],
                                       lambda a, axis=axis, bounds=bounds:
                                       np.split(a[0], bounds, axis=axis),
                                       {"axis": attr_axis, "sizes": sizes}, shapes, ""))
        elif op == "gather":
            x = values(rng, kdt, rand_shape(rng, **(big or dict(min_rank=1, max_elems=120))), prof)
            axis = int(rng.integers(0, x.ndim))
            n = x.shape[axis]
            idt = "i32" if rng.random() < 0.5 else "i64"
            ishape = rand_shape(rng, max_rank=2, max_elems=12)
            if n == 0 and int(np.prod(ishape)) != 0:
                ishape = (0,)
            idx = rng.integers(0, max(n, 1), size=ishape).astype(STORAGE[idt])
            if i == 0:  # every index, in random order
                idx = rng.permutation(n).astype(STORAGE[idt])
            attr_axis = axis - x.ndim if rng.random() < 0.3 else axis
            to = np.take(x, idx, axis=axis).shape
            cases.append(movement_case(op, kdt, [("x", kdt, x), ("indices", idt, idx)],
                                       lambda a, axis=axis: [np.take(a[0], a[1], axis=axis)],
                                       {"axis": attr_axis}, [(kdt, to)], ""))
    # a scalar whose bits are easy to lose (low bits of a big i64, a negative denormal)
    scalar = {"i64": 2 ** 60 + 2 ** 36 + 1, "i32": 2 ** 24 + 1, "i8": -128, "u8": 255,
              "bool": True, "f32": -1e-40, "bf16": -1e-40, "f16": -6e-8, "f64": -5e-324}[kdt]
    x = (np.array(scalar, STORAGE[kdt]) if not is_float(kdt) else
         round_float(np.array(scalar), kdt).reshape(()))
    if op == "reshape":
        cases.append(movement_case(op, kdt, [("x", kdt, x)], lambda a: [a[0].reshape(1, 1)],
                                   {"shape": SH([1, 1])}, [(kdt, (1, 1))], "scalar, "))
    elif op == "transpose":
        cases.append(movement_case(op, kdt, [("x", kdt, x)], lambda a: [a[0].copy()],
                                   {"perm": []}, [(kdt, ())], "scalar, "))
    elif op == "broadcast_to":
        cases.append(movement_case(op, kdt, [("x", kdt, x)],
                                   lambda a: [np.broadcast_to(a[0], (2, 3))],
                                   {"shape": SH([2, 3])}, [(kdt, (2, 3))], "scalar, "))
    elif op == "slice":
        cases.append(movement_case(op, kdt, [("x", kdt, x)], lambda a: [a[0].copy()],
                                   {"starts": [], "stops": [], "steps": []}, [(kdt, ())],
                                   "scalar, "))
    else:
        x1 = x.reshape(1)
        if op == "concat":
            cases.append(movement_case(op, kdt, [("x0", kdt, x1), ("x1", kdt, x1.copy())],
                                       lambda a: [np.concatenate(a)], {"axis": 0},
                                       [(kdt, (2,))], "one-element, "))
        elif op == "split":
            cases.append(movement_case(op, kdt, [("x", kdt, x1)],
                                       lambda a: np.split(a[0], [0]), {"axis": 0, "sizes": [0, 1]},
                                       [(kdt, (0,)), (kdt, (1,))], "one-element, "))
        elif op == "gather":
            idx = np.array(0, np.int64)
            cases.append(movement_case(op, kdt, [("x", kdt, x1), ("indices", "i64", idx)],
                                       lambda a: [np.take(a[0], a[1], axis=0)], {"axis": 0},
                                       [(kdt, ())], "scalar index, "))
    if op == "slice":  # a vector of edge values, every second one
        x = edges(kdt)
        cases.append(movement_case(op, kdt, [("x", kdt, x)], lambda a: [a[0][1::2]],
                                   {"starts": [1], "stops": [2 ** 63 - 1], "steps": [2]},
                                   [(kdt, x[1::2].shape)], "edges, "))
    return cases

def gather_nd_numpy(x, idx, b):
    """ONNX's GatherND in NumPy's advanced indexing (negative indices from the end)."""
    k = idx.shape[-1]
    batch = int(np.prod(x.shape[:b], dtype=np.int64))
    xs = x.reshape((batch,) + x.shape[b:])
    ids = idx.reshape((batch, -1, k)).astype(np.int64)
    out = np.stack([xs[j][tuple(ids[j, :, m] for m in range(k))] for j in range(batch)])
    return out.reshape(idx.shape[:-1] + x.shape[b + k:])


def take_along(x, idx, axis):
    """ONNX's GatherElements: indices may be shorter than x off the axis, and negative."""
    if idx.size == 0:
        return np.zeros(idx.shape, x.dtype)
    part = x[tuple(slice(0, m) if d != axis else slice(None) for d, m in enumerate(idx.shape))]
    ids = np.where(idx < 0, idx + x.shape[axis], idx).astype(np.int64)
    return np.take_along_axis(part, ids, axis=axis)


def cumsum_numpy(X, axis, exclusive, reverse):
    """X (float64 or int64, which wraps) summed along the axis in order, as ONNX's CumSum."""
    y = np.flip(X, axis) if reverse else X
    c = np.cumsum(y, axis=axis, dtype=y.dtype)
    if exclusive:  # shifted by one: a zero first
        zero = np.zeros_like(np.take(y, [0], axis=axis)) if y.shape[axis] else y
        c = np.concatenate([zero, np.take(c, range(max(y.shape[axis] - 1, 0)), axis=axis)],
                           axis=axis)
    return np.flip(c, axis) if reverse else c


def gen_indexing(op, kdt, rng, k):
    """gather_elements and gather_nd (data movement: compared bit for bit) and cumsum."""
    cases = []
    for i in range(k + 2):
        prof = "all_edges" if i == 0 else "general"
        idt = "i32" if rng.random() < 0.5 else "i64"
        if op == "gather_elements":
            x = values(rng, kdt, rand_shape(rng, min_rank=1, max_elems=120, zero_prob=0), prof)
            axis = int(rng.integers(0, x.ndim))
            ishape = tuple(int(rng.integers(0, n + 1)) if d != axis else int(rng.integers(0, 5))
                           for d, n in enumerate(x.shape))
            n = x.shape[axis]
            idx = rng.integers(-n, n, size=ishape).astype(STORAGE[idt])
            attr_axis = axis - x.ndim if rng.random() < 0.3 else axis
            cases.append(movement_case(op, kdt, [("x", kdt, x), ("indices", idt, idx)],
                                       lambda a, axis=axis: [take_along(a[0], a[1], axis)],
                                       {"axis": attr_axis}, [(kdt, ishape)], ""))
        elif op == "gather_nd":
            x = values(rng, kdt, rand_shape(rng, min_rank=1, max_elems=120, zero_prob=0), prof)
            b = int(rng.integers(0, x.ndim)) if rng.random() < 0.3 else 0
            kk = int(rng.integers(1, x.ndim - b + 1))
            lead = tuple(int(rng.integers(1, 4)) for _ in range(int(rng.integers(0, 3))))
            ishape = x.shape[:b] + lead + (kk,)
            idx = np.stack([rng.integers(-x.shape[b + m], x.shape[b + m], size=ishape[:-1])
                            for m in range(kk)], axis=-1).astype(STORAGE[idt])
            to = ishape[:-1] + x.shape[b + kk:]
            cases.append(movement_case(op, kdt, [("x", kdt, x), ("indices", idt, idx)],
                                       lambda a, b=b: [gather_nd_numpy(a[0], a[1], b)],
                                       {"batch_dims": b}, [(kdt, to)], ""))
        else:  # cumsum
            x = values(rng, kdt, rand_shape(rng, min_rank=1), prof)
            axis = int(rng.integers(0, x.ndim))
            exclusive, reverse = bool(rng.random() < 0.5), bool(rng.random() < 0.5)
            X = to_f64(x) if is_float(kdt) else x.astype(np.int64)
            with np.errstate(all="ignore"):
                e = cumsum_numpy(X, axis, exclusive, reverse)
            exp = round_float(e, kdt) if is_float(kdt) else e.astype(STORAGE[kdt])
            out = Out(np.asarray(exp).reshape(x.shape), kdt,
                      inputs_at=elementwise_inputs_at(["x"], [x], x.shape), cond_inputs=[X])
            attrs = {"axis": axis, "exclusive": exclusive, "reverse": reverse}
            cases.append(Case("kiln.cumsum", kdt, f"x: {tname(kdt, x.shape)} axis={axis} "
                              f"exclusive={exclusive} reverse={reverse}", [("x", kdt, x)],
                              lambda bl, v, attrs=attrs, sh=x.shape: bl.op(
                                  "kiln.cumsum", v, attrs, [(kdt, sh)]), [out]))
    return cases


def top_k_numpy(kdt, x, X, k, axis, largest):
    """The k best along the axis and their indices, as PyTorch's topk orders them (NaN above
    every number; ties: the lower index first), by a stable lexicographic sort."""
    idx = np.broadcast_to(np.arange(x.shape[axis]).reshape(
        [-1 if d == axis else 1 for d in range(x.ndim)]), x.shape)
    if is_float(kdt):
        nan = np.isnan(X)
        value = np.where(nan, 0.0, -X if largest else X)
        first = ~nan if largest else nan  # False sorts first
    else:
        value = ~X if largest else X      # ~x: decreasing, and never overflows
        first = np.zeros(X.shape, bool)
    order = np.lexsort((idx, value, first), axis=axis)
    order = np.take(order, range(k), axis=axis)
    return np.take_along_axis(x, order, axis=axis), order.astype(np.int64)


def gen_top_k(op, kdt, rng, k):
    """top_k: values compared bit for bit, indices exactly."""
    cases = []
    for i in range(k + 2):
        prof = "all_edges" if i == 0 else "general"
        x = values(rng, kdt, rand_shape(rng, min_rank=1, max_elems=120, zero_prob=0.1), prof)
        axis = int(rng.integers(0, x.ndim))
        kk = int(rng.integers(0, x.shape[axis] + 1))
        largest = bool(rng.random() < 0.6)
        X = to_f64(x) if is_float(kdt) else x.astype(np.int64)
        vals, ids = top_k_numpy(kdt, x, X, kk, axis, largest)
        shape = tuple(kk if d == axis else n for d, n in enumerate(x.shape))
        outs = [Out(np.asarray(vals).astype(STORAGE[kdt]), kdt, cond_inputs=[X]),
                Out(ids, "i64", label="kiln.top_k (indices)", cond_inputs=[X])]
        attrs = {"k": kk, "axis": axis - x.ndim if rng.random() < 0.3 else axis,
                 "largest": largest}
        cases.append(Case("kiln.top_k", kdt, f"x: {tname(kdt, x.shape)} k={kk} axis={axis} "
                          f"largest={largest}", [("x", kdt, x)],
                          lambda bl, v, attrs=attrs, sh=shape: bl.op(
                              "kiln.top_k", v, attrs, [(kdt, sh), ("i64", sh)]), outs))
    return cases


# ---------------------------------------------------------------------------------------
# the op table


def op_table():
    """[(op name, dtypes, generator)] in run order."""
    t = []
    for op in BINARY:
        t.append((op, NUMERIC, gen_binary))
    for op in BITWISE:
        t.append((op, INTS, gen_binary))
    t.append(("bitwise_not", INTS, gen_unary_numeric))
    for op in COMPARE:
        t.append((op, ALL, gen_compare))
    t.append(("where", ALL, gen_where))
    for op in UNARY_FLOAT:
        t.append((op, FLOATS, gen_unary_float))
    for op in ("neg", "abs", "relu", "sign", "floor", "ceil", "round"):
        t.append((op, NUMERIC, gen_unary_numeric))
    t.append(("cast", ALL, gen_cast))
    for op in ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"):
        t.append((op, NUMERIC if op != "reduce_mean" else FLOATS, gen_reduce))
    t.append(("argmax", ALL, gen_argmax))
    t.append(("reduce_max_errors", NUMERIC, gen_reduce_errors))
    t.append(("reduce_min_errors", NUMERIC, gen_reduce_errors))
    t.append(("argmax_errors", ALL, gen_reduce_errors))
    t.append(("reduce_mean_errors", INTS, gen_reduce_errors))
    for op in ("softmax", "log_softmax"):
        t.append((op, FLOATS, gen_softmax))
    for op in ("layer_norm", "rms_norm"):
        t.append((op, FLOATS, gen_norm))
    t.append(("matmul", NUMERIC, gen_matmul))
    for op in ("reshape", "transpose", "broadcast_to", "slice", "concat", "split", "gather"):
        t.append((op, ALL, gen_movement))
    for op in ("gather_elements", "gather_nd"):
        t.append((op, ALL, gen_indexing))
    t.append(("cumsum", NUMERIC, gen_indexing))
    t.append(("top_k", NUMERIC, gen_top_k))
    return t


def kiln_op_of(entry):
    """The kiln op an op-table entry tests (for --op)."""
    name = entry.replace("_errors", "")
    return "gelu" if name == "gelu_tanh" else name


def build_cases(seed, k, only):
    cases = []
    for op, dtypes, gen in op_table():
        if only and kiln_op_of(op) not in only:
            continue
        for kdt in dtypes:
            rng = np.random.default_rng([seed, zlib.crc32(f"{op}/{kdt}".encode())])
            for c in gen(op, kdt, rng, k):
                c.group = f"{op}.{kdt}"
                cases.append(c)
    return cases


# ---------------------------------------------------------------------------------------
# running kiln


@dataclass
class Module:
    name: str
    cases: list
    path: str = ""
    out_slices: list = field(default_factory=list)   # per case: (first output, count)
    nargs: int = 0


def write_module(mod, root):
    b = Builder()
    mod.out_slices = []
    for c in mod.cases:
        vals = [b.arg(k, a) for _, k, a in c.inputs]
        res = c.emit(b, vals)
        if isinstance(res, Val):
            res = [res]
        mod.out_slices.append((len(b.rets), len(res)))
        b.rets.extend(res)
    d = os.path.join(root, mod.name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    for i, a in enumerate(b.data):
        np.save(os.path.join(d, f"arg{i}.npy"), a)
    with open(os.path.join(d, "m.mlir"), "w") as f:
        f.write(b.text())
    mod.path, mod.nargs = d, len(b.data)


@dataclass
class RunResult:
    rc: int
    stderr: str
    outputs: Optional[list]   # loaded arrays, or None
    seconds: float


ISA_LEVELS = ("base", "avx2", "avx512", "avx512_bf16", "amx")


def kiln_env(isa):
    """The environment of the kiln runs: KILN_CPU_ISA=isa when --isa is given (kiln then
    runs that instruction-set level's kernels, capped at the CPU's; base: portable loops),
    else this process's environment as it is."""
    env = dict(os.environ)
    if isa:
        env["KILN_CPU_ISA"] = isa
    return env


def effective_isa(kiln, env, root):
    """The level kiln's kernels run at under env, as `kiln bench` names it ("cpu avx2"),
    or a short reason why it could not be found."""
    d = os.path.join(root, "isa_probe")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "m.mlir")
    with open(path, "w") as f:
        f.write('module attributes {kiln.device = "cpu:0", kiln.entry = @main} {\n'
                '  func.func @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {\n'
                '    %0 = "kiln.neg"(%arg0) : (tensor<2xf32>) -> tensor<2xf32>\n'
                '    return %0 : tensor<2xf32>\n  }\n}\n')
    cmd = [kiln, "bench", path, "--warmup", "0", "-n", "1", "--reference-iterations", "0",
           "--threads", "1"]
    for attempt in range(20):
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
            break
        except subprocess.TimeoutExpired:
            return "unknown (kiln bench timed out)"
        except OSError:
            time.sleep(3)
    else:
        return "unknown (kiln did not start)"
    words = p.stdout.split("\n", 1)[0].split()
    if p.returncode == 0 and "cpu" in words[:-1]:
        return words[words.index("cpu") + 1]
    return f"unknown ({first_lines(p.stderr or p.stdout, 1)})"


def run_kiln(kiln, mod, mode, threads, timeout, env=None):
    outdir = os.path.join(mod.path, mode)
    if os.path.isdir(outdir):
        shutil.rmtree(outdir)
    cmd = [kiln, "run", os.path.join(mod.path, "m.mlir")]
    for i in range(mod.nargs):
        cmd += ["-i", f"arg{i}={os.path.join(mod.path, f'arg{i}.npy')}"]
    cmd += ["-o", outdir, "--threads", str(threads)]
    if mode == "reference":
        cmd.append("--reference")
    t0 = time.monotonic()
    for attempt in range(20):  # the binary may be briefly missing while it is rebuilt
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
            break
        except subprocess.TimeoutExpired:
            return RunResult(-999, f"timed out after {timeout} s", None, time.monotonic() - t0)
        except OSError as e:  # missing, or being written by the linker
            if attempt == 19:
                return RunResult(-998, f"cannot run {kiln}: {e}", None, time.monotonic() - t0)
            time.sleep(3)
    dt = time.monotonic() - t0
    if p.returncode != 0:
        return RunResult(p.returncode, p.stderr, None, dt)
    n = sum(c for _, c in mod.out_slices)
    outs = []
    for i in range(n):
        f = os.path.join(outdir, f"output{i}.npy")
        outs.append(np.load(f) if os.path.exists(f) else None)
    return RunResult(0, p.stderr, outs, dt)


# ---------------------------------------------------------------------------------------
# comparing


@dataclass
class Finding:
    case: Case
    mode: str
    kind: str          # value, shape, refused, accepted, crash
    label: str
    text: str
    count: int = 0     # differing elements


class CondCtx:
    def __init__(self, inputs, expected, got):
        self.inputs, self.expected, self.got = inputs, expected, got


def compare_out(case, o, got, mode):
    """(finding or None, undefined count, kiln-defined count, expected-difference reasons)."""
    label = o.label or case.op
    head = f"{label} {case.kdt} [{mode}] {case.desc}"
    exp = o.expected
    if got is None:
        return Finding(case, mode, "shape", label, f"{head}: output file missing"), 0, 0, []
    want_dtype = np.dtype(STORAGE[o.kdt])
    if got.shape != exp.shape or got.dtype != want_dtype:
        return Finding(case, mode, "shape", label,
                       f"{head}: kiln wrote {got.dtype}{list(got.shape)}, expected "
                       f"{want_dtype}{list(exp.shape)}"), 0, 0, []
    skip = np.zeros(exp.shape, bool) if o.skip is None else np.asarray(o.skip, bool)
    if is_float(o.kdt):
        g, e = got.astype(np.float64), exp.astype(np.float64)
        gn, en = np.isnan(g), np.isnan(e)
        bad = gn != en
        both = ~gn & ~en
        zsf = np.zeros(exp.shape, bool) if o.zero_sign_free is None else o.zero_sign_free
        exact_bad = both & ((g != e) | ((np.signbit(g) != np.signbit(e)) & ~zsf))
        if o.tol is None:
            bad |= exact_bad
        else:
            strict = np.zeros(exp.shape, bool) if o.strict is None else o.strict
            nonfinite = both & (np.isinf(g) | np.isinf(e))
            with np.errstate(all="ignore"):
                far = both & ~nonfinite & ~(np.abs(g - e) <= o.tol)
            bad |= np.where(strict, exact_bad, far | (nonfinite & (g != e)))
    else:
        g, e = got, exp
        bad = got != exp
    bad &= ~skip
    undefined = int(skip.sum())
    rules = {k: np.asarray(m, bool) & ~skip for k, m in (o.kiln_rule or {}).items()}
    kiln_defined = int(sum(int(m.sum()) for m in rules.values()))
    reasons = []
    if bad.any():
        ctx = CondCtx(o.cond_inputs, to_f64(e), to_f64(g))
        for op, dts, cond, reason in EXPECTED_DIFFERENCES:
            if op == label and (dts == "*" or case.kdt in dts or o.kdt in dts):
                m = bad & np.asarray(cond(ctx), bool)
                if m.any():
                    reasons.append(f"{reason} ({int(m.sum())} elements)")
                    bad &= ~m
    if not bad.any():
        return None, undefined, kiln_defined, reasons
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    ins = o.inputs_at(idx) if o.inputs_at else ""
    text = (f"{head} -> {tname(o.kdt, exp.shape)}: {int(bad.sum())} of {bad.size} elements "
            f"differ; first at {list(idx)}: {ins}; kiln {fmt_val(got[idx])}, expected "
            f"{fmt_val(exp[idx])}")
    if o.detail is not None:
        text += "; " + o.detail(idx, got[idx], exp[idx])
    if o.tol is not None:
        text += f" (tolerance {float(np.asarray(o.tol)[idx]):.3g})"
    ruled = [k for k, m in rules.items() if m[idx]]
    if ruled:  # PyTorch leaves this element undefined; the expectation is kiln's own rule
        text += f" [{'; '.join(ruled)}; docs/ops.md, Numerics]"
    n_ruled = int(sum(int((bad & m).sum()) for m in rules.values()))
    if n_ruled and not ruled:
        text += f" [{n_ruled} of the differing elements are under kiln-defined rules]"
    return (Finding(case, mode, "value", label, text, int(bad.sum())), undefined, kiln_defined,
            reasons)


def error_mentions_op(stderr, short):
    return "kiln: error" in stderr and short in stderr


def judge(mod, mode, res, findings, stats):
    """Compares one module's run; returns False when the module must be split up."""
    if len(mod.cases) == 1 and mod.cases[0].error is not None:
        c = mod.cases[0]
        if res.rc == 2 and error_mentions_op(res.stderr, c.error):
            stats["passed"] += 1
        else:
            kind = "accepted" if res.rc == 0 else "crash"
            if res.rc == 0:
                outs = ", ".join(fmt_row(o) for o in (res.outputs or []) if o is not None)
                msg = f"kiln accepted it and returned {outs}"
            else:
                msg = f"{exit_text(res.rc)}: {first_lines(res.stderr)}"
            findings.append(Finding(c, mode, kind, c.op, f"{c.op} {c.kdt} [{mode}] {c.desc}: "
                                    f"expected a verification error naming {c.error}; {msg}"))
            stats["failed"] += 1
        return True
    if res.rc != 0:
        if len(mod.cases) > 1:
            return False
        c = mod.cases[0]
        kind = "refused" if res.rc in (1, 2) else "crash"
        findings.append(Finding(c, mode, kind, c.op, f"{c.op} {c.kdt} [{mode}] {c.desc}: "
                                f"kiln {exit_text(res.rc)}: {first_lines(res.stderr)}"))
        stats["failed"] += 1
        return True
    for c, (first, n) in zip(mod.cases, mod.out_slices):
        ok = True
        for o, got in zip(c.outs, res.outputs[first:first + n]):
            f, undefined, kiln_defined, reasons = compare_out(c, o, got, mode)
            stats["undefined"] += undefined
            stats["kiln_defined"] += kiln_defined
            for r in reasons:
                stats["expected"].append(f"{o.label or c.op} {c.kdt} [{mode}]: {r}")
            if f is not None:
                findings.append(f)
                ok = False
        stats["passed" if ok else "failed"] += 1
    return True


def exit_text(rc):
    if rc < 0 and rc > -100:
        import signal
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit {rc}"


def first_lines(text, n=4):
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    s = " | ".join(lines[:n])
    return s[:600] + ("..." if len(s) > 600 else "")


def self_check():
    """The rounding helpers agree with the cases the brief names."""
    assert int(int_to_float(np.array([2 ** 60 + 2 ** 36 + 1], np.int64), "f32")[0]) == \
        2 ** 60 + 2 ** 37
    assert float(round_float(np.array([1 + 2 ** -8 + 2 ** -40]), "bf16")[0]) == 1 + 2 ** -7
    assert float(round_float(np.array([1 + 2 ** -8]), "bf16")[0]) == 1.0
    assert float(round_float(np.array([1 + 2 ** -11 + 2 ** -40]), "f16")[0]) == 1 + 2 ** -10
    assert float(round_float(np.array([3.4e38]), "bf16")[0]) == INF
    assert float(round_float(np.array([2.0 ** -134]), "bf16")[0]) == 0.0  # tie -> even
    assert float(round_float(np.array([3 * 2.0 ** -134]), "bf16")[0]) == 2.0 ** -132
    assert np.isinf(int_to_float(np.array([65520], np.int64), "f16")[0])
    assert float(int_to_float(np.array([65519], np.int64), "f16")[0]) == 65504.0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", required=True, help="path to the kiln binary")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cases-per-op", type=int, default=8,
                    help="random cases per op and dtype, besides the fixed edge cases")
    ap.add_argument("--workdir", help="keep modules, inputs and outputs here")
    ap.add_argument("--op", nargs="+", default=[], help="only these ops (add, kiln.cast, ...)")
    ap.add_argument("--mode", choices=["compiled", "reference", "both"], default="both")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2,
                    help="kiln processes at a time")
    ap.add_argument("--kiln-threads", type=int, default=1, help="kiln run --threads")
    ap.add_argument("--timeout", type=float, default=120, help="seconds per kiln run")
    ap.add_argument("--max-reports", type=int, default=400,
                    help="print at most this many differences (all are counted)")
    ap.add_argument("--isa", choices=ISA_LEVELS,
                    help="run kiln with KILN_CPU_ISA=ISA: that instruction-set level's kernels "
                    "(base: portable loops; capped at the CPU's level); default: the "
                    "environment's KILN_CPU_ISA if set, else the CPU's own level")
    args = ap.parse_args(argv)

    t0 = time.monotonic()
    self_check()
    kiln = os.path.abspath(args.kiln)
    for _ in range(40):  # it may be missing for a moment while it is rebuilt
        if os.path.isfile(kiln) and os.access(kiln, os.X_OK):
            break
        time.sleep(3)
    else:
        print(f"{kiln} is not an executable file (the kiln binary is build/<preset>/bin/kiln)",
              file=sys.stderr)
        return 2
    only = {o[5:] if o.startswith("kiln.") else o for o in args.op}
    known = {kiln_op_of(op) for op, _, _ in op_table()}
    unknown = only - known
    if unknown:
        print(f"unknown op(s): {', '.join(sorted(unknown))}; known: {', '.join(sorted(known))}",
              file=sys.stderr)
        return 2
    modes = ["compiled", "reference"] if args.mode == "both" else [args.mode]
    env = kiln_env(args.isa)
    cases = build_cases(args.seed, args.cases_per_op, only)
    groups = {}
    for c in cases:
        groups.setdefault(c.group, []).append(c)
    modules = [Module(name, cs) for name, cs in groups.items()]
    root = args.workdir or tempfile.mkdtemp(prefix="kiln_numpy_diff_")
    os.makedirs(root, exist_ok=True)
    for m in modules:
        write_module(m, root)
    t_built = time.monotonic()
    runs_at = effective_isa(kiln, env, root)
    if args.isa:
        isa_text = f"isa {args.isa}" + ("" if runs_at == args.isa else f" (kiln runs {runs_at})")
    elif "KILN_CPU_ISA" in env:
        isa_text = f"isa {runs_at} (KILN_CPU_ISA={env['KILN_CPU_ISA']} from the environment)"
    else:
        isa_text = f"isa default ({runs_at})"

    findings, stats = [], {"passed": 0, "failed": 0, "undefined": 0, "kiln_defined": 0,
                           "expected": []}
    kiln_seconds = [0.0, 0]
    lock = threading.Lock()

    def timed(mod, mode):
        r = run_kiln(kiln, mod, mode, args.kiln_threads, args.timeout, env)
        with lock:
            kiln_seconds[0] += r.seconds
            kiln_seconds[1] += 1
        return r

    def run_and_judge(mod):
        local_f, local_s = [], {"passed": 0, "failed": 0, "undefined": 0, "kiln_defined": 0,
                                "expected": []}
        for mode in modes:
            res = timed(mod, mode)
            if not judge(mod, mode, res, local_f, local_s):
                # split the module: each case alone, to name the one kiln rejects
                for i, c in enumerate(mod.cases):
                    sub = Module(f"{mod.name}.case{i}", [c])
                    write_module(sub, root)
                    r = timed(sub, mode)
                    judge(sub, mode, r, local_f, local_s)
        return local_f, local_s

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for f, s in pool.map(run_and_judge, modules):
            findings.extend(f)
            for key in ("passed", "failed", "undefined", "kiln_defined"):
                stats[key] += s[key]
            stats["expected"].extend(s["expected"])

    # report
    for f in findings[:args.max_reports]:
        print("FAIL " + f.text)
    if len(findings) > args.max_reports:
        print(f"... {len(findings) - args.max_reports} more differences not shown")
    classes = {}
    for f in findings:
        key = (f.label, f.case.kdt, f.kind)
        entry = classes.setdefault(key, {"modes": set(), "checks": 0, "first": f})
        entry["modes"].add(f.mode)
        entry["checks"] += 1
    if classes:
        print(f"\ndifference classes (op, dtype, kind: modes, failing outputs):")
        for (label, kdt, kind), v in sorted(classes.items()):
            ms = "both" if len(v["modes"]) == 2 else next(iter(v["modes"]))
            print(f"  {label} {kdt} {kind}: {ms}, {v['checks']}")
    if stats["expected"]:
        print("\nexpected differences (EXPECTED_DIFFERENCES):")
        for line in stats["expected"]:
            print("  " + line)
    t_end = time.monotonic()
    print(f"\n{isa_text}: {len(modules)} modules, {kiln_seconds[1]} kiln runs "
          f"({kiln_seconds[0]:.1f} s of kiln time), {stats['kiln_defined']} elements under "
          f"kiln-defined rules (docs/ops.md, Numerics), {stats['undefined']} undefined (not "
          f"compared), {t_end - t0:.1f} s in all ({t_built - t0:.1f} s building cases); "
          f"work dir {root}{'' if args.workdir else ' (removed)'}")
    if not args.workdir:
        shutil.rmtree(root, ignore_errors=True)
    print(f"{stats['passed']} passed, {stats['failed']} failed")
    return 0 if stats["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
