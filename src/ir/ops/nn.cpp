// Sliding-window ops over [N, C, spatial...] tensors (ONNX's NCHW layout, 1 to 3 spatial
// dims): convolution, transposed convolution, max and average pooling. Their geometry is
// explicit: one stride, dilation and kernel size per spatial dim, and pads as all the
// begins then all the ends (ONNX's order). An importer resolves auto_pad into pads.
// Also resize (ONNX's Resize): nearest, linear and cubic resampling of any axes.

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string>

#include "ir/ops/ops.hpp"
#include "kiln/core/error.hpp"

namespace kiln::ir::detail {
namespace {

using Kind = Attribute::Kind;

/// The largest stride, pad, dilation or kernel size accepted: room for their arithmetic.
constexpr std::int64_t kMaxGeometry = std::int64_t{1} << 31;

/// One spatial dim's window: kernel size, stride, dilation and the pads on each side.
struct Window {
  std::int64_t kernel = 1, stride = 1, dilation = 1, pad_begin = 0, pad_end = 0;
  /// The input elements one window spans.
  std::int64_t span() const { return dilation * (kernel - 1) + 1; }
};

/// The values of attribute \p name, \p per_dim for each of \p spatial dims, each in
/// [lo, kMaxGeometry]. \throws UserError.
std::vector<std::int64_t> geometry(const InferContext& ctx, const char* name, std::size_t spatial,
                                   std::int64_t lo, std::size_t per_dim = 1) {
  const std::vector<std::int64_t> v = ctx.attr(name).as_int_array();
  if (v.size() != spatial * per_dim)
    throw UserError(cat(name, " has ", v.size(), " values; ", spatial, " spatial dims need ",
                        spatial * per_dim));
  for (std::int64_t x : v)
    if (x < lo || x > kMaxGeometry)
      throw UserError(cat(name, " [", join(v, ", "), "] must each be in [", lo, ", 2^31]"));
  return v;
}

/// The windows of every spatial dim of \p x (rank 3 to 5), kernel sizes from \p kernel.
std::vector<Window> windows(const InferContext& ctx, const TensorType& x,
                            const std::vector<std::int64_t>& kernel) {
  const std::size_t r = x.shape.rank();
  if (r < 3 || r > 5)
    throw UserError(cat("x ", x.shape, " must be [N, C, spatial...] with 1 to 3 spatial dims"));
  const std::size_t s = r - 2;
  const std::vector<std::int64_t> strides = geometry(ctx, "strides", s, 1),
                                  dilations = geometry(ctx, "dilations", s, 1),
                                  pads = geometry(ctx, "pads", s, 0, 2);
  std::vector<Window> w(s);
  for (std::size_t d = 0; d < s; ++d) {
    if (kernel[d] < 1 || kernel[d] > kMaxGeometry)
      throw UserError(
          cat("kernel size ", kernel[d], " at spatial dim ", d, " must be in [1, 2^31]"));
    w[d] = {kernel[d], strides[d], dilations[d], pads[d], pads[s + d]};
  }
  return w;
}

/// The output size of a window over \p in (rounding the last partial step up when \p ceil,
/// as long as that window starts inside the input or its begin pad).
Dim window_output(const Dim& in, const Window& w, std::size_t d, bool ceil = false) {
  if (!in.is_static()) {
    // Only a window that maps each position to one output keeps a symbol.
    if (w.stride == 1 && w.span() == 1 + w.pad_begin + w.pad_end) return in;
    throw UserError(cat("spatial dim ", d, " is symbolic (", in.symbol(),
                        "): this window changes its size; give it a size"));
  }
  const std::int64_t room = in.size() + w.pad_begin + w.pad_end - w.span();
  if (room < 0)
    throw UserError(cat("the window of ", w.span(), " at spatial dim ", d,
                        " is larger than the padded input (", in.size(), " + ", w.pad_begin, " + ",
                        w.pad_end, ")"));
  std::int64_t out = (ceil ? (room + w.stride - 1) / w.stride : room / w.stride) + 1;
  if (ceil && (out - 1) * w.stride >= in.size() + w.pad_begin) --out;
  return out;
}

void check_floating(const TensorType& t, const char* what) {
  if (!is_floating(t.dtype))
    throw UserError(cat(what, " must be a floating-point tensor, got ", name(t.dtype)));
}

/// Checks the bias (operand 2, if any) of a convolution with \p channels outputs.
void check_bias(const InferContext& ctx, const TensorType& x, const Dim& channels) {
  if (ctx.operands().size() < 3) return;
  const TensorType& b = ctx.operand(2);
  if (b.dtype != x.dtype || b.shape.rank() != 1 || !(b.shape[0] == channels))
    throw UserError(cat("the bias must be [", channels, "] of ", name(x.dtype), ", got ", b.shape,
                        " of ", name(b.dtype)));
}

/// The groups attribute, which must divide both \p a and \p b (when static).
std::int64_t groups_of(const InferContext& ctx, const Dim& a, const Dim& b) {
  const std::int64_t g = ctx.attr("groups").as_int();
  if (g < 1 || g > kMaxGeometry) throw UserError(cat("groups ", g, " must be in [1, 2^31]"));
  for (const Dim& c : {a, b})
    if (c.is_static() ? c.size() % g != 0 : g != 1)
      throw UserError(cat("groups ", g, " must divide the channels (", a, " in, ", b, " out)"));
  return g;
}

std::vector<std::int64_t> kernel_dims(const TensorType& w, std::size_t spatial) {
  std::vector<std::int64_t> k;
  for (std::size_t d = 0; d < spatial; ++d) {
    const Dim& dim = w.shape[2 + d];
    if (!dim.is_static()) throw UserError(cat("the kernel dims of w ", w.shape, " must be static"));
    k.push_back(dim.size());
  }
  return k;
}

/// conv(x [N, C, S...], w [M, C / groups, K...], bias [M]?) -> [N, M, O...].
std::vector<TensorType> infer_conv(const InferContext& ctx) {
  const TensorType &x = ctx.operand(0), &w = ctx.operand(1);
  const Device device = common_device(ctx);
  check_floating(x, "x");
  if (w.dtype != x.dtype)
    throw UserError(cat("w (", name(w.dtype), ") must have x's dtype (", name(x.dtype), ")"));
  if (w.shape.rank() != x.shape.rank())
    throw UserError(cat("w ", w.shape, " must have x's rank (", x.shape.rank(), ")"));
  const std::size_t s = x.shape.rank() - 2;
  const std::vector<Window> win = windows(ctx, x, kernel_dims(w, s));
  const Dim &c = x.shape[1], &m = w.shape[0];
  const std::int64_t g = groups_of(ctx, c, m);
  const bool fits = c.is_static() && w.shape[1].is_static() ? c.size() == w.shape[1].size() * g
                                                            : g == 1 && c == w.shape[1];
  if (!fits)
    throw UserError(cat("w ", w.shape, " must be [M, C / groups, kernel...] for x ", x.shape,
                        " and groups ", g));
  check_bias(ctx, x, m);
  std::vector<Dim> dims{x.shape[0], m};
  for (std::size_t d = 0; d < s; ++d) dims.push_back(window_output(x.shape[2 + d], win[d], d));
  return {{x.dtype, Shape(std::move(dims)), device}};
}

/// conv_transpose(x [N, C, S...], w [C, M / groups, K...], bias [M]?) -> [N, M, O...],
/// O = stride (S - 1) + output_padding + dilation (K - 1) + 1 - pad_begin - pad_end.
std::vector<TensorType> infer_conv_transpose(const InferContext& ctx) {
  const TensorType &x = ctx.operand(0), &w = ctx.operand(1);
  const Device device = common_device(ctx);
  check_floating(x, "x");
  if (w.dtype != x.dtype || w.shape.rank() != x.shape.rank())
    throw UserError(cat("w ", w.shape, " of ", name(w.dtype), " must have x's rank and dtype"));
  const std::size_t s = x.shape.rank() - 2;
  const std::vector<Window> win = windows(ctx, x, kernel_dims(w, s));
  const std::vector<std::int64_t> extra = geometry(ctx, "output_padding", s, 0);
  if (!(w.shape[0] == x.shape[1]) || !w.shape[1].is_static())
    throw UserError(cat("w ", w.shape, " must be [C, M / groups, kernel...] for x ", x.shape));
  const std::int64_t g = ctx.attr("groups").as_int();
  if (g < 1 || g > kMaxGeometry) throw UserError(cat("groups ", g, " must be in [1, 2^31]"));
  const Dim m = w.shape[1].size() * g;
  groups_of(ctx, x.shape[1], m);
  check_bias(ctx, x, m);
  std::vector<Dim> dims{x.shape[0], m};
  for (std::size_t d = 0; d < s; ++d) {
    const Dim& in = x.shape[2 + d];
    const Window& v = win[d];
    if (extra[d] >= std::max(v.stride, v.dilation))
      throw UserError(cat("output_padding ", extra[d], " at spatial dim ", d,
                          " must be less than the stride or the dilation"));
    if (!in.is_static())
      throw UserError(cat("spatial dim ", d, " is symbolic (", in.symbol(), "); give it a size"));
    const std::int64_t out =
        v.stride * (in.size() - 1) + extra[d] + v.span() - v.pad_begin - v.pad_end;
    if (in.size() == 0 || out < 1)
      throw UserError(cat("the output of spatial dim ", d, " would have ", out,
                          " elements: the pads are larger than the window"));
    dims.push_back(out);
  }
  return {{x.dtype, Shape(std::move(dims)), device}};
}

std::vector<TensorType> infer_pool(const InferContext& ctx, bool average) {
  const TensorType& x = ctx.operand(0);
  if (average) check_floating(x, "x");
  if (x.dtype == DType::bool_) throw UserError("max_pool is not defined for bool tensors");
  if (x.shape.rank() < 3 || x.shape.rank() > 5)
    throw UserError(cat("x ", x.shape, " must be [N, C, spatial...] with 1 to 3 spatial dims"));
  const std::size_t s = x.shape.rank() - 2;
  const std::vector<Window> win = windows(ctx, x, geometry(ctx, "kernel_shape", s, 1));
  const bool ceil = ctx.attr("ceil_mode").as_bool();
  std::vector<Dim> dims{x.shape[0], x.shape[1]};
  for (std::size_t d = 0; d < s; ++d) {
    if (win[d].pad_begin >= win[d].span() || win[d].pad_end >= win[d].span())
      throw UserError(cat("the pads at spatial dim ", d, " (", win[d].pad_begin, ", ",
                          win[d].pad_end, ") must be smaller than the window (", win[d].span(),
                          "): a window of only padding has no value"));
    dims.push_back(window_output(x.shape[2 + d], win[d], d, ceil));
  }
  return {{x.dtype, Shape(std::move(dims)), x.device}};
}

std::vector<TensorType> infer_max_pool(const InferContext& ctx) { return infer_pool(ctx, false); }
std::vector<TensorType> infer_avg_pool(const InferContext& ctx) { return infer_pool(ctx, true); }

std::vector<AttrSpec> window_attributes(std::vector<AttrSpec> more) {
  std::vector<AttrSpec> a{
      {"strides", Kind::array}, {"pads", Kind::array}, {"dilations", Kind::array}};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

/// resize: the most entries of one axis's tap table, and the most taps one output sums.
constexpr double kMaxResizeTable = 1 << 28, kMaxResizeTaps = 1 << 16;

/// \p value must be one of \p allowed (attribute \p name). \throws UserError.
void check_one_of(const std::string& name, const std::string& value,
                  std::initializer_list<const char*> allowed) {
  for (const char* a : allowed)
    if (value == a) return;
  std::string list;
  for (const char* a : allowed) list += cat(list.empty() ? "" : ", ", "\"", a, "\"");
  throw UserError(cat(name, " must be one of ", list, ", got \"", value, "\""));
}

// x resampled: output dim d is sizes[d] (-1: x's, where scales[d] is 1); scales[d] is the
// factor the coordinate transform divides by (ONNX's, not always sizes[d] / x's dim).
std::vector<TensorType> infer_resize(const InferContext& ctx) {
  const TensorType& x = ctx.operand(0);
  const std::size_t r = x.shape.rank();
  const std::string mode = ctx.attr("mode").as_string();
  check_one_of("mode", mode, {"nearest", "linear", "cubic"});
  const std::string coords = ctx.attr("coordinate_transformation_mode").as_string();
  check_one_of("coordinate_transformation_mode", coords,
               {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                "asymmetric", "tf_crop_and_resize"});
  check_one_of("nearest_mode", ctx.attr("nearest_mode").as_string(),
               {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"});
  if (mode != "nearest" && !is_floating(x.dtype))
    throw UserError(cat(mode, " resizing needs a floating-point tensor, got ", name(x.dtype),
                        " (nearest takes any dtype)"));
  if (mode == "nearest" && ctx.attr("antialias").as_bool())
    throw UserError("antialias applies to linear and cubic resizing, not nearest");
  const std::vector<std::int64_t> sizes = ctx.attr("sizes").as_int_array();
  const std::vector<double> scales = ctx.attr("scales").as_float_array();
  if (sizes.size() != r || scales.size() != r)
    throw UserError(cat("sizes and scales need one value per axis of x ", x.shape, ", got ",
                        sizes.size(), " and ", scales.size()));
  if (coords == "tf_crop_and_resize" && ctx.attr("roi").as_float_array().size() != 2 * r)
    throw UserError(cat("tf_crop_and_resize needs roi: ", 2 * r,
                        " values (the starts of every axis, then the ends)"));
  std::vector<Dim> dims;
  double work = 1;  // taps per output element
  for (std::size_t d = 0; d < r; ++d) {
    const Dim& in = x.shape.dims()[d];
    if (!(scales[d] > 0) || !std::isfinite(scales[d]))
      throw UserError(cat("scale ", scales[d], " of axis ", d, " must be finite and above 0"));
    if (sizes[d] == -1) {
      if (scales[d] != 1)
        throw UserError(cat("axis ", d, " keeps x's size (-1) but its scale is ", scales[d]));
      dims.push_back(in);
      continue;
    }
    if (sizes[d] < 0 || sizes[d] > kMaxGeometry)
      throw UserError(cat("size ", sizes[d], " of axis ", d, " must be in [0, 2^31] or -1"));
    if (!in.is_static())
      throw UserError(cat("axis ", d, " of x ", x.shape, " is symbolic: only axes that keep ",
                          "their size (-1) may be"));
    if (in.size() == 0 && sizes[d] > 0)
      throw UserError(cat("axis ", d, " of x ", x.shape, " is empty: nothing to resize from"));
    dims.push_back(Dim(sizes[d]));
    // The taps of one output (antialiasing widens the filter by 1 / scale): each axis's
    // table (taps per output) is made once per plan, and each output sums their product.
    const double reach = mode == "cubic" ? 2 : mode == "linear" ? 1 : 0.5;
    const double stretch = ctx.attr("antialias").as_bool() ? std::min(scales[d], 1.0) : 1.0;
    const bool same = sizes[d] == in.size() && scales[d] == 1 && coords != "tf_crop_and_resize";
    const double taps = same ? 1 : 2 * std::ceil(reach / stretch);  // same: one input each
    if (taps * static_cast<double>(sizes[d]) > kMaxResizeTable)
      throw UserError(cat("axis ", d, ": ", sizes[d], " outputs of ", taps,
                          " taps each (antialiasing at scale ", scales[d],
                          ") are more than kiln resizes (", kMaxResizeTable, ")"));
    work *= taps;
  }
  if (work > kMaxResizeTaps)
    throw UserError(cat("each output would sum ", work,
                        " taps (antialiasing at small scales), "
                        "more than kiln resizes (",
                        kMaxResizeTaps, ")"));
  return {{x.dtype, Shape(std::move(dims)), x.device}};
}

}  // namespace

void register_nn_ops(OpRegistry& r) {
  r.add(make_op("kiln.resize",
                "x resampled to new sizes (ONNX's Resize): nearest, linear or cubic, any axes, "
                "ONNX's coordinate transforms",
                1, 1, infer_resize,
                {{"sizes", Kind::array},
                 {"scales", Kind::array},
                 {"mode", Kind::string},
                 {"coordinate_transformation_mode", Kind::string},
                 {"nearest_mode", Kind::string},
                 {"cubic_coeff_a", Kind::floating},
                 {"exclude_outside", Kind::boolean},
                 {"extrapolation_value", Kind::floating},
                 {"antialias", Kind::boolean},
                 {"roi", Kind::array, false}}));
  r.add(make_op("kiln.conv",
                "convolution of [N, C, spatial...] by [M, C / groups, kernel...], plus a bias [M]",
                2, 3, infer_conv, window_attributes({{"groups", Kind::integer}})));
  r.add(make_op("kiln.conv_transpose",
                "transposed convolution (the gradient of conv): [N, C, S...] by "
                "[C, M / groups, kernel...], plus a bias [M]",
                2, 3, infer_conv_transpose,
                window_attributes({{"groups", Kind::integer}, {"output_padding", Kind::array}})));
  r.add(make_op("kiln.max_pool",
                "largest element of each window of [N, C, spatial...] (pads never win)", 1, 1,
                infer_max_pool,
                window_attributes({{"kernel_shape", Kind::array}, {"ceil_mode", Kind::boolean}})));
  r.add(make_op("kiln.avg_pool",
                "mean of each window of [N, C, spatial...], counting the pads or not", 1, 1,
                infer_avg_pool,
                window_attributes({{"kernel_shape", Kind::array},
                                   {"ceil_mode", Kind::boolean},
                                   {"count_include_pad", Kind::boolean}})));
}

}  // namespace kiln::ir::detail
