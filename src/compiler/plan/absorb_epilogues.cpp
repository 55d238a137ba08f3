// Plan rewrite: elementwise launches run as the epilogue of the matmul before them (see
// rewrites.hpp).

#include <algorithm>
#include <string>

#include "compiler/plan/rewrites.hpp"
#include "core/str.hpp"
#include "kiln/core/error.hpp"

namespace kiln::compiler {

namespace {

/// Whether launch \p j is a view that reads storage \p s as it lies (a reshape: the same
/// elements in the same order) with the same last dim, so that rows and columns of \p s
/// (a matmul's tiles, oneDNN's post-op operands) are rows and columns of the view too.
bool reshapes_in_place(const Plan& plan, std::size_t j, std::size_t s) {
  if (!plan.is_view[j] || plan.in(j).size() != 1 || plan.out(j).size() != 1 ||
      plan.root(plan.in(j)[0]) != s)
    return false;
  const Storage& view = plan.storage[plan.out(j)[0]];
  const Storage& base = plan.storage[s];
  return view.strides.empty() && !view.shape.empty() && !base.shape.empty() &&
         view.shape.back() == base.shape.back();
}

}  // namespace

void absorb_epilogues(Plan& plan) {
  const std::vector<bool> is_output = plan.output_flags();
  for (std::size_t i = 0; i + 1 < plan.launches.size(); ++i) {
    if (plan.absorbed[i] || plan.out(i).size() != 1) continue;
    const std::size_t s = plan.out(i)[0];
    // The consumer: the next launch, or the one after reshapes of the result that copy
    // nothing (an ONNX MatMul over [batch, seq, d] is a matmul over [batch * seq, d] and
    // a reshape back).
    std::size_t j = i + 1;
    while (j < plan.launches.size() && reshapes_in_place(plan, j, s) && !is_output[plan.out(j)[0]])
      ++j;
    if (j >= plan.launches.size()) continue;
    const Launch& producer = plan.launches[i];
    const Launch& consumer = plan.launches[j];
    if (consumer.fused == nullptr || plan.io[i].device != plan.io[j].device ||
        plan.invariant[i] != plan.invariant[j])
      continue;
    const Storage& result = plan.storage[s];
    const std::vector<std::size_t>& readers = result.readers;
    // Read by the consumer alone (and by the views on the way to it).
    const bool only_reader = !readers.empty() &&
                             std::all_of(readers.begin(), readers.end(),
                                         [&](std::size_t r) { return r > i && r <= j; }) &&
                             std::find(readers.begin(), readers.end(), j) != readers.end();
    const Storage& out = plan.storage[plan.out(j)[0]];
    if (!only_reader || is_output[s] || elements_of(out.shape) != elements_of(result.shape) ||
        (j == i + 1 && out.shape != result.shape) ||
        !takes_epilogue(*producer.graph, producer.view(), *consumer.fused))
      continue;
    plan.absorbed[j] = true;
    ++plan.epilogues;
    for (std::size_t in : plan.in(i)) plan.storage[plan.root(in)].readers.push_back(j);
    // `kiln.matmul + kiln.fused @fused_3 layers.0 (nn.cpp:29)`: both ops before the
    // place, which traces may truncate.
    plan.labels[i].insert(producer.view().name().size(), " + " + op_label(plan, j));
  }
}

void link_epilogues(Plan& plan) {
  for (std::size_t i = 1; i < plan.launches.size(); ++i) {
    if (!plan.absorbed[i] || plan.is_view[i] || plan.in_kernel[i]) continue;
    std::size_t p = i - 1;  // its matmul or conv: the launch before it, views aside
    while (p > 0 && plan.is_view[p]) --p;
    // An epilogue writes its output while other tiles of its matmul still read the operands.
    const Storage& out = plan.storage[plan.out(i)[0]];
    for (std::size_t s : plan.in(p))
      if (share_bytes(plan.storage[plan.root(s)], out))
        throw InternalError(detail::cat("CompiledCallable: the epilogue of ", plan.labels[p],
                                        " writes over an operand it is still reading"));
    plan.launches[p].epilogue = &plan.launches[i];
  }
}

}  // namespace kiln::compiler
