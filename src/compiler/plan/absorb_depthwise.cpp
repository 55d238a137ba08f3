// Plan rewrite: a conv and the depthwise conv after it as one kernel, an expansion (see
// rewrites.hpp).

#include <algorithm>
#include <array>
#include <string>

#include "compiler/cpu/kernel_support.hpp"
#include "compiler/plan/rewrites.hpp"
#include "core/str.hpp"
#include "kiln/core/error.hpp"

namespace kiln::compiler {

namespace {

/// Whether launch \p i's operand \p k is a weight or constant (fixed bytes).
bool fixed_operand(const Plan& plan, std::size_t i, std::size_t k) {
  return plan.in(i).size() > k && plan.storage[plan.root(plan.in(i)[k])].fixed != nullptr;
}

/// Whether every operand of launch \p e (an epilogue, or -1: none) other than storage \p
/// produced holds a single value.
bool single_values_besides(const Plan& plan, std::int64_t e, std::size_t produced) {
  if (e < 0) return true;
  const std::span<const std::size_t> in = plan.in(std::size_t(e));
  return std::all_of(in.begin(), in.end(), [&](std::size_t s) {
    return s == produced || elements_of(plan.storage[s].shape) == 1;
  });
}

}  // namespace

void absorb_depthwise(Plan& plan, bool prepack_weights) {
  const std::vector<bool> is_output = plan.output_flags();
  for (std::size_t i = 0; i < plan.launches.size(); ++i) {
    if (plan.absorbed[i] || plan.invariant[i] || !is_conv(plan, i) || plan.out(i).size() != 1)
      continue;
    // The first conv's epilogue, then the depthwise conv right after it (no views between:
    // the depthwise conv reads the planes as the first conv writes them).
    const std::int64_t e = epilogue_of(plan, i);
    const std::size_t last_of_first = e >= 0 ? std::size_t(e) : i;
    const std::size_t d = last_of_first + 1;
    if (d >= plan.launches.size() || plan.absorbed[d] || plan.is_view[d] || !is_conv(plan, d) ||
        plan.out(d).size() != 1 || plan.io[d].device != plan.io[i].device ||
        plan.invariant[d] != plan.invariant[i])
      continue;
    const std::size_t expanded = plan.out(last_of_first)[0];
    if (plan.in(d).empty() || plan.in(d)[0] != expanded ||
        !read_only_by(plan, expanded, d, is_output) ||
        (e >= 0 && (plan.storage[expanded].shape != plan.storage[plan.out(i)[0]].shape ||
                    !read_only_by(plan, plan.out(i)[0], std::size_t(e), is_output))))
      continue;
    // The depthwise conv's own epilogue runs inside too (link_epilogues points it there).
    const std::int64_t dw_epilogue = epilogue_of(plan, d);
    const bool blocked_allowed = prepack_weights && fixed_operand(plan, i, 1) &&
                                 fixed_operand(plan, d, 1) &&
                                 single_values_besides(plan, e, plan.out(i)[0]) &&
                                 single_values_besides(plan, dw_epilogue, plan.out(d)[0]);
    const ShapeViews first(plan, i), depthwise(plan, d);
    if (!kernel::runs_with_depthwise(first.launch, depthwise.launch, blocked_allowed)) continue;
    const std::size_t last = dw_epilogue >= 0 ? std::size_t(dw_epilogue) : d;
    plan.absorbed[d] = plan.in_kernel[d] = true;
    ++plan.expansions;
    // What the kernel reads stays live until its last write.
    std::vector<std::size_t> read;
    for (std::size_t l = i; l <= last; ++l)
      read.insert(read.end(), plan.in(l).begin(), plan.in(l).end());
    for (std::size_t s : read) plan.storage[plan.root(s)].readers.push_back(last);
    // The expanded activation lives in the kernel's scratch, a band at a time.
    plan.storage[plan.out(i)[0]].bytes = 0;
    plan.storage[expanded].bytes = 0;
    // `kiln.conv + kiln.relu + kiln.conv + kiln.relu (node_Conv_514:12)`.
    std::string parts = " + " + op_label(plan, d);
    if (dw_epilogue >= 0) parts += " + " + op_label(plan, std::size_t(dw_epilogue));
    std::size_t at = plan.launches[i].view().name().size();
    if (e >= 0) at += 3 + op_label(plan, std::size_t(e)).size();
    plan.labels[i].insert(std::min(at, plan.labels[i].size()), parts);
  }
}

void link_depthwise(Plan& plan) {
  for (std::size_t d = 1; d < plan.launches.size(); ++d) {
    if (!plan.in_kernel[d] || !is_conv(plan, d)) continue;
    std::size_t i = d - 1;  // its first conv: the launch before it, or before its epilogue
    if (plan.absorbed[i] && !plan.in_kernel[i]) --i;
    // The kernel writes the depthwise conv's output (and its epilogue's) while it still
    // reads the first conv's operands and the epilogues'.
    const std::int64_t dw_epilogue = epilogue_of(plan, d);
    const std::size_t last = dw_epilogue >= 0 ? std::size_t(dw_epilogue) : d;
    const std::size_t written[] = {plan.out(d)[0], plan.out(last)[0]};
    for (std::size_t w : written)
      for (std::size_t l = i; l <= last; ++l)
        for (std::size_t s : plan.in(l)) {
          const std::size_t r = plan.root(s);
          if (r == written[0] || r == written[1]) continue;  // the kernel's own, elementwise
          if (share_bytes(plan.storage[r], plan.storage[w]))
            throw InternalError(detail::cat("CompiledCallable: the expansion kernel of ",
                                            plan.labels[i],
                                            " writes over an operand it still reads"));
        }
    plan.launches[i].depthwise = &plan.launches[d];
  }
}

}  // namespace kiln::compiler
