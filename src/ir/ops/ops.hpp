#pragma once
// Internal: the built-in ops and the helpers their inference rules share.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/str.hpp"
#include "kiln/ir/op_registry.hpp"

namespace kiln::ir::detail {

using kiln::detail::cat;
using kiln::detail::join;

/// Registers every built-in op (called once, by OpRegistry::global()).
void register_builtin_ops(OpRegistry& registry);
void register_elementwise_ops(OpRegistry& registry);
void register_structural_ops(OpRegistry& registry);
void register_collective_ops(OpRegistry& registry);
void register_indexing_ops(OpRegistry& registry);
void register_nn_ops(OpRegistry& registry);

/// An op definition with inferred result types.
OpDef make_op(std::string name, std::string summary, int min_operands, int max_operands,
              InferFn infer, std::vector<AttrSpec> attributes = {});

/// NumPy broadcasting of two shapes: trailing dims align; equal dims (same size or same
/// symbol) stay, a 1 stretches. \throws UserError naming both shapes and the axis.
Shape broadcast_shapes(const Shape& a, const Shape& b);
/// \throws UserError unless every operand is on the same device; returns that device.
Device common_device(const InferContext& ctx);
/// \throws UserError unless every operand has the same dtype; returns it.
DType common_dtype(const InferContext& ctx);
/// Normalises \p axis (negative counts from the end) for a tensor of rank \p rank.
/// \throws UserError naming the axis and the rank.
std::size_t normalize_axis(std::int64_t axis, std::size_t rank);

}  // namespace kiln::ir::detail
