#pragma once
// Internal: kiln's own conv loops over zero-padded input planes, on kiln's [N, C, H, W]
// layout with no reorder into oneDNN's blocked one and back: depthwise convs
// (vmath::depthwise_plane, in conv_kernels.cpp) and convs of few input channels, a
// network's stem (vmath::conv_channels8, here).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "compiler/cpu/kernel_support.hpp"

namespace kiln::compiler::kernel {

/// A 2-D conv's input plane zero-padded as far as its windows reach (every window inside
/// it), rows of `cols` floats; for stride 2 along rows, each row's even columns, then its
/// odd ones, so that a window's taps are unit-stride vectors.
struct PaddedPlane {
  std::int64_t h = 0, w = 0, oh = 0, ow = 0, kh = 0, kw = 0, sh = 1, sw = 1;
  std::int64_t pad_top = 0, pad_left = 0;
  std::int64_t rows = 0, cols = 0;  // the padded plane: as far as the windows reach
  std::int64_t even = 0;            // stride 2: the columns in each row's even half
  std::vector<std::size_t> taps;    // per kx: where its column starts in a padded row

  PaddedPlane() = default;
  /// \p g: a 2-D (or 1-D) undilated conv with strides 1 or 2.
  explicit PaddedPlane(const WindowGeometry& g);
  /// Writes padded rows [first, last) to \p to (row `first` at to[0]) from the input plane
  /// \p from: input rows between the pad columns, which must be zero already (they are
  /// never written), and rows above or below the input zeroed, unless \p pad_rows_zero says
  /// they are already (a whole plane's buffer, filled again for each plane).
  void fill_rows(const float* from, float* to, std::int64_t first, std::int64_t last,
                 bool pad_rows_zero = false) const;
};

/// Whether kiln's plane loops take \p g (either kind): at most 2-D, undilated, strides 1
/// or 2, output rows of at least 16 (one vector) and a padded plane of at most 2^24 floats.
bool plane_conv_fits(const WindowGeometry& g);

/// A conv of at most kFewChannels input channels and one group (MobileNetV3's stem: 3 ->
/// 16, 3x3, stride 2), by vmath::conv_channels8 over bands of padded rows, eight output
/// channels at a time. oneDNN reorders its output from its blocked layout, 0.8 MB for that
/// stem, and ran it at about a third of the FMA ceiling.
struct FewChannelConv {
  static constexpr std::int64_t kFewChannels = 4;
  PaddedPlane plane;
  std::int64_t n = 0, c = 0, m = 0;
  std::int64_t groups = 1, group_rows = 0;  // output rows split in groups: tasks n x groups
  std::int64_t band = 0;                    // floats of one channel's band of padded rows
  // Per block: c bands of padded rows (their pad columns zero), then the packed weights.
  std::vector<std::unique_ptr<float[]>> scratch;
};

/// Whether \p g is a conv FewChannelConv runs (f32 is the caller's to check).
bool few_channels(const WindowGeometry& g);
/// \p g's FewChannelConv on up to \p threads workers (blocks: `scratch.size()`).
std::unique_ptr<FewChannelConv> prepare_few_channels(const WindowGeometry& g, int threads);
/// This block's share of \p l (f32 [N, C, H, W] by [M, C, KH, KW], with or without a bias),
/// each chunk of rows followed by the epilogue while in cache.
void run_few_channels(const Launch& l, const FewChannelConv& f);

}  // namespace kiln::compiler::kernel
