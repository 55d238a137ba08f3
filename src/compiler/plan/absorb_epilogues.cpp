// Plan rewrite: elementwise launches run as the epilogue of the matmul before them (see
// rewrites.hpp).

#include <algorithm>
#include <string>

#include "compiler/plan/rewrites.hpp"
#include "core/str.hpp"
#include "kiln/core/error.hpp"

namespace kiln::compiler {

void absorb_epilogues(Plan& plan) {
  const std::vector<bool> is_output = plan.output_flags();
  for (std::size_t i = 0; i + 1 < plan.launches.size(); ++i) {
    const Launch& producer = plan.launches[i];
    const Launch& consumer = plan.launches[i + 1];
    if (plan.absorbed[i] || plan.out(i).size() != 1 || consumer.fused == nullptr ||
        plan.io[i].device != plan.io[i + 1].device || plan.invariant[i] != plan.invariant[i + 1])
      continue;
    const std::size_t s = plan.out(i)[0];
    const Storage& result = plan.storage[s];
    const std::vector<std::size_t>& readers = result.readers;
    const bool only_reader =
        !readers.empty() &&
        std::all_of(readers.begin(), readers.end(), [&](std::size_t r) { return r == i + 1; });
    if (!only_reader || is_output[s] || plan.storage[plan.out(i + 1)[0]].shape != result.shape ||
        !takes_epilogue(*producer.graph, producer.view(), *consumer.fused))
      continue;
    plan.absorbed[i + 1] = true;
    ++plan.epilogues;
    for (std::size_t in : plan.in(i)) plan.storage[plan.root(in)].readers.push_back(i + 1);
    // `kiln.matmul + kiln.fused @fused_3 layers.0 (nn.cpp:29)`: both ops before the
    // place, which traces may truncate.
    std::string epilogue = " + " + std::string(consumer.view().name());
    if (const ir::Attribute* callee = consumer.view().find("callee"))
      epilogue += " @" + callee->as_symbol().name;
    plan.labels[i].insert(producer.view().name().size(), epilogue);
  }
}

void link_epilogues(Plan& plan) {
  for (std::size_t i = 1; i < plan.launches.size(); ++i) {
    if (!plan.absorbed[i] || plan.is_view[i]) continue;
    // An epilogue writes its output while other tiles of its matmul still read the operands.
    const Storage& out = plan.storage[plan.out(i)[0]];
    for (std::size_t s : plan.in(i - 1)) {
      const Storage& in = plan.storage[plan.root(s)];
      if (in.arena_offset >= 0 && in.kept == out.kept && in.device == out.device &&
          in.arena_offset < out.arena_offset + std::int64_t(out.bytes) &&
          out.arena_offset < in.arena_offset + std::int64_t(in.bytes))
        throw InternalError(detail::cat("CompiledCallable: the epilogue of ", plan.labels[i - 1],
                                        " writes over an operand it is still reading"));
    }
    plan.launches[i - 1].epilogue = &plan.launches[i];
  }
}

}  // namespace kiln::compiler
