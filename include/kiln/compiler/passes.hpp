#pragma once
/// \file
/// Passes over the graph IR: each takes a module and returns an equivalent one, so each
/// can be tested alone (IR in, IR out) and shown with `kiln print --passes`.

#include <string>
#include <vector>

#include "kiln/ir/graph.hpp"

namespace kiln::passes {

/// Removes ops none of whose results is used (every kiln op is pure).
ir::Module dead_code_elimination(const ir::Module& module);
/// Merges ops with the same name, operands, attributes and result types.
ir::Module common_subexpression_elimination(const ir::Module& module);
/// Evaluates ops whose operands are all constants (results up to 4096 elements) into
/// constants.
ir::Module fold_constants(const ir::Module& module);
/// Simple algebra: x+0, x-0, x*1, x/1 (when the result has x's type), neg(neg(x)), casts to
/// the same dtype, reshapes to the same shape and identity transposes become x. And GELU
/// written out op by op (ONNX exports before opset 20), 0.5 x (1 + erf(x / √2)) or 0.5 x
/// (1 + tanh(√(2/π) (x + 0.044715 x³))) with its products and sums in any order, becomes
/// one `kiln.gelu` (`approximate = "tanh"` for the second): the same function rounded
/// once, not after each op.
ir::Module canonicalize(const ir::Module& module);

/// Outlines trees of elementwise ops (a root and the elementwise producers used only by
/// it, all of the root's shape; inputs may broadcast) into a body graph `@fused_N`, called
/// by one `kiln.fused` op that the compiler runs as a single kernel.
ir::Module fuse_elementwise(const ir::Module& module);

/// The pass names `run_passes` knows, in the default order: canonicalize, fold, cse, dce,
/// fuse.
std::vector<std::string> default_pipeline();
/// Runs the named passes in order. \throws UserError for an unknown name, listing the known.
ir::Module run_passes(const ir::Module& module, const std::vector<std::string>& names);

}  // namespace kiln::passes
