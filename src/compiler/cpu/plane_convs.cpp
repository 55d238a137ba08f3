#include "compiler/cpu/plane_convs.hpp"

#include <algorithm>
#include <cstring>

#include "compiler/cpu/vector_math.hpp"

namespace kiln::compiler::kernel {

PaddedPlane::PaddedPlane(const WindowGeometry& g)
    : h(g.in[1]),
      w(g.in[2]),
      oh(g.out[1]),
      ow(g.out[2]),
      kh(g.kernel[1]),
      kw(g.kernel[2]),
      sh(g.stride[1]),
      sw(g.stride[2]),
      pad_top(g.pad_begin[1]),
      pad_left(g.pad_begin[2]),
      rows((oh - 1) * sh + kh),
      cols((ow - 1) * sw + kw),
      even(sw == 2 ? (cols + 1) / 2 : cols) {
  for (std::int64_t kx = 0; kx < kw; ++kx)
    taps.push_back(static_cast<std::size_t>(sw == 1 ? kx : kx / 2 + (kx % 2) * even));
}

void PaddedPlane::fill_rows(const float* from, float* to, std::int64_t first, std::int64_t last,
                            bool pad_rows_zero) const {
  // The padded rows [in0, in1) of [first, last) hold input rows; the others are zero.
  const std::int64_t in0 = std::clamp(pad_top, first, last);
  const std::int64_t in1 = std::clamp(pad_top + h, in0, last);
  if (!pad_rows_zero) {
    std::memset(to, 0, static_cast<std::size_t>((in0 - first) * cols) * sizeof(float));
    std::memset(to + (in1 - first) * cols, 0,
                static_cast<std::size_t>((last - in1) * cols) * sizeof(float));
  }
  if (in0 == in1) return;
  // The input columns that land inside the padded plane: x in column x + pad_left, which for
  // stride 2 is in the even half or in the odd one.
  const std::int64_t copied = std::clamp<std::int64_t>(cols - pad_left, 0, w);
  std::int64_t at = pad_left, at_odd = 0;
  if (sw == 2) {
    const std::int64_t half = pad_left / 2;
    const bool shifted = pad_left % 2 != 0;  // even x in odd columns, odd x in even ones
    at = shifted ? even + half : half;
    at_odd = shifted ? half + 1 : even + half;
  }
  vmath::copy_rows(from + (in0 - pad_top) * w, static_cast<std::size_t>(w),
                   static_cast<std::size_t>(copied), static_cast<std::size_t>(in1 - in0),
                   to + (in0 - first) * cols, static_cast<std::size_t>(cols),
                   static_cast<std::size_t>(at), static_cast<std::size_t>(at_odd), sw == 2);
}

bool plane_conv_fits(const WindowGeometry& g) {
  if (g.spatial > 2 || g.out[2] < 16) return false;
  for (std::size_t d = 0; d < WindowGeometry::kMaxSpatial; ++d)
    if (g.dilation[d] != 1 || (g.stride[d] != 1 && g.stride[d] != 2)) return false;
  const double rows = static_cast<double>(g.out[1] - 1) * static_cast<double>(g.stride[1]) +
                      static_cast<double>(g.kernel[1]),
               cols = static_cast<double>(g.out[2] - 1) * static_cast<double>(g.stride[2]) +
                      static_cast<double>(g.kernel[2]);
  return rows * cols <= static_cast<double>(1 << 24);
}

namespace {
/// Output rows computed for every channel block in turn while their input rows stay in the
/// first-level cache (the stem's 4 rows: 9 padded rows of 3 channels, 24 KiB).
constexpr std::int64_t kChunkRows = 4;
constexpr std::int64_t kBlock = 8;  // output channels per vmath::conv_channels8

std::int64_t channel_blocks(std::int64_t m) { return (m + kBlock - 1) / kBlock; }
}  // namespace

bool few_channels(const WindowGeometry& g) {
  return g.groups == 1 && g.c > 0 && g.c <= FewChannelConv::kFewChannels && g.m > 0 &&
         g.taps() * g.c <= 1024 && plane_conv_fits(g);
}

std::unique_ptr<FewChannelConv> prepare_few_channels(const WindowGeometry& g, int threads) {
  auto f = std::make_unique<FewChannelConv>();
  f->plane = PaddedPlane(g);
  f->n = g.n, f->c = g.c, f->m = g.m;
  const PaddedPlane& p = f->plane;
  // Row groups enough for every worker when the batch is smaller than the workers.
  const std::int64_t workers = std::max(threads, 1);
  const std::int64_t wanted = (workers + f->n - 1) / f->n;
  f->groups = std::clamp<std::int64_t>(wanted, 1, std::max<std::int64_t>(1, p.oh / kChunkRows));
  f->group_rows = (p.oh + f->groups - 1) / f->groups;
  f->groups = (p.oh + f->group_rows - 1) / f->group_rows;
  f->band = ((f->group_rows - 1) * p.sh + p.kh) * p.cols;
  const std::int64_t blocks = std::min(workers, f->n * f->groups);
  const std::int64_t packed = channel_blocks(f->m) * (g.taps() * f->c + 1) * kBlock;
  for (std::int64_t b = 0; b < blocks; ++b)  // zeroed: the pad columns stay so
    f->scratch.push_back(std::make_unique<float[]>(static_cast<std::size_t>(
        f->c * f->band + static_cast<std::int64_t>(vmath::kDepthwiseSlack) + packed)));
  return f;
}

void run_few_channels(const Launch& l, const FewChannelConv& f) {
  const auto* in = reinterpret_cast<const float*>(l.in[0].data);
  const auto* weights = reinterpret_cast<const float*>(l.in[1].data);
  const float* bias = l.in.size() > 2 ? reinterpret_cast<const float*>(l.in[2].data) : nullptr;
  auto* out = reinterpret_cast<float*>(l.out[0].data);
  const PaddedPlane& p = f.plane;
  float* bands = f.scratch[static_cast<std::size_t>(kiln::block_idx().x)].get();
  const std::int64_t blocks = channel_blocks(f.m), taps = f.c * p.kh * p.kw;
  const std::int64_t out_plane = p.oh * p.ow;
  const auto [first, last] = block_range(f.n * f.groups);
  if (first >= last) return;
  // The weights packed [block][c][kh][kw][8] and the bias [block][8], zeros past m.
  float* packed = bands + f.c * f.band + static_cast<std::int64_t>(vmath::kDepthwiseSlack);
  float* packed_bias = packed + blocks * taps * kBlock;
  for (std::int64_t b = 0; b < blocks; ++b)
    for (std::int64_t j = 0; j < kBlock; ++j) {
      const std::int64_t m = b * kBlock + j;
      for (std::int64_t t = 0; t < taps; ++t)
        packed[(b * taps + t) * kBlock + j] = m < f.m ? weights[m * taps + t] : 0.0f;
      packed_bias[b * kBlock + j] = m < f.m && bias != nullptr ? bias[m] : 0.0f;
    }
  for (std::int64_t task = first; task < last; ++task) {
    const std::int64_t image = task / f.groups, group = task % f.groups;
    const std::int64_t oy0 = group * f.group_rows, oy1 = std::min(p.oh, oy0 + f.group_rows);
    const std::int64_t top = oy0 * p.sh;  // the band's first padded row
    for (std::int64_t ci = 0; ci < f.c; ++ci)
      p.fill_rows(in + (image * f.c + ci) * p.h * p.w, bands + ci * f.band, top,
                  (oy1 - 1) * p.sh + p.kh);
    float* image_out = out + image * f.m * out_plane;
    for (std::int64_t oy = oy0; oy < oy1; oy += kChunkRows) {
      const std::int64_t rows = std::min(kChunkRows, oy1 - oy);
      for (std::int64_t b = 0; b < blocks; ++b) {
        vmath::ConvChannels8 call;
        call.in = bands + (oy * p.sh - top) * p.cols;
        call.in_plane = static_cast<std::size_t>(f.band);
        call.in_row = static_cast<std::size_t>(p.cols);
        call.row_step = static_cast<std::size_t>(p.sh);
        call.taps = p.taps.data();
        call.w = packed + b * taps * kBlock;
        call.c = static_cast<std::size_t>(f.c);
        call.kh = static_cast<std::size_t>(p.kh);
        call.kw = static_cast<std::size_t>(p.kw);
        call.bias = packed_bias + b * kBlock;
        call.out = image_out + b * kBlock * out_plane + oy * p.ow;
        call.out_plane = static_cast<std::size_t>(out_plane);
        call.channels = static_cast<std::size_t>(std::min(kBlock, f.m - b * kBlock));
        call.oh = static_cast<std::size_t>(rows);
        call.ow = static_cast<std::size_t>(p.ow);
        vmath::conv_channels8(call);
      }
      if (l.epilogue != nullptr)  // on the chunk's rows of every channel, in cache
        run_fused_f32_rows(*l.epilogue, image * f.m * out_plane + oy * p.ow, f.m, rows * p.ow,
                           out_plane);
    }
  }
}

}  // namespace kiln::compiler::kernel
