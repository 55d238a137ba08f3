#pragma once
// Internal: the structural ops that the planner (plan/program.cpp), the weights checks and
// the passes handle themselves rather than as kernels (weights, constants, fused bodies),
// named once here and compared by OpDef.

#include "kiln/ir/graph.hpp"

namespace kiln::compiler {

const ir::OpDef& weight_op();
const ir::OpDef& constant_op();
const ir::OpDef& fused_op();

/// Whether \p op is an op of \p def.
inline bool is_op(const ir::OpView& op, const ir::OpDef& def) { return &op.def() == &def; }

}  // namespace kiln::compiler
