#pragma once
// Internal: the compiler's definition of each elementwise op (each op with
// `ir::OpTrait::elementwise`), one entry per op, keyed by its `ir::OpDef`: how the CPU's
// per-element interpreter computes it on every dtype, its f32 array form (vector_math),
// and the CUDA C it is written as. Everything below the IR that is particular to one
// elementwise op is in its entry (elementwise.cpp); the fused kernel, the CUDA code
// generator and the op-definition test read the entries and name no op. The reference
// interpreter keeps its own evaluators (reference.cpp), written independently, so that it
// can check these.
//
// Adding an elementwise op: its `OpDef` in src/ir/ops/elementwise.cpp, its entry here,
// its reference evaluator, its staging function and tests.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "compiler/cpu/vector_math.hpp"
#include "kiln/ir/graph.hpp"

namespace kiln::compiler {

/// How the per-element interpreter applies an op to its operands.
enum class ElementwiseKind : std::uint8_t {
  unary,   ///< f(a)
  binary,  ///< f(a, b)
  select,  ///< a ? b : c (bool a)
  cast,    ///< a converted to the result's dtype, rounded once
};

/// The operands a CUDA expression is written over, and the float type it computes in.
struct CudaTerms {
  std::string a, b;
  bool f32 = false;  ///< float (an all-f32 body) rather than double
  /// CUDA's math function \p name in this float type ("exp": "expf" in float).
  std::string fn(std::string_view name) const;
  /// The literal \p number in this float type ("1.0": "1.0f" in float).
  std::string lit(std::string_view number) const;
};

/// One function an elementwise op computes (an op with an attribute that picks the
/// function, as gelu's `approximate`, has one form per value).
struct ElementwiseForm {
  /// The per-element interpreter on floating-point operands, in double (by the kind).
  double (*unary)(double) = nullptr;
  double (*binary)(double, double) = nullptr;
  /// On integer and bool operands, exact in int64 (wrapping as two's complement); null
  /// when the op takes floating-point operands only (its IR rule refuses the others).
  std::int64_t (*int_unary)(std::int64_t) = nullptr;
  std::int64_t (*int_binary)(std::int64_t, std::int64_t) = nullptr;
  /// The f32 tile program's array op (one of the two, by the kind); a comparison's gives a
  /// mask (1.0f where true, 0.0f where false).
  std::optional<vmath::Unary> vector_unary{};
  std::optional<vmath::Binary> vector_binary{};
  /// CUDA C over floating-point operands (in double, or in float for all-f32 bodies).
  std::string (*cuda)(const CudaTerms&) = nullptr;
  /// CUDA C over integer operands held as long long (exact); null as `int_unary` is.
  std::string (*cuda_int)(const CudaTerms&) = nullptr;

  /// Whether the interpreter's function on floats (of an op of kind \p k) is there.
  bool has_float_function(ElementwiseKind k) const {
    return k == ElementwiseKind::binary ? binary != nullptr : unary != nullptr;
  }
  /// Whether the exact function on integers (of an op of kind \p k) is there.
  bool has_integer_function(ElementwiseKind k) const {
    return k == ElementwiseKind::binary ? int_binary != nullptr : int_unary != nullptr;
  }
  /// Whether the f32 array op (of an op of kind \p k) is there.
  bool has_array_op(ElementwiseKind k) const {
    return k == ElementwiseKind::binary ? vector_binary.has_value() : vector_unary.has_value();
  }
};

/// The compiler's definition of one elementwise op.
/// A constant operand that makes a binary op return its other operand, exactly for every
/// input: canonicalize folds it (x + -0.0, x - 0.0, x * 1, x / 1; not x + 0.0, which is +0.0
/// for x = -0.0).
struct NeutralOperand {
  double value = 0;
  bool negative = false;     ///< floats: the sign the constant must have (-0.0 for add)
  bool either_side = false;  ///< the op commutes: the constant may be either operand
};

struct ElementwiseDef {
  const ir::OpDef* op = nullptr;
  ElementwiseKind kind = ElementwiseKind::unary;
  ElementwiseForm form{};     ///< what it computes
  ElementwiseForm variant{};  ///< with `picks_variant`: what it computes when that says so
  /// Null, or true when the op's attributes select `variant` (gelu: approximate = "tanh").
  bool (*picks_variant)(const ir::OpView&) = nullptr;
  /// The algebra canonicalize may use, each exact for every input:
  std::optional<NeutralOperand> neutral{};  ///< binary ops with a neutral constant
  bool involution = false;                  ///< f(f(x)) is x (neg)
  bool identity_on_same_type = false;       ///< its operand when the types match (cast)

  /// The form \p view (an op of this definition) computes.
  const ElementwiseForm& form_of(const ir::OpView& view) const {
    return picks_variant != nullptr && picks_variant(view) ? variant : form;
  }
};

/// The definition of \p op, or nullptr when it is not an elementwise op.
const ElementwiseDef* find_elementwise(const ir::OpDef& op);

/// Every definition, in no particular order (for the op-definition test).
const std::vector<ElementwiseDef>& elementwise_defs();

}  // namespace kiln::compiler
