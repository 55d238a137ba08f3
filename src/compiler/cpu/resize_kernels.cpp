// kiln.resize: ONNX's Resize. prepare works out, once per plan, each axis's taps: for every
// output coordinate, the input elements it reads (edge-clamped, as offsets into x) and
// their weights, or that it lies outside the crop (tf_crop_and_resize: the extrapolation
// value). A call goes by rows of the last axis: the other axes' taps combined once a row,
// then each element the sum over them and the last axis's taps, in double, rounded once;
// nearest copies the one element it picks, bit for bit, in any dtype. Nothing here
// allocates when it runs (up to 64 combined taps a row).

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "compiler/cpu/kernel_support.hpp"

namespace kiln::compiler::kernel {

namespace {

/// One axis's resampling: taps per output coordinate o at [o * taps, (o + 1) * taps).
struct AxisTaps {
  std::int64_t taps = 1;
  std::vector<std::int64_t> index;  // into the input axis, clamped to it (prepare: times the
                                    // axis's stride, an offset into x)
  std::vector<double> weight;
  std::vector<std::uint8_t> outside;  // per output coordinate
};

/// The last axis's taps of weight other than 0, column by column: column c's are
/// [begin[c], begin[c + 1]) (a column on an input position reads just that one; nearest
/// reads one in every column).
struct ColumnTaps {
  std::vector<std::uint32_t> begin;
  std::vector<std::int64_t> index;
  std::vector<double> weight;
};

struct PreparedResize final : PreparedLaunch {
  static constexpr Kind kKind = Kind::resize;
  PreparedResize() : PreparedLaunch(kKind) {}
  std::vector<AxisTaps> axes;
  ColumnTaps columns;            // of axes.back()
  bool columns_outside = false;  // a column of the last axis lies outside the crop
  bool nearest = false;
  double extrapolation = 0;
};

struct ResizeSpec {
  std::string mode, coords, nearest_mode;
  double cubic_a = -0.75;
  bool exclude_outside = false, antialias = false;
};

/// Where output coordinate \p o falls on an input axis of \p in elements (ONNX's
/// coordinate transforms; \p scale as given, \p out the output size, \p roi0/roi1 the
/// crop). NaN: outside the crop.
double source_coordinate(const ResizeSpec& s, std::int64_t o, std::int64_t in, std::int64_t out,
                         double scale, double roi0, double roi1) {
  const double x = static_cast<double>(o), length = static_cast<double>(in);
  const double width = scale * length;  // the resized length before rounding
  if (s.coords == "align_corners") return width == 1 ? 0 : x * (length - 1) / (width - 1);
  if (s.coords == "asymmetric") return x / scale;
  if (s.coords == "tf_crop_and_resize") {
    double at = width == 1 ? (roi1 - roi0) * (length - 1) / 2
                           : x * (roi1 - roi0) * (length - 1) / (width - 1);
    at += roi0 * (length - 1);
    return at < 0 || at > length - 1 ? std::nan("") : at;
  }
  if (s.coords == "pytorch_half_pixel") return width == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
  if (s.coords == "half_pixel_symmetric") {
    const double offset = length / 2 * (1 - static_cast<double>(out) / width);
    return offset + (x + 0.5) / scale - 0.5;
  }
  return (x + 0.5) / scale - 0.5;  // half_pixel
}

/// Cubic convolution weight at distance \p d (Keys' kernel with coefficient \p a).
double cubic_weight(double d, double a) {
  d = std::abs(d);
  if (d <= 1) return ((a + 2) * d - (a + 3)) * d * d + 1;
  if (d < 2) return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
  return 0;
}

/// The taps of one axis: for each output coordinate, the first tap's offset from the
/// input position below-or-at the source coordinate, and their weights.
AxisTaps axis_taps(const ResizeSpec& s, std::int64_t in, std::int64_t out, double scale,
                   double roi0, double roi1) {
  // Antialiasing widens the filter by 1 / scale when shrinking.
  const double stretch = s.antialias ? std::min(scale, 1.0) : 1.0;
  const double reach = s.mode == "cubic" ? 2 : 1;  // the filter's half-width, in inputs
  AxisTaps a;
  const auto first = static_cast<std::int64_t>(std::floor(-reach / stretch) + 1);
  a.taps = s.mode == "nearest" ? 1 : 2 - 2 * first;
  a.index.resize(static_cast<std::size_t>(out * a.taps));
  a.weight.resize(a.index.size());
  a.outside.resize(static_cast<std::size_t>(out));
  for (std::int64_t o = 0; o < out; ++o) {
    const double at = source_coordinate(s, o, in, out, scale, roi0, roi1);
    const auto slot = static_cast<std::size_t>(o * a.taps);
    if (std::isnan(at)) {
      a.outside[static_cast<std::size_t>(o)] = 1;
      continue;
    }
    // base: the input position left of the source coordinate, so that t in (0, 1]
    // (a coordinate on an input position counts from the one before it).
    const double below = std::ceil(at) - 1;
    const double t = at - below;
    const auto base = static_cast<std::int64_t>(below);
    const auto clamp = [&](std::int64_t i) { return std::clamp<std::int64_t>(i, 0, in - 1); };
    if (s.mode == "nearest") {
      bool up = true;  // t == 1: the source coordinate is an input position
      if (t < 1) {
        if (s.nearest_mode == "round_prefer_floor") up = t > 0.5;
        if (s.nearest_mode == "round_prefer_ceil") up = t >= 0.5;
        if (s.nearest_mode == "floor") up = false;
      }
      a.index[slot] = clamp(base + (up ? 1 : 0));
      a.weight[slot] = 1;
      continue;
    }
    double sum = 0;
    for (std::int64_t k = 0; k < a.taps; ++k) {
      const double d = (static_cast<double>(first + k) - t) * stretch;
      double w = s.mode == "cubic" ? cubic_weight(d, s.cubic_a) : std::max(0.0, 1 - std::abs(d));
      const std::int64_t i = base + first + k;
      if (s.exclude_outside && (i < 0 || i >= in)) w = 0;
      a.index[slot + static_cast<std::size_t>(k)] = clamp(i);
      a.weight[slot + static_cast<std::size_t>(k)] = w;
      sum += w;
    }
    // Antialiased filters and excluded taps are normalised to sum to one.
    if (s.antialias || s.exclude_outside)
      for (std::int64_t k = 0; k < a.taps; ++k) a.weight[slot + static_cast<std::size_t>(k)] /= sum;
  }
  return a;
}

/// \p a without the taps that have weight 0 at every output (an axis that keeps its size
/// reads one input per output, not two or four): fewer products per output element.
void drop_unused_taps(AxisTaps& a) {
  const auto out = static_cast<std::int64_t>(a.outside.size());
  for (std::int64_t k = a.taps; k-- > 0;) {
    bool unused = a.taps > 1;
    for (std::int64_t o = 0; o < out && unused; ++o)
      unused = a.weight[static_cast<std::size_t>(o * a.taps + k)] == 0;
    if (!unused) continue;
    std::size_t to = 0;
    for (std::size_t i = 0; i < a.index.size(); ++i)
      if (static_cast<std::int64_t>(i) % a.taps != k) {
        a.index[to] = a.index[i];
        a.weight[to++] = a.weight[i];
      }
    a.index.resize(to);
    a.weight.resize(to);
    --a.taps;
  }
}

/// \p l's taps, as prepare_resize and resize_tables give them.
std::unique_ptr<PreparedResize> prepared_resize(const Launch& l) {
  const ir::OpView op = l.view();
  ResizeSpec s{.mode = op.find("mode")->as_string(),
               .coords = op.find("coordinate_transformation_mode")->as_string(),
               .nearest_mode = op.find("nearest_mode")->as_string(),
               .cubic_a = op.find("cubic_coeff_a")->as_float(),
               .exclude_outside = op.find("exclude_outside")->as_bool(),
               .antialias = op.find("antialias")->as_bool()};
  const std::vector<double> scales = op.find("scales")->as_float_array();
  const std::vector<double> roi =
      op.find("roi") != nullptr ? op.find("roi")->as_float_array() : std::vector<double>{};
  const Dims in = l.in[0].shape, out = l.out[0].shape;
  const Index strides = strides_of(in);
  auto p = std::make_unique<PreparedResize>();
  p->nearest = s.mode == "nearest";
  p->extrapolation = op.find("extrapolation_value")->as_float();
  for (std::size_t d = 0; d < in.size(); ++d) {
    p->axes.push_back(axis_taps(s, in[d], out[d], scales[d], roi.empty() ? 0 : roi[d],
                                roi.empty() ? 1 : roi[in.size() + d]));
    drop_unused_taps(p->axes.back());
    for (std::int64_t& i : p->axes.back().index) i *= strides[d];
  }
  if (!in.empty()) {
    const AxisTaps& last = p->axes.back();
    ColumnTaps& c = p->columns;
    for (std::size_t k = 0; k < last.weight.size(); ++k) {
      if (k % static_cast<std::size_t>(last.taps) == 0)
        c.begin.push_back(static_cast<std::uint32_t>(c.index.size()));
      if (last.weight[k] == 0) continue;  // a weight of 0 reads nothing (not even a NaN)
      c.index.push_back(last.index[k]);
      c.weight.push_back(last.weight[k]);
    }
    c.begin.push_back(static_cast<std::uint32_t>(c.index.size()));
    p->columns_outside =
        std::find(last.outside.begin(), last.outside.end(), 1) != last.outside.end();
  }
  return p;
}

}  // namespace

void prepare_resize(Launch& l, int /*threads*/) { l.prepared = prepared_resize(l); }

ResizeTables resize_tables(const Launch& l) {
  const std::unique_ptr<PreparedResize> p = prepared_resize(l);
  ResizeTables t;
  t.nearest = p->nearest;
  t.extrapolation = p->extrapolation;
  for (const AxisTaps& a : p->axes) {
    t.taps.push_back(a.taps);
    t.at.push_back(static_cast<std::int64_t>(t.words.size()));
    for (std::int64_t i : a.index) t.words.push_back(static_cast<std::uint64_t>(i));
    for (double w : a.weight) {
      std::uint64_t bits = 0;
      std::memcpy(&bits, &w, sizeof bits);
      t.words.push_back(bits);
    }
    for (std::uint8_t o : a.outside) {
      t.words.push_back(o);
      t.outside = t.outside || o != 0;
    }
  }
  return t;
}

namespace {

/// One tap of an output row: where in x a row of the last axis starts, and its weight.
struct RowTap {
  std::int64_t offset;
  double weight;
};

/// Output row \p row (the coordinates \p at of every axis but the last) of one launch: the
/// taps of its other axes combined (into \p taps), then each element the sum over them and
/// the last axis's taps. f32 reads through a float pointer; nearest copies bytes.
template <bool F32>
void resize_row(const PreparedResize& p, const View& x, const View& o, const std::int64_t* at,
                std::int64_t row, Scratch<RowTap, 64>& taps) {
  const std::size_t r = x.shape.size();
  const std::int64_t cols = o.shape[r - 1];
  bool outside = false;
  for (std::size_t d = 0; d + 1 < r; ++d)
    outside = outside || p.axes[d].outside[static_cast<std::size_t>(at[d])] != 0;
  if (outside) {
    for (std::int64_t c = 0; c < cols; ++c) store(o, row * cols + c, p.extrapolation);
    return;
  }
  // Every combination of the other axes' taps (an odometer over them), weight 0 left out.
  std::size_t count = 0;
  IndexScratch tap(r);
  for (std::size_t d = 0; d < r; ++d) tap[d] = 0;
  for (bool more = true; more;) {
    double w = 1;
    std::int64_t from = 0;
    for (std::size_t d = 0; d + 1 < r; ++d) {
      const auto k = static_cast<std::size_t>(at[d] * p.axes[d].taps + tap[d]);
      w *= p.axes[d].weight[k];
      from += p.axes[d].index[k];
    }
    if (w != 0) taps[count++] = {from, w};
    more = false;
    for (std::size_t d = r - 1; d-- > 0;) {
      if (++tap[d] < p.axes[d].taps) {
        more = true;
        break;
      }
      tap[d] = 0;
    }
  }
  // Raw arrays in the loop over the row (the hot loop of linear and cubic f32).
  const RowTap* rt = taps.data();
  const std::uint8_t* col_outside = p.axes[r - 1].outside.data();
  const std::uint32_t* begin = p.columns.begin.data();
  const std::int64_t* index = p.columns.index.data();
  const double* weight = p.columns.weight.data();
  const auto* xf = reinterpret_cast<const float*>(x.data);
  auto* of = reinterpret_cast<float*>(o.data) + row * cols;
  const std::size_t es = size_of(x.dtype);
  for (std::int64_t c = 0; c < cols; ++c) {
    if (p.columns_outside && col_outside[c] != 0) {
      store(o, row * cols + c, p.extrapolation);
    } else if (p.nearest) {  // one tap on every axis
      const std::int64_t from = rt[0].offset + index[begin[c]];
      if constexpr (F32) {
        of[c] = xf[from];
      } else {
        std::memcpy(o.data + static_cast<std::size_t>(row * cols + c) * es,
                    x.data + static_cast<std::size_t>(from) * es, es);
      }
    } else {
      double sum = 0;
      for (std::size_t t = 0; t < count; ++t) {
        double across = 0;  // the row's taps along the last axis
        for (std::uint32_t j = begin[c]; j < begin[c + 1]; ++j) {
          const std::int64_t from = rt[t].offset + index[j];
          across += weight[j] * (F32 ? static_cast<double>(xf[from]) : load(x, from));
        }
        sum += rt[t].weight * across;
      }
      if constexpr (F32) {
        of[c] = static_cast<float>(sum);
      } else {
        store(o, row * cols + c, sum);
      }
    }
  }
}

}  // namespace

/// By rows of the last axis, split over the launch's blocks: the taps of the other axes
/// worked out once a row, then the row's elements.
void resize(const Launch& l) {
  const auto& p = *l.prepared_as<PreparedResize>();
  const View &x = l.in[0], &o = l.out[0];
  const std::size_t r = x.shape.size();
  if (r == 0) {  // a scalar resizes to itself
    copy_element(o, 0, x, 0);
    return;
  }
  const std::int64_t cols = o.shape[r - 1];
  if (cols == 0) return;
  const auto [first, last] = block_range(elements(o.shape) / cols);
  if (first >= last) return;
  std::size_t most = 1;  // taps of the axes but the last, combined
  for (std::size_t d = 0; d + 1 < r; ++d) most *= static_cast<std::size_t>(p.axes[d].taps);
  Scratch<RowTap, 64> taps(most);
  IndexScratch at(r);  // the row's coordinates (the last: unused)
  at[r - 1] = 0;
  for (std::size_t d = r - 1, rest = static_cast<std::size_t>(first); d-- > 0;) {
    at[d] = static_cast<std::int64_t>(rest % static_cast<std::size_t>(o.shape[d]));
    rest /= static_cast<std::size_t>(o.shape[d]);
  }
  const bool f32 = x.dtype == DType::f32;
  for (std::int64_t row = first; row < last; ++row) {
    if (f32) {
      resize_row<true>(p, x, o, at.data(), row, taps);
    } else {
      resize_row<false>(p, x, o, at.data(), row, taps);
    }
    for (std::size_t d = r - 1; d-- > 0;) {  // the next row
      if (++at[d] < o.shape[d]) break;
      at[d] = 0;
    }
  }
}

}  // namespace kiln::compiler::kernel
