// ONNX's sliding-window ops (Conv, ConvTranspose, MaxPool, AveragePool) onto kiln.conv,
// kiln.conv_transpose, kiln.max_pool and kiln.avg_pool, with auto_pad and ConvTranspose's
// output_shape resolved into explicit pads here; GlobalAveragePool and GlobalMaxPool as
// reductions over the spatial axes; BatchNormalization (inference) as elementwise ops.

#include <algorithm>

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

Outputs max_pool_(NodeContext& n) {
  n.only_attributes(
      {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"});
  only_first_output(n, "the indices of the maxima");
  const Tensor x = n.input(0);
  const std::optional<Ints> kernel = n.attr_ints("kernel_shape");
  if (!kernel) n.fail("kernel_shape is required");
  const Window win = window_of(n, x, *kernel);
  return {traced(max_pool(x, *kernel, win, n.attr_int("ceil_mode", 0) != 0))};
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

const OpConverter kConverters[] = {
    {"AveragePool", average_pool_},
    {"BatchNormalization", batch_normalization},
    {"Conv", conv_},
    {"ConvTranspose", conv_transpose_},
    {"GlobalAveragePool", global_average_pool},
    {"GlobalMaxPool", global_max_pool},
    {"MaxPool", max_pool_},
};

}  // namespace

std::span<const OpConverter> window_converters() { return kConverters; }

}  // namespace kiln::onnx_import
