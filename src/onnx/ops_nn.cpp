// ONNX's linear algebra, reductions and normalisations, one entry per op type.

#include <algorithm>
#include <limits>

#include "core/str.hpp"
#include "onnx/fold.hpp"

namespace kiln::onnx_import {
namespace {
using detail::cat;
using Outputs = std::vector<OnnxValue>;

Outputs matmul_(NodeContext& n) { return {traced(matmul(n.input(0), n.input(1)))}; }

Outputs gemm(NodeContext& n) {
  Tensor a = n.input(0), b = n.input(1);
  if (a.rank() != 2 || b.rank() != 2) n.fail("A and B must be matrices");
  if (n.attr_int("transA", 0) != 0) a = transpose(a);
  if (n.attr_int("transB", 0) != 0) b = transpose(b);
  Tensor y = matmul(a, b);
  if (const double alpha = n.attr_float("alpha", 1.0); alpha != 1.0) y = y * alpha;
  if (n.has_input(2)) {
    Tensor c = n.input(2);
    if (const double beta = n.attr_float("beta", 1.0); beta != 1.0) c = c * beta;
    y = y + c;
  }
  return {traced(y)};
}

// ---- reductions ---------------------------------------------------------------------------

/// The axes of a reduction (input 1 from \p since_opset, else the `axes` attribute), all of
/// them when none are given, or none with noop_with_empty_axes (then nothing: the identity).
std::optional<std::vector<std::int64_t>> reduce_axes(NodeContext& n, const Tensor& x,
                                                     std::int64_t since_opset) {
  std::vector<std::int64_t> axes;
  if (n.opset() >= since_opset) {
    if (n.has_input(1)) axes = n.ints(1, "axes");
  } else if (auto a = n.attr_ints("axes")) {
    axes = *a;
  }
  if (axes.empty()) {
    if (n.attr_int("noop_with_empty_axes", 0) != 0) return std::nullopt;
    for (std::size_t i = 0; i < x.rank(); ++i) axes.push_back(static_cast<std::int64_t>(i));
  }
  for (auto& a : axes) a = n.axis(a, x.rank());
  return axes;
}

using Reduce = Tensor (*)(const Tensor&, std::vector<std::int64_t>, bool, Loc);
Tensor reduce_sum(const Tensor& x, std::vector<std::int64_t> a, bool k, Loc l) {
  return sum(x, std::move(a), k, l);
}
Tensor reduce_mean(const Tensor& x, std::vector<std::int64_t> a, bool k, Loc l) {
  return mean(x, std::move(a), k, l);
}
Tensor reduce_max(const Tensor& x, std::vector<std::int64_t> a, bool k, Loc l) {
  return max(x, std::move(a), k, l);
}
Tensor reduce_min(const Tensor& x, std::vector<std::int64_t> a, bool k, Loc l) {
  return min(x, std::move(a), k, l);
}
Tensor reduce_prod(const Tensor& x, std::vector<std::int64_t> a, bool k, Loc l) {
  return prod(x, std::move(a), k, l);
}

/// The shape of \p x reduced over \p axes.
Shape reduced_shape(const Tensor& x, const std::vector<std::int64_t>& axes, bool keep) {
  std::vector<Dim> dims;
  for (std::size_t i = 0; i < x.rank(); ++i) {
    const bool reduced =
        std::find(axes.begin(), axes.end(), static_cast<std::int64_t>(i)) != axes.end();
    if (!reduced)
      dims.push_back(x.shape().dims()[i]);
    else if (keep)
      dims.emplace_back(1);
  }
  return Shape(dims);
}
/// True when a reduced axis is static and empty.
bool reduces_nothing(const Tensor& x, const std::vector<std::int64_t>& axes) {
  return std::any_of(axes.begin(), axes.end(), [&](std::int64_t a) {
    const Dim& d = x.shape().dims()[a];
    return d.is_static() && d.size() == 0;
  });
}

/// A reduction: \p before maps the input, \p R reduces, \p after maps the result. Over
/// no elements it gives \p empty (ONNX: -inf for max, +inf for min; sums reduce to 0).
template <Reduce R, std::int64_t Since, Tensor (*Before)(const Tensor&) = nullptr,
          Tensor (*After)(const Tensor&) = nullptr, int Empty = 0>
Outputs reduce(NodeContext& n) {
  Tensor x = n.input(0);
  const bool keep = n.attr_int("keepdims", 1) != 0;
  const auto axes = reduce_axes(n, x, Since);
  if (!axes) return {traced(x)};
  if (Empty != 0 && reduces_nothing(x, *axes)) {
    const double inf = std::numeric_limits<double>::infinity();
    return {
        traced(Tensor::full(TensorLayout(x.dtype(), reduced_shape(x, *axes, keep)), Empty * inf))};
  }
  const DType dtype = x.dtype();
  if (dtype == DType::bool_) x = cast(x, DType::u8);  // max: any, min: all
  if (Before != nullptr) x = Before(x);
  Tensor y = R(x, *axes, keep, Loc::current());
  if (After != nullptr) y = After(y);
  if (y.dtype() != dtype && dtype == DType::bool_) y = cast(y, dtype);
  return {traced(y)};
}
Tensor square(const Tensor& x) { return x * x; }
Tensor abs_of(const Tensor& x) { return kiln::abs(x); }
Tensor sqrt_of(const Tensor& x) { return kiln::sqrt(x); }

Outputs reduce_log_sum_exp(NodeContext& n) {
  const Tensor x = n.input(0);
  const bool keep = n.attr_int("keepdims", 1) != 0;
  const auto axes = reduce_axes(n, x, 18);
  if (!axes) return {traced(x)};
  if (reduces_nothing(x, *axes)) return {traced(log(sum(exp(x), *axes, keep)))};  // log 0
  // log(sum(exp(x - m))) + m with m the max: no overflow for large x.
  const Tensor m = max(x, *axes, true);
  Tensor y = log(sum(exp(x - m), *axes, true)) + m;
  if (!keep) {
    std::vector<Dim> dims;
    for (std::size_t i = 0; i < x.rank(); ++i)
      if (std::find(axes->begin(), axes->end(), static_cast<std::int64_t>(i)) == axes->end())
        dims.push_back(x.shape().dims()[i]);
    y = reshape(y, Shape(dims));
  }
  return {traced(y)};
}

Outputs arg_max_min(NodeContext& n, bool is_max) {
  Tensor x = n.input(0);
  const std::int64_t axis = n.axis(n.attr_int("axis", 0), x.rank());
  const bool keep = n.attr_int("keepdims", 1) != 0;
  if (!is_max) x = neg(x);
  if (n.attr_int("select_last_index", 0) == 0) return {traced(argmax(x, axis, keep))};
  // The last index of the extreme: the first one of the axis reversed, counted back.
  const Dim& dim = x.shape().dims()[axis];
  if (!dim.is_static())
    n.fail(cat("select_last_index over symbolic dim ", dim, " is not supported"));
  std::vector<std::int64_t> reversed;
  for (std::int64_t i = dim.size() - 1; i >= 0; --i) reversed.push_back(i);
  const Tensor indices = Tensor::from_data(reversed, Shape{dim.size()});
  const Tensor first = argmax(gather(x, indices, axis), axis, keep);
  return {traced(Tensor::scalar(static_cast<double>(dim.size() - 1), DType::i64) - first)};
}
Outputs arg_max(NodeContext& n) { return arg_max_min(n, true); }
Outputs arg_min(NodeContext& n) { return arg_max_min(n, false); }

Outputs softmax_(NodeContext& n) {
  const Tensor x = n.input(0);
  return {traced(softmax(x, n.axis(n.attr_int("axis", -1), x.rank())))};
}
Outputs log_softmax_(NodeContext& n) {
  const Tensor x = n.input(0);
  return {traced(log_softmax(x, n.axis(n.attr_int("axis", -1), x.rank())))};
}

// ---- normalisation ---------------------------------------------------------------------------

/// The axes [\p from, \p rank).
std::vector<std::int64_t> axes_from(std::int64_t from, std::size_t rank) {
  std::vector<std::int64_t> axes;
  for (std::int64_t i = from; i < static_cast<std::int64_t>(rank); ++i) axes.push_back(i);
  return axes;
}

/// (x - mean) / sqrt(var + eps) over \p axes, computed in f32 (f64 for f64), in x's dtype;
/// with the mean and 1 / stddev (kept dims, f32).
struct Standardized {
  Tensor y, mean, inv_stddev;
};
Standardized standardize(const Tensor& x, const std::vector<std::int64_t>& axes, double eps) {
  const DType stash = is_floating(x.dtype()) && x.dtype() != DType::f64 ? DType::f32 : x.dtype();
  const Tensor xs = cast(x, stash);
  const Tensor m = kiln::mean(xs, axes, true);
  const Tensor d = xs - m;
  const Tensor inv = rsqrt(kiln::mean(d * d, axes, true) + eps);
  return {cast(d * inv, x.dtype()), m, inv};
}

Outputs layer_normalization(NodeContext& n) {
  const Tensor x = n.input(0), scale = n.input(1);
  const std::int64_t axis = n.axis(n.attr_int("axis", -1), x.rank());
  const double eps = n.attr_float("epsilon", 1e-5);
  const bool extra = (n.node().output_size() > 1 && !n.node().output(1).empty()) ||
                     (n.node().output_size() > 2 && !n.node().output(2).empty());
  const bool last = axis + 1 == static_cast<std::int64_t>(x.rank());
  if (last && !extra && scale.rank() == 1 && is_floating(x.dtype()) &&
      n.attr_int("stash_type", 1) == 1) {
    const Tensor bias = n.has_input(2) ? n.input(2) : Tensor::zeros(scale.layout());
    if (bias.rank() == 1) return {traced(layer_norm(x, scale, bias, eps))};
  }
  // The general form: over axes [axis, rank), with the mean and 1/stddev as outputs.
  const Standardized s = standardize(x, axes_from(axis, x.rank()), eps);
  Tensor y = s.y * scale;
  if (n.has_input(2)) y = y + n.input(2);
  return {traced(y), traced(s.mean), traced(s.inv_stddev)};
}

/// [C] -> [C, 1, ...] (rank \p rank), to scale the channels of [N, C, spatial...].
Tensor per_channel(NodeContext& n, const Tensor& v, const Dim& channels, std::size_t rank,
                   std::string_view what) {
  if (v.rank() != 1 || v.shape().dims()[0] != channels)
    n.fail(cat(what, " must be [", channels, "], one per channel; got ", v.shape()));
  std::vector<Dim> dims(rank, Dim(1));
  dims[0] = channels;
  return reshape(v, Shape(dims));
}

/// Each channel of each batch entry over its spatial axes.
Outputs instance_normalization(NodeContext& n) {
  n.only_attributes({"epsilon"});
  const Tensor x = n.input(0);
  if (x.rank() < 3) n.fail(cat("the input must be [N, C, spatial...]; got rank ", x.rank()));
  const Dim& channels = x.shape().dims()[1];
  const Standardized s = standardize(x, axes_from(2, x.rank()), n.attr_float("epsilon", 1e-5));
  return {traced(s.y * per_channel(n, n.input(1), channels, x.rank() - 1, "the scale (input 1)") +
                 per_channel(n, n.input(2), channels, x.rank() - 1, "the bias (input 2)"))};
}

/// [N, C, spatial...] as [N, G, C / G, spatial...], each group over its channels and
/// spatial axes; the scale and bias are per group (opset 18) or per channel (21).
Outputs group_normalization(NodeContext& n) {
  n.only_attributes({"epsilon", "num_groups", "stash_type"});
  const Tensor x = n.input(0);
  if (x.rank() < 2) n.fail(cat("the input must be [N, C, spatial...]; got rank ", x.rank()));
  if (n.attr_int("stash_type", 1) != 1) n.fail("stash_type other than 1 (f32) is not supported");
  const std::int64_t groups = n.attr_int("num_groups", 0);
  const Dim& channel_dim = x.shape().dims()[1];
  if (!channel_dim.is_static())
    n.fail(cat("the channels are the symbolic dim ", channel_dim,
               "; GroupNormalization needs "
               "their number"));
  const std::int64_t channels = channel_dim.size();
  if (groups < 1 || channels % groups != 0)
    n.fail(cat("num_groups ", groups, " does not divide the ", channels, " channels"));
  std::vector<Dim> grouped = x.shape().dims();
  grouped[1] = channels / groups;
  grouped.insert(grouped.begin() + 1, Dim(groups));
  const Standardized s = standardize(reshape(x, Shape(grouped)), axes_from(2, grouped.size()),
                                     n.attr_float("epsilon", 1e-5));
  const Tensor scale = n.input(1), bias = n.input(2);
  if (n.opset() >= 21) {
    const Tensor y = reshape(s.y, x.shape());
    return {traced(y * per_channel(n, scale, channel_dim, x.rank() - 1, "the scale (input 1)") +
                   per_channel(n, bias, channel_dim, x.rank() - 1, "the bias (input 2)"))};
  }
  const Tensor y = s.y * per_channel(n, scale, Dim(groups), grouped.size() - 1, "the scale") +
                   per_channel(n, bias, Dim(groups), grouped.size() - 1, "the bias");
  return {traced(reshape(y, x.shape()))};
}

const OpConverter kConverters[] = {
    {"ArgMax", arg_max},
    {"ArgMin", arg_min},
    {"Gemm", gemm},
    {"GroupNormalization", group_normalization, nullptr, 18},
    {"InstanceNormalization", instance_normalization},
    {"LayerNormalization", layer_normalization, nullptr, 17},
    {"LogSoftmax", log_softmax_},
    {"MatMul", matmul_},
    {"ReduceL1", reduce<reduce_sum, 18, abs_of>},
    {"ReduceL2", reduce<reduce_sum, 18, square, sqrt_of>},
    {"ReduceLogSumExp", reduce_log_sum_exp},
    {"ReduceMax", reduce<reduce_max, 18, nullptr, nullptr, -1>},
    {"ReduceMean", reduce<reduce_mean, 18>},
    {"ReduceMin", reduce<reduce_min, 18, nullptr, nullptr, 1>},
    {"ReduceProd", reduce<reduce_prod, 18>},
    {"ReduceSum", reduce<reduce_sum, 13>},
    {"ReduceSumSquare", reduce<reduce_sum, 18, square>},
    {"Softmax", softmax_},
};

}  // namespace

std::span<const OpConverter> nn_converters() { return kConverters; }

}  // namespace kiln::onnx_import
