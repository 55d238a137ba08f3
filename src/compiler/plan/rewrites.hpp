#pragma once
// Internal: the rewrites of a plan, listed beside the IR passes (kiln/compiler/passes.hpp):
// each changes which launches run and how they read their operands, never what the plan
// computes. The CPU lowering runs them all; the CUDA kernels read neither views nor
// epilogues, so CUDA plans run none.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/plan/plan.hpp"

namespace kiln::compiler {

// ---- helpers the rewrites share (rewrite_support.cpp) ----

/// Whether launch \p i runs the op \p name.
bool is_op(const Plan& plan, std::size_t i, std::string_view name);
/// Whether storage \p s (not a view, not an entry result) is read by launch \p reader alone
/// among the launches that run (others may list it to keep their operands live).
bool read_only_by(const Plan& plan, std::size_t s, std::size_t reader,
                  const std::vector<bool>& is_output);
/// `kiln.relu` or `kiln.fused @fused_3`: launch \p i's op as labels name it.
std::string op_label(const Plan& plan, std::size_t i);
/// Whether storages \p a and \p b (roots) share bytes: both placed in the same arena of
/// one device, their byte ranges overlapping (an empty one overlaps nothing). The link_*
/// steps refuse a kernel that would write over what it still reads.
bool share_bytes(const Storage& a, const Storage& b);
/// The elements of a storage of \p shape.
std::int64_t elements_of(const Index& shape);
/// Whether launch \p i is a conv (`kiln.conv`).
bool is_conv(const Plan& plan, std::size_t i);
/// Launch \p i's absorbed epilogue: the next launch, when it is one that reads \p i's
/// output directly; else -1.
std::int64_t epilogue_of(const Plan& plan, std::size_t i);
/// Launch \p i with views of its operands and results that carry their shapes and dtypes
/// but no data (memory is not placed yet), for the kernels' checks
/// (kernel::runs_with_depthwise, kernel::runs_with_input_scale).
struct ShapeViews {
  ShapeViews(const Plan& plan, std::size_t i);
  ShapeViews(const ShapeViews&) = delete;
  ShapeViews& operator=(const ShapeViews&) = delete;
  std::vector<View> views;
  Launch launch;
};

/// Turns reshapes of contiguous data and transposes whose readers all take strided operands
/// (matmuls, directly or through further reshapes and transposes) into views: no copy runs,
/// the readers read the original bytes, and the base's liveness covers the views' readers.
/// Before memory is placed.
void fold_views(Plan& plan);

/// Marks the launches that read only weights, constants and what such launches write
/// (`Plan::invariant`): a causal mask built from positions, a weight transposed or scaled.
/// Their outputs are the same on every call, so memory placement keeps them apart for the
/// plan's life and the lowering runs them once, when it records the plan, rather than on
/// every call. Collectives are never marked. After fold_views, before absorb_epilogues
/// (which joins no invariant launch to a varying one).
void hoist_invariant(Plan& plan);

/// Marks each elementwise launch that directly follows the matmul whose output it alone
/// reads, with that output's shape (or through reshapes of it that copy nothing and keep
/// its last dim, which may lie between them), to run inside the matmul tile by tile (bias,
/// scale, activation, residual add: the output is read back from cache instead of
/// memory). The matmul's operands then stay live until the epilogue's slot. Before memory
/// is placed.
void absorb_epilogues(Plan& plan);

/// Marks each softmax over the last axis of a batched f32 matmul's output (or of its
/// absorbed epilogue's: a mask, a scale) that is that output's only reader, and whose output
/// only a matmul reads, as its left operand, to run with both matmuls as one kernel:
/// attention's softmax(Q Kᵀ + mask) V a block of query rows at a time, the scores in a
/// worker's scratch rather than in memory (at batch 16, 8 heads and 128 tokens, 8 MB written
/// and read three times), which takes no bytes of the arena. Q, K, V and the epilogue's
/// operands then stay live until the context matmul's slot. After absorb_epilogues, before
/// memory is placed.
void absorb_attention(Plan& plan);

/// Marks each depthwise conv whose input only a conv wrote (a pointwise one, or any other
/// that oneDNN's blocked kernels take; directly or through that conv's absorbed epilogue)
/// and only it reads, where the CPU kernels take the pair
/// (kernel::runs_with_depthwise; oneDNN's blocked kernels only with \p prepack_weights), to
/// run inside the pointwise conv as one kernel: per batch entry and band of channels, the
/// pointwise conv, its bias and epilogue into a worker's scratch, then the depthwise conv of
/// those channels from it (MobileNetV3's expansions: the expanded activation, 7 MiB at batch
/// 8, never leaves the cache). The expanded activation takes no bytes of the arena;
/// everything the kernel reads stays live until its last write. After absorb_epilogues,
/// before memory is placed.
void absorb_depthwise(Plan& plan, bool prepack_weights);
/// Marks each elementwise multiply of an f32 [N, C, H, W] by an f32 [N or 1, C, 1, 1]
/// (squeeze-and-excitation's scale) whose output only a conv reads, as its input, where
/// the CPU kernels take it (kernel::runs_with_input_scale: a 1x1 conv on the GEMM path), to
/// run inside that conv: each batch entry's input scaled into a worker's scratch just
/// before its GEMM, so the scaled activation is never written to memory and read back.
/// It takes no bytes of the arena; the multiply's operands stay live until the conv. After
/// absorb_depthwise, before memory is placed.
void absorb_input_scales(Plan& plan);

/// After memory is placed and the views bound: points each matmul at its absorbed epilogue
/// (`Launch::epilogue`). \throws InternalError if an epilogue's output was placed over an
/// operand its matmul still reads (which absorb_epilogues' liveness rules out).
void link_epilogues(Plan& plan);

/// After memory is placed and the views bound: points each attention's scores matmul at its
/// softmax and context launches (`Launch::softmax`, `Launch::context`). \throws
/// InternalError if the context was placed over an operand the kernel still reads.
void link_attention(Plan& plan);

/// After memory is placed and the views bound: points each pointwise conv at the
/// depthwise conv absorb_depthwise joined to it (`Launch::depthwise`). \throws
/// InternalError if the depthwise conv's output (or its epilogue's) was placed over an
/// operand the kernel still reads.
void link_depthwise(Plan& plan);
/// After memory is placed and the views bound: points each conv at the multiply
/// absorb_input_scales joined to it (`Launch::input_scale`). \throws InternalError if the
/// conv's output (or its epilogue's) was placed over the multiply's operands.
void link_input_scales(Plan& plan);

/// bf16 plans, after the CPU lowering prepared the launches: a bf16 weight matmul whose
/// output (or fused epilogue's) only another bf16 weight matmul reads, as its left operand
/// (an MLP's two layers), writes it as bf16 for that matmul to read as it is; so does a
/// layer or RMS norm read only by bf16 weight matmuls (attention's Q, K and V), and without
/// bf16 units a softmax read only by batched bf16 matmuls. Counts them in
/// `Plan::bf16_handoffs`.
void hand_off_bf16(Plan& plan);

}  // namespace kiln::compiler
