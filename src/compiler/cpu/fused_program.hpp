#pragma once
// Internal: a compiled elementwise body (`kiln.fused` or one elementwise op), as the CPU
// kernels run it and the CUDA code generator writes it out.

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/cpu/vector_math.hpp"
#include "compiler/ops/elementwise.hpp"
#include "kiln/core/dtype.hpp"

namespace kiln::compiler {

/// One value of the per-element interpreter: floating-point dtypes in `f` (double holds
/// every f32, f16, bf16 and f64 value), integer and bool dtypes in `i` (exact).
struct Number {
  double f = 0;
  std::int64_t i = 0;
};

/// One op of a body in the per-element interpreter (any dtype; floats computed in double
/// and rounded to the result's dtype, integers exactly in int64 and wrapped to its width).
struct Scalar {
  const ElementwiseForm* form = nullptr;  // what the op computes (its definition's)
  ElementwiseKind kind = ElementwiseKind::unary;
  bool is_float = true;  // the operands are floating-point
  std::uint32_t a = 0, b = 0, c = 0, result = 0;
  DType operand_dtype = DType::f32;
  DType dtype = DType::f32;
};

/// One op of a fused body in the f32 tile program.
struct VectorOp {
  bool is_binary = false;
  vmath::Unary unary = vmath::Unary::copy;
  vmath::Binary binary = vmath::Binary::add;
  std::uint32_t a = 0, b = 0, result = 0;
};

struct FusedProgram {
  std::uint32_t num_values = 0;
  std::vector<std::uint32_t> args;
  std::vector<Scalar> ops;
  std::uint32_t result = 0;
  // When every value of the body is f32 and every op has an f32 array form: the body as
  // array ops over tiles (run_fused_f32), else the per-element interpreter.
  bool f32 = false;
  std::vector<VectorOp> vector_ops;
};

}  // namespace kiln::compiler
