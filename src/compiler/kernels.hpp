#pragma once
// Internal: the CPU kernels a compiled plan launches, one per IR op, over contiguous
// row-major buffers of concrete shape. Each reads its attributes from the op and its
// operands from `in`, and writes every element of `out`.
//
// These are the straightforward kernels of the compiler issue: correct for every dtype
// (f16 and bf16 are stored compactly and computed in f32; integers in 64 bits), not yet
// fast; the performance issue replaces the hot ones.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "kiln/core/dtype.hpp"
#include "kiln/ir/graph.hpp"

namespace kiln::compiler {

using Index = std::vector<std::int64_t>;

/// One buffer of a launch.
struct View {
  std::byte* data = nullptr;
  DType dtype = DType::f32;
  Index shape;
};

struct FusedProgram;

/// Everything a kernel needs for one launch.
struct Launch {
  const ir::Graph* graph = nullptr;
  std::uint32_t op = 0;
  std::vector<View> in;
  std::vector<View> out;
  std::shared_ptr<const FusedProgram> fused;  // kiln.fused launches: the body's scalar ops
  ir::OpView view() const { return graph->op(op); }
};

using Kernel = void (*)(const Launch&);

/// The kernel of \p op, or nullptr when there is none (weights, constants, calls and fused
/// ops are not table kernels: the planner handles them).
Kernel find_kernel(std::string_view op);

/// Compiles the body of a `kiln.fused` op into scalar ops evaluated once per output
/// element. \throws UserError if the body holds an op that is not elementwise.
std::shared_ptr<const FusedProgram> compile_fused(const ir::Graph& body);
/// The kernel of every `kiln.fused` launch (reads `Launch::fused`).
void run_fused(const Launch& launch);
/// True for the ops a fused body may contain.
bool is_elementwise(std::string_view op);

}  // namespace kiln::compiler
