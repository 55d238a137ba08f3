#pragma once
// Internal: a plan's launches and values, made from the programs for one set of concrete
// input shapes (see plan.hpp), and bound to their memory once it is placed.

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/plan/plan.hpp"
#include "kiln/compiler/compiled_callable.hpp"
#include "kiln/runtime/collectives.hpp"

namespace kiln::compiler {

class Lowering;

/// What instantiating a plan reads besides the inputs' shapes.
struct PlanSetup {
  const ir::Module& module;
  const std::map<const ir::Graph*, Program>& programs;
  const std::map<std::string, Tensor>& weights;  // by full name (call prefixes joined)
  std::size_t expanded_ops;                      // the lists are reserved for this many
  /// Which of the callable's devices computes on \p d.
  std::function<std::size_t(const Device& d)> device_slot;
  /// The communicator of the devices in \p slots, in that rank order.
  std::function<std::shared_ptr<Communicator>(const std::vector<std::size_t>& slots)> communicator;
  Lowering& lowering;  // where weights and constants are read from
};

/// The entry graph's launches and values for \p inputs' shapes, calls expanded, in program
/// order; nothing placed yet. \throws UserError when these shapes make a value too big.
std::unique_ptr<Plan> instantiate_plan(const PlanSetup& setup, const std::vector<Tensor>& inputs);

/// Once memory is placed and allocated: every launch's views over it, and what the
/// planner tells prepare (`Launch::pack_rhs` with \p prepack_weights, and then
/// `Launch::packs` = \p packs, the callable's packed weights; `Launch::bf16`;
/// `Launch::winograd` with \p winograd).
void bind_launches(Plan& plan, bool prepack_weights, MatmulPrecision precision,
                   WeightPacks* packs = nullptr, bool winograd = false);

/// Marks the launches that write nothing (every output empty) as not run: a kernel looping
/// over the 3 * 10^9 rows of an f32[3037000500, 0] would take minutes to write no bytes.
/// Collectives still run: their ranks meet.
void skip_empty_launches(Plan& plan);

}  // namespace kiln::compiler
