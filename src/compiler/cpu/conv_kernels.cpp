// conv and conv_transpose over [N, C, spatial...] buffers.
//
// f32 convolutions run oneDNN's convolution and deconvolution primitives, built once per
// plan (prepare_conv): the work splits into tiles of batch entries and output channels
// (whole groups for grouped convolutions), one primitive execution per tile on the worker
// that runs its block, the bias inside the primitive and an elementwise epilogue (ReLU, a
// residual add) on each tile right after it, while the tile is in cache. With fixed
// weights oneDNN picks every layout: the weights are reordered once into its blocked
// layout, and each tile's activations into and out of its blocked layout on every call
// (its direct kernels beat its im2col GEMM on kiln's plain layout by far). A pointwise
// (1x1) conv over planes of 128 or more is a GEMM per batch entry on kiln's own layout
// instead, with no reorders: there they cost more than oneDNN's conv kernel saves. So is a
// depthwise conv with output rows of 16 or more, by kiln's own loops (vmath::
// depthwise_plane), and a conv of at most 4 input channels (a stem; plane_convs.hpp).
// 3x3 stride-1 convs may run oneDNN's Winograd kernels
// (`Launch::winograd`), or where oneDNN has none (below AVX-512) kiln's own
// (winograd_conv.hpp). A pointwise conv with the depthwise conv after it (an expansion,
// `Launch::depthwise`) runs both as one kernel: oneDNN's on its blocked layout
// (blocked_expansion.hpp), else kiln's in bands of channels (`Expansion`). Other dtypes,
// and any problem oneDNN has no primitive for, run direct loops in double. Pools are in
// pool_kernels.cpp.

#include <omp.h>

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <tuple>

#include "compiler/cpu/blocked_expansion.hpp"
#include "compiler/cpu/conv_descs.hpp"
#include "compiler/cpu/kernel_support.hpp"
#include "compiler/cpu/onednn_support.hpp"
#include "compiler/cpu/plane_convs.hpp"
#include "compiler/cpu/vector_math.hpp"
#include "compiler/cpu/weight_packs.hpp"
#include "compiler/cpu/winograd_conv.hpp"
#include "core/str.hpp"
#include "kiln/core/cpu_isa.hpp"
#include "kiln/core/error.hpp"

namespace kiln::compiler::kernel {

using kiln::detail::cat;

namespace {

constexpr std::size_t kMaxSpatial = WindowGeometry::kMaxSpatial;
using Spatial = WindowGeometry::Spatial;
using Geometry = WindowGeometry;

// ---- direct loops (any floating dtype) ----------------------------------------------------

/// One output element of a conv: out[n, m, o] with the group's input channels.
double conv_element(const Launch& l, const Geometry& g, std::int64_t n, std::int64_t m,
                    const Spatial& o) {
  const View &x = l.in[0], &w = l.in[1];
  const std::int64_t cg = g.c / g.groups, mg = g.m / g.groups, first = m / mg * cg;
  double sum = l.in.size() > 2 ? load(l.in[2], m) : 0.0;
  for (std::int64_t c = 0; c < cg; ++c) {
    const std::int64_t x_plane = (n * g.c + first + c) * g.in_plane(),
                       w_taps = (m * cg + c) * g.taps();
    for (std::int64_t k0 = 0; k0 < g.kernel[0]; ++k0) {
      const std::int64_t i0 = o[0] * g.stride[0] - g.pad_begin[0] + k0 * g.dilation[0];
      if (i0 < 0 || i0 >= g.in[0]) continue;
      for (std::int64_t k1 = 0; k1 < g.kernel[1]; ++k1) {
        const std::int64_t i1 = o[1] * g.stride[1] - g.pad_begin[1] + k1 * g.dilation[1];
        if (i1 < 0 || i1 >= g.in[1]) continue;
        for (std::int64_t k2 = 0; k2 < g.kernel[2]; ++k2) {
          const std::int64_t i2 = o[2] * g.stride[2] - g.pad_begin[2] + k2 * g.dilation[2];
          if (i2 < 0 || i2 >= g.in[2]) continue;
          sum += load(x, x_plane + (i0 * g.in[1] + i1) * g.in[2] + i2) *
                 load(w, w_taps + (k0 * g.kernel[1] + k1) * g.kernel[2] + k2);
        }
      }
    }
  }
  return sum;
}

/// Where output position \p y of a transposed conv takes tap \p k from: the input index,
/// or -1 when no input lands there through that tap.
std::int64_t transposed_source(std::int64_t y, std::int64_t k, std::int64_t stride,
                               std::int64_t dilation, std::int64_t pad, std::int64_t in) {
  const std::int64_t at = y + pad - k * dilation;
  if (at < 0 || at % stride != 0 || at / stride >= in) return -1;
  return at / stride;
}

/// One output element of a conv_transpose: every x[n, c, i] of the group whose tap k
/// lands on it (i * stride - pad + k * dilation = o), times w[c, m - first, k].
double conv_transpose_element(const Launch& l, const Geometry& g, std::int64_t n, std::int64_t m,
                              const Spatial& o) {
  const View &x = l.in[0], &w = l.in[1];
  const std::int64_t cg = g.c / g.groups, mg = g.m / g.groups, first = m / mg * cg, j = m % mg;
  double sum = l.in.size() > 2 ? load(l.in[2], m) : 0.0;
  for (std::int64_t c = first; c < first + cg; ++c) {
    const std::int64_t x_plane = (n * g.c + c) * g.in_plane(), w_taps = (c * mg + j) * g.taps();
    for (std::int64_t k0 = 0; k0 < g.kernel[0]; ++k0) {
      const std::int64_t i0 =
          transposed_source(o[0], k0, g.stride[0], g.dilation[0], g.pad_begin[0], g.in[0]);
      if (i0 < 0) continue;
      for (std::int64_t k1 = 0; k1 < g.kernel[1]; ++k1) {
        const std::int64_t i1 =
            transposed_source(o[1], k1, g.stride[1], g.dilation[1], g.pad_begin[1], g.in[1]);
        if (i1 < 0) continue;
        for (std::int64_t k2 = 0; k2 < g.kernel[2]; ++k2) {
          const std::int64_t i2 =
              transposed_source(o[2], k2, g.stride[2], g.dilation[2], g.pad_begin[2], g.in[2]);
          if (i2 < 0) continue;
          sum += load(x, x_plane + (i0 * g.in[1] + i1) * g.in[2] + i2) *
                 load(w, w_taps + (k0 * g.kernel[1] + k1) * g.kernel[2] + k2);
        }
      }
    }
  }
  return sum;
}

/// This block's share of the output of a conv or conv_transpose, element by element in
/// double, then its epilogue over the same elements.
void direct_conv(const Launch& l, bool transposed) {
  const Geometry g = window_geometry(l, true);
  const View& o = l.out[0];
  const auto [first, last] = block_range(elements(o.shape));
  for (std::int64_t i = first; i < last; ++i) {
    std::int64_t rest = i / g.out_plane();
    const std::int64_t pos = i % g.out_plane(), m = rest % g.m, n = rest / g.m;
    const Spatial at{pos / (g.out[1] * g.out[2]), pos / g.out[2] % g.out[1], pos % g.out[2]};
    store(o, i, transposed ? conv_transpose_element(l, g, n, m, at) : conv_element(l, g, n, m, at));
  }
  if (l.epilogue != nullptr && first < last)
    run_fused_f32_rows(*l.epilogue, first, 1, last - first, 0);
}

// ---- oneDNN ---------------------------------------------------------------------------------

/// One tile: batch entries [n0, n1), output channels [m0, m1) (whole groups when
/// grouped) and output rows [oy0, oy1) of a 2-D conv (oy1 0: every row), computed by one
/// primitive execution.
struct ConvTile {
  std::int64_t n0 = 0, n1 = 0, m0 = 0, m1 = 0;
  std::int64_t oy0 = 0, oy1 = 0;
  onednn::Step step;
  // When the primitive reads and writes blocked layouts (its fast kernels do): the tile's
  // input reordered into one, and its output reordered back, around `step`.
  onednn::Step src_in, dst_out;
  // Emulated bf16 (no bf16 units): first each of `rows` runs of `run` input elements,
  // `stride` apart from `from`, rounded to bf16 into the dense f32 `to` (`src_in` reads).
  const float* from = nullptr;
  float* to = nullptr;
  std::int64_t rows = 0, run = 0, stride = 0;
  dnnl::memory rounded;  // owns `to`
  dnnl::stream stream;
  // A pointwise conv run as GEMMs on kiln's layout (`step` unused): one per batch entry,
  // out[n][m0:m1] = w[m0:m1] x[n] over [channels, plane], then the bias added per row.
  std::vector<onednn::Step> images;
  const float* bias = nullptr;  // the tile's first output channel's, or null
  float* out = nullptr;         // the tile's first image's first output row
  std::int64_t image_stride = 0, plane = 0;
  // With Launch::input_scale: before each GEMM, its image's input channel c times
  // scales[image * scale_stride + c], from `unscaled` into `scaled` + image *
  // scaled_stride ([channels, plane]), which the GEMM reads: the conv's input, where the
  // tile owns whole images (its place in the arena is in cache, being reused all the time),
  // else `own` (two tiles write the same image).
  const float* unscaled = nullptr;
  const float* scales = nullptr;
  std::int64_t scale_stride = 0, channels = 0, scaled_stride = 0;
  float* scaled = nullptr;
  std::unique_ptr<float[]> own;
};

/// A depthwise conv (one input channel per output channel; 1-D or 2-D, undilated, stride 1
/// or 2) by kiln's own loops on kiln's layout: each plane copied into a zero-padded scratch
/// plane (for stride 2 along rows: each row's even columns, then its odd ones), then
/// vmath::depthwise_plane. With no reorder into oneDNN's blocked layout and back, which
/// around its depthwise kernel cost more than the kernel itself (MobileNetV3-Small: 0.44 ms
/// of reorders around 0.35 ms of `brdgmm_dw` a call).
struct Depthwise {
  std::int64_t planes = 0, channels = 0;  // N C, and C
  PaddedPlane plane;
  // Per block: a padded plane whose pad rows and columns stay zero (only input rows are
  // written into it).
  std::vector<std::unique_ptr<float[]>> scratch;
};

/// A pointwise conv and the depthwise conv that alone reads its output (`Launch::depthwise`)
/// as one kernel: per batch entry and band of output channels, the band's GEMM (w[band] x
/// x[n], oneDNN's sgemm) into a worker's scratch, the bias and the pointwise conv's epilogue
/// there, then the depthwise conv's planes of those channels from it, each copied into a
/// zero-padded plane as `Depthwise` does, and the depthwise conv's epilogue. The expanded
/// activation never leaves the cache: MobileNetV3-Small's first expansion writes 7 MiB at
/// batch 8, then a bias pass, a ReLU pass and the depthwise conv read it back from memory.
struct Expansion {
  std::int64_t n = 0, c = 0, m = 0, plane = 0;  // [n, c, plane] -> [n, m, plane] (pointwise)
  std::int64_t band = 0, bands = 0;             // channels a band, bands a batch entry
  PaddedPlane padded;                           // the depthwise conv's
  // Per block: a band of rows (band x plane), then a padded plane whose pads stay zero.
  std::vector<std::unique_ptr<float[]>> scratch;
};

/// A conv or conv_transpose launch's prepared state: its tiles, each with its primitive.
struct PreparedConv final : PreparedLaunch {
  static constexpr Kind kKind = Kind::conv;
  PreparedConv() : PreparedLaunch(kKind) {}
  std::vector<ConvTile> tiles;
  std::vector<dnnl::memory> weights;  // fixed weights reordered for oneDNN's kernel
  std::int64_t m = 0, out_plane = 0;
  std::int64_t out_rows = 1;  // a 2-D conv's output rows a plane (tiles may be bands of them)
  bool bf16 = false;          // input and weights multiplied as bfloat16 (`MatmulPrecision::bf16`)
  bool winograd = false;      // the tiles run Winograd's algorithm (`Launch::winograd`)
  std::unique_ptr<Depthwise> depthwise;         // or, without tiles, kiln's depthwise loops
  std::unique_ptr<FewChannelConv> few;          // or kiln's loops for few input channels
  std::unique_ptr<WinogradConv> kiln_winograd;  // or kiln's Winograd (`winograd` set too)
  std::unique_ptr<Expansion> expansion;         // or with its depthwise conv (`depthwise`)
  std::unique_ptr<BlockedExpansion> blocked;    // or so by oneDNN's blocked kernels
};

/// A conv's prepared state, its sizes from \p g, its kind of kernel for the caller to set.
std::unique_ptr<PreparedConv> prepared_for(const Geometry& g) {
  auto prepared = std::make_unique<PreparedConv>();
  prepared->m = g.m;
  prepared->out_plane = g.out_plane();
  return prepared;
}

/// Multiply-adds below which a conv is not split over more than one tile: 2^18, as
/// measured on MobileNetV3-Small at two threads (about 2.0 ms a call against 2.4-2.8 with
/// 2^20, at which most of its convs ran on one worker while the other waited; ResNet-18
/// unchanged).
constexpr std::int64_t kTileMacs = std::int64_t{1} << 18;

/// Output planes from which a 2-D conv with fewer batch entries than workers splits into
/// bands of output rows rather than output channels: each channel tile reorders the whole
/// input into oneDNN's blocked layout (and Winograd's transforms it whole), a row band only
/// its rows and a few more. ResNet-18's 56x56 layers at batch 1 took 0.87-0.94x their
/// one-thread time on two workers by channels.
constexpr std::int64_t kRowBandPlane = 1024;

/// The tiles of \p g over \p threads workers: batch entries first, then bands of output
/// rows (\p row_bands allowed and large planes) or output channels (at least 16 a tile) or
/// whole groups.
std::vector<ConvTile> plan_tiles(const Geometry& g, int threads, bool row_bands = false) {
  // In double: a hostile geometry's product may exceed int64.
  const double macs = static_cast<double>(g.n) * static_cast<double>(g.m) *
                      static_cast<double>(g.out_plane()) * static_cast<double>(g.c / g.groups) *
                      static_cast<double>(g.taps());
  const auto want = static_cast<std::int64_t>(
      std::clamp(macs / static_cast<double>(kTileMacs), 1.0, static_cast<double>(threads)));
  const std::int64_t unit = g.groups == 1 ? 1 : g.m / g.groups;  // channels that stay together
  const std::int64_t units = g.m / unit;
  const std::int64_t by_batch = std::min(g.n, want);
  const std::int64_t by_rows = row_bands && by_batch < want && g.spatial == 2 && g.groups == 1 &&
                                       g.out_plane() >= kRowBandPlane
                                   ? std::min((want + by_batch - 1) / by_batch, g.out[1] / 2)
                                   : 1;
  const std::int64_t by_channel =
      by_rows > 1 ? 1
      : by_batch >= want
          ? 1
          : std::clamp<std::int64_t>((want + by_batch - 1) / by_batch, 1,
                                     g.groups == 1 ? std::max<std::int64_t>(1, units / 16) : units);
  std::vector<ConvTile> tiles;
  for (std::int64_t b = 0; b < by_batch; ++b)
    for (std::int64_t c = 0; c < by_channel * by_rows; ++c)
      tiles.push_back({.n0 = g.n * b / by_batch,
                       .n1 = g.n * (b + 1) / by_batch,
                       .m0 = by_rows > 1 ? 0 : units * c / by_channel * unit,
                       .m1 = by_rows > 1 ? g.m : units * (c + 1) / by_channel * unit,
                       .oy0 = by_rows > 1 ? g.out[1] * c / by_rows : 0,
                       .oy1 = by_rows > 1 ? g.out[1] * (c + 1) / by_rows : 0,
                       .step = {},
                       .src_in = {},
                       .dst_out = {},
                       .from = nullptr,
                       .to = nullptr,
                       .rows = 0,
                       .run = 0,
                       .stride = 0,
                       .rounded = {},
                       .stream = {},
                       .images = {},
                       .bias = nullptr,
                       .out = nullptr,
                       .image_stride = 0,
                       .plane = 0,
                       .unscaled = nullptr,
                       .scales = nullptr,
                       .scale_stride = 0,
                       .channels = 0,
                       .scaled_stride = 0,
                       .scaled = nullptr,
                       .own = nullptr});
  return tiles;
}

/// \p d's dims, dense row-major, in \p type.
Desc dense(const Desc& d, dnnl::memory::data_type type) {
  const DnnlDims dims = d.dims();
  DnnlDims strides(dims.size(), 1);
  for (std::size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  return Desc(dims, type, strides);
}

/// Whether \p l may run Winograd's algorithm: asked for, an f32 conv with fixed weights
/// and 3x3 windows at stride 1, undilated and ungrouped (oneDNN's kernels need all of
/// that, and more of the shape: prepare falls back to the direct algorithm without one),
/// over whole vectors of 16 input and output channels (with fewer, transforming the tiles
/// costs more than the multiplies it saves).
bool winograd_candidate(const Launch& l, const Geometry& g, bool transposed, bool bf16) {
  return l.winograd && l.pack_rhs && !transposed && !bf16 && winograd_shape(g);
}

/// Builds \p tile's primitive and binds it to \p l's buffers; \p fixed weights are
/// reordered once into the layout the primitive prefers (into \p owned). With \p bf16
/// (fixed weights only) the input and weights are multiplied as bfloat16, summed and
/// written in f32: by bf16 units where the CPU has them, else as f32 over operands rounded
/// to bf16 (the same products). With \p winograd, Winograd's algorithm where oneDNN has a
/// kernel for the tile (cleared where it has none). \returns whether oneDNN chose its
/// reference implementation (tens of times slower than its others).
bool build_tile(const Launch& l, const Geometry& g, bool transposed, ConvTile& tile,
                std::vector<dnnl::memory>& owned, bool bf16, bool& winograd) {
  const dnnl::engine& engine = onednn::cpu_engine();
  const std::int64_t rows = tile.n1 - tile.n0, outs = tile.m1 - tile.m0;
  // A grouped tile reads its groups' input channels; an ungrouped one all of them.
  const std::int64_t c0 = g.groups == 1 ? 0 : tile.m0 / (g.m / g.groups) * (g.c / g.groups);
  const std::int64_t ins = g.groups == 1 ? g.c : outs / (g.m / g.groups) * (g.c / g.groups);
  Desc src = activation_desc(rows, ins, g.c, g.in, g.spatial),
       dst = activation_desc(rows, outs, g.m, g.out, g.spatial);
  DnnlDims pad_l = tail(g.pad_begin, g.spatial), pad_r = tail(g.pad_end, g.spatial);
  std::int64_t src_offset = 0, dst_offset = 0;  // a band's first row in its planes
  if (tile.oy1 != 0) {  // a band of output rows: the input rows it reads, the rest padding
    const std::size_t h = kMaxSpatial - 2;
    const std::int64_t first = tile.oy0 * g.stride[h] - g.pad_begin[h];
    const std::int64_t end =
        (tile.oy1 - 1) * g.stride[h] - g.pad_begin[h] + (g.kernel[h] - 1) * g.dilation[h] + 1;
    const std::int64_t in0 = std::max<std::int64_t>(0, first), in1 = std::min(g.in[h], end);
    pad_l[0] = in0 - first;
    pad_r[0] = end - in1;
    const auto band = [&](const Desc& whole, std::int64_t band_rows) {
      DnnlDims dims = whole.dims();
      dims[2] = band_rows;
      const auto& blocking = whole.data.format_desc.blocking;
      return Desc(dims, dnnl::memory::data_type::f32,
                  DnnlDims(blocking.strides, blocking.strides + whole.data.ndims));
    };
    src = band(src, in1 - in0);
    dst = band(dst, tile.oy1 - tile.oy0);
    src_offset = in0 * g.in[h + 1];
    dst_offset = tile.oy0 * g.out[h + 1];
  }
  const auto [weights, w_offset] = weights_desc(g, transposed, tile.m0, tile.m1);
  const bool fixed = l.pack_rhs;
  // With fixed weights every layout is oneDNN's choice: its direct kernels read blocked
  // activations (nChw16c) and weights; on kiln's plain layouts it has only im2col + GEMM
  // (2-3x slower for a 3x3 conv, ~100x for a depthwise one). The activations are then
  // reordered in and out on each call, the weights once.
  const bool native = bf16 && has_native_bf16(), emulated = bf16 && !native;
  const auto f32 = dnnl::memory::data_type::f32, bf16_type = dnnl::memory::data_type::bf16;
  const auto any = [](const Desc& d, dnnl::memory::data_type type) {
    return Desc(d.dims(), type, dnnl::memory::format_tag::any);
  };
  const dnnl::memory::data_type operands = native ? bf16_type : f32;
  const Desc asked = fixed ? any(weights, operands) : weights,
             asked_src = fixed ? any(src, operands) : src, asked_dst = fixed ? any(dst, f32) : dst;
  const bool has_bias = l.in.size() > 2;
  const Desc bias = has_bias ? Desc({outs}, dnnl::memory::data_type::f32, DnnlDims{1}) : Desc();
  const DnnlDims strides = tail(g.stride, g.spatial), dilates = tail(g.dilation, g.spatial, 1);
  const dnnl::primitive_attr attr = onednn::user_scratchpad();
  // A deconvolution's descriptor takes the same arguments as a convolution's.
  const auto make = [&]<class P>(P*, dnnl::algorithm algorithm) {
    const typename P::desc d =
        has_bias ? typename P::desc(dnnl::prop_kind::forward_inference, algorithm, asked_src, asked,
                                    bias, asked_dst, strides, dilates, pad_l, pad_r)
                 : typename P::desc(dnnl::prop_kind::forward_inference, algorithm, asked_src, asked,
                                    asked_dst, strides, dilates, pad_l, pad_r);
    const typename P::primitive_desc pd(d, attr, engine);
    tile.step.primitive = P(pd);
    return std::tuple{std::string(pd.impl_info_str()), pd.weights_desc(), pd.scratchpad_desc(),
                      pd.src_desc(), pd.dst_desc()};
  };
  const auto conv = [&] {
    constexpr auto* kConv = static_cast<dnnl::convolution_forward*>(nullptr);
    if (winograd) try {
        return make(kConv, dnnl::algorithm::convolution_winograd);
      } catch (const dnnl::error&) {
        winograd = false;  // no kernel for this shape here: the direct one
      }
    return make(kConv, dnnl::algorithm::convolution_direct);
  };
  const auto [impl, chosen, scratchpad, chosen_src, chosen_dst] =
      transposed ? make(static_cast<dnnl::deconvolution_forward*>(nullptr),
                        dnnl::algorithm::deconvolution_direct)
                 : conv();
  const auto at = [](const View& v, std::int64_t offset) {
    return reinterpret_cast<float*>(v.data) + offset;
  };
  // An activation as the primitive reads it: kiln's bytes, or a buffer in the layout it
  // chose with a reorder from (source) or into (destination) kiln's bytes.
  const auto bind = [&](int arg, const dnnl::memory& user, const Desc& chosen_desc,
                        onednn::Step& reorder) {
    if (arg == DNNL_ARG_SRC && emulated) {  // rounded to bf16 (by kiln), then into its layout
      tile.rounded = dnnl::memory(dense(user.get_desc(), f32), engine);
      tile.to = static_cast<float*>(tile.rounded.get_data_handle());
      tile.from = static_cast<const float*>(user.get_data_handle());
      tile.rows = rows;
      tile.run = ins * g.in_plane();
      tile.stride = g.c * g.in_plane();
      const dnnl::memory blocked(chosen_desc, engine);
      reorder = onednn::reorder_step(tile.rounded, blocked);
      tile.step.add(arg, blocked);
      return;
    }
    if (chosen_desc == user.get_desc()) {
      tile.step.add(arg, user);
      return;
    }
    const dnnl::memory blocked(chosen_desc, engine);
    reorder = arg == DNNL_ARG_SRC ? onednn::reorder_step(user, blocked)
                                  : onednn::reorder_step(blocked, user);
    tile.step.add(arg, blocked);
  };
  bind(DNNL_ARG_SRC,
       dnnl::memory(src, engine, at(l.in[0], (tile.n0 * g.c + c0) * g.in_plane() + src_offset)),
       chosen_src, tile.src_in);
  dnnl::memory given(weights, engine, at(l.in[1], w_offset));
  if (chosen != weights) {  // fixed weights only (others are asked for as they are)
    // (Copies: clang 14 lets no lambda capture a structured binding.)
    const Desc packed_desc = chosen, source_desc = weights;
    const auto pack = [&] {
      dnnl::memory from = given, packed(packed_desc, engine);
      dnnl::stream stream(engine);
      if (emulated) {  // rounded to bf16 first (native: the reorder into bf16 rounds)
        dnnl::memory rounded(dense(source_desc, f32), engine);
        dnnl::reorder(from, rounded).execute(stream, from, rounded);
        stream.wait();
        auto* values = static_cast<float*>(rounded.get_data_handle());
        vmath::round_bf16_f32(values, values, rounded.get_desc().get_size() / sizeof(float), 1.0f);
        from = rounded;
      }
      dnnl::reorder(from, packed).execute(stream, from, packed);
      stream.wait();
      return packed;
    };
    const dnnl::memory packed =
        l.packs != nullptr
            ? l.packs->find_or_pack(given.get_data_handle(), weights, chosen, bf16, pack)
            : pack();
    owned.push_back(packed);
    given = packed;
  }
  tile.step.add(DNNL_ARG_WEIGHTS, given);
  if (has_bias) tile.step.add(DNNL_ARG_BIAS, dnnl::memory(bias, engine, at(l.in[2], tile.m0)));
  bind(DNNL_ARG_DST,
       dnnl::memory(dst, engine,
                    at(l.out[0], (tile.n0 * g.m + tile.m0) * g.out_plane() + dst_offset)),
       chosen_dst, tile.dst_out);
  tile.step.add_scratchpad(scratchpad, engine);
  tile.stream = dnnl::stream(engine);
  return impl.rfind("ref", 0) == 0;
}

/// Output planes from which a pointwise conv runs as GEMMs on kiln's layout: there the
/// reorders into and out of oneDNN's blocked layout cost more than its conv kernel saves
/// (measured on MobileNetV3's 1x1 convs: 56x56 planes 71 us vs 223, 14x14 34-51 vs
/// 43-60, 7x7 67 vs 56, on an AMD EPYC). With several batch entries from 32: the conv's
/// reorders then stream the whole batch (on an Intel Xeon MobileNetV3's six 7x7 1x1 convs
/// at batch 8 took 2.8 ms as GEMMs, 3.4 as oneDNN convs; at batch 1 345 us vs 360).
constexpr std::int64_t kGemmPlane = 128, kGemmPlaneBatched = 32;

/// Whether \p g is a 1x1 conv over whole planes (no stride, padding or groups): per batch
/// entry the GEMM w [m, c] x [c, plane], with every operand as kiln lays it out.
bool pointwise(const Geometry& g) {
  for (std::size_t d = 0; d < kMaxSpatial; ++d)
    if (g.kernel[d] != 1 || g.stride[d] != 1 || g.pad_begin[d] != 0 || g.pad_end[d] != 0)
      return false;
  return g.groups == 1 && g.in_plane() == g.out_plane();
}

/// The operands of the multiply \p scale (see Launch::input_scale) as a conv's input of
/// \p shape ([N, C, spatial...]): which is the activation (of that shape), which the
/// scale ([N or 1, C, 1...]), and the scale's stride between batch entries (C or 0).
struct ScaleOperands {
  std::size_t x = 0, s = 1;
  std::int64_t stride = 0;
};
std::optional<ScaleOperands> scale_operands(const Launch& scale, Dims shape) {
  if (scale.in.size() != 2 || scale.out.size() != 1 || shape.size() < 3 ||
      !same_dims(scale.out[0].shape, shape))
    return std::nullopt;
  for (const std::size_t x : {0, 1}) {
    const Dims a = scale.in[x].shape, b = scale.in[1 - x].shape;
    if (!same_dims(a, shape) || b.size() != shape.size() || b[1] != shape[1] ||
        (b[0] != 1 && b[0] != shape[0]) || elements(b) == elements(a))
      continue;
    if (std::all_of(b.begin() + 2, b.end(), [](std::int64_t d) { return d == 1; }))
      return ScaleOperands{x, 1 - x, b[0] == 1 ? 0 : shape[1]};
  }
  return std::nullopt;
}

/// \p l (a pointwise conv, f32) as one oneDNN matmul per tile and batch entry, or null
/// when oneDNN has only its reference kernel for it. With `Launch::input_scale`, each
/// tile's matmuls read its scratch, where each image's input is scaled first.
std::unique_ptr<PreparedConv> prepare_pointwise(const Launch& l, const Geometry& g, int threads) {
  const dnnl::engine& engine = onednn::cpu_engine();
  const onednn::OneOpenMpThread one_thread;  // each tile runs on one worker
  auto prepared = prepared_for(g);
  prepared->tiles = plan_tiles(g, threads);
  const std::int64_t plane = g.out_plane();
  auto* x = reinterpret_cast<float*>(l.in[0].data);
  auto* w = reinterpret_cast<float*>(l.in[1].data);
  auto* out = reinterpret_cast<float*>(l.out[0].data);
  const auto f32 = dnnl::memory::data_type::f32;
  std::optional<ScaleOperands> scale;
  if (l.input_scale != nullptr && !(scale = scale_operands(*l.input_scale, l.in[0].shape)))
    throw InternalError(
        cat(l.view().describe(), ": its scaled input is not [N, C, ...] by [N, C, 1...]"));
  for (ConvTile& tile : prepared->tiles) {
    if (scale) {
      tile.unscaled = reinterpret_cast<const float*>(l.input_scale->in[scale->x].data);
      tile.scales = reinterpret_cast<const float*>(l.input_scale->in[scale->s].data);
      tile.scale_stride = scale->stride;
      tile.channels = g.c;
      if (tile.m0 == 0 && tile.m1 == g.m) {
        tile.scaled = x, tile.scaled_stride = g.c * plane;
      } else {
        tile.own = std::make_unique<float[]>(static_cast<std::size_t>(g.c * plane));
        tile.scaled = tile.own.get();
      }
    }
    const std::int64_t outs = tile.m1 - tile.m0;
    const Desc a({outs, g.c}, f32, DnnlDims{g.c, 1}), b({g.c, plane}, f32, DnnlDims{plane, 1}),
        c({outs, plane}, f32, DnnlDims{plane, 1});
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), onednn::user_scratchpad(),
                                          engine);
    if (std::string(pd.impl_info_str()).rfind("ref", 0) == 0) return nullptr;
    const dnnl::matmul primitive(pd);
    const dnnl::memory scratchpad(pd.scratchpad_desc(), engine);
    for (std::int64_t n = tile.n0; n < tile.n1; ++n) {
      onednn::Step& step = tile.images.emplace_back();
      step.primitive = primitive;
      step.add(DNNL_ARG_SRC, dnnl::memory(a, engine, w + tile.m0 * g.c));
      step.add(DNNL_ARG_WEIGHTS,
               dnnl::memory(b, engine,
                            scale ? tile.scaled + n * tile.scaled_stride : x + n * g.c * plane));
      step.add(DNNL_ARG_DST, dnnl::memory(c, engine, out + (n * g.m + tile.m0) * plane));
      if (pd.scratchpad_desc().get_size() > 0) step.add(DNNL_ARG_SCRATCHPAD, scratchpad);
    }
    tile.bias = l.in.size() > 2 ? reinterpret_cast<const float*>(l.in[2].data) + tile.m0 : nullptr;
    tile.out = out + (tile.n0 * g.m + tile.m0) * plane;
    tile.image_stride = g.m * plane;
    tile.plane = plane;
    tile.stream = dnnl::stream(engine);
  }
  return prepared;
}

/// Whether \p g is a depthwise conv kiln's loops run (see Depthwise): at most 2-D, one
/// input and one output channel per group, undilated, strides 1 or 2, output rows of at
/// least 16 (one vector; on MobileNetV3's 14- and 7-wide planes oneDNN's kernel, reorders
/// included, was faster than the idle lanes let kiln's be: 2.28 ms a call vs 2.45 with
/// 14 in, 3.0 with all) and a padded plane of at most 2^24 floats.
bool depthwise(const Geometry& g) {
  return g.groups == g.c && g.m == g.c && g.c != 0 && plane_conv_fits(g);
}

/// Whether \p g is a depthwise conv (one input and one output channel per group), 2-D.
bool depthwise_geometry(const Geometry& g) {
  return g.groups == g.c && g.m == g.c && g.c != 0 && g.spatial == 2;
}

/// \p g (a depthwise conv, see `depthwise`) by kiln's loops over planes, in blocks of at
/// least kTileMacs multiply-adds on up to \p threads workers.
std::unique_ptr<PreparedConv> prepare_depthwise(const Geometry& g, int threads) {
  auto d = std::make_unique<Depthwise>();
  d->planes = g.n * g.c;
  d->channels = g.c;
  d->plane = PaddedPlane(g);
  const double macs = static_cast<double>(d->planes) * static_cast<double>(g.out_plane()) *
                      static_cast<double>(g.taps());
  const auto blocks = static_cast<std::int64_t>(std::clamp(
      macs / static_cast<double>(kTileMacs), 1.0,
      std::min(static_cast<double>(std::max(threads, 1)), static_cast<double>(d->planes))));
  for (std::int64_t b = 0; b < blocks; ++b)
    d->scratch.push_back(std::make_unique<float[]>(
        static_cast<std::size_t>(d->plane.rows * d->plane.cols) + vmath::kDepthwiseSlack));
  auto prepared = prepared_for(g);
  prepared->depthwise = std::move(d);
  return prepared;
}

/// Channel \p c of a depthwise conv over one input plane \p in: copied into the zero-padded
/// \p padded, then the channel's taps (and bias) over it into \p out.
void depthwise_channel(const PaddedPlane& pp, const float* in, float* padded, const float* weights,
                       const float* bias, std::int64_t c, float* out) {
  pp.fill_rows(in, padded, 0, pp.rows, /*pad_rows_zero=*/true);
  vmath::depthwise_plane(padded, static_cast<std::size_t>(pp.cols), static_cast<std::size_t>(pp.sh),
                         pp.taps.data(), weights + c * pp.kh * pp.kw,
                         static_cast<std::size_t>(pp.kh), static_cast<std::size_t>(pp.kw),
                         bias != nullptr ? bias[c] : 0.0f, out, static_cast<std::size_t>(pp.oh),
                         static_cast<std::size_t>(pp.ow));
}

/// This block's planes of a depthwise conv, each followed by the epilogue (in cache).
void run_depthwise(const Launch& l, const Depthwise& d) {
  const auto* in = reinterpret_cast<const float*>(l.in[0].data);
  const auto* weights = reinterpret_cast<const float*>(l.in[1].data);
  const float* bias = l.in.size() > 2 ? reinterpret_cast<const float*>(l.in[2].data) : nullptr;
  auto* out = reinterpret_cast<float*>(l.out[0].data);
  float* plane = d.scratch[static_cast<std::size_t>(kiln::block_idx().x)].get();
  const PaddedPlane& pp = d.plane;
  const std::int64_t out_plane = pp.oh * pp.ow;
  const auto [first, last] = block_range(d.planes);
  // The epilogue runs over runs of planes of at least 8192 elements, while they are in
  // cache (per plane, small planes would pay its start-up each time).
  constexpr std::int64_t kEpilogueRun = 8192;
  std::int64_t pending = first;  // the first plane the epilogue has not run on
  for (std::int64_t p = first; p < last; ++p) {
    depthwise_channel(pp, in + p * pp.h * pp.w, plane, weights, bias, p % d.channels,
                      out + p * out_plane);
    if (l.epilogue != nullptr && ((p + 1 - pending) * out_plane >= kEpilogueRun || p + 1 == last)) {
      run_fused_f32_rows(*l.epilogue, pending * out_plane, 1, (p + 1 - pending) * out_plane, 0);
      pending = p + 1;
    }
  }
}

/// Adds bias[r] to each of \p count rows of \p plane floats from \p rows (a GEMM's output
/// in cache), by the vectorised loop (this file is built for any x86-64).
void add_row_bias(float* rows, const float* bias, std::int64_t count, std::int64_t plane) {
  for (std::int64_t r = 0; r < count; ++r)
    vmath::binary(vmath::Binary::add, rows + r * plane, 1, bias + r, 0, rows + r * plane,
                  static_cast<std::size_t>(plane));
}

/// Runs a pointwise tile's GEMMs, each followed by the bias on its rows (in cache).
/// Then \p epilogue (or null) on the same rows, image by image: a batch's outputs need not
/// fit in cache (MobileNetV3's first expansion at batch 8: 7 MiB).
bool run_pointwise(const ConvTile& tile, const Launch* epilogue) {
  for (std::size_t k = 0; k < tile.images.size(); ++k) {
    if (tile.scaled != nullptr) {  // the image's input scaled per channel (in cache)
      const std::int64_t image = tile.n0 + static_cast<std::int64_t>(k);
      const float* from = tile.unscaled + image * tile.channels * tile.plane;
      float* to = tile.scaled + image * tile.scaled_stride;
      for (std::int64_t c = 0; c < tile.channels; ++c)
        vmath::binary(vmath::Binary::mul, from + c * tile.plane, 1,
                      tile.scales + image * tile.scale_stride + c, 0, to + c * tile.plane,
                      static_cast<std::size_t>(tile.plane));
    }
    if (!tile.images[k].run(tile.stream) || dnnl_stream_wait(tile.stream.get()) != dnnl_success)
      return false;
    float* rows = tile.out + static_cast<std::int64_t>(k) * tile.image_stride;
    if (tile.bias != nullptr) add_row_bias(rows, tile.bias, tile.m1 - tile.m0, tile.plane);
    if (epilogue != nullptr) {
      const std::int64_t image = tile.n0 + static_cast<std::int64_t>(k);
      run_fused_f32_rows(*epilogue, image * tile.image_stride + tile.m0 * tile.plane, 1,
                         (tile.m1 - tile.m0) * tile.plane, 0);
    }
  }
  return true;
}

/// Floats of a band of an expansion's rows: with the padded plane and the depthwise conv's
/// outputs, within a core's L2 (512 KiB on the smallest seen here).
constexpr std::int64_t kExpansionBand = 32 * 1024;

/// Whether every view of \p l is f32.
bool all_f32(const Launch& l) {
  const auto f32 = [](const View& v) { return v.dtype == DType::f32; };
  return std::all_of(l.in.begin(), l.in.end(), f32) && std::all_of(l.out.begin(), l.out.end(), f32);
}

/// Whether kiln's loops take the expansion of \p pw (a pointwise conv) and \p dw (a
/// depthwise conv reading its output): the GEMM path's planes and kiln's depthwise loops.
bool kiln_expansion(const Launch& pw, const Launch& dw) {
  const Geometry g = window_geometry(pw, true);
  return pointwise(g) && g.out_plane() >= (g.n > 1 ? kGemmPlaneBatched : kGemmPlane) &&
         depthwise(window_geometry(dw, true));
}

/// \p l (a pointwise conv, see `pointwise`) with its depthwise conv \p dw (see
/// runs_with_depthwise) as an Expansion, in bands of about kExpansionBand floats, on up to
/// \p threads workers.
std::unique_ptr<PreparedConv> prepare_expansion(const Launch& l, const Launch& dw, int threads) {
  const Geometry g = window_geometry(l, true), gd = window_geometry(dw, true);
  auto e = std::make_unique<Expansion>();
  e->n = g.n, e->c = g.c, e->m = g.m, e->plane = g.out_plane();
  const std::int64_t bands =
      std::clamp<std::int64_t>((e->m * e->plane + kExpansionBand - 1) / kExpansionBand, 1, e->m);
  e->band = (e->m + bands - 1) / bands;
  e->bands = (e->m + e->band - 1) / e->band;
  e->padded = PaddedPlane(gd);
  const std::int64_t blocks = std::clamp<std::int64_t>(threads, 1, e->n * e->bands);
  const auto floats =
      static_cast<std::size_t>(e->band * e->plane + e->padded.rows * e->padded.cols) +
      vmath::kDepthwiseSlack;
  for (std::int64_t b = 0; b < blocks; ++b) e->scratch.push_back(std::make_unique<float[]>(floats));
  auto prepared = prepared_for(g);
  prepared->expansion = std::move(e);
  return prepared;
}

/// This block's (batch entry, band) pairs of an expansion (see Expansion).
void run_expansion(const Launch& l, const Expansion& e) {
  const Launch& dw = *l.depthwise;
  const auto* x = reinterpret_cast<const float*>(l.in[0].data);
  const auto* w = reinterpret_cast<const float*>(l.in[1].data);
  const float* bias = l.in.size() > 2 ? reinterpret_cast<const float*>(l.in[2].data) : nullptr;
  const auto* dw_w = reinterpret_cast<const float*>(dw.in[1].data);
  const float* dw_bias = dw.in.size() > 2 ? reinterpret_cast<const float*>(dw.in[2].data) : nullptr;
  auto* out = reinterpret_cast<float*>(dw.out[0].data);
  float* rows = e.scratch[static_cast<std::size_t>(kiln::block_idx().x)].get();
  float* plane = rows + e.band * e.plane;
  const PaddedPlane& pp = e.padded;
  const std::int64_t out_plane = pp.oh * pp.ow;
  // oneDNN's OpenMP regions use this thread only: the blocks are the parallelism.
  if (omp_get_max_threads() != 1) omp_set_num_threads(1);
  const auto [first, last] = block_range(e.n * e.bands);
  for (std::int64_t u = first; u < last; ++u) {
    const std::int64_t n = u / e.bands, m0 = u % e.bands * e.band;
    const std::int64_t count = std::min(e.band, e.m - m0);
    if (dnnl_sgemm('N', 'N', count, e.plane, e.c, 1.0f, w + m0 * e.c, e.c, x + n * e.c * e.plane,
                   e.plane, 0.0f, rows, e.plane) != dnnl_success)
      throw DeviceError(cat(l.view().describe(), ": oneDNN's sgemm failed"));
    if (bias != nullptr) add_row_bias(rows, bias + m0, count, e.plane);
    const std::int64_t at = (n * e.m + m0) * e.plane;
    if (l.epilogue != nullptr)  // on the band where it is, not where its views say
      run_fused_f32_rows(*l.epilogue, at, 1, count * e.plane, 0,
                         RowsAt{.matmul_out = l.out[0].data, .origin = at, .rows = rows});
    for (std::int64_t r = 0; r < count; ++r)
      depthwise_channel(pp, rows + r * e.plane, plane, dw_w, dw_bias, m0 + r,
                        out + (n * e.m + m0 + r) * out_plane);
    if (dw.epilogue != nullptr)
      run_fused_f32_rows(*dw.epilogue, (n * e.m + m0) * out_plane, 1, count * out_plane, 0);
  }
}

/// Whether oneDNN has a Winograd kernel for the whole of \p g (f32, any layouts): where it
/// has none (oneDNN 2.6: below AVX-512) kiln's own runs instead.
bool onednn_has_winograd(const Geometry& g) {
  const auto f32 = dnnl::memory::data_type::f32;
  const auto any = dnnl::memory::format_tag::any;
  const DnnlDims space_in = tail(g.in, g.spatial), space_out = tail(g.out, g.spatial);
  DnnlDims src{g.n, g.c}, dst{g.n, g.m}, w{g.m, g.c};
  src.insert(src.end(), space_in.begin(), space_in.end());
  dst.insert(dst.end(), space_out.begin(), space_out.end());
  w.insert(w.end(), {3, 3});
  try {
    const dnnl::convolution_forward::primitive_desc pd(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                        dnnl::algorithm::convolution_winograd, Desc(src, f32, any),
                                        Desc(w, f32, any), Desc(dst, f32, any),
                                        tail(g.stride, g.spatial), tail(g.dilation, g.spatial, 1),
                                        tail(g.pad_begin, g.spatial), tail(g.pad_end, g.spatial)),
        onednn::cpu_engine());
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

void prepare_window_conv(Launch& l, int threads, bool transposed) {
  const Geometry g = window_geometry(l, true);
  const bool f32 =
      std::all_of(l.in.begin(), l.in.end(), [](const View& v) { return v.dtype == DType::f32; });
  const std::int64_t outputs = elements(l.out[0].shape);
  l.blocks =
      static_cast<std::uint32_t>(std::clamp<std::int64_t>(outputs / 1024, 1, std::max(threads, 1)));
  if (!f32 || outputs == 0 || elements(l.in[0].shape) == 0) return;  // direct loops
  // Tiles of several workers, unless oneDNN has only its reference kernel for their
  // slices: then one tile (the whole problem is a plain layout). In bf16 (fixed weights,
  // `MatmulPrecision::bf16`) unless oneDNN has only its reference kernel or none for that:
  // then f32.
  std::unique_ptr<PreparedConv> prepared;
  const bool want_bf16 = l.bf16 && l.pack_rhs;
  if (l.depthwise != nullptr) {  // the planner checked runs_with_depthwise
    if (auto blocked = prepare_blocked_expansion(l, threads)) {
      prepared = prepared_for(g);
      l.blocks = static_cast<std::uint32_t>(blocked->streams.size());
      prepared->blocked = std::move(blocked);
    } else if (kiln_expansion(l, *l.depthwise)) {
      prepared = prepare_expansion(l, *l.depthwise, threads);
      l.blocks = static_cast<std::uint32_t>(prepared->expansion->scratch.size());
    } else {
      throw InternalError(cat(l.view().describe(), ": no kernel for its expansion"));
    }
    l.prepared = std::move(prepared);
    return;
  }
  if (l.input_scale != nullptr) {  // the planner checked runs_with_input_scale
    try {
      prepared = prepare_pointwise(l, g, threads);
    } catch (const dnnl::error& e) {
      throw DeviceError(cat(l.view().describe(), ": oneDNN cannot run its GEMMs (", e.what(), ")"));
    }
    if (prepared == nullptr)
      throw InternalError(cat(l.view().describe(), ": no GEMM kernel for its scaled input"));
    l.blocks = static_cast<std::uint32_t>(prepared->tiles.size());
    l.prepared = std::move(prepared);
    return;
  }
  if (!transposed && !want_bf16 && depthwise(g)) {
    prepared = prepare_depthwise(g, threads);
    l.blocks = static_cast<std::uint32_t>(prepared->depthwise->scratch.size());
    l.prepared = std::move(prepared);
    return;
  }
  if (!transposed && !want_bf16 && few_channels(g)) {
    prepared = prepared_for(g);
    prepared->few = prepare_few_channels(g, threads);
    l.blocks = static_cast<std::uint32_t>(prepared->few->scratch.size());
    l.prepared = std::move(prepared);
    return;
  }
  if (!transposed && !want_bf16 && pointwise(g) &&
      g.out_plane() >= (g.n > 1 ? kGemmPlaneBatched : kGemmPlane)) {
    try {
      prepared = prepare_pointwise(l, g, threads);
    } catch (const dnnl::error&) {
      prepared = nullptr;  // the conv primitives below, or the direct loops
    }
    if (prepared != nullptr) {
      l.blocks = static_cast<std::uint32_t>(prepared->tiles.size());
      l.prepared = std::move(prepared);
      return;
    }
  }
  if (const std::int64_t tile = winograd_tile(g);
      tile != 0 && winograd_candidate(l, g, transposed, want_bf16) && !onednn_has_winograd(g)) {
    try {
      prepared = prepared_for(g);
      prepared->kiln_winograd = prepare_winograd(l, g, tile, threads);
      prepared->winograd = true;
      l.blocks = static_cast<std::uint32_t>(prepared->kiln_winograd->blocks.size());
      l.prepared = std::move(prepared);
      return;
    } catch (const dnnl::error&) {
      prepared = nullptr;  // no GEMM for it here: oneDNN's conv primitives below
    }
  }
  for (const bool bf16 : {want_bf16, false}) {
    bool reference = false, failed = false;
    for (const int workers : {threads, 1}) {
      // Every tile by Winograd's algorithm, or none: a tile without a kernel for it makes the
      // whole conv direct (its outputs all rounded the same way).
      bool winograd = winograd_candidate(l, g, transposed, bf16);
      do {
        prepared = prepared_for(g);
        // Row bands with fixed weights (the activations then reordered, whatever their
        // strides) in f32 (emulated bf16 rounds whole planes).
        prepared->tiles = plan_tiles(g, workers, l.pack_rhs && !bf16 && !transposed);
        prepared->out_rows = g.spatial == 2 ? g.out[kMaxSpatial - 2] : 1;
        prepared->bf16 = bf16;
        prepared->winograd = winograd;
        reference = false;
        try {
          const onednn::OneOpenMpThread one_thread;  // each tile runs on one worker
          for (ConvTile& tile : prepared->tiles) {
            reference =
                build_tile(l, g, transposed, tile, prepared->weights, bf16, winograd) || reference;
            if (winograd != prepared->winograd) break;  // and again, directly
          }
        } catch (const dnnl::error&) {
          failed = true;
        }
      } while (!failed && winograd != prepared->winograd);
      if (failed) break;
      if (!reference || prepared->tiles.size() == 1) break;
    }
    if (!bf16 && failed) return;  // no primitive for it on this CPU: the direct loops compute it
    if (!failed && !(bf16 && reference)) break;
  }
  l.blocks = static_cast<std::uint32_t>(prepared->tiles.size());
  l.prepared = std::move(prepared);
}

void run_window_conv(const Launch& l, bool transposed) {
  const PreparedConv* p = l.prepared_as<PreparedConv>();
  if (p == nullptr) {
    direct_conv(l, transposed);
    return;
  }
  if (p->depthwise != nullptr) {
    run_depthwise(l, *p->depthwise);
    return;
  }
  if (p->expansion != nullptr) {
    run_expansion(l, *p->expansion);
    return;
  }
  if (p->blocked != nullptr) {
    run_blocked_expansion(l, *p->blocked);
    return;
  }
  if (p->few != nullptr) {
    run_few_channels(l, *p->few);
    return;
  }
  if (p->kiln_winograd != nullptr) {
    if (!run_winograd(l, *p->kiln_winograd))
      throw DeviceError(cat(l.view().describe(), ": oneDNN failed on a Winograd GEMM"));
    return;
  }
  // This thread's OpenMP regions (oneDNN's) use this thread only: the tiles are the
  // parallelism. Checked per call, since the calling thread may be anyone's.
  if (omp_get_max_threads() != 1) omp_set_num_threads(1);
  const auto [first, last] = block_range(static_cast<std::int64_t>(p->tiles.size()));
  for (std::int64_t t = first; t < last; ++t) {
    const ConvTile& tile = p->tiles[static_cast<std::size_t>(t)];
    for (std::int64_t r = 0; r < tile.rows; ++r)  // emulated bf16: the input rounded
      vmath::round_bf16_f32(tile.from + r * tile.stride, tile.to + r * tile.run,
                            static_cast<std::size_t>(tile.run), 1.0f);
    const bool pointwise_tile = !tile.images.empty();
    const bool ran = pointwise_tile ? run_pointwise(tile, l.epilogue)
                                    : tile.src_in.run(tile.stream) && tile.step.run(tile.stream) &&
                                          tile.dst_out.run(tile.stream) &&
                                          dnnl_stream_wait(tile.stream.get()) == dnnl_success;
    if (!ran)
      throw DeviceError(
          cat(l.view().describe(), ": oneDNN failed on tile ", t, " of ", p->tiles.size()));
    if (l.epilogue != nullptr && !pointwise_tile && tile.oy1 != 0) {  // rows of every plane
      const std::int64_t width = p->out_plane / p->out_rows;
      run_fused_f32_rows(*l.epilogue, tile.n0 * p->m * p->out_plane + tile.oy0 * width,
                         (tile.n1 - tile.n0) * p->m, (tile.oy1 - tile.oy0) * width, p->out_plane);
    } else if (l.epilogue != nullptr && !pointwise_tile) {
      const std::int64_t row = p->m * p->out_plane;
      run_fused_f32_rows(*l.epilogue, tile.n0 * row + tile.m0 * p->out_plane, tile.n1 - tile.n0,
                         (tile.m1 - tile.m0) * p->out_plane, row);
    }
  }
}

}  // namespace

WindowGeometry window_geometry(const Launch& l, bool kernel_from_w) {
  const ir::OpView op = l.view();
  const View &x = l.in[0], &o = l.out[0];
  WindowGeometry g;
  g.spatial = x.shape.size() - 2;
  g.n = x.shape[0];
  g.c = x.shape[1];
  g.m = o.shape[1];
  if (const ir::Attribute* groups = op.find("groups")) g.groups = groups->as_int();
  const Index stride = op.find("strides")->as_int_array(),
              dilation = op.find("dilations")->as_int_array(),
              pads = op.find("pads")->as_int_array(),
              kernel = kernel_from_w ? Index(l.in[1].shape.begin() + 2, l.in[1].shape.end())
                                     : op.find("kernel_shape")->as_int_array();
  const std::size_t lead = kMaxSpatial - g.spatial;
  for (std::size_t d = 0; d < g.spatial; ++d) {
    g.in[lead + d] = x.shape[2 + d];
    g.out[lead + d] = o.shape[2 + d];
    g.kernel[lead + d] = kernel[d];
    g.stride[lead + d] = stride[d];
    g.dilation[lead + d] = dilation[d];
    g.pad_begin[lead + d] = pads[d];
    g.pad_end[lead + d] = pads[g.spatial + d];
  }
  return g;
}

bool runs_with_depthwise(const Launch& pw, const Launch& dw, bool blocked_allowed) {
  if (pw.view().name() != "kiln.conv" || dw.view().name() != "kiln.conv" || pw.in.size() < 2 ||
      dw.in.size() < 2 || pw.out.size() != 1 || dw.out.size() != 1 || !all_f32(pw) || !all_f32(dw))
    return false;
  for (const Launch* l : {&pw, &dw})
    for (const View& v : l->in)
      if (!v.strides.empty() || elements(v.shape) == 0) return false;
  const Geometry g = window_geometry(pw, true), gd = window_geometry(dw, true);
  if (!depthwise_geometry(gd) || gd.n != g.n || gd.c != g.m || gd.in != g.out) return false;
  return kiln_expansion(pw, dw) ||
         (blocked_allowed && g.groups == 1 && blocked_expansion_fits(pw, dw));
}

bool runs_with_input_scale(const Launch& conv, const Launch& scale) {
  if (conv.view().name() != "kiln.conv" || conv.in.size() < 2 || conv.out.size() != 1 ||
      !all_f32(conv) || !all_f32(scale))
    return false;
  for (const Launch* l : {&conv, &scale})
    for (const View& v : l->in)
      if (!v.strides.empty() || elements(v.shape) == 0) return false;
  const Geometry g = window_geometry(conv, true);
  return pointwise(g) && g.out_plane() >= (g.n > 1 ? kGemmPlaneBatched : kGemmPlane) &&
         scale_operands(scale, conv.in[0].shape).has_value();
}

bool conv_in_bf16(const Launch& l) {
  const PreparedConv* p = l.prepared_as<PreparedConv>();
  return p != nullptr && p->bf16;
}

void conv(const Launch& l) { run_window_conv(l, false); }
void conv_transpose(const Launch& l) { run_window_conv(l, true); }
void prepare_conv(Launch& l, int threads) { prepare_window_conv(l, threads, false); }
void prepare_conv_transpose(Launch& l, int threads) { prepare_window_conv(l, threads, true); }

}  // namespace kiln::compiler::kernel

namespace kiln::compiler {

bool in_winograd(const Launch& launch) {
  const kernel::PreparedConv* p = launch.prepared_as<kernel::PreparedConv>();
  return p != nullptr && p->winograd;
}

}  // namespace kiln::compiler
