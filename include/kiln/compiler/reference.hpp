#pragma once
/// \file
/// The reference interpreter: a deliberately simple, obviously correct evaluator of every
/// IR op, the oracle the compiler is tested against (and `kiln run --reference`).
///
/// Every op computes in double precision with plain loops over multi-indices, then rounds
/// its result to the result's dtype (floats to their precision, integers truncating toward
/// zero, bools to 0/1), so what it computes is what storage in that dtype would hold. No
/// fusion, no memory reuse, no parallelism. Semantics the IR leaves open are defined here:
/// - integer `kiln.div` truncates toward zero; dividing by zero gives 0;
/// - `kiln.argmax` returns the first index of the largest element;
/// - `kiln.layer_norm` uses the population variance; `kiln.gelu` exact is
///   0.5·x·(1 + erf(x/√2)), "tanh" is 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)));
/// - `kiln.gather` with an index outside [0, n) is an error naming the index.

#include <map>
#include <string>
#include <vector>

#include "kiln/ir/graph.hpp"
#include "kiln/stage/tensor.hpp"

namespace kiln {

/// Evaluates the entry graph of \p module on concrete \p inputs (one per argument, in
/// order). Weights are looked up by full name (call prefixes applied).
/// \throws UserError for a wrong input count, dtype or shape (symbolic dims must agree),
/// a missing or mis-shaped weight, or an out-of-range gather index.
std::vector<Tensor> reference_run(const ir::Module& module, const std::vector<Tensor>& inputs,
                                  const std::map<std::string, Tensor>& weights = {});

}  // namespace kiln
