// Plan rewrite: squeeze-and-excitation's per-channel scale run inside the conv that reads
// the scaled activation (see rewrites.hpp).

#include <algorithm>
#include <string>

#include "compiler/cpu/kernel_support.hpp"
#include "compiler/plan/rewrites.hpp"
#include "core/str.hpp"
#include "kiln/core/error.hpp"

namespace kiln::compiler {

namespace {

/// Whether launch \p i is a lone f32 multiply of two operands (not part of a fused body).
bool is_multiply(const Plan& plan, std::size_t i) {
  if (!is_op(plan, i, "kiln.mul") || plan.in(i).size() != 2 || plan.out(i).size() != 1)
    return false;
  for (std::size_t s : {plan.in(i)[0], plan.in(i)[1], plan.out(i)[0]})
    if (plan.storage[s].dtype != DType::f32) return false;
  return true;
}

/// The launch that reads storage \p s as its first operand and is not absorbed, else -1.
std::int64_t first_operand_reader(const Plan& plan, std::size_t s) {
  for (std::size_t r : plan.storage[s].readers)
    if (!plan.absorbed[r] && !plan.in(r).empty() && plan.in(r)[0] == s) return std::int64_t(r);
  return -1;
}

/// Whether conv \p c runs a depthwise conv inside it (absorb_depthwise marked the one
/// after it, or after its epilogue).
bool hosts_expansion(const Plan& plan, std::size_t c) {
  const std::int64_t e = epilogue_of(plan, c);
  const std::size_t d = (e >= 0 ? std::size_t(e) : c) + 1;
  return d < plan.launches.size() && plan.in_kernel[d] && is_conv(plan, d);
}

}  // namespace

void absorb_input_scales(Plan& plan) {
  const std::vector<bool> is_output = plan.output_flags();
  for (std::size_t m = 0; m < plan.launches.size(); ++m) {
    if (plan.absorbed[m] || plan.invariant[m] || !is_multiply(plan, m)) continue;
    const std::size_t scaled = plan.out(m)[0];
    const std::int64_t reader = first_operand_reader(plan, scaled);
    if (reader < 0) continue;
    const auto c = std::size_t(reader);
    if (!is_conv(plan, c) || plan.io[c].device != plan.io[m].device ||
        plan.invariant[c] != plan.invariant[m] || !read_only_by(plan, scaled, c, is_output) ||
        hosts_expansion(plan, c))
      continue;
    const ShapeViews conv(plan, c), multiply(plan, m);
    if (!kernel::runs_with_input_scale(conv.launch, multiply.launch)) continue;
    plan.absorbed[m] = plan.in_kernel[m] = true;
    ++plan.scaled_inputs;
    // The conv reads the multiply's operands, and writes the scaled activation where the
    // multiply would have (or into scratch, see kernel::ConvTile), a batch entry just
    // before its GEMM reads it: all three stay live until the conv's last write, its
    // epilogue's if it has one.
    const std::int64_t e = epilogue_of(plan, c);
    const std::size_t last = e >= 0 ? std::size_t(e) : c;
    for (std::size_t s : {plan.in(m)[0], plan.in(m)[1], scaled})
      plan.storage[plan.root(s)].readers.push_back(last);
    // `kiln.mul + kiln.conv + kiln.add (node_Conv_512:11)`.
    plan.labels[c].insert(0, op_label(plan, m) + " + ");
  }
}

void link_input_scales(Plan& plan) {
  for (std::size_t m = 0; m < plan.launches.size(); ++m) {
    // Attention's kernel may run a multiply too (the probabilities' epilogue): a conv
    // reading this one's output says it is a scaled input.
    if (!plan.in_kernel[m] || !is_multiply(plan, m)) continue;
    const std::int64_t reader = first_operand_reader(plan, plan.out(m)[0]);
    if (reader < 0 || !is_conv(plan, std::size_t(reader))) continue;
    const auto c = std::size_t(reader);
    // The conv writes its output (and its epilogue's) while it still reads the multiply's
    // operands.
    const std::int64_t e = epilogue_of(plan, c);
    std::vector<std::size_t> written = {plan.root(plan.out(c)[0])};
    if (e >= 0) written.push_back(plan.root(plan.out(std::size_t(e))[0]));
    for (std::size_t w : written)
      for (std::size_t s : {plan.in(m)[0], plan.in(m)[1], plan.out(m)[0]})
        if (share_bytes(plan.storage[plan.root(s)], plan.storage[w]))
          throw InternalError(detail::cat("CompiledCallable: the conv of ", plan.labels[c],
                                          " writes over the input it scales"));
    plan.launches[c].input_scale = &plan.launches[m];
  }
}

}  // namespace kiln::compiler
