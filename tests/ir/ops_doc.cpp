// Writes the op reference (docs/ops.md) from the op registry, so the document cannot drift
// from the code: ctest compares the committed file with this program's output.
//
//   ir_ops_doc > docs/ops.md

#include <cstdio>
#include <iostream>
#include <string>

#include "kiln/ir/op_registry.hpp"

// What the ops compute, in every backend and in the reference interpreter alike; the
// NumPy differential test (tests/numpy_diff, ctest label numpy) checks each rule.
const char* const kNumerics = R"(
## Numerics

kiln follows PyTorch's rules; where NumPy and PyTorch differ, PyTorch's. The compiled
kernels (CPU at every instruction-set level, CUDA) and the reference interpreter compute
the same values; `tests/numpy_diff/numpy_diff.py` (ctest `numpy_diff`) compares every
elementwise, reduction, cast and data-movement op, every dtype it allows, random shapes
(empty dims included) and edge values (NaN, ±inf, -0.0, denormals, huge and tiny values,
integers near ±2^63 and 2^53 ± 1) against NumPy, compiled and reference.

- **Floats.** f32 ops compute in f32 (add, sub, mul, div, sqrt correctly rounded; exp, log,
  tanh, sigmoid, GELU within a few ulp: exp reaches the denormals down to e^-103.97;
  GELU's erf has a relative error below 1.2e-7); f16, bf16 and f64 ops compute in double
  and round once to the result's dtype. Reductions, softmax and norms accumulate in double
  (f32 rows through vector loops: the order of summation differs from NumPy's by rounding).
- **NaN** propagates through `maximum`, `minimum`, `relu`, `reduce_max`, `reduce_min` and
  `softmax`; `argmax` returns the index of the first NaN when its line has one, else of the
  first largest element.
- **top_k** orders as PyTorch's `topk`: NaN above every number (first when largest, last
  when smallest), ties by the lower index; its output is always sorted.
- **resize** computes ONNX's Resize (its reference implementation's coordinates, taps
  and weights; every case of ONNX's node tests passes): floats in double, rounded once;
  `nearest` copies elements, any dtype, exactly. A tap of weight 0 is not read, so a NaN
  beside an output does not reach it (ONNX's reference multiplies it by 0 and gets NaN).
- **Signed zero.** `canonicalize` folds only identities that are exact for every input
  (its two rewrites that round differently make GELU, written out op by op in its erf or
  tanh form, one `kiln.gelu`, and RMSNorm written out one `kiln.rms_norm`, each rounded
  once instead of after each op):
  `x * 1`, `x / 1`, `x - 0.0` and `x + -0.0` go, `x + 0.0` stays (-0.0 + 0.0 is +0.0).
  `tanh(-0.0)` is -0.0. The sign of a zero from `maximum`/`minimum` of 0.0 and -0.0, from
  `reduce_max`/`reduce_min` over them and from `relu(-0.0)` is not specified.
- **Integers** are exact: every integer op computes in 64-bit integers, never through
  double (an i64 above 2^53 keeps every bit, in copies, constants, weights, collectives
  and sharding too). `add`, `sub`, `mul`, `neg`, `abs`, sums, matmuls and `pow` wrap as
  two's complement at the result's width, as in NumPy and PyTorch; comparisons are exact.
- **Casts** round once: float to float and integer to float round to nearest even (i64
  to f32 and f64 to bf16 included); an integer to a narrower integer wraps; anything to
  bool is `x != 0` (NaN is true).

Where kiln differs from PyTorch, by design:

| op | kiln | PyTorch | why |
| --- | --- | --- | --- |
| `div` of integers | truncates toward zero in the operands' dtype; `x / 0` is 0; `INT_MIN / -1` wraps to `INT_MIN` | `torch.div` divides as floats; `rounding_mode="trunc"` raises on `x / 0` | ops keep their operands' dtype; an integer division by zero traps on x86, so kiln gives it a defined value rather than ending the process |
| `reduce_sum` of i8, u8, i32 | keeps the dtype (and wraps there) | promotes to int64 | every kiln op keeps its operand's dtype; cast to i64 first for PyTorch's result |
| `cast` of a float to an integer: NaN, ±inf, out of range | truncates toward zero, then saturates at the target's range (a negative value to u8 is 0); NaN is 0 | undefined (depends on the CPU) | a defined result on every backend |
| `argmax` of bool | the first `true`, else 0 | not defined for bool | as for integers 0 and 1 |
| `reduce_max`, `reduce_min`, `argmax` over an empty axis | refused: by the verifier for a static dim, when the call runs for a symbolic one | refused when run | they have no identity |
| `reduce_mean` of integers | refused by the verifier | refused | a mean of integers is not an integer: cast first |
| `pow` of integers, negative exponent | 0, except 1 for base 1 and ±1 for base -1 (PyTorch's integer pow) | the same for a tensor exponent | |
| `fmod` of integers by 0 (and by -1) | 0 | `torch.fmod` raises on `x fmod 0` | as `div`: a defined value, not a trap |
| `shift_left`, `shift_right` by a count outside [0, 63] | every bit shifted out: 0 (-1 for a negative `x >> n`) | undefined (the CPU's) | a defined result on every backend |
| `transfer` to the device the operand is on | refused by the verifier (`transfer_to` returns such a tensor as it is) | a no-op | it would wait for itself |
)";

int main() {
  const kiln::ir::OpRegistry& registry = kiln::ir::OpRegistry::global();
  std::cout << "# kiln IR ops\n\n"
               "Generated from the op registry by `build/release/tests/ir_ops_doc` (a test checks\n"
               "that this file is current). Every op prints in MLIR's generic form,\n"
               "`\"kiln.add\"(%a, %b) : (...) -> ...`; see `include/kiln/ir/text.hpp`.\n\n"
               "| op | operands | attributes | result types | what it does |\n"
               "| --- | --- | --- | --- | --- |\n";
  for (const std::string& name : registry.names()) {
    if (name.rfind("test.", 0) == 0) continue;  // ops tests register for themselves
    const kiln::ir::OpDef& def = *registry.find(name);
    std::string operands =
        def.max_operands < 0 ? std::to_string(def.min_operands) + "+"
        : def.min_operands == def.max_operands
            ? std::to_string(def.min_operands)
            : std::to_string(def.min_operands) + "–" + std::to_string(def.max_operands);
    std::string attributes;
    for (const kiln::ir::AttrSpec& a : def.attributes) {
      if (!attributes.empty()) attributes += ", ";
      attributes += "`" + a.name + "`: " + std::string(kiln::ir::kind_name(a.kind)) +
                    (a.required ? "" : " (optional)");
    }
    std::cout << "| `" << name << "` | " << operands << " | "
              << (attributes.empty() ? "—" : attributes) << " | "
              << (def.infer != nullptr ? "inferred" : "given") << " | " << def.summary << " |\n";
  }
  std::cout << kNumerics;
  return 0;
}
