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
#include <optional>
#include <span>
#include <string_view>

#include "compiler/cpu/kernels.hpp"
#include "compiler/cuda/launches.hpp"
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

/// The members of the families of ops that share a kernel (`KernelDef::variant`).
namespace variant {
enum Rows : std::uint8_t { softmax, log_softmax, layer_norm, rms_norm };
enum Reduce : std::uint8_t { sum, mean, max, min, prod };
enum Window : std::uint8_t { conv, conv_transpose, max_pool, avg_pool };
enum Collective : std::uint8_t {
  transfer,
  allreduce_sum,
  allgather,
  reduce_scatter_sum,
  all_to_all
};
}  // namespace variant

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
  /// Which member of a family sharing one CPU kernel or CUDA kernel the op is (one of
  /// variant::Rows, Reduce or Collective).
  std::uint8_t variant = 0;
  /// Ops whose result can be a view of their operand's bytes (reshape, transpose): the
  /// strides the result has over an operand laid out with \p in_strides (empty:
  /// contiguous) as \p in_shape; nullopt when it has none (see `view_strides`).
  std::optional<Index> (*view_strides)(const ir::OpView& op, Dims in_shape,
                                       const Index& in_strides) = nullptr;
  /// The CPU kernel reads its two f32 operands through strides (matmul: a transposed or
  /// head-split view copies nothing) and runs an elementwise epilogue on each output tile.
  bool strided_operands = false;
  bool takes_epilogue = false;
  /// Whether \p op (whose result has its operand's type when \p same_type) returns its
  /// operand unchanged, for canonicalize (a reshape or broadcast_to to the same shape, a
  /// transpose by the identity permutation); null: never.
  bool (*returns_operand)(const ir::OpView& op, bool same_type) = nullptr;
  /// Its CUDA launch reports an index out of range through the plan's error words (gather).
  bool reports_errors = false;
};

/// Every definition, in the order of the IR's op reference.
std::span<const KernelDef> kernel_defs();
/// The definition of \p op, or null (elementwise ops and the planner's own).
const KernelDef* find_kernel_def(const ir::OpDef& op);

}  // namespace kiln::compiler
