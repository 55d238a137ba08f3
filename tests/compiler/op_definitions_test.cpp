// Every op of the registry has what the compiler and the reference interpreter need, by
// its definition's traits: an elementwise op a scalar kernel (and only those ops), a
// collective the collective launch, every other op a kernel of its own or a step of the
// planner, and every op an evaluator in the reference interpreter. Adding an op to the IR
// without them fails here, naming the op, instead of at a user's first call.

#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <string>

#include "compiler/cpu/kernels.hpp"
#include "compiler/ops/elementwise.hpp"
#include "compiler/ops/kernel_defs.hpp"
#include "compiler/reference_ops.hpp"
#include "kiln/core/error.hpp"
#include "kiln/ir/graph.hpp"
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
    EXPECT_EQ(compiler::find_elementwise(def) != nullptr, def.has(ir::OpTrait::elementwise))
        << "an elementwise op has a definition in compiler/ops/elementwise.cpp, and only those "
           "ops do";
    EXPECT_FALSE(def.has(ir::OpTrait::elementwise) && def.has(ir::OpTrait::collective));
    if (def.has(ir::OpTrait::elementwise)) {
      ++elementwise;
    } else if (kPlannerSteps.count(name) == 0) {
      collective += def.has(ir::OpTrait::collective) ? 1 : 0;
      EXPECT_NE(compiler::find_kernel_def(def), nullptr)
          << "an op that is neither elementwise nor the planner's has a definition in "
             "compiler/ops/kernel_defs.cpp";
    } else {
      EXPECT_EQ(compiler::find_kernel_def(def), nullptr) << "the planner's own";
    }
  }
  // The traits are declared where the ops are (src/ir/ops/): some of each kind exist.
  EXPECT_GE(elementwise, 20u);
  EXPECT_EQ(collective, 5u);  // allreduce_sum, allgather, reduce_scatter_sum, all_to_all, transfer
  for (const std::string& name : kPlannerSteps) EXPECT_NE(registry.find(name), nullptr) << name;
}

TEST(OpDefinitions, EveryKernelOpHasACpuKernelAndACudaLaunchOrTheReasonItHasNone) {
  std::size_t defs = 0;
  for (const compiler::KernelDef& d : compiler::kernel_defs()) {
    SCOPED_TRACE(d.op->name);
    ++defs;
    EXPECT_EQ(compiler::find_kernel_def(*d.op), &d);
    EXPECT_FALSE(d.op->has(ir::OpTrait::elementwise));
    EXPECT_NE(d.cpu, nullptr) << "no CPU kernel";
    EXPECT_NE(d.cuda == nullptr, d.no_cuda.empty())
        << "a CUDA launch, or (only then) the reason there is none";
    const std::string unsupported = compiler::cuda_unsupported(*d.op);
    if (d.cuda != nullptr) {
      EXPECT_EQ(unsupported, "");
    } else {
      EXPECT_NE(unsupported.find(d.no_cuda), std::string::npos) << unsupported;
      EXPECT_NE(unsupported.find(d.op->name), std::string::npos) << unsupported;
    }
    if (d.op->has(ir::OpTrait::collective)) {
      EXPECT_EQ(d.cpu, &compiler::run_collective);
      EXPECT_NE(d.prepare, nullptr) << "binds the rank's collective to its buffers";
    }
    if (d.grid == compiler::KernelGrid::rows || d.grid == compiler::KernelGrid::reduce) {
      // A family shares one kernel and tells its members apart by `variant`: distinct.
      for (const compiler::KernelDef& e : compiler::kernel_defs()) {
        if (&e == &d || e.grid != d.grid) continue;
        EXPECT_NE(e.variant, d.variant) << e.op->name;
      }
    }
  }
  EXPECT_GE(defs, 22u);  // 17 kernels of their own and 5 collectives
}

/// Whether the IR accepts \p def on two (or one) operands of dtype \p d; the result's dtype.
std::optional<DType> accepts(const ir::OpDef& def, bool binary, DType d) {
  ir::Graph g("op");
  const ir::Value a = g.add_argument({d, {4}, Device::cpu()});
  try {
    return g.type((binary ? g.add_op(def.name, {a, a}) : g.add_op(def.name, {a})).result(0)).dtype;
  } catch (const UserError&) {
    return std::nullopt;
  }
}

TEST(OpDefinitions, EveryElementwiseOpHasEachFormOnEveryDtypeItAccepts) {
  // The forms an op needs follow from what its IR rule accepts: every floating-point op
  // the per-element interpreter's function and the CUDA C; one with an f32 result the f32
  // array form (else its bodies run per element, several times slower), as does one with a
  // bool result on f32 (a comparison, as a mask); one the IR
  // accepts on integers the exact integer function and its CUDA C.
  std::size_t defs = 0;
  for (const compiler::ElementwiseDef& d : compiler::elementwise_defs()) {
    SCOPED_TRACE(d.op->name);
    ++defs;
    EXPECT_TRUE(d.op->has(ir::OpTrait::elementwise));
    EXPECT_EQ(compiler::find_elementwise(*d.op), &d);
    if (d.kind != compiler::ElementwiseKind::unary && d.kind != compiler::ElementwiseKind::binary)
      continue;  // cast and where: the interpreter and the code generator convert and select
    const bool binary = d.kind == compiler::ElementwiseKind::binary;
    EXPECT_EQ(d.op->min_operands, binary ? 2 : 1);
    for (const compiler::ElementwiseForm* f : {&d.form, &d.variant}) {
      if (f == &d.variant && d.picks_variant == nullptr) continue;
      const std::optional<DType> on_f32 = accepts(*d.op, binary, DType::f32);
      if (on_f32.has_value()) {
        EXPECT_TRUE(f->has_float_function(d.kind));
        EXPECT_NE(f->cuda, nullptr);
        if (*on_f32 == DType::f32) {
          EXPECT_TRUE(f->has_array_op(d.kind)) << "no f32 array form";
        }
        if (*on_f32 == DType::bool_) {  // a comparison: its mask form (1 or 0) in the tiles
          EXPECT_TRUE(f->has_array_op(d.kind)) << "no mask form";
        }
      } else {  // integers only: the IR refuses floats, so nothing computes on them
        EXPECT_FALSE(f->has_float_function(d.kind));
        EXPECT_TRUE(accepts(*d.op, binary, DType::i64).has_value())
            << "the IR accepts neither floats nor integers";
      }
      if (accepts(*d.op, binary, DType::i64).has_value()) {
        EXPECT_TRUE(f->has_integer_function(d.kind))
            << "the IR accepts integers, but there is no integer function";
        EXPECT_NE(f->cuda_int, nullptr) << "no integer CUDA form";
      }
    }
  }
  EXPECT_GE(defs, 27u);
}

}  // namespace
}  // namespace kiln
