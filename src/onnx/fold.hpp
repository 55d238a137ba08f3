#pragma once
// Internal: computing ONNX ops on host values (context.hpp) while importing, the folding
// that turns `Shape -> Gather -> Concat -> Reshape` chains into static or symbolic shapes.

#include <cstdint>
#include <optional>
#include <vector>

#include "onnx/context.hpp"

namespace kiln::onnx_import {

/// The inputs of \p node as host values when every given input is known, else nothing.
std::optional<std::vector<const HostValue*>> all_known(NodeContext& node);

/// NumPy's broadcast of two shapes; fails on \p node when they do not broadcast.
std::vector<std::int64_t> broadcast_shapes(const NodeContext& node,
                                           const std::vector<std::int64_t>& a,
                                           const std::vector<std::int64_t>& b);

/// How an element-wise binary op computes with symbolic dims (an element of a shape that
/// is `batch`, `seq + 1`, ...): sums, differences and products become expressions over
/// the names, quotients when exact, comparisons when they hold for every value of the
/// names; anything else cannot be folded.
enum class SymbolRule { none, add, sub, mul, div, equal, max_min };

/// \p a op \p b with broadcasting, in \p a's dtype (bool for comparisons: \p compare), or
/// nothing when a symbolic element cannot be folded.
std::optional<HostValue> fold_binary(const NodeContext& node, const HostValue& a,
                                     const HostValue& b,
                                     std::int64_t (*int_op)(std::int64_t, std::int64_t),
                                     double (*float_op)(double, double), SymbolRule rule,
                                     bool compare = false);

/// Row-major strides of \p shape.
std::vector<std::int64_t> strides_of(const std::vector<std::int64_t>& shape);

/// Element \p flat of \p h copied to element \p to of \p out (values and symbols).
void copy_element(const HostValue& h, std::size_t flat, HostValue& out);
/// An empty value of \p h's dtype (and symbol-ness) with \p shape.
HostValue like(const HostValue& h, std::vector<std::int64_t> shape);

}  // namespace kiln::onnx_import
