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

/// Everything a kernel needs for one launch.
struct Launch {
  const ir::Graph* graph = nullptr;
  std::uint32_t op = 0;
  std::vector<View> in;
  std::vector<View> out;
  ir::OpView view() const { return graph->op(op); }
};

using Kernel = void (*)(const Launch&);

/// The kernel of \p op, or nullptr when there is none (weights, constants and calls are
/// not kernels: the planner handles them).
Kernel find_kernel(std::string_view op);

}  // namespace kiln::compiler
