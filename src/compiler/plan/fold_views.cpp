// Plan rewrite: reshapes and transposes as views (see rewrites.hpp).

#include <optional>

#include "compiler/plan/rewrites.hpp"

namespace kiln::compiler {
namespace {

// Whether every reader of \p s can read it laid out with \p strides.
bool readers_take(const Plan& plan, const std::vector<bool>& is_output, std::size_t s,
                  const Index& strides) {
  if (is_output[s]) return false;
  if (strides.empty()) return true;  // contiguous: any reader
  for (std::size_t r : plan.storage[s].readers) {
    const Launch& reader = plan.launches[r];
    const std::span<const std::size_t> in = plan.in(r);
    for (std::size_t k = 0; k < in.size(); ++k) {
      if (in[k] != s) continue;
      if (reads_strided(*reader.graph, reader.view(), k, plan.storage[s].shape, strides)) continue;
      // A reshape or transpose of the view is fine if its own result is taken.
      if (reader.fused != nullptr || in.size() != 1 || plan.out(r).size() != 1) return false;
      const std::optional<Index> next = view_strides(reader.view(), plan.storage[s].shape, strides);
      if (!next || !readers_take(plan, is_output, plan.out(r)[0], *next)) return false;
    }
  }
  return true;
}

}  // namespace

void fold_views(Plan& plan) {
  const std::vector<bool> is_output = plan.output_flags();
  for (std::size_t i = 0; i < plan.launches.size(); ++i) {
    const Launch& l = plan.launches[i];
    if (l.fused != nullptr || plan.in(i).size() != 1 || plan.out(i).size() != 1) continue;
    const std::size_t in = plan.in(i)[0], out = plan.out(i)[0];
    const std::optional<Index> strides =
        view_strides(l.view(), plan.storage[in].shape, plan.storage[in].strides);
    if (!strides || !readers_take(plan, is_output, out, *strides)) continue;
    const std::size_t base = plan.root(in);
    Storage& view = plan.storage[out];
    view.base = static_cast<std::int64_t>(base);
    view.strides = *strides;
    view.producer = plan.storage[base].producer;
    view.arena_offset = -1;
    for (std::size_t r : view.readers) plan.storage[base].readers.push_back(r);
    plan.absorbed[i] = plan.is_view[i] = true;
    ++plan.views;
  }
}

}  // namespace kiln::compiler
