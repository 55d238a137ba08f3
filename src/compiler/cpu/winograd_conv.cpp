#include "compiler/cpu/winograd_conv.hpp"

#include <omp.h>

#include <algorithm>
#include <string>
#include <vector>

#include "compiler/cpu/vector_math.hpp"
#include "compiler/cpu/weight_packs.hpp"

namespace kiln::compiler::kernel {

namespace {

using Desc = dnnl::memory::desc;
using DnnlDims = dnnl::memory::dims;

constexpr std::int64_t kLanes = 16;  // channels a transform takes at once
/// Tiles a chunk holds at most (whole tile rows, at least one): its V and products then
/// stay within about a core's L2 for 64 channels (ResNet-18's first layers), and the
/// transformed weights are read once per chunk.
constexpr std::int64_t kChunkTiles = 64;
/// Floats added to each row of V, U and the products: rows a multiple of 1 KiB apart share
/// cache sets (oneDNN's GEMM on [4, 512] x [512, 512] ran at 19 GFLOP/s so, 59 padded).
constexpr std::int64_t kRowPad = 16;
/// Tiles (over the batch) from which a conv runs by F(4x4), else by F(2x2): each tile's row
/// of the GEMMs reuses the transformed weights, 4x (F(4x4)) or 1.8x (F(2x2)) the direct
/// kernel's bytes, and F(2x2) has four times as many tiles (2.25x the multiplies). On an
/// AMD EPYC (Zen 3) at one thread, ResNet-18's 3x3 layers at batch 1 took (F(4x4) / F(2x2)
/// / direct): 56x56 64 channels (196 tiles of 4x4) 1.3 / 1.9 / 3.0 ms, 28x28 128 channels
/// (49) 1.1 / 1.5 / 3.0, 14x14 256 channels (16) 1.8 / 1.5 / 3.1, 7x7 512 channels (4)
/// 4.3 / 2.6 / 4.0 (F(4x4) read 39 MB of transformed weights for 4 tiles).
constexpr std::int64_t kMinTiles4 = 32, kMinTiles2 = 16;
/// The most bytes of transformed weights a conv takes (4x its weights' by F(4x4), 1.8x by
/// F(2x2)): a 1024-channel 3x3 conv's would be 151 MB by F(4x4), 67 MB by F(2x2); wider
/// ones run directly rather than hold several times their weights.
constexpr double kMaxTransformedBytes = 128.0 * 1024 * 1024;
/// Output rows wider than this run directly (a chunk holds whole tile rows).
constexpr std::int64_t kMaxWidth = 4096;
/// Multiply-adds (the direct conv's) below which a conv stays on one worker.
constexpr double kBlockMacs = double(std::int64_t{1} << 18);

/// G of F(4x4, 3x3) and of F(2x2, 3x3): the (m + 2) x 3 matrices whose G g Gᵀ is a 3x3
/// filter g's transform.
constexpr double kG4[6][3] = {{1.0 / 4, 0, 0},
                              {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                              {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                              {1.0 / 24, 1.0 / 12, 1.0 / 6},
                              {1.0 / 24, -1.0 / 12, 1.0 / 6},
                              {0, 0, 1}};
constexpr double kG2[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};

/// The tiles of 4x4 (\p tile 4) or 2x2 (2) outputs that cover \p g's output planes.
std::int64_t tiles_of(const WindowGeometry& g, std::int64_t tile) {
  constexpr std::size_t h = WindowGeometry::kMaxSpatial - 2;
  return g.n * ((g.out[h] + tile - 1) / tile) * ((g.out[h + 1] + tile - 1) / tile);
}

/// U[ξ][c][m] = (G g Gᵀ)[ξ] of filter g = w[m][c] (f32 [M, C, 3, 3]) for \p tile, at \p u
/// with rows of \p ldu floats; in double, then rounded. One input channel at a time, its
/// filters transposed ([9][M]) so that every loop runs along the output channels
/// (vectorised) and writes each point's row in order: ResNet-18's first call took 259 ms
/// with them computed filter by filter, 143 ms so (69 without Winograd).
void transform_weights(const float* w, std::int64_t c, std::int64_t m, std::int64_t tile,
                       std::int64_t ldu, float* u) {
  const std::int64_t alpha = tile + 2;
  std::vector<double> g(static_cast<std::size_t>(9 * m)),
      gg(static_cast<std::size_t>(alpha * 3 * m));
  const auto coefficient = [&](std::int64_t a, std::int64_t k) {
    return tile == 4 ? kG4[a][k] : kG2[a][k];
  };
  for (std::int64_t i = 0; i < c; ++i) {
    for (std::int64_t o = 0; o < m; ++o)
      for (std::int64_t k = 0; k < 9; ++k) g[k * m + o] = w[(o * c + i) * 9 + k];
    for (std::int64_t a = 0; a < alpha; ++a)  // G g: gg[a][x] = Σ_y G[a][y] g[y][x]
      for (std::int64_t x = 0; x < 3; ++x) {
        const double g0 = coefficient(a, 0), g1 = coefficient(a, 1), g2 = coefficient(a, 2);
        const double *r0 = &g[x * m], *r1 = &g[(3 + x) * m], *r2 = &g[(6 + x) * m];
        double* to = &gg[(a * 3 + x) * m];
        for (std::int64_t o = 0; o < m; ++o) to[o] = g0 * r0[o] + g1 * r1[o] + g2 * r2[o];
      }
    for (std::int64_t a = 0; a < alpha; ++a)  // (G g) Gᵀ
      for (std::int64_t b = 0; b < alpha; ++b) {
        const double g0 = coefficient(b, 0), g1 = coefficient(b, 1), g2 = coefficient(b, 2);
        const double *r0 = &gg[a * 3 * m], *r1 = &gg[(a * 3 + 1) * m], *r2 = &gg[(a * 3 + 2) * m];
        float* to = u + ((a * alpha + b) * c + i) * ldu;
        for (std::int64_t o = 0; o < m; ++o)
          to[o] = static_cast<float>(r0[o] * g0 + r1[o] * g1 + r2[o] * g2);
      }
  }
}

/// The GEMMs of a chunk of \p tiles tiles, one per point, as one batched matmul: [tiles, C] x
/// [C, m1 - m0] per point, V's and the products' point strides those of a full chunk (\p chunk
/// tiles).
onednn::Step chunk_gemms(const WinogradConv& wc, WinogradConv::Block& b, std::int64_t tiles,
                         std::int64_t chunk) {
  const dnnl::engine& engine = onednn::cpu_engine();
  const auto f32 = dnnl::memory::data_type::f32;
  const std::int64_t outs = b.m1 - b.m0;
  const std::int64_t points = wc.points();
  const Desc v({points, tiles, wc.c}, f32, DnnlDims{chunk * wc.ldv, wc.ldv, 1}),
      u({points, wc.c, outs}, f32, DnnlDims{wc.c * wc.ldu, wc.ldu, 1}),
      o({points, tiles, outs}, f32, DnnlDims{chunk * b.ldo, b.ldo, 1});
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(v, u, o), onednn::user_scratchpad(),
                                        engine);
  if (std::string(pd.impl_info_str()).rfind("ref", 0) == 0)
    throw dnnl::error(dnnl_unimplemented, "only oneDNN's reference matmul");
  onednn::Step step;
  step.primitive = dnnl::matmul(pd);
  step.add(DNNL_ARG_SRC, dnnl::memory(v, engine, b.v.get()));
  step.add(DNNL_ARG_WEIGHTS,
           dnnl::memory(u, engine, static_cast<float*>(wc.u.get_data_handle()) + b.m0));
  step.add(DNNL_ARG_DST, dnnl::memory(o, engine, b.o.get()));
  step.add_scratchpad(pd.scratchpad_desc(), engine);
  return step;
}

/// The m + 2 input rows tile row \p ty of image \p n reads, channels [c0, c0 + 16),
/// interleaved (`vmath::interleave16`): (y, x) at rows[(y·cols + x)·16], zero outside the
/// input, `cols` = m tile_cols + 2.
void interleave_rows(const WinogradConv& wc, const float* x, std::int64_t n, std::int64_t ty,
                     std::int64_t c0, float* rows) {
  const std::int64_t cols = wc.tile_cols * wc.tile + 2, plane = wc.h * wc.w;
  const std::int64_t right = wc.pad_left + wc.w;  // the first column past the input
  for (std::int64_t y = 0; y < wc.tile + 2; ++y) {
    float* row = rows + y * cols * kLanes;
    const std::int64_t iy = ty * wc.tile - wc.pad_top + y;
    if (iy < 0 || iy >= wc.h) {
      std::fill_n(row, cols * kLanes, 0.0f);
      continue;
    }
    std::fill_n(row, wc.pad_left * kLanes, 0.0f);
    vmath::interleave16(x + (n * wc.c + c0) * plane + iy * wc.w, static_cast<std::size_t>(plane),
                        static_cast<std::size_t>(wc.w), row + wc.pad_left * kLanes);
    std::fill(row + right * kLanes, row + cols * kLanes, 0.0f);
  }
}

}  // namespace

bool winograd_shape(const WindowGeometry& g) {
  if (g.spatial != 2 || g.groups != 1 || g.c % kLanes != 0 || g.m % kLanes != 0) return false;
  for (std::size_t d = WindowGeometry::kMaxSpatial - 2; d < WindowGeometry::kMaxSpatial; ++d)
    if (g.kernel[d] != 3 || g.stride[d] != 1 || g.dilation[d] != 1) return false;
  return true;
}

std::int64_t winograd_tile(const WindowGeometry& g) {
  constexpr std::size_t h = WindowGeometry::kMaxSpatial - 2;
  if (!winograd_shape(g) || g.c == 0 || g.m == 0 || g.out[h] <= 0 || g.out[h + 1] <= 0) return 0;
  // A chunk is at least one tile row: wider planes would need buffers of their width.
  if (g.out[h + 1] > kMaxWidth) return 0;
  // The transformed weights' bytes, (m + 2)^2 C M floats (in double: hostile channels).
  const auto fits = [&](double points) {
    return points * static_cast<double>(g.c) * static_cast<double>(g.m + kRowPad) * 4.0 <=
           kMaxTransformedBytes;
  };
  if (tiles_of(g, 4) >= kMinTiles4 && fits(36)) return 4;
  if (tiles_of(g, 2) >= kMinTiles2 && fits(16)) return 2;
  return 0;
}

std::unique_ptr<WinogradConv> prepare_winograd(const Launch& l, const WindowGeometry& g,
                                               std::int64_t tile, int threads) {
  constexpr std::size_t h = WindowGeometry::kMaxSpatial - 2;
  const dnnl::engine& engine = onednn::cpu_engine();
  const onednn::OneOpenMpThread one_thread;  // each block runs on one worker
  auto wc = std::make_unique<WinogradConv>();
  wc->c = g.c, wc->m = g.m;
  wc->h = g.in[h], wc->w = g.in[h + 1], wc->oh = g.out[h], wc->ow = g.out[h + 1];
  wc->pad_top = g.pad_begin[h], wc->pad_left = g.pad_begin[h + 1];
  wc->tile = tile;
  wc->tile_rows = (wc->oh + tile - 1) / tile, wc->tile_cols = (wc->ow + tile - 1) / tile;
  wc->ldv = g.c + kRowPad, wc->ldu = g.m + kRowPad;

  const auto f32 = dnnl::memory::data_type::f32;
  const Desc layout({wc->points(), g.c, g.m}, f32, DnnlDims{g.c * wc->ldu, wc->ldu, 1});
  const auto* weights = reinterpret_cast<const float*>(l.in[1].data);
  const auto transform = [&] {
    dnnl::memory u(layout, engine);
    // Every element the GEMMs read (not the rows' padding) written.
    transform_weights(weights, g.c, g.m, tile, wc->ldu, static_cast<float*>(u.get_data_handle()));
    return u;
  };
  const Desc source({g.m, g.c, 3, 3}, f32, dnnl::memory::format_tag::abcd);
  wc->u = l.packs != nullptr ? l.packs->find_or_pack(weights, source, layout, false, transform)
                             : transform();

  // Workers split the tile rows of every plane, or, when there are fewer tiles than output
  // channels (deep layers at small batches), the output channels: each then reads only its
  // share of the transformed weights.
  const std::int64_t rows = g.n * wc->tile_rows, tiles = rows * wc->tile_cols;
  const double macs = static_cast<double>(g.n) * static_cast<double>(g.m) *
                      static_cast<double>(g.out_plane()) * static_cast<double>(g.c) * 9.0;
  const auto want = static_cast<std::int64_t>(
      std::clamp(macs / kBlockMacs, 1.0, static_cast<double>(std::max(threads, 1))));
  const bool by_channels = tiles < g.m;
  const std::int64_t count = std::min(want, by_channels ? g.m / kLanes : rows);
  const std::int64_t chunk_rows = std::max<std::int64_t>(1, kChunkTiles / wc->tile_cols);
  wc->blocks.resize(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) {
    WinogradConv::Block& b = wc->blocks[static_cast<std::size_t>(i)];
    if (by_channels) {
      b.row0 = 0, b.row1 = rows;
      b.m0 = g.m / kLanes * i / count * kLanes, b.m1 = g.m / kLanes * (i + 1) / count * kLanes;
    } else {
      b.row0 = rows * i / count, b.row1 = rows * (i + 1) / count;
      b.m0 = 0, b.m1 = g.m;
    }
    b.chunk_rows = std::min(chunk_rows, b.row1 - b.row0);
    b.ldo = b.m1 - b.m0 + kRowPad;
    const std::int64_t chunk = b.chunk_rows * wc->tile_cols;
    b.v = std::make_unique<float[]>(static_cast<std::size_t>(wc->points() * chunk * wc->ldv));
    b.o = std::make_unique<float[]>(static_cast<std::size_t>(wc->points() * chunk * b.ldo));
    const std::int64_t cols = wc->tile_cols * tile;
    b.in_rows =
        std::make_unique<float[]>(static_cast<std::size_t>(kLanes * (tile + 2) * (cols + 2)));
    b.out_rows = std::make_unique<float[]>(static_cast<std::size_t>((b.m1 - b.m0) * tile * cols));
    b.full = chunk_gemms(*wc, b, chunk, chunk);
    const std::int64_t rest = (b.row1 - b.row0) % b.chunk_rows;
    if (rest != 0) b.last = chunk_gemms(*wc, b, rest * wc->tile_cols, chunk);
    b.stream = dnnl::stream(engine);
  }
  return wc;
}

bool run_winograd(const Launch& l, const WinogradConv& wc) {
  // This thread's OpenMP regions (oneDNN's) use this thread only: the blocks are the
  // parallelism. Checked per call, since the calling thread may be anyone's.
  if (omp_get_max_threads() != 1) omp_set_num_threads(1);
  const WinogradConv::Block& b = wc.blocks[static_cast<std::size_t>(kiln::block_idx().x)];
  const auto* x = reinterpret_cast<const float*>(l.in[0].data);
  const auto* bias = l.in.size() > 2 ? reinterpret_cast<const float*>(l.in[2].data) : nullptr;
  auto* out = reinterpret_cast<float*>(l.out[0].data);
  static const float kZeros[kLanes] = {};
  const bool four = wc.tile == 4;
  const std::int64_t tile = wc.tile, chunk = b.chunk_rows * wc.tile_cols, plane = wc.oh * wc.ow;
  const std::int64_t in_cols = wc.tile_cols * tile + 2, out_cols = wc.tile_cols * tile;
  const auto in_row = static_cast<std::size_t>(in_cols * kLanes),
             out_row = static_cast<std::size_t>(out_cols * kLanes),
             v_stride = static_cast<std::size_t>(chunk * wc.ldv),
             o_stride = static_cast<std::size_t>(chunk * b.ldo);
  for (std::int64_t r0 = b.row0; r0 < b.row1; r0 += b.chunk_rows) {
    const std::int64_t r1 = std::min(b.row1, r0 + b.chunk_rows);
    for (std::int64_t r = r0; r < r1; ++r) {  // V: each tile row's tiles, all input channels
      float* v = b.v.get() + (r - r0) * wc.tile_cols * wc.ldv;
      for (std::int64_t c0 = 0; c0 < wc.c; c0 += kLanes) {
        interleave_rows(wc, x, r / wc.tile_rows, r % wc.tile_rows, c0, b.in_rows.get());
        for (std::int64_t tx = 0; tx < wc.tile_cols; ++tx) {
          const float* patch = b.in_rows.get() + tx * tile * kLanes;
          float* to = v + tx * wc.ldv + c0;
          four ? vmath::winograd_input_4x3(patch, in_row, to, v_stride)
               : vmath::winograd_input_2x3(patch, in_row, to, v_stride);
        }
      }
    }
    const onednn::Step& gemms = r1 - r0 == b.chunk_rows ? b.full : b.last;
    if (!gemms.run(b.stream) || dnnl_stream_wait(b.stream.get()) != dnnl_success) return false;
    for (std::int64_t r = r0; r < r1; ++r) {  // each tile row's outputs, channels [m0, m1)
      const std::int64_t n = r / wc.tile_rows, oy = r % wc.tile_rows * tile;
      const float* o = b.o.get() + (r - r0) * wc.tile_cols * b.ldo;
      for (std::int64_t m0 = b.m0; m0 < b.m1; m0 += kLanes) {
        float* rows = b.out_rows.get() + (m0 - b.m0) * tile * out_cols;
        const float* shift = bias != nullptr ? bias + m0 : kZeros;
        for (std::int64_t tx = 0; tx < wc.tile_cols; ++tx) {
          const float* products = o + tx * b.ldo + (m0 - b.m0);
          float* to = rows + tx * tile * kLanes;
          four ? vmath::winograd_output_4x3(products, o_stride, shift, to, out_row)
               : vmath::winograd_output_2x3(products, o_stride, shift, to, out_row);
        }
        for (std::int64_t y = 0; y < std::min(tile, wc.oh - oy); ++y)
          vmath::deinterleave16(rows + y * out_cols * kLanes, static_cast<std::size_t>(wc.ow),
                                out + (n * wc.m + m0) * plane + (oy + y) * wc.ow,
                                static_cast<std::size_t>(plane));
      }
    }
    if (l.epilogue == nullptr) continue;
    // The chunk's output rows of each image it reaches, channels [m0, m1), while in cache.
    for (std::int64_t r = r0; r < r1;) {
      const std::int64_t image = r / wc.tile_rows;
      const std::int64_t end = std::min(r1, (image + 1) * wc.tile_rows);
      const std::int64_t oy0 = (r % wc.tile_rows) * tile,
                         oy1 = std::min(wc.oh, ((end - 1) % wc.tile_rows + 1) * tile);
      run_fused_f32_rows(*l.epilogue, (image * wc.m + b.m0) * plane + oy0 * wc.ow, b.m1 - b.m0,
                         (oy1 - oy0) * wc.ow, plane);
      r = end;
    }
  }
  return true;
}

}  // namespace kiln::compiler::kernel
