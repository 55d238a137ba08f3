// ONNX's sliding-window ops (Conv, ConvTranspose, MaxPool, AveragePool) onto kiln.conv,
// kiln.conv_transpose, kiln.max_pool and kiln.avg_pool, with auto_pad and ConvTranspose's
// output_shape resolved into explicit pads here; GlobalAveragePool and GlobalMaxPool as
// reductions over the spatial axes; BatchNormalization (inference) as elementwise ops;
// Resize onto kiln.resize, its output sizes and scales worked out here (scales or sizes,
// axes, keep_aspect_ratio_policy, the crop of tf_crop_and_resize).

#include <algorithm>
#include <cmath>

#include "core/str.hpp"
#include "onnx/fold.hpp"

namespace kiln::onnx_import {
namespace {
using detail::cat;
using Outputs = std::vector<OnnxValue>;
using Ints = std::vector<std::int64_t>;

/// Fails unless only output 0 of the node is used.
void only_first_output(NodeContext& n, const char* what) {
  for (int i = 1; i < n.node().output_size(); ++i)
    if (!n.node().output(i).empty())
      n.fail(cat("its output ", i, " (", what, ") is not supported"));
}

/// The spatial dims of \p x, which must be static (\p why names what needs them).
Ints static_spatial(NodeContext& n, const Tensor& x, const char* why) {
  Ints dims;
  for (std::size_t d = 2; d < x.rank(); ++d) {
    const Dim& dim = x.shape().dims()[d];
    if (!dim.is_static())
      n.fail(cat("spatial dim ", d - 2, " of the input ", x.shape(), " is symbolic; ", why,
                 " needs its size (fix it with --dim)"));
    dims.push_back(dim.size());
  }
  return dims;
}

/// Attribute \p name with one value per spatial dim (\p per_dim values for pads), or
/// \p fill for each when it is absent.
Ints per_dim(NodeContext& n, const char* name, std::size_t spatial, std::int64_t fill,
             std::size_t per = 1) {
  const std::optional<Ints> v = n.attr_ints(name);
  if (!v) return Ints(spatial * per, fill);
  if (v->size() != spatial * per)
    n.fail(cat(name, " has ", v->size(), " values; the input's ", spatial, " spatial dims need ",
               spatial * per));
  return *v;
}

/// The strides and dilations of a window op over \p x [N, C, spatial...] (1 to 3
/// spatial dims), no pads yet.
Window strided_window(NodeContext& n, const Tensor& x) {
  if (x.rank() < 3 || x.rank() > 5)
    n.fail(cat("the input ", x.shape(), " must be [N, C, spatial...] with 1 to 3 spatial dims"));
  const std::size_t s = x.rank() - 2;
  Window w;
  w.strides = per_dim(n, "strides", s, 1);
  w.dilations = per_dim(n, "dilations", s, 1);
  return w;
}

/// The window of a Conv or pool over \p x with kernel sizes \p kernel: strides, dilations,
/// and pads (auto_pad resolved: SAME_UPPER puts an odd pad at the end, SAME_LOWER at the
/// start, both keeping ceil(size / stride) outputs).
Window window_of(NodeContext& n, const Tensor& x, const Ints& kernel) {
  Window w = strided_window(n, x);
  const std::size_t s = x.rank() - 2;
  const std::string pad = n.attr_string("auto_pad", "NOTSET");
  if (pad == "NOTSET") {
    w.pads = per_dim(n, "pads", s, 0, 2);
  } else if (pad == "VALID") {
    w.pads.assign(2 * s, 0);
  } else if (pad == "SAME_UPPER" || pad == "SAME_LOWER") {
    const Ints in = static_spatial(n, x, "auto_pad SAME");
    w.pads.assign(2 * s, 0);
    for (std::size_t d = 0; d < s; ++d) {
      const std::int64_t stride = std::max<std::int64_t>(w.strides[d], 1);
      const std::int64_t out = (in[d] + stride - 1) / stride;
      const std::int64_t span = w.dilations[d] * (kernel[d] - 1) + 1;
      const std::int64_t total = std::max<std::int64_t>(0, (out - 1) * stride + span - in[d]);
      const std::int64_t small = total / 2, large = total - small;
      w.pads[d] = pad == "SAME_UPPER" ? small : large;
      w.pads[s + d] = pad == "SAME_UPPER" ? large : small;
    }
  } else {
    n.fail(cat("auto_pad '", pad, "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID"));
  }
  return w;
}

/// The kernel sizes of a conv from its weights \p w, checked against kernel_shape if given.
Ints conv_kernel(NodeContext& n, const Tensor& w) {
  Ints k;
  for (std::size_t d = 2; d < w.rank(); ++d) {
    const Dim& dim = w.shape().dims()[d];
    if (!dim.is_static()) n.fail(cat("the weights ", w.shape(), " must have static kernel dims"));
    k.push_back(dim.size());
  }
  if (const std::optional<Ints> given = n.attr_ints("kernel_shape"); given && *given != k)
    n.fail(cat("kernel_shape [", detail::join(*given, ", "), "] does not match the weights ",
               w.shape()));
  return k;
}

Outputs conv_(NodeContext& n) {
  n.only_attributes({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"});
  const Tensor x = n.input(0), w = n.input(1);
  Window win = window_of(n, x, conv_kernel(n, w));
  win.groups = n.attr_int("group", 1);
  return {traced(n.has_input(2) ? conv(x, w, n.input(2), win) : conv(x, w, win))};
}

Outputs conv_transpose_(NodeContext& n) {
  n.only_attributes({"auto_pad", "dilations", "group", "kernel_shape", "output_padding",
                     "output_shape", "pads", "strides"});
  const Tensor x = n.input(0), w = n.input(1);
  const Ints kernel = conv_kernel(n, w);
  Window win = strided_window(n, x);
  const std::size_t s = x.rank() - 2;
  win.output_padding = per_dim(n, "output_padding", s, 0);
  win.groups = n.attr_int("group", 1);
  const std::string pad = n.attr_string("auto_pad", "NOTSET");
  const std::optional<Ints> output_shape = n.attr_ints("output_shape");
  if (pad != "NOTSET" && pad != "VALID" && pad != "SAME_UPPER" && pad != "SAME_LOWER")
    n.fail(cat("auto_pad '", pad, "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID"));
  const bool same = pad == "SAME_UPPER" || pad == "SAME_LOWER";
  if (!same && !output_shape) {
    win.pads = pad == "VALID" ? Ints(2 * s, 0) : per_dim(n, "pads", s, 0, 2);
  } else {
    // The output size asked for (output_shape, or size * stride for SAME): the pads (or
    // extra end elements) that give it.
    const Ints in = static_spatial(n, x, output_shape ? "output_shape" : "auto_pad SAME");
    Ints want(s);
    for (std::size_t d = 0; d < s; ++d) want[d] = in[d] * win.strides[d];
    if (output_shape) {
      if (output_shape->size() != s && output_shape->size() != s + 2)
        n.fail(cat("output_shape has ", output_shape->size(), " values for ", s, " spatial dims"));
      want.assign(output_shape->end() - static_cast<long>(s), output_shape->end());
    }
    win.pads.assign(2 * s, 0);
    for (std::size_t d = 0; d < s; ++d) {
      const std::int64_t full = win.strides[d] * (in[d] - 1) + win.output_padding[d] +
                                win.dilations[d] * (kernel[d] - 1) + 1;
      const std::int64_t total = full - want[d];
      if (total < 0) {  // larger than the window reaches: extra elements at the end
        win.output_padding[d] -= total;
        continue;
      }
      const std::int64_t small = total / 2, large = total - small;
      win.pads[d] = !same ? 0 : pad == "SAME_UPPER" ? small : large;
      win.pads[s + d] = !same ? total : pad == "SAME_UPPER" ? large : small;
    }
  }
  return {
      traced(n.has_input(2) ? conv_transpose(x, w, n.input(2), win) : conv_transpose(x, w, win))};
}

/// The most (output position, tap) pairs MaxPool's Indices output tabulates.
constexpr double kMaxPoolIndexTable = 1 << 26;

/// MaxPool's Indices output: where each maximum lies in x, counted as if [N, C, S...]
/// were one array, the spatial dims row-major (storage_order 0) or column-major (1).
/// Composed: each output position's taps gathered from x flattened per plane (a tap in
/// the padding reads the window's first tap inside x instead, which never changes where
/// the first maximum lies), argmax over the taps (the first maximum, or the first NaN, as
/// the values max_pool gives), that tap's position from a table, plus the plane's offset.
Tensor max_pool_indices(NodeContext& n, const Tensor& x, const Tensor& y, const Ints& kernel,
                        const Window& w) {
  const Ints in = static_spatial(n, x, "MaxPool's Indices output");
  const std::int64_t order = n.attr_int("storage_order", 0);
  if (order != 0 && order != 1) n.fail(cat("storage_order ", order, " is not 0 or 1"));
  const Dim batch = x.shape().dims()[0], channels = x.shape().dims()[1];
  if (!channels.is_static())
    n.fail(cat("the channels of the input ", x.shape(),
               " are symbolic; the Indices output "
               "needs their number (fix it with --dim)"));
  const std::size_t s = in.size();
  Ints out, row(s, 1), column(s, 1);
  std::int64_t positions = 1, plane = 1;  // both bounded by tensors' sizes
  double pairs = 1;                       // a hostile kernel_shape's product leaves int64
  for (std::size_t d = 0; d < s; ++d) {
    out.push_back(y.shape().dims()[2 + d].size());
    positions *= out[d];
    plane *= in[d];
    pairs *= static_cast<double>(out[d]) * static_cast<double>(kernel[d]);
    if (d > 0) column[d] = column[d - 1] * in[d - 1];
  }
  for (std::size_t d = s - 1; d-- > 0;) row[d] = row[d + 1] * in[d + 1];
  if (pairs > kMaxPoolIndexTable)
    n.fail(cat("the Indices output of ", positions, " positions of a [", detail::join(kernel, ", "),
               "] window each is more than kiln tabulates (2^26 "
               "position-tap pairs)"));
  std::int64_t taps = 1;
  for (std::int64_t k : kernel) taps *= k;
  // read: the tap's row-major offset in a plane; at: the offset the Indices output counts.
  std::vector<std::int64_t> read(static_cast<std::size_t>(positions * taps), -1), at(read.size());
  for (std::int64_t p = 0; p < positions; ++p) {
    std::int64_t first_inside = -1;
    for (std::int64_t k = 0; k < taps; ++k) {
      std::int64_t rest_p = p, rest_k = k, r = 0, c = 0;
      bool inside = true;
      for (std::size_t d = s; d-- > 0;) {
        const std::int64_t o = rest_p % out[d], kk = rest_k % kernel[d];
        rest_p /= out[d];
        rest_k /= kernel[d];
        const std::int64_t i = o * w.strides[d] - w.pads[d] + kk * w.dilations[d];
        inside = inside && i >= 0 && i < in[d];
        r += i * row[d];
        c += i * column[d];
      }
      if (!inside) continue;
      const auto slot = static_cast<std::size_t>(p * taps + k);
      read[slot] = r;
      at[slot] = order == 0 ? r : c;
      if (first_inside < 0) first_inside = k;
    }
    if (first_inside < 0) n.fail(cat("output position ", p, " has no tap inside the input"));
    const auto first = static_cast<std::size_t>(p * taps + first_inside);
    for (std::int64_t k = 0; k < taps; ++k) {
      const auto slot = static_cast<std::size_t>(p * taps + k);
      if (read[slot] < 0) {
        read[slot] = read[first];
        at[slot] = at[first];
      }
    }
  }
  std::vector<std::int64_t> tap_base(static_cast<std::size_t>(positions)),
      plane_base(static_cast<std::size_t>(channels.size()));
  for (std::size_t p = 0; p < tap_base.size(); ++p)
    tap_base[p] = static_cast<std::int64_t>(p) * taps;
  for (std::size_t c = 0; c < plane_base.size(); ++c)
    plane_base[c] = static_cast<std::int64_t>(c) * plane;
  const auto i64 = [](std::vector<std::int64_t> v, Shape shape) {
    return Tensor::from_data(v, std::move(shape));
  };
  const Tensor windows =
      gather(reshape(x, Shape{batch, channels, plane}), i64(read, Shape{positions, taps}), 2);
  const Tensor tap = argmax(windows, 3) + i64(tap_base, Shape{positions});  // [N, C, P]
  const Tensor where = gather(i64(at, Shape{positions * taps}), tap, 0);
  // n * C * plane + c * plane, for a batch that may be symbolic.
  const Tensor n_index =
      cumsum(broadcast_to(i64({1}, Shape{1}), Shape{batch}), 0, /*exclusive=*/true);
  const Tensor batch_base =
      reshape(n_index * i64({channels.size() * plane}, Shape{}), Shape{batch, 1, 1});
  return reshape(where + i64(plane_base, Shape{channels.size(), 1}) + batch_base, y.shape());
}

Outputs max_pool_(NodeContext& n) {
  n.only_attributes(
      {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"});
  const Tensor x = n.input(0);
  const std::optional<Ints> kernel = n.attr_ints("kernel_shape");
  if (!kernel) n.fail("kernel_shape is required");
  const Window win = window_of(n, x, *kernel);
  const Tensor y = max_pool(x, *kernel, win, n.attr_int("ceil_mode", 0) != 0);
  if (n.node().output_size() < 2 || n.node().output(1).empty()) return {traced(y)};
  return {traced(y), traced(max_pool_indices(n, x, y, *kernel, win))};
}

Outputs average_pool_(NodeContext& n) {
  n.only_attributes({"auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape",
                     "pads", "strides"});
  const Tensor x = n.input(0);
  const std::optional<Ints> kernel = n.attr_ints("kernel_shape");
  if (!kernel) n.fail("kernel_shape is required");
  const Window win = window_of(n, x, *kernel);
  return {traced(avg_pool(x, *kernel, win, n.attr_int("count_include_pad", 0) != 0,
                          n.attr_int("ceil_mode", 0) != 0))};
}

/// The spatial axes of [N, C, spatial...] \p x.
Ints spatial_axes(NodeContext& n, const Tensor& x) {
  if (x.rank() < 3) n.fail(cat("the input ", x.shape(), " must be [N, C, spatial...]"));
  Ints axes;
  for (std::size_t d = 2; d < x.rank(); ++d) axes.push_back(static_cast<std::int64_t>(d));
  return axes;
}

Outputs global_average_pool(NodeContext& n) {
  n.only_attributes({});
  const Tensor x = n.input(0);
  return {traced(mean(x, spatial_axes(n, x), true))};
}

Outputs global_max_pool(NodeContext& n) {
  n.only_attributes({});
  const Tensor x = n.input(0);
  return {traced(max(x, spatial_axes(n, x), true))};
}

/// Inference: y = (x - mean) / sqrt(var + epsilon) * scale + bias, per channel (axis 1).
Outputs batch_normalization(NodeContext& n) {
  n.only_attributes({"epsilon", "momentum", "training_mode"});
  if (n.attr_int("training_mode", 0) != 0)
    n.fail("training_mode=1 (batch statistics) is not supported; export the model for inference");
  only_first_output(n, "running statistics, training only");
  const Tensor x = n.input(0);
  if (x.rank() < 2) n.fail(cat("the input ", x.shape(), " must be [N, C, ...]"));
  std::vector<Dim> dims{x.shape().dims()[1]};
  for (std::size_t d = 2; d < x.rank(); ++d) dims.emplace_back(1);
  const Shape per_channel(dims);
  const auto param = [&](std::size_t i) {
    const Tensor p = n.input(i);
    if (p.rank() != 1) n.fail(cat("input ", i, " ", p.shape(), " must be one value per channel"));
    return reshape(p, per_channel);
  };
  const Tensor scale = param(1), bias = param(2), m = param(3), var = param(4);
  const double eps = n.attr_float("epsilon", 1e-5);
  return {traced((x - m) * (scale * rsqrt(var + eps)) + bias)};
}

/// Input \p i's floats (scales, roi), known while importing; empty when it is not given
/// or empty (opsets 11-12 wrote an empty tensor for "none").
std::vector<double> known_floats(NodeContext& n, std::size_t i, const char* what) {
  if (!n.has_input(i)) return {};
  const HostValue* h = n.host(i);
  if (h == nullptr)
    n.fail(cat("its ", what, " (input ", i, ") must be known when the model is imported"));
  if (!h->is_float()) {
    std::vector<double> v;
    for (std::int64_t e : h->ints) v.push_back(static_cast<double>(e));
    return v;
  }
  return h->floats;
}

Outputs resize_(NodeContext& n) {
  n.only_attributes({"mode", "coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a",
                     "exclude_outside", "extrapolation_value", "antialias", "axes",
                     "keep_aspect_ratio_policy"});
  const Tensor x = n.input(0);
  const std::size_t r = x.rank();
  Resampling how{.mode = n.attr_string("mode", "nearest"),
                 .coordinates = n.attr_string("coordinate_transformation_mode", "half_pixel"),
                 .nearest_mode = n.attr_string("nearest_mode", "round_prefer_floor"),
                 .cubic_coeff_a = n.attr_float("cubic_coeff_a", -0.75),
                 .exclude_outside = n.attr_int("exclude_outside", 0) != 0,
                 .antialias = n.attr_int("antialias", 0) != 0,
                 .extrapolation_value = n.attr_float("extrapolation_value", 0)};
  Ints axes;
  if (const auto given = n.attr_ints("axes")) {
    for (std::int64_t a : *given) {
      axes.push_back(n.axis(a, r, "axes"));
      if (std::count(axes.begin(), axes.end(), axes.back()) > 1)
        n.fail(cat("axis ", a, " appears twice in axes"));
    }
  } else {
    for (std::size_t d = 0; d < r; ++d) axes.push_back(static_cast<std::int64_t>(d));
  }
  const std::size_t k = axes.size();
  const std::vector<double> roi = known_floats(n, 1, "roi"),
                            given_scales = known_floats(n, 2, "scales");
  Ints given_sizes;
  if (n.has_input(3) && (n.host(3) == nullptr || n.host(3)->size() != 0))
    given_sizes = n.ints(3, "sizes");
  if (given_scales.empty() == given_sizes.empty())
    n.fail("needs exactly one of scales (input 2) and sizes (input 3)");
  if ((!given_scales.empty() && given_scales.size() != k) ||
      (!given_sizes.empty() && given_sizes.size() != k))
    n.fail(cat("scales or sizes have ", std::max(given_scales.size(), given_sizes.size()),
               " values for ", k, " axes"));
  const bool crop = how.coordinates == "tf_crop_and_resize";
  if (crop && roi.size() != 2 * k)
    n.fail(cat("tf_crop_and_resize needs roi (input 1) with ", 2 * k, " values, got ", roi.size()));
  // Per axis of x: the crop, the scale, the output size (-1: as it is).
  std::vector<double> scales(r, 1.0);
  Ints sizes(r, -1);
  if (crop) {
    how.roi.assign(2 * r, 0.0);
    std::fill(how.roi.begin() + static_cast<long>(r), how.roi.end(), 1.0);
  }
  const auto static_dim = [&](std::int64_t axis) {
    const Dim& d = x.shape().dims()[static_cast<std::size_t>(axis)];
    if (!d.is_static())
      n.fail(cat("axis ", axis, " of the input ", x.shape(),
                 " is symbolic and resized; fix its size with --dim"));
    return d.size();
  };
  const std::string policy = n.attr_string("keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
    n.fail(cat("keep_aspect_ratio_policy \"", policy,
               "\" is not one of stretch, not_larger, not_smaller"));
  double kept = policy == "not_larger" ? INFINITY : 0;  // the one scale of a kept ratio
  for (std::size_t i = 0; i < k; ++i) {
    const auto a = static_cast<std::size_t>(axes[i]);
    if (crop) how.roi[a] = roi[i], how.roi[r + a] = roi[k + i];
    if (!given_sizes.empty()) {
      const std::int64_t in = static_dim(axes[i]);
      if (given_sizes[i] < 0) n.fail(cat("size ", given_sizes[i], " is negative"));
      sizes[a] = given_sizes[i];
      scales[a] = in == 0 ? 1.0 : static_cast<double>(given_sizes[i]) / static_cast<double>(in);
      kept = policy == "not_larger" ? std::min(kept, scales[a]) : std::max(kept, scales[a]);
      continue;
    }
    const double s = given_scales[i];
    if (!(s > 0) || !std::isfinite(s)) n.fail(cat("scale ", s, " must be finite and above 0"));
    scales[a] = s;
    const Dim& d = x.shape().dims()[a];
    if (s == 1 && !crop && !d.is_static()) continue;  // kept as it is, symbolic or not
    // ONNX: floor(input * scale), of the crop's length for tf_crop_and_resize.
    const double span = crop ? how.roi[r + a] - how.roi[a] : 1.0;
    const double out = std::floor(static_cast<double>(static_dim(axes[i])) * span * s);
    if (!(out >= 0) || out > 2147483648.0)
      n.fail(cat("axis ", a, " would have ", out, " elements (scale ", s, ")"));
    sizes[a] = static_cast<std::int64_t>(out);
  }
  if (!given_sizes.empty() && policy != "stretch")
    for (std::int64_t axis : axes) {  // one scale for every axis, sizes rounded half up
      const auto a = static_cast<std::size_t>(axis);
      scales[a] = kept;
      sizes[a] =
          static_cast<std::int64_t>(std::floor(kept * static_cast<double>(static_dim(axis)) + 0.5));
    }
  if (how.antialias && n.opset() < 18) n.fail("antialias is read from opset 18 on");
  return {traced(resize(x, sizes, how, scales))};
}

const OpConverter kConverters[] = {
    {"AveragePool", average_pool_},
    {"BatchNormalization", batch_normalization},
    {"Conv", conv_},
    {"ConvTranspose", conv_transpose_},
    {"GlobalAveragePool", global_average_pool},
    {"GlobalMaxPool", global_max_pool},
    {"MaxPool", max_pool_},
    {"Resize", resize_},
};

}  // namespace

std::span<const OpConverter> window_converters() { return kConverters; }

}  // namespace kiln::onnx_import
