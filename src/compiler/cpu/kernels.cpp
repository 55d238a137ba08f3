// What every CPU launch goes through: its grid (blocks_for), its prepared state (prepare),
// and the questions the planner asks of ops (views, strided operands), answered from the
// ops' definitions.

#include "compiler/cpu/kernels.hpp"

#include <dnnl.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <unordered_map>

#include "compiler/cpu/batched_bf16_matmul.hpp"
#include "compiler/cpu/fused_program.hpp"
#include "compiler/cpu/kernel_support.hpp"
#include "compiler/cpu/packed_matmul.hpp"
#include "compiler/cpu/skinny_matmul.hpp"
#include "compiler/cpu/vector_math.hpp"
#include "compiler/ops/kernel_defs.hpp"
#include "core/str.hpp"
#include "kiln/core/error.hpp"
#include "kiln/runtime/launch.hpp"

namespace kiln::compiler {

using namespace kernel;  // the shared helpers

std::optional<Index> view_strides(const ir::OpView& op, Dims in_shape, const Index& in_strides) {
  const KernelDef* def = find_kernel_def(op.def());
  if (def == nullptr || def->view_strides == nullptr) return std::nullopt;
  return def->view_strides(op, in_shape, in_strides);
}

std::optional<Index> kernel::reshape_view_strides(const ir::OpView&, Dims,
                                                  const Index& in_strides) {
  if (in_strides.empty()) return Index{};  // the same bytes under another shape
  return std::nullopt;
}

std::optional<Index> kernel::transpose_view_strides(const ir::OpView& op, Dims in_shape,
                                                    const Index& in_strides) {
  const Index perm = op.find("perm")->as_int_array();
  const Index own = in_strides.empty() ? strides_of(in_shape) : in_strides;
  Index shape(perm.size()), st(perm.size());
  for (std::size_t d = 0; d < perm.size(); ++d) {
    shape[d] = in_shape[axis_of(perm[d], in_shape.size())];
    st[d] = own[axis_of(perm[d], in_shape.size())];
  }
  if (st == strides_of(shape)) return Index{};
  return st;
}

bool reads_strided(const ir::Graph& graph, const ir::OpView& reader, std::size_t operand,
                   const Index& shape, Dims strides) {
  const KernelDef* def = find_kernel_def(reader.def());
  if (def == nullptr || !def->strided_operands || operand > 1 || shape.size() < 2 ||
      strides.size() != shape.size() || graph.type(reader.result(0)).dtype != DType::f32)
    return false;
  for (ir::Value v : reader.operands())
    if (graph.type(v).dtype != DType::f32) return false;
  const std::size_t r = shape.size();
  const std::int64_t row = strides[r - 2], col = strides[r - 1];
  if (col == 1) return row >= std::max<std::int64_t>(1, shape[r - 1]);
  if (row == 1) return col >= std::max<std::int64_t>(1, shape[r - 2]);
  return false;
}

std::uint32_t kernel::blocks_for(const Launch& l, int threads) {
  if (threads <= 1 || l.out.empty()) return 1;
  const View& o = l.out[0];
  std::int64_t items = 0, per_block = 1, most = 4 * static_cast<std::int64_t>(threads);
  const auto all_f32 = [&] {
    for (const View& v : l.in)
      if (v.dtype != DType::f32) return false;
    return o.dtype == DType::f32;
  };
  // Below this a block is not worth a worker. Helpers spin between a call's kernels, so a
  // block costs a few microseconds of hand-off, not a wake-up; and on two cores a lone
  // thread's small copy reads half its input from the other core's cache (the GEMM before
  // it split its rows). Measured against 16384 (interleaved, 2 threads, batch 1): Llama
  // 1.12x, GPT-2 1.06x, MobileNetV3 1.05x, MiniLM and ResNet-18 the same.
  constexpr std::int64_t kMinElements = 2048;
  const KernelDef* def = l.fused ? nullptr : find_kernel_def(l.view().def());
  const KernelGrid grid = def != nullptr ? def->grid : KernelGrid::single;
  if (l.fused) {
    // A kiln.fused body or a lone elementwise op: its tile program's tiles split (the
    // per-element interpreter runs as one block).
    if (!l.fused->tiles || o.dtype != DType::f32) return 1;
    items = (elements(o.shape) + kTile - 1) / kTile;
    per_block = kMinElements / kTile;
  } else if (grid == KernelGrid::matmul && all_f32()) {
    const View& a = l.in[0];
    const std::int64_t k = a.shape.empty() ? 1 : a.shape.back();
    items = elements(o.shape) * k;  // multiply-adds
    per_block = std::int64_t{1} << 18;
    most = threads;  // one tile per worker: each tile packs its own operands
  } else if (grid == KernelGrid::copy) {
    for (const View& out : l.out) items += elements(out.shape);
    per_block = kMinElements;
  } else if (grid == KernelGrid::reduce) {
    if (!all_f32()) return 1;
    items = elements(l.in[0].shape);
    per_block = kMinElements;
  } else if (grid == KernelGrid::rows) {
    const bool softmax = def->variant < 2;  // softmax, log_softmax; else a norm
    const std::size_t axis =
        softmax ? axis_of(l.view().find("axis")->as_int(), o.shape.size()) : o.shape.size() - 1;
    if (o.shape.empty() || !all_f32() || !f32_last_axis_rows(l, axis)) return 1;
    items = elements(o.shape) / o.shape.back();
    per_block = std::max<std::int64_t>(1, kMinElements / o.shape.back());
  } else {
    return 1;
  }
  return static_cast<std::uint32_t>(std::clamp<std::int64_t>(items / per_block, 1, most));
}

void prepare(Launch& launch, int threads) {
  launch.blocks = blocks_for(launch, threads);
  if (launch.fused) {
    // Only inputs broadcast to the output's shape, or bool (read as masks), are read
    // through strides: a body whose inputs are all f32 of that shape (a chain of tanh ops)
    // needs none.
    const bool broadcasts = std::any_of(launch.in.begin(), launch.in.end(), [&](const View& in) {
      return !same_dims(in.shape, launch.out[0].shape) || in.dtype == DType::bool_;
    });
    if (broadcasts) {
      std::vector<Index> strides;
      for (const View& in : launch.in)
        strides.push_back(broadcast_strides(in.shape, launch.out[0].shape));
      launch.prepared = std::make_unique<ReadStrides>(std::move(strides));
    }
  } else if (const KernelDef* def = find_kernel_def(launch.view().def());
             def != nullptr && def->prepare != nullptr) {
    def->prepare(launch, threads);
  }
  // An empty output (a dim of size 0) can leave no tiles: one block, which finds no work.
  launch.blocks = std::max<std::uint32_t>(launch.blocks, 1);
}

}  // namespace kiln::compiler
