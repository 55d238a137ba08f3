// Plan rewrite: attention's softmax(Q Kᵀ) V as one kernel in the scores matmul (see
// rewrites.hpp).

#include <algorithm>
#include <optional>
#include <string>

#include "compiler/cpu/fused_program.hpp"
#include "compiler/plan/rewrites.hpp"
#include "core/str.hpp"
#include "kiln/core/error.hpp"

namespace kiln::compiler {

namespace {

/// The most keys an attention kernel takes: its scratch is at least 16 rows of them per
/// worker (64 MiB here). Longer rows run op by op, where the arena's size check sees them.
constexpr std::int64_t kMostKeys = std::int64_t{1} << 20;

/// The f32 storage launch \p i reads as operand \p k, if it is f32 of rank 3 or more.
const Storage* f32_operand(const Plan& plan, std::size_t i, std::size_t k) {
  if (plan.in(i).size() <= k) return nullptr;
  const Storage& st = plan.storage[plan.in(i)[k]];
  return st.dtype == DType::f32 && st.shape.size() >= 3 ? &st : nullptr;
}

/// What an attention kernel runs after its scores matmul: the softmax, an elementwise
/// launch over the probabilities or -1 (NaN to 0, as exports write it), the context matmul.
struct AttentionParts {
  std::size_t softmax = 0;
  std::int64_t probs_epilogue = -1;
  std::size_t context = 0;
};

/// The parts of the attention whose scores matmul is launch \p i, with \p epilogue (or -1)
/// absorbed; nullopt when it is not one.
std::optional<AttentionParts> attention_after(const Plan& plan, std::size_t i,
                                              std::int64_t epilogue,
                                              const std::vector<bool>& is_output) {
  const std::size_t scores_at = epilogue >= 0 ? static_cast<std::size_t>(epilogue) : i;
  const std::size_t scores = plan.out(scores_at)[0];
  AttentionParts parts;
  const std::size_t k = parts.softmax = plan.next_launch(scores_at);
  if (k >= plan.launches.size() || plan.absorbed[k] || !is_op(plan, k, "kiln.softmax") ||
      plan.in(k).size() != 1 || plan.out(k).size() != 1 || plan.in(k)[0] != scores)
    return std::nullopt;
  const Storage& s = plan.storage[scores];
  const ir::Attribute* axis = plan.launches[k].view().find("axis");
  const auto rank = static_cast<std::int64_t>(s.shape.size());
  if (axis == nullptr || (axis->as_int() != rank - 1 && axis->as_int() != -1) ||
      s.dtype != DType::f32 || s.shape.back() > kMostKeys ||
      !read_only_by(plan, scores, k, is_output))
    return std::nullopt;
  std::size_t probs = plan.out(k)[0];
  std::size_t c = plan.next_launch(k);
  // An elementwise launch over the probabilities alone, of their shape (NaN to 0).
  if (c < plan.launches.size() && !plan.absorbed[c] && plan.launches[c].fused != nullptr &&
      plan.launches[c].fused->tiles && plan.out(c).size() == 1 &&
      read_only_by(plan, probs, c, is_output)) {
    const Storage& out = plan.storage[plan.out(c)[0]];
    const std::span<const std::size_t> in = plan.in(c);
    if (out.shape != s.shape || out.dtype != DType::f32 ||
        std::find(in.begin(), in.end(), probs) == in.end())
      return std::nullopt;
    parts.probs_epilogue = static_cast<std::int64_t>(c);
    probs = plan.out(c)[0];
    c = plan.next_launch(c);
  }
  parts.context = c;
  if (c >= plan.launches.size() || plan.absorbed[c] || !is_op(plan, c, "kiln.matmul") ||
      plan.in(c).size() != 2 || plan.out(c).size() != 1 || plan.in(c)[0] != probs ||
      !read_only_by(plan, probs, c, is_output))
    return std::nullopt;
  // The context matmul has no epilogue of its own (the kernel would not run it).
  const std::size_t after = plan.next_launch(c);
  if (after < plan.launches.size() && plan.absorbed[after] && !plan.is_view[after])
    return std::nullopt;
  // [..., s, t] x [..., t, dv] -> [..., s, dv], every operand f32 with the scores' batch.
  const Storage* v = f32_operand(plan, c, 1);
  const Storage& o = plan.storage[plan.out(c)[0]];
  const Index batch(s.shape.begin(), s.shape.end() - 2);
  if (v == nullptr || o.dtype != DType::f32 || o.shape.size() != s.shape.size() ||
      v->shape.size() != s.shape.size() ||
      !std::equal(batch.begin(), batch.end(), o.shape.begin()) ||
      o.shape[o.shape.size() - 2] != s.shape[s.shape.size() - 2] ||
      v->shape[v->shape.size() - 2] != s.shape.back() || o.shape.back() != v->shape.back() ||
      elements_of(s.shape) == 0 || elements_of(o.shape) == 0)
    return std::nullopt;
  for (std::size_t d = 0; d < batch.size(); ++d)
    if (v->shape[d] != batch[d] && v->shape[d] != 1) return std::nullopt;
  for (std::int64_t l : {std::int64_t(k), parts.probs_epilogue, std::int64_t(c)}) {
    if (l < 0) continue;
    const auto u = static_cast<std::size_t>(l);
    if (plan.io[u].device != plan.io[i].device || plan.invariant[u] != plan.invariant[i])
      return std::nullopt;
  }
  return parts;
}

}  // namespace

void absorb_attention(Plan& plan) {
  const std::vector<bool> is_output = plan.output_flags();
  for (std::size_t i = 0; i < plan.launches.size(); ++i) {
    if (plan.absorbed[i] || plan.invariant[i] || !is_op(plan, i, "kiln.matmul") ||
        plan.in(i).size() != 2 || plan.out(i).size() != 1)
      continue;
    const Storage* q = f32_operand(plan, i, 0);
    const Storage* kt = f32_operand(plan, i, 1);
    const Storage& scores = plan.storage[plan.out(i)[0]];
    if (q == nullptr || kt == nullptr || scores.dtype != DType::f32 ||
        q->shape.size() != scores.shape.size() || kt->shape.size() != scores.shape.size())
      continue;
    // Its absorbed epilogue (a mask added, a scale), over the scores' own shape.
    std::int64_t epilogue = -1;
    const std::size_t j = plan.next_launch(i);
    if (j < plan.launches.size() && plan.absorbed[j] && !plan.in_kernel[j]) {
      const std::span<const std::size_t> in = plan.in(j);
      const bool reads_scores = std::any_of(
          in.begin(), in.end(), [&](std::size_t v) { return plan.root(v) == plan.out(i)[0]; });
      if (!reads_scores) continue;
      const Storage& out = plan.storage[plan.out(j)[0]];
      if (out.shape != scores.shape || out.dtype != DType::f32) continue;
      for (std::size_t v : in)  // the scores read directly, not through a reshape
        if (plan.root(v) == plan.out(i)[0] && v != plan.out(i)[0]) epilogue = -2;
      if (epilogue == -2) continue;
      epilogue = static_cast<std::int64_t>(j);
    }
    const std::optional<AttentionParts> parts = attention_after(plan, i, epilogue, is_output);
    if (!parts) continue;
    const std::size_t c = parts->context;
    std::vector<std::size_t> absorbed{parts->softmax, c};
    if (parts->probs_epilogue >= 0) absorbed.push_back(std::size_t(parts->probs_epilogue));
    for (std::size_t l : absorbed) plan.absorbed[l] = plan.in_kernel[l] = true;
    ++plan.attentions;
    // What the kernel reads stays live until the context's slot, where its output is placed.
    std::vector<std::size_t> read(plan.in(i).begin(), plan.in(i).end());
    for (std::int64_t e : {epilogue, parts->probs_epilogue})
      if (e >= 0)
        read.insert(read.end(), plan.in(std::size_t(e)).begin(), plan.in(std::size_t(e)).end());
    read.push_back(plan.in(c)[1]);
    for (std::size_t s : read) plan.storage[plan.root(s)].readers.push_back(c);
    // The scores and probabilities, and their epilogues' outputs, live in the kernel's
    // scratch: no bytes in the arena (placement still gives each its own address).
    std::vector<std::size_t> kept_in_scratch{plan.out(i)[0], plan.out(parts->softmax)[0]};
    for (std::int64_t e : {epilogue, parts->probs_epilogue})
      if (e >= 0) kept_in_scratch.push_back(plan.out(std::size_t(e))[0]);
    for (std::size_t s : kept_in_scratch) plan.storage[s].bytes = 0;
    // `kiln.matmul + kiln.add + kiln.softmax + kiln.matmul (attention) ...`: after the
    // epilogue's part (` + kiln.add`, ` + kiln.fused @fused_2`).
    std::size_t at = plan.launches[i].view().name().size();
    if (epilogue >= 0) at += 3 + op_label(plan, static_cast<std::size_t>(epilogue)).size();
    plan.labels[i].insert(std::min(at, plan.labels[i].size()),
                          " + kiln.softmax + kiln.matmul (attention)");
  }
}

void link_attention(Plan& plan) {
  for (std::size_t i = 0; i < plan.launches.size(); ++i) {
    if (!plan.in_kernel[i] || !is_op(plan, i, "kiln.softmax")) continue;
    std::size_t p = i - 1;  // its scores matmul: the launch before it, views and epilogue aside
    while (p > 0 && (plan.is_view[p] || (plan.absorbed[p] && !plan.in_kernel[p]))) --p;
    std::size_t c = plan.next_launch(i);
    const Launch* probs_epilogue = nullptr;
    if (!is_op(plan, c, "kiln.matmul")) {
      probs_epilogue = &plan.launches[c];
      c = plan.next_launch(c);
    }
    // The kernel writes the context while it still reads Q, K, V and the epilogues' operands.
    const Storage& out = plan.storage[plan.out(c)[0]];
    std::vector<std::size_t> read(plan.in(p).begin(), plan.in(p).end());
    read.push_back(plan.in(c)[1]);
    for (std::size_t e : {plan.launches[p].epilogue != nullptr ? plan.next_launch(p) : p,
                          probs_epilogue != nullptr ? plan.next_launch(i) : p})
      read.insert(read.end(), plan.in(e).begin(), plan.in(e).end());
    for (std::size_t s : read)
      if (share_bytes(plan.storage[plan.root(s)], out))
        throw InternalError(detail::cat("CompiledCallable: the attention kernel of ",
                                        plan.labels[p], " writes over an operand it still reads"));
    plan.launches[p].softmax = &plan.launches[i];
    plan.launches[p].probs_epilogue = probs_epilogue;
    plan.launches[p].context = &plan.launches[c];
  }
}

}  // namespace kiln::compiler
