#pragma once
// Internal: which ops the reference interpreter evaluates (for the test that walks the op
// registry and requires every op to have its evaluator).

#include <string_view>

namespace kiln::compiler {

/// True when `reference_run` has an evaluator for the op named \p op.
bool reference_evaluates(std::string_view op);

}  // namespace kiln::compiler
