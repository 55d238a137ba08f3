#pragma once
// Internal: a compiled elementwise body (`kiln.fused` or one elementwise op), as the CPU
// kernels run it and the CUDA code generator writes it out.

#include <cstdint>
#include <optional>
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

/// One op of a fused body in the f32 tile program: unary, binary, or (`is_select`) a
/// select of b or c by the mask a.
struct VectorOp {
  bool is_binary = false;
  bool is_select = false;
  vmath::Unary unary = vmath::Unary::copy;
  vmath::Binary binary = vmath::Binary::add;
  std::uint32_t a = 0, b = 0, c = 0, result = 0;
};

/// A body that is one vmath::binary_chain: from an argument (the input), every op an
/// add, sub, mul, div, maximum or minimum of the value before and either the input or a
/// one-element argument, or a ReLU (the maximum of 0 and the value, which gives ReLU's
/// bits: NaN stays NaN, -0 becomes 0), the last op the result (hard-swish and hard-sigmoid
/// as ONNX exports write them, an affine map, a clamp). Run in one pass with the value in
/// registers rather than one pass per op.
struct ChainProgram {
  static constexpr std::size_t kMaxSteps = 8;
  struct Step {
    vmath::Binary f = vmath::Binary::add;
    bool flip = false;         // f(operand, value) rather than f(value, operand)
    bool input = false;        // the operand is the input, else the argument `scalar`
    bool zero = false;         // the operand is 0 (a ReLU), not an argument
    std::uint32_t scalar = 0;  // a one-element argument's value
  };
  std::uint32_t input = 0;
  std::vector<Step> steps;
};

struct FusedProgram {
  std::uint32_t num_values = 0;
  std::vector<std::uint32_t> args;
  std::vector<Scalar> ops;
  std::uint32_t result = 0;
  // The body as array ops over f32 tiles (run_fused_f32_rows), when its result is f32,
  // every value is f32 or bool, and every op has an array form: bools (compared values,
  // bool inputs, casts to bool) are held as masks of 1.0f and 0.0f, which comparisons,
  // selects (`kiln.where`) and casts read. Else the per-element interpreter runs it.
  bool tiles = false;
  // Tiles with no bool value: every value f32 (what the CUDA code generator's float
  // kernels and the matmul's post-ops take).
  bool f32 = false;
  std::vector<VectorOp> vector_ops;
  // The body as one chain, when it is one (with `f32`); run_fused_f32_rows takes it when the
  // input has the output's shape and the operands are one element at run time.
  std::optional<ChainProgram> chain;
};

}  // namespace kiln::compiler
