// Plan rewrite: launches that read only weights and constants run once, when the plan is
// made, instead of on every call (see rewrites.hpp).

#include "compiler/plan/rewrites.hpp"

namespace kiln::compiler {

void hoist_invariant(Plan& plan) {
  plan.invariant.assign(plan.launches.size(), false);
  std::vector<bool> is_input(plan.storage.size(), false);
  for (std::size_t s : plan.inputs) is_input[s] = true;
  for (std::size_t i = 0; i < plan.launches.size(); ++i) {
    // A collective meets other devices' launches on every call.
    if (plan.launches[i].view().def().has(ir::OpTrait::collective)) continue;
    bool invariant = true;
    for (std::size_t s : plan.in(i)) {
      const std::size_t root = plan.root(s);
      const std::int64_t producer = plan.storage[root].producer;
      if (is_input[root] ||
          (producer >= 0 && !plan.invariant[static_cast<std::size_t>(producer)])) {
        invariant = false;
        break;
      }
    }
    plan.invariant[i] = invariant;
  }
}

}  // namespace kiln::compiler
