#pragma once
// Internal: kiln's own Winograd convolution, F(4x4, 3x3) or F(2x2, 3x3) (the text below
// says F(4x4)'s numbers), for 3x3 stride-1 f32 convs with
// fixed weights where oneDNN 2.6 has no Winograd kernel (every CPU without AVX-512). On
// kiln's [N, C, H, W] layout, with no reorder into a blocked layout and back:
//
//  - the weights transformed once per callable, U = G g Gᵀ (in double, then rounded), as
//    36 matrices [C, M] (one per point ξ of the 6x6 tile), shared by its plans;
//  - each call, per chunk of 4x4 output tiles: each tile's 6x6 input patch, sixteen
//    channels at a time, transformed (V = Bᵀ d B, vmath::winograd_input_4x3) into 36
//    matrices [tiles, C]; one batched oneDNN matmul multiplies them by U, [tiles, M] each;
//    and each tile's 36 products transformed back (Y = Aᵀ M A plus the bias,
//    vmath::winograd_output_4x3) into its 4x4 outputs, then the epilogue on those rows.
//
// 36 multiplies a tile and channel pair instead of the direct kernel's 144 (4x fewer), at
// the cost of the transforms and of 4x the weights' bytes; with few tiles F(2x2, 3x3)
// instead (16 multiplies for 36, 1.8x the bytes). The sums are rounded differently from a
// direct convolution's (F(4x4)'s transforms multiply by up to 5 and 8). On an AMD EPYC
// (Zen 3, AVX2) at one thread, ResNet-18's 3x3 stride-1 convs at batch 1 took 0.37-0.66x
// the direct kernels' time (the numbers: kMinTiles4 in winograd_conv.cpp).

#include <cstdint>
#include <dnnl.hpp>
#include <memory>
#include <vector>

#include "compiler/cpu/kernel_support.hpp"
#include "compiler/cpu/onednn_support.hpp"

namespace kiln::compiler::kernel {

struct WinogradConv {
  std::int64_t c = 0, m = 0, h = 0, w = 0, oh = 0, ow = 0, pad_top = 0, pad_left = 0;
  std::int64_t tile = 4;                                           // F(4x4, 3x3) or F(2x2, 3x3)
  std::int64_t tile_rows = 0, tile_cols = 0;                       // tiles a plane: rows x cols
  std::int64_t points() const { return (tile + 2) * (tile + 2); }  // of a transformed tile
  std::int64_t ldv = 0, ldu = 0;  // row strides of V [tiles, C] and U [C, M]
  dnnl::memory u;                 // [points][C][ldu], shared by the callable's plans
  /// One worker's share: the tile rows [row0, row1) of every plane (row r: image
  /// r / tile_rows, tiles row r % tile_rows) for the output channels [m0, m1), in chunks of
  /// `chunk_rows` tile rows.
  struct Block {
    std::int64_t row0 = 0, row1 = 0, m0 = 0, m1 = 0, chunk_rows = 0, ldo = 0;
    // [points][chunk tiles][ldv], [points][chunk tiles][ldo]
    std::unique_ptr<float[]> v, o;
    // Sixteen input channels of one tile row's input rows, [tile + 2][tile tile_cols + 2][16],
    // and its outputs, [(m1 - m0) / 16][tile][tile tile_cols][16], channels interleaved.
    std::unique_ptr<float[]> in_rows, out_rows;
    onednn::Step full, last;  // a full chunk's GEMMs, and the last (shorter) chunk's
    dnnl::stream stream;
  };
  std::vector<Block> blocks;
};

/// Whether \p g has the shape Winograd's algorithm takes (oneDNN's kernels and kiln's): a
/// 2-D 3x3 conv, stride 1, undilated, one group, over whole vectors of 16 input and output
/// channels.
bool winograd_shape(const WindowGeometry& g);

/// The tile kiln's Winograd runs \p g with, or 0 when it does not take it: `winograd_shape`
/// (f32 with fixed weights: the caller's), output rows of at most 4096, and enough tiles over
/// the batch to reuse the transformed weights: F(4x4) (4) with 32 or more 4x4 tiles, else
/// F(2x2) (2) with 16 or more 2x2 tiles; either only while its transformed weights take at
/// most 128 MiB.
std::int64_t winograd_tile(const WindowGeometry& g);

/// \p l's WinogradConv (f32 [N, C, H, W] by fixed [M, C, 3, 3], bias or not) with \p tile
/// (`winograd_tile`) on up to \p threads workers (blocks: `blocks.size()`); the transformed
/// weights come from (and go to) `l.packs` when set. \throws dnnl::error when oneDNN has no
/// matmul for it.
std::unique_ptr<WinogradConv> prepare_winograd(const Launch& l, const WindowGeometry& g,
                                               std::int64_t tile, int threads);

/// Block `block_idx().x`'s share of \p l, each chunk followed by the epilogue on its rows.
/// Allocates nothing. \returns false when oneDNN fails.
bool run_winograd(const Launch& l, const WinogradConv& wc);

}  // namespace kiln::compiler::kernel
