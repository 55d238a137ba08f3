// Programs: one step per op (see program.hpp).

#include "compiler/plan/program.hpp"

#include "compiler/lowering.hpp"
#include "compiler/ops/kernel_defs.hpp"
#include "compiler/ops/structural.hpp"
#include "core/str.hpp"
#include "kiln/core/error.hpp"

namespace kiln::compiler {

std::map<const ir::Graph*, Program> compile_programs(const ir::Module& module,
                                                     const Lowering& lowering,
                                                     const Device& device) {
  std::map<const ir::Graph*, Program> programs;
  FusedPrograms fused_programs;  // shared between ops that compute the same
  for (std::size_t g = 0; g < module.num_graphs(); ++g) {
    const ir::Graph& graph = module.graph(g);
    Program p{&graph, {}};
    p.steps.reserve(graph.num_ops());
    for (std::size_t i = 0; i < graph.num_ops(); ++i) {
      const ir::OpView op = graph.op(i);
      Step step;
      if (is_op(op, weight_op())) {
        step.kind = StepKind::weight;
      } else if (is_op(op, constant_op())) {
        step.kind = StepKind::constant;
      } else if (is_op(op, fused_op())) {
        step.kernel = run_fused;
        step.fused = fused_programs.fused(*module.find(op.find("callee")->as_symbol().name));
      } else if (op.def().has(ir::OpTrait::elementwise)) {
        step.kernel = run_fused;
        step.fused = fused_programs.elementwise(graph, op);
      } else if (const ir::Attribute* callee = op.find("callee")) {
        step.kind = StepKind::call;
        step.callee = module.find(callee->as_symbol().name);
        if (const ir::Attribute* prefix = op.find("kiln.prefix")) step.prefix = prefix->as_string();
      } else if (const KernelDef* def = find_kernel_def(op.def())) {
        step.kind = op.def().has(ir::OpTrait::collective) ? StepKind::collective : StepKind::kernel;
        step.kernel = def->cpu;
      } else {
        throw UserError(detail::cat("CompiledCallable: no CPU kernel for ", op.describe(), " in @",
                                    graph.name()));
      }
      if (step.kind == StepKind::kernel || step.kind == StepKind::collective) {
        if (const std::string why = lowering.unsupported(op.def()); !why.empty())
          throw UserError(detail::cat("CompiledCallable on ", device, ": ", op.describe(), " in @",
                                      graph.name(), ": ", why));
      }
      p.steps.push_back(std::move(step));
    }
    programs.emplace(&graph, std::move(p));
  }
  return programs;
}

}  // namespace kiln::compiler
