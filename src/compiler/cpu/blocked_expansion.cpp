// An expansion by oneDNN's conv kernels on their blocked layout (see blocked_expansion.hpp).

#include "compiler/cpu/blocked_expansion.hpp"

#include <omp.h>

#include <algorithm>
#include <optional>
#include <string>

#include "compiler/cpu/conv_descs.hpp"
#include "compiler/cpu/kernel_support.hpp"
#include "compiler/cpu/weight_packs.hpp"
#include "core/str.hpp"
#include "kiln/core/error.hpp"

namespace kiln::compiler::kernel {

namespace {

using kiln::detail::cat;
constexpr auto kF32 = dnnl::memory::data_type::f32;
constexpr auto kAny = dnnl::memory::format_tag::any;

/// The two primitives of a slice of output channels [m0, m1): the first conv reading
/// one batch entry (kiln's layout or its own) and writing oneDNN's blocked layout, and the
/// depthwise conv reading that layout as it is.
struct Slice {
  dnnl::convolution_forward::primitive_desc first, depthwise;
  dnnl::convolution_forward first_conv, depthwise_conv;
};

Desc any_of(const DnnlDims& dims) { return Desc(dims, kF32, kAny); }

dnnl::convolution_forward::primitive_desc conv_pd(const Desc& src, const Desc& weights, bool bias,
                                                  const Desc& dst, const WindowGeometry& g) {
  const DnnlDims strides = tail(g.stride, 2), dilates = tail(g.dilation, 2, 1),
                 pad_l = tail(g.pad_begin, 2), pad_r = tail(g.pad_end, 2);
  const auto kind = dnnl::prop_kind::forward_inference;
  const auto algorithm = dnnl::algorithm::convolution_direct;
  const dnnl::convolution_forward::desc d =
      bias ? dnnl::convolution_forward::desc(
                 kind, algorithm, src, weights,
                 Desc({dst.dims()[1]}, kF32, dnnl::memory::format_tag::x), dst, strides, dilates,
                 pad_l, pad_r)
           : dnnl::convolution_forward::desc(kind, algorithm, src, weights, dst, strides, dilates,
                                             pad_l, pad_r);
  return {d, onednn::user_scratchpad(), onednn::cpu_engine()};
}

/// Whether \p pd runs a kernel other than oneDNN's reference one and writes its output
/// unpadded (the epilogues run over exactly the output's elements).
bool usable(const dnnl::convolution_forward::primitive_desc& pd) {
  const DnnlDims dims = pd.dst_desc().dims();
  std::int64_t elements = 1;
  for (std::int64_t d : dims) elements *= d;
  return std::string(pd.impl_info_str()).rfind("ref", 0) != 0 &&
         pd.dst_desc().get_size() == static_cast<std::size_t>(elements) * sizeof(float);
}

/// The slice [m0, m1) of the expansion \p g (first) then \p gd (depthwise), or nullopt
/// when oneDNN has no usable kernel for it (see `usable`).
std::optional<Slice> slice_of(const WindowGeometry& g, const WindowGeometry& gd, bool bias,
                              bool dw_bias, std::int64_t m0, std::int64_t m1) {
  const std::int64_t outs = m1 - m0;
  const DnnlDims in = tail(g.in, 2), mid = tail(g.out, 2), kernel = tail(g.kernel, 2),
                 out = tail(gd.out, 2), dw_kernel = tail(gd.kernel, 2);
  try {
    const auto first =
        conv_pd(any_of({1, g.c, in[0], in[1]}), any_of({outs, g.c, kernel[0], kernel[1]}), bias,
                any_of({1, outs, mid[0], mid[1]}), g);
    if (!usable(first)) return std::nullopt;
    const auto depthwise =
        conv_pd(first.dst_desc(), any_of({outs, 1, 1, dw_kernel[0], dw_kernel[1]}), dw_bias,
                any_of({1, outs, out[0], out[1]}), gd);
    if (!usable(depthwise) || depthwise.src_desc() != first.dst_desc()) return std::nullopt;
    return Slice{first, depthwise, dnnl::convolution_forward(first),
                 dnnl::convolution_forward(depthwise)};
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
}

float* floats(const View& v, std::int64_t offset) {
  return reinterpret_cast<float*>(v.data) + offset;
}

/// \p weights (kiln's layout, channels [m0, m1) of \p g) in the layout \p chosen, reordered
/// once: through \p l's packs (shared by every plan of the callable) when it has them.
dnnl::memory packed_weights(const Launch& l, const WindowGeometry& g, std::int64_t m0,
                            std::int64_t m1, const Desc& chosen) {
  const auto [source, offset] = weights_desc(g, false, m0, m1);
  const dnnl::engine& engine = onednn::cpu_engine();
  const dnnl::memory given(source, engine, floats(l.in[1], offset));
  const Desc source_desc = source, chosen_desc = chosen;
  const auto pack = [&] {
    dnnl::memory from = given, packed(chosen_desc, engine);
    dnnl::stream stream(engine);
    dnnl::reorder(from, packed).execute(stream, from, packed);
    stream.wait();
    return packed;
  };
  return l.packs != nullptr
             ? l.packs->find_or_pack(given.get_data_handle(), source_desc, chosen_desc, false, pack)
             : pack();
}

/// One execution of \p conv (the conv launch \p l, geometry \p g, described by \p pd) for
/// output channels [m0, m1): \p src to \p dst, with its weights packed and its bias.
onednn::Step conv_step(const dnnl::convolution_forward::primitive_desc& pd,
                       const dnnl::convolution_forward& conv, const Launch& l,
                       const WindowGeometry& g, std::int64_t m0, std::int64_t m1,
                       const dnnl::memory& src, const dnnl::memory& dst) {
  const dnnl::engine& engine = onednn::cpu_engine();
  onednn::Step step;
  step.primitive = conv;
  step.add(DNNL_ARG_SRC, src);
  step.add(DNNL_ARG_WEIGHTS, packed_weights(l, g, m0, m1, pd.weights_desc()));
  if (l.in.size() > 2)
    step.add(DNNL_ARG_BIAS, dnnl::memory(pd.bias_desc(), engine, floats(l.in[2], m0)));
  step.add(DNNL_ARG_DST, dst);
  step.add_scratchpad(pd.scratchpad_desc(), engine);
  return step;
}

/// prepare_blocked_expansion's work (oneDNN's errors left to it).
std::unique_ptr<BlockedExpansion> prepare_tiles(const Launch& l, int threads) {
  const Launch& dw = *l.depthwise;
  if (!l.pack_rhs || !dw.pack_rhs || l.in[0].shape.size() != 4 ||
      !only_single_values_besides(l.epilogue, l.out[0].data) ||
      !only_single_values_besides(dw.epilogue, dw.out[0].data))
    return nullptr;
  const WindowGeometry g = window_geometry(l, true), gd = window_geometry(dw, true);
  const bool bias = l.in.size() > 2, dw_bias = dw.in.size() > 2;
  const onednn::OneOpenMpThread one_thread;  // each tile runs on one worker
  // One tile per batch entry, or slices of channels (multiples of 16, so that both blocked
  // layouts stay unpadded) until every worker has one.
  std::int64_t slices = 1;
  if (g.n < threads && g.m >= 32) slices = std::min((threads + g.n - 1) / g.n, g.m / 16);
  std::int64_t width = slices == 1 ? g.m : (g.m / slices + 15) / 16 * 16;
  // The primitives of a slice of `width` channels, and of the last one if it is narrower;
  // one slice of every channel where oneDNN has no usable kernel for those (the planner's
  // blocked_expansion_fits checked that one).
  const std::int64_t last_width = g.m - (g.m - 1) / width * width;
  std::optional<Slice> full = slice_of(g, gd, bias, dw_bias, 0, width),
                       narrow = last_width == width
                                    ? full
                                    : slice_of(g, gd, bias, dw_bias, g.m - last_width, g.m);
  if (!full || !narrow) {
    width = g.m;
    full = narrow = slice_of(g, gd, bias, dw_bias, 0, g.m);
    if (!full) return nullptr;
  }
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
  for (std::int64_t m0 = 0; m0 < g.m; m0 += width)
    ranges.emplace_back(m0, std::min(g.m, m0 + width));
  const dnnl::engine& engine = onednn::cpu_engine();
  auto e = std::make_unique<BlockedExpansion>();
  e->m = g.m, e->plane = g.out_plane(), e->out_plane = gd.out_plane();
  const std::int64_t tiles = g.n * static_cast<std::int64_t>(ranges.size());
  const std::int64_t blocks = std::clamp<std::int64_t>(threads, 1, tiles);
  const Slice& widest = *full;
  // Per block: the input in the first conv's layout, its output, the depthwise conv's.
  std::vector<dnnl::memory> input, expanded, result;
  for (std::int64_t b = 0; b < blocks; ++b) {
    input.emplace_back(widest.first.src_desc(), engine);
    expanded.emplace_back(widest.first.dst_desc(), engine);
    result.emplace_back(widest.depthwise.dst_desc(), engine);
    e->streams.emplace_back(engine);
  }
  e->owned.insert(e->owned.end(), input.begin(), input.end());
  e->owned.insert(e->owned.end(), expanded.begin(), expanded.end());
  e->owned.insert(e->owned.end(), result.begin(), result.end());
  // The final values: the depthwise conv's epilogue's output, or its own.
  const View& final_out = dw.epilogue != nullptr ? dw.epilogue->out[0] : dw.out[0];
  // Tile t runs on the block whose block_range holds it.
  std::vector<std::size_t> block_of(static_cast<std::size_t>(tiles));
  for (std::int64_t b = 0; b < blocks; ++b)
    for (std::int64_t t = tiles * b / blocks; t < tiles * (b + 1) / blocks; ++t)
      block_of[static_cast<std::size_t>(t)] = static_cast<std::size_t>(b);
  for (std::int64_t t = 0; t < tiles; ++t) {
    const std::size_t b = block_of[static_cast<std::size_t>(t)];
    const auto [m0, m1] = ranges[static_cast<std::size_t>(t) % ranges.size()];
    const Slice& kind = m1 - m0 == width ? *full : *narrow;
    BlockedExpansion::Tile& tile = e->tiles.emplace_back();
    tile.n = t / static_cast<std::int64_t>(ranges.size()), tile.m0 = m0, tile.m1 = m1;
    const dnnl::memory x(activation_desc(1, g.c, g.c, g.in, 2), engine,
                         floats(l.in[0], tile.n * g.c * g.in_plane()));
    dnnl::memory src = x;
    if (kind.first.src_desc() != x.get_desc()) {
      src = dnnl::memory(kind.first.src_desc(), engine, input[b].get_data_handle());
      tile.in = onednn::reorder_step(x, src);
    }
    const dnnl::memory mid(kind.first.dst_desc(), engine, expanded[b].get_data_handle()),
        last(kind.depthwise.dst_desc(), engine, result[b].get_data_handle());
    tile.expanded = static_cast<float*>(mid.get_data_handle());
    tile.result = static_cast<float*>(last.get_data_handle());
    tile.first = conv_step(kind.first, kind.first_conv, l, g, m0, m1, src, mid);
    tile.depthwise = conv_step(kind.depthwise, kind.depthwise_conv, dw, gd, m0, m1, mid, last);
    const dnnl::memory y(activation_desc(1, m1 - m0, g.m, gd.out, 2), engine,
                         floats(final_out, (tile.n * g.m + m0) * gd.out_plane()));
    tile.out = onednn::reorder_step(last, y);
  }
  return e;
}

}  // namespace

bool only_single_values_besides(const Launch* epilogue, const std::byte* producer_out) {
  if (epilogue == nullptr) return true;
  return std::all_of(epilogue->in.begin(), epilogue->in.end(), [&](const View& v) {
    return v.data == producer_out || elements(v.shape) == 1;
  });
}

bool blocked_expansion_fits(const Launch& first, const Launch& depthwise) {
  if (first.in[0].shape.size() != 4) return false;
  const WindowGeometry g = window_geometry(first, true), gd = window_geometry(depthwise, true);
  return slice_of(g, gd, first.in.size() > 2, depthwise.in.size() > 2, 0, g.m).has_value();
}

std::unique_ptr<BlockedExpansion> prepare_blocked_expansion(const Launch& l, int threads) {
  try {
    return prepare_tiles(l, threads);
  } catch (const dnnl::error& e) {  // out of memory for the scratch, say
    throw DeviceError(cat(l.view().describe(), ": oneDNN could not prepare its expansion with ",
                          l.depthwise->view().describe(), ": ", e.what()));
  }
}

void run_blocked_expansion(const Launch& l, const BlockedExpansion& e) {
  const Launch& dw = *l.depthwise;
  const dnnl::stream& stream = e.streams[static_cast<std::size_t>(kiln::block_idx().x)];
  // oneDNN's OpenMP regions use this thread only: the tiles are the parallelism.
  if (omp_get_max_threads() != 1) omp_set_num_threads(1);
  const auto run = [&](const onednn::Step& step) {
    if (!step.run(stream) || dnnl_stream_wait(stream.get()) != dnnl_success)
      throw DeviceError(cat(l.view().describe(), ": oneDNN failed on an expansion"));
  };
  const auto [first, last] = block_range(static_cast<std::int64_t>(e.tiles.size()));
  for (std::int64_t t = first; t < last; ++t) {
    const BlockedExpansion::Tile& tile = e.tiles[static_cast<std::size_t>(t)];
    const std::int64_t outs = tile.m1 - tile.m0;
    run(tile.in);
    run(tile.first);
    // The epilogues over the blocked buffers: single values besides the conv's output, so
    // the order of the elements does not matter.
    if (l.epilogue != nullptr) {
      const std::int64_t at = (tile.n * e.m + tile.m0) * e.plane;
      run_fused_f32_rows(*l.epilogue, at, 1, outs * e.plane, 0,
                         RowsAt{.matmul_out = l.out[0].data, .origin = at, .rows = tile.expanded});
    }
    run(tile.depthwise);
    if (dw.epilogue != nullptr) {
      const std::int64_t at = (tile.n * e.m + tile.m0) * e.out_plane;
      run_fused_f32_rows(*dw.epilogue, at, 1, outs * e.out_plane, 0,
                         RowsAt{.matmul_out = dw.out[0].data, .origin = at, .rows = tile.result});
    }
    run(tile.out);
  }
}

}  // namespace kiln::compiler::kernel
