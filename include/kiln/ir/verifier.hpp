#pragma once
/// \file
/// The IR verifier: checks a module and reports every problem it finds.

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/ir/graph.hpp"

namespace kiln::ir {

/// How deep calls (`func.call`, `kiln.fused`) may nest: @main calling @a calling @b is
/// depth 2. Real models nest a few levels; a module nesting deeper is refused.
inline constexpr std::size_t kMaxCallDepth = 256;

/// One problem: where (graph and op, with the op's source location when known) and what.
struct Diagnostic {
  std::string where;    ///< `@main, op 3 ('kiln.add') at model.cpp:12:7`
  std::string message;  ///< what is wrong and, where possible, how to fix it
};

/// Checks every graph of \p module: each op's operand count and attributes against its
/// spec; result types against its inference rule; SSA dominance (operands defined
/// before use in the same graph); symbol references (callees exist) and call signatures
/// (operand and result types equal the callee's arguments and results); results defined;
/// no call cycles, and calls nested at most kMaxCallDepth deep (so that the compiler's and
/// the reference interpreter's walks over calls stay within any thread's stack); every
/// static value at most kMaxTensorBytes. The walks here are iterative: a hostile module
/// cannot exhaust the stack. Returns every problem found, in order; empty when the module
/// is valid.
std::vector<Diagnostic> verify(const Module& module);

/// \throws UserError listing every problem `verify` finds.
void verify_or_throw(const Module& module);

/// How many ops running \p module's entry performs with every `func.call` replaced by its
/// callee's ops (a `kiln.fused` counts once), each graph counted once: graphs that each
/// call the next twice, 64 deep, perform 2^64 ops in a few kilobytes of text, so the
/// compiler and the reference interpreter check this before expanding. Saturates at
/// UINT64_MAX. \p module must verify (no call cycles, calls at most kMaxCallDepth deep).
std::uint64_t expanded_op_count(const Module& module);

}  // namespace kiln::ir
