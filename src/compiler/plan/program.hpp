#pragma once
// Internal: the first stage of compiling a module, once per callable: a program per graph,
// one step per op (see plan.hpp).

#include <map>

#include "compiler/plan/plan.hpp"
#include "kiln/core/device.hpp"
#include "kiln/ir/graph.hpp"

namespace kiln::compiler {

class Lowering;

/// One program per graph of \p module, for \p lowering on \p device (the callable's
/// first). Elementwise ops that compute the same share one fused program. \throws
/// UserError naming the op and its graph when an op has no CPU kernel, or when \p lowering
/// cannot run it (quoting why).
std::map<const ir::Graph*, Program> compile_programs(const ir::Module& module,
                                                     const Lowering& lowering,
                                                     const Device& device);

}  // namespace kiln::compiler
