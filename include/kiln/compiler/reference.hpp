#pragma once
/// \file
/// The reference interpreter: a deliberately simple, obviously correct evaluator of every
/// IR op, the oracle the compiler is tested against (and `kiln run --reference`).
///
/// Floating-point ops compute in double precision and integer ops exactly in int64, with
/// plain loops over multi-indices; each result is then rounded to its dtype (floats to
/// their precision, once; a float cast to an integer truncating toward zero), so what it computes
/// is what storage in that dtype would hold. No fusion, no memory reuse, no parallelism.
/// Semantics the IR leaves open follow PyTorch where it defines them (docs/ops.md lists
/// every rule and every difference):
/// - NaN propagates through `kiln.maximum`, `kiln.minimum`, `kiln.relu` and the max/min
///   reductions; `kiln.argmax` returns the first index of the largest element, or of the
///   first NaN;
/// - integer `kiln.div` truncates toward zero; dividing by zero gives 0;
/// - `kiln.layer_norm` uses the population variance; `kiln.gelu` exact is
///   0.5·x·(1 + erf(x/√2)), "tanh" is 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)));
/// - `kiln.gather` with an index outside [0, n) is an error naming the index.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kiln/ir/graph.hpp"
#include "kiln/stage/tensor.hpp"

namespace kiln {

/// The most ops (calls expanded, `ir::expanded_op_count`) `reference_run` evaluates: at
/// about a microsecond per small op, a minute; real models have a million at most.
inline constexpr std::uint64_t kMaxReferenceOps = std::uint64_t{1} << 26;

/// Evaluates the entry graph of \p module on concrete \p inputs (one per argument, in
/// order). Weights are looked up by full name (call prefixes applied).
/// \throws UserError for a module that does not verify, a wrong input count, dtype or
/// shape (symbolic dims must agree), a missing or mis-shaped weight, an out-of-range
/// gather index, a value too big for memory, or calls that expand to more than
/// kMaxReferenceOps ops (it evaluates them one by one: 2^64 of them would never finish).
std::vector<Tensor> reference_run(const ir::Module& module, const std::vector<Tensor>& inputs,
                                  const std::map<std::string, Tensor>& weights = {});

}  // namespace kiln
