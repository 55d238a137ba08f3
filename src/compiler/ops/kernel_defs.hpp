#pragma once
// Internal: the compiler's definition of each op that runs as a kernel of its own (data
// movement, matmul, reductions, softmax and norms, collectives), keyed by its `ir::OpDef`:
// everything below the IR that is particular to the op, in one entry (ops/kernel_defs.cpp).
// Elementwise ops have theirs in ops/elementwise.hpp; weights, constants, calls and fused
// bodies are the planner's own. The reference interpreter (reference.cpp) stays independent
// code, so that it checks the kernels rather than sharing their mistakes.
//
// Adding such an op: its OpDef (src/ir/ops/), its CPU kernel and, where there is one, its
// CUDA launch (cuda_launches.cpp), its entry here, its reference evaluator and its tests.
// OpDefinitions.EveryKernelOpHasADefinition walks the IR registry for missing entries.

#include <cstdint>
#include <span>
#include <string_view>

#include "compiler/cuda_launches.hpp"
#include "compiler/kernels.hpp"
#include "kiln/ir/op_registry.hpp"

namespace kiln::compiler {

/// How `prepare` splits a launch's work over the workers (its grid; see blocks_for).
enum class KernelGrid : std::uint8_t {
  single,  ///< one block
  copy,    ///< by output elements, from a quarter MiB of f32 on
  rows,    ///< by rows of f32 along the op's axis (softmax; norms: the last)
  reduce,  ///< f32 reductions, by input elements
  matmul,  ///< f32 matmuls, by multiply-adds, one tile per worker
};

struct KernelDef {
  const ir::OpDef* op = nullptr;
  /// The CPU kernel: correct for every dtype the op's IR rule accepts.
  Kernel cpu = nullptr;
  KernelGrid grid = KernelGrid::single;
  /// What prepare works out once per plan beyond the grid (the launch's prepared state);
  /// null when the kernel needs nothing.
  void (*prepare)(Launch& launch, int threads) = nullptr;
  /// How the CUDA lowering records a launch; null when there is none, and then:
  CudaLaunchFn cuda = nullptr;
  std::string_view no_cuda{};  ///< why not (quoted by the error for a module that uses it)
  /// Which member of a family sharing one CPU kernel or CUDA kernel the op is (softmax 0,
  /// log_softmax 1, layer_norm 2, rms_norm 3; reduce_sum 0, mean 1, max 2, min 3).
  std::uint8_t variant = 0;
};

/// Every definition, in the order of the IR's op reference.
std::span<const KernelDef> kernel_defs();
/// The definition of \p op, or null (elementwise ops and the planner's own).
const KernelDef* find_kernel_def(const ir::OpDef& op);

}  // namespace kiln::compiler
