#pragma once
// Internal: an expansion (a conv, pointwise or any other ungrouped one, and the depthwise
// conv that alone reads its output, see absorb_depthwise) by oneDNN's conv kernels on their
// blocked layout.

#include <cstdint>
#include <memory>
#include <vector>

#include "compiler/cpu/kernels.hpp"
#include "compiler/cpu/onednn_support.hpp"

namespace kiln::compiler::kernel {

/// An expansion by oneDNN's direct conv kernels on their blocked layout (nChw8c with AVX2,
/// nChw16c with AVX-512): per tile of one batch entry and a slice of output channels, the
/// input reordered into the blocked layout (where the first conv reads it so), the first conv
/// (a pointwise one, or a network's stem; its bias inside), its
/// epilogue over the blocked buffer, the depthwise conv (bias inside), its epilogue, then
/// one reorder into kiln's layout. The expanded activation is never reordered, and stays in
/// the worker's scratch: around oneDNN's depthwise kernel alone, the reorders of its input
/// and output cost more than the kernel. Takes fixed weights (reordered once, shared through
/// `Launch::packs`) and epilogues whose other operands are single values (the blocked order
/// of elements is not kiln's).
struct BlockedExpansion {
  struct Tile {
    std::int64_t n = 0, m0 = 0, m1 = 0;
    onednn::Step in, first, depthwise, out;  // `in` empty: the conv reads kiln's layout
    float* expanded = nullptr;               // the first conv's output, blocked
    float* result = nullptr;                 // the depthwise conv's, blocked
  };
  std::vector<Tile> tiles;
  std::int64_t m = 0, plane = 0, out_plane = 0;
  std::vector<dnnl::memory> owned;    // scratch per block, weights reordered without packs
  std::vector<dnnl::stream> streams;  // per block
};

/// Whether a BlockedExpansion takes \p first and \p depthwise (views' shapes and
/// dtypes, the ops' attributes; no data): 2-D, f32, oneDNN with a kernel that is not its
/// reference one for both, the blocked outputs unpadded. The caller checks the weights are
/// fixed and the epilogues' other operands single values.
bool blocked_expansion_fits(const Launch& first, const Launch& depthwise);

/// \p l's expansion with `l.depthwise` on up to \p threads workers, or null when it does
/// not fit (see blocked_expansion_fits; also: weights not fixed, or an epilogue with an
/// operand of more than one value).
std::unique_ptr<BlockedExpansion> prepare_blocked_expansion(const Launch& l, int threads);

/// This block's tiles of \p e, the expansion of \p l.
void run_blocked_expansion(const Launch& l, const BlockedExpansion& e);

/// Whether every operand of the epilogue \p epilogue other than \p producer_out (what its
/// conv wrote) holds a single value (or \p epilogue is null).
bool only_single_values_besides(const Launch* epilogue, const std::byte* producer_out);

}  // namespace kiln::compiler::kernel
