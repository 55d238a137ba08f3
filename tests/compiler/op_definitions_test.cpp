// Every op of the registry has what the compiler and the reference interpreter need, by
// its definition's traits: an elementwise op a scalar kernel (and only those ops), a
// collective the collective launch, every other op a kernel of its own or a step of the
// planner, and every op an evaluator in the reference interpreter. Adding an op to the IR
// without them fails here, naming the op, instead of at a user's first call.

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "compiler/kernels.hpp"
#include "compiler/reference_ops.hpp"
#include "kiln/ir/op_registry.hpp"

namespace kiln {
namespace {

// What the planner turns into steps of its own (weights, constants, calls, fused bodies).
const std::set<std::string> kPlannerSteps = {"kiln.weight", "kiln.constant", "func.call",
                                             "kiln.fused"};

TEST(OpDefinitions, EveryOpHasItsKernelAndItsReferenceEvaluator) {
  const ir::OpRegistry& registry = ir::OpRegistry::global();
  std::size_t elementwise = 0, collective = 0;
  for (const std::string& name : registry.names()) {
    const ir::OpDef& def = *registry.find(name);
    SCOPED_TRACE(name);
    EXPECT_TRUE(compiler::reference_evaluates(name)) << "no reference evaluator";
    EXPECT_EQ(compiler::has_scalar_kernel(name), def.has(ir::OpTrait::elementwise))
        << "an elementwise op has a scalar kernel, and only those ops do";
    EXPECT_FALSE(def.has(ir::OpTrait::elementwise) && def.has(ir::OpTrait::collective));
    if (def.has(ir::OpTrait::elementwise)) {
      ++elementwise;
    } else if (def.has(ir::OpTrait::collective)) {
      ++collective;  // run_collective runs every one
    } else if (kPlannerSteps.count(name) == 0) {
      EXPECT_NE(compiler::find_kernel(name), nullptr) << "no CPU kernel";
    }
  }
  // The traits are declared where the ops are (src/ir/ops/): some of each kind exist.
  EXPECT_GE(elementwise, 20u);
  EXPECT_EQ(collective, 5u);  // allreduce_sum, allgather, reduce_scatter_sum, all_to_all, transfer
  for (const std::string& name : kPlannerSteps) EXPECT_NE(registry.find(name), nullptr) << name;
}

}  // namespace
}  // namespace kiln
