// ONNX's shape and data-movement ops, one entry per op type; where their inputs are known
// while importing (shapes, axes, indices) they are computed on the host (fold), so that
// shape computations become static or symbolic kiln shapes.

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/str.hpp"
#include "kiln/core/error.hpp"
#include "onnx/fold.hpp"
#include "onnx/proto.hpp"

namespace kiln::onnx_import {
namespace {
using detail::cat;
using Outputs = std::vector<OnnxValue>;
using Folded = std::optional<std::vector<HostValue>>;

Folded one(HostValue h) { return std::vector<HostValue>{std::move(h)}; }
std::vector<Dim> host_dims(const HostValue& h) { return {h.shape.begin(), h.shape.end()}; }

/// 0, 1, ..., n - 1 (i64) for a size that may be symbolic (`seq`, `seq + 1`): an
/// exclusive running sum of ones, so that it has n's size whatever n is at run time.
Tensor iota(const Dim& n) {
  const Tensor one = Tensor::from_data(std::vector<std::int64_t>{1}, Shape{1});
  return cumsum(broadcast_to(one, Shape{n}), 0, /*exclusive=*/true);
}

/// The dims of \p layout as a host value (what `Shape` gives).
HostValue dims_value(const Shape& shape, std::size_t begin, std::size_t end) {
  HostValue h;
  h.shape = {static_cast<std::int64_t>(end - begin)};
  bool symbolic = false;
  for (std::size_t i = begin; i < end; ++i) {
    const Dim& d = shape.dims()[i];
    h.ints.push_back(d.is_static() ? d.size() : 0);
    h.symbols.push_back(d.is_static() ? std::string() : d.symbol());
    symbolic = symbolic || !d.is_static();
  }
  if (!symbolic) h.symbols.clear();
  return h;
}

/// Optional axes: input \p input from \p since_opset on, else attribute `axes`.
std::optional<std::vector<std::int64_t>> axes_of(NodeContext& n, std::size_t input,
                                                 std::int64_t since_opset) {
  if (n.opset() >= since_opset) {
    if (!n.has_input(input)) return std::nullopt;
    return n.ints(input, "axes");
  }
  return n.attr_ints("axes");
}

std::vector<std::int64_t> normalized(NodeContext& n, std::vector<std::int64_t> axes,
                                     std::size_t rank) {
  for (auto& a : axes) a = n.axis(a, rank, "axis");
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) n.fail("axes repeat an axis");
  return axes;
}

// ---- Shape, Size ---------------------------------------------------------------------------

Folded fold_shape(NodeContext& n) {
  const Shape shape = n.layout(0).shape;
  const auto rank = static_cast<std::int64_t>(shape.rank());
  const auto clamp = [&](std::int64_t v) {
    if (v < 0) v += rank;
    return static_cast<std::size_t>(std::clamp<std::int64_t>(v, 0, rank));
  };
  const std::size_t begin = clamp(n.attr_int("start", 0));
  const std::size_t end = std::max(begin, clamp(n.attr_int("end", rank)));
  return one(dims_value(shape, begin, end));
}
Outputs no_convert(NodeContext& n) {
  n.fail("cannot be computed from what is known (this should have been folded)");
}
Folded fold_size(NodeContext& n) {
  const Shape shape = n.layout(0).shape;
  Dim count = 1;  // an expression over the symbolic dims (batch*seq)
  for (const Dim& d : shape.dims()) count = count * d;
  HostValue h;
  h.ints = {count.is_static() ? count.size() : 0};
  if (!count.is_static()) h.symbols = {count.symbol()};
  return one(std::move(h));
}

// ---- Reshape, Flatten, Squeeze, Unsqueeze ---------------------------------------------------

/// The dims ONNX's Reshape of \p in to \p target (0: copy, -1: infer) means.
std::vector<Dim> reshape_dims(NodeContext& n, const Shape& in, const HostValue& target,
                              bool allowzero) {
  std::vector<Dim> out;
  std::optional<std::size_t> infer;
  for (std::size_t k = 0; k < target.size(); ++k) {
    const bool symbol = target.symbolic() && !target.symbols[k].empty();
    const std::int64_t v = symbol ? 0 : target.ints[k];
    if (!symbol && v == 0 && !allowzero) {
      if (k >= in.rank())
        n.fail(cat("shape entry ", k, " is 0 (copy) but the input has rank ", in.rank()));
      out.push_back(in.dims()[k]);
    } else if (!symbol && v == -1) {
      if (infer) n.fail("the shape has more than one -1");
      infer = k;
      out.emplace_back(1);
    } else if (symbol || v >= 0) {
      out.push_back(target.dim(k));
    } else {
      n.fail(cat("shape entry ", k, " is ", v));
    }
  }
  if (!infer) return out;
  // -1: the input's elements over the others' (exactly, for every value of the names).
  Dim in_count = 1, out_count = 1;
  for (const Dim& d : in.dims()) in_count = in_count * d;
  for (std::size_t k = 0; k < out.size(); ++k)
    if (k != *infer) out_count = out_count * out[k];
  const std::optional<Dim> rest = divide_exactly(in_count, out_count);
  if (!rest)
    n.fail(cat("cannot infer the -1 of shape ", Shape(out), " from input ", in, ": ", in_count,
               " elements are not a multiple of ", out_count, " for every value of the names"));
  out[*infer] = *rest;
  return out;
}

Outputs reshape_(NodeContext& n) {
  const Tensor x = n.input(0);
  const HostValue* target = n.int_host(1, "the shape");
  if (target == nullptr)
    n.fail(
        "the shape (input 1) must be known when the model is imported (a constant, an "
        "initializer, or computed from shapes)");
  return {traced(
      reshape(x, Shape(reshape_dims(n, x.shape(), *target, n.attr_int("allowzero", 0) != 0))))};
}
Folded fold_reshape(NodeContext& n) {
  const HostValue* x = n.host(0);
  const HostValue* target = n.int_host(1, "the shape");
  if (x == nullptr || target == nullptr) return std::nullopt;
  std::vector<Dim> in(x->shape.begin(), x->shape.end());
  HostValue out = *x;
  out.shape.clear();
  for (const Dim& d : reshape_dims(n, Shape(in), *target, n.attr_int("allowzero", 0) != 0)) {
    if (!d.is_static()) return std::nullopt;
    out.shape.push_back(d.size());
  }
  std::int64_t count = 1;
  for (const std::int64_t d : out.shape) count = checked_mul(count, d, "reshape");
  if (count != static_cast<std::int64_t>(x->size()))
    n.fail(cat("cannot reshape ", x->size(), " elements to ", Shape(host_dims(out))));
  return one(std::move(out));
}

/// The product of \p dims as one dim (static, or an expression: batch*seq).
Dim product(std::span<const Dim> dims) {
  Dim p = 1;
  for (const Dim& d : dims) p = p * d;
  return p;
}
Outputs flatten(NodeContext& n) {
  const Tensor x = n.input(0);
  const std::int64_t rank = static_cast<std::int64_t>(x.rank());
  std::int64_t axis = n.attr_int("axis", 1);
  if (axis < -rank || axis > rank) n.fail(cat("axis ", axis, " is out of range for rank ", rank));
  if (axis < 0) axis += rank;
  const auto& dims = x.shape().dims();
  const auto split = static_cast<std::size_t>(axis);
  return {traced(reshape(
      x, Shape{product(std::span(dims).first(split)), product(std::span(dims).subspan(split))}))};
}

std::vector<Dim> squeezed(NodeContext& n, const Shape& shape,
                          const std::optional<std::vector<std::int64_t>>& axes) {
  std::vector<Dim> out;
  const std::vector<std::int64_t> drop =
      axes ? normalized(n, *axes, shape.rank()) : std::vector<std::int64_t>{};
  for (std::size_t i = 0; i < shape.rank(); ++i) {
    const Dim& d = shape.dims()[i];
    const bool listed =
        std::find(drop.begin(), drop.end(), static_cast<std::int64_t>(i)) != drop.end();
    if (listed && !(d.is_static() && d.size() == 1))
      n.fail(cat("cannot squeeze axis ", i, " of ", shape, ": its size is not 1"));
    if (listed || (!axes && d.is_static() && d.size() == 1)) continue;
    if (!axes && !d.is_static())
      n.fail(cat("squeeze without axes of ", shape, ": symbolic dim ", d, " may or may not be 1"));
    out.push_back(d);
  }
  return out;
}
std::vector<Dim> unsqueezed(NodeContext& n, const Shape& shape,
                            const std::vector<std::int64_t>& axes) {
  const std::size_t rank = shape.rank() + axes.size();
  const std::vector<std::int64_t> add = normalized(n, axes, rank);
  std::vector<Dim> out;
  std::size_t next = 0;
  for (std::size_t i = 0; i < rank; ++i) {
    if (std::find(add.begin(), add.end(), static_cast<std::int64_t>(i)) != add.end())
      out.emplace_back(1);
    else
      out.push_back(shape.dims()[next++]);
  }
  return out;
}
Outputs squeeze(NodeContext& n) {
  const Tensor x = n.input(0);
  return {traced(reshape(x, Shape(squeezed(n, x.shape(), axes_of(n, 1, 13)))))};
}
Outputs unsqueeze(NodeContext& n) {
  const Tensor x = n.input(0);
  const auto axes = axes_of(n, 1, 13);
  if (!axes) n.fail("needs axes");
  return {traced(reshape(x, Shape(unsqueezed(n, x.shape(), *axes))))};
}
/// A host value with a new shape (same elements).
Folded reshaped(const HostValue& h, const std::vector<Dim>& dims) {
  HostValue out = h;
  out.shape.clear();
  for (const Dim& d : dims) out.shape.push_back(d.size());
  return one(std::move(out));
}
Folded fold_squeeze(NodeContext& n) {
  const HostValue* x = n.host(0);
  if (x == nullptr) return std::nullopt;
  return reshaped(*x, squeezed(n, Shape(host_dims(*x)), axes_of(n, 1, 13)));
}
Folded fold_unsqueeze(NodeContext& n) {
  const HostValue* x = n.host(0);
  const auto axes = axes_of(n, 1, 13);
  if (x == nullptr || !axes) return std::nullopt;
  return reshaped(*x, unsqueezed(n, Shape(host_dims(*x)), *axes));
}

// ---- Transpose, Concat, Split, Slice, Expand, Gather, Tile ------------------------------------

Outputs transpose_(NodeContext& n) {
  const Tensor x = n.input(0);
  std::vector<std::int64_t> perm(x.rank());
  for (std::size_t i = 0; i < perm.size(); ++i)
    perm[i] = static_cast<std::int64_t>(perm.size() - 1 - i);
  if (auto p = n.attr_ints("perm")) perm = *p;
  return {traced(permute(x, perm))};
}

Outputs concat_(NodeContext& n) {
  std::vector<Tensor> xs;
  for (std::size_t i = 0; i < n.num_inputs(); ++i)
    if (n.has_input(i)) xs.push_back(n.input(i));
  if (xs.empty()) n.fail("needs at least one input");
  const std::int64_t axis = n.axis(n.attr_int("axis", 0), xs.front().rank());
  return {traced(concat(xs, axis))};
}
Folded fold_concat(NodeContext& n) {
  const auto in = all_known(n);
  if (!in || in->empty() || (*in)[0] == nullptr) return std::nullopt;
  const HostValue& first = *(*in)[0];
  const std::size_t rank = first.shape.size();
  if (rank == 0) n.fail("cannot concatenate scalars");
  const std::int64_t axis = n.axis(n.attr_int("axis", 0), rank);
  std::vector<std::int64_t> shape = first.shape;
  shape[axis] = 0;
  for (const HostValue* h : *in) {
    if (h == nullptr || h->shape.size() != rank || h->dtype != first.dtype) return std::nullopt;
    for (std::size_t d = 0; d < rank; ++d)
      if (static_cast<std::int64_t>(d) != axis && h->shape[d] != first.shape[d])
        n.fail(cat("inputs differ at axis ", d, " (", h->shape[d], " and ", first.shape[d],
                   "), which is not the concatenation axis ", axis));
    shape[axis] += h->shape[axis];
  }
  HostValue out = like(first, shape);
  const std::int64_t outer = [&] {
    std::int64_t o = 1;
    for (std::int64_t i = 0; i < axis; ++i) o *= shape[i];
    return o;
  }();
  for (std::int64_t o = 0; o < outer; ++o)
    for (const HostValue* h : *in) {
      std::int64_t inner = 1;
      for (std::size_t i = axis; i < rank; ++i) inner *= h->shape[i];
      for (std::int64_t k = 0; k < inner; ++k) copy_element(*h, o * inner + k, out);
    }
  if (!out.symbolic()) out.symbols.clear();
  return one(std::move(out));
}

Outputs split_(NodeContext& n) {
  const Tensor x = n.input(0);
  const std::int64_t axis = n.axis(n.attr_int("axis", 0), x.rank());
  const Dim& dim = x.shape().dims()[axis];
  if (!dim.is_static()) n.fail(cat("splitting symbolic dim ", dim, " is not supported"));
  std::vector<std::int64_t> sizes;
  if (n.has_input(1)) {
    sizes = n.ints(1, "split");
  } else if (const auto* a = n.attribute("split"); a != nullptr) {
    sizes = *n.attr_ints("split");
  } else {
    const std::int64_t parts = n.attr_int("num_outputs", n.node().output_size());
    if (parts <= 0) n.fail("needs num_outputs or split");
    if (parts != n.node().output_size())
      n.fail(
          cat("num_outputs is ", parts, " but the node has ", n.node().output_size(), " outputs"));
    const std::int64_t each = dim.size() / parts + (dim.size() % parts != 0 ? 1 : 0);
    for (std::int64_t left = dim.size(); left > 0; left -= each)
      sizes.push_back(std::min(each, left));
    while (static_cast<std::int64_t>(sizes.size()) < parts) sizes.push_back(0);
  }
  Outputs out;
  for (const Tensor& t : split(x, sizes, axis)) out.push_back(traced(t));
  return out;
}

/// The indices ONNX's Slice takes along an axis: first, first + step, ... (count of them).
struct SliceRange {
  std::int64_t first = 0, count = 0, step = 1;
  std::int64_t at(std::int64_t k) const { return first + k * step; }
};
/// The range ONNX's Slice takes along an axis of \p size: from \p start by \p step (either
/// sign) up to, not including, \p end, each clamped as ONNX says. Computed by count, never
/// by stepping: a hostile step near 2^63 would overflow, and a huge axis is not walked.
SliceRange slice_range(std::int64_t start, std::int64_t end, std::int64_t step, std::int64_t size) {
  const auto wrap = [&](std::int64_t v) { return v < 0 ? (v < -size ? -1 : v + size) : v; };
  start = wrap(start);
  end = wrap(end);
  if (step > 0) {
    start = std::clamp<std::int64_t>(start, 0, size);
    end = std::clamp<std::int64_t>(end, 0, size);
    return {start, end > start ? (end - start - 1) / step + 1 : 0, step};
  }
  start = std::clamp<std::int64_t>(start, -1, size - 1);
  end = std::clamp<std::int64_t>(end, -1, size - 1);
  // -step overflows for INT64_MIN; any step that large takes one element anyway.
  const std::int64_t back = step == std::numeric_limits<std::int64_t>::min() ? size + 1 : -step;
  return {start, start > end ? (start - end - 1) / back + 1 : 0, start > end ? -back : -1};
}
struct SliceSpec {
  std::vector<std::int64_t> starts, ends, axes, steps;
};
SliceSpec slice_spec(NodeContext& n, std::size_t rank) {
  SliceSpec s;
  s.starts = n.ints(1, "starts");
  s.ends = n.ints(2, "ends");
  if (n.has_input(3))
    s.axes = n.ints(3, "axes");
  else
    for (std::size_t i = 0; i < s.starts.size(); ++i)
      s.axes.push_back(static_cast<std::int64_t>(i));
  if (n.has_input(4))
    s.steps = n.ints(4, "steps");
  else
    s.steps.assign(s.starts.size(), 1);
  if (s.ends.size() != s.starts.size() || s.axes.size() != s.starts.size() ||
      s.steps.size() != s.starts.size())
    n.fail("starts, ends, axes and steps differ in length");
  for (auto& a : s.axes) a = n.axis(a, rank);
  for (const std::int64_t step : s.steps)
    if (step == 0) n.fail("a step is 0");
  return s;
}
/// Slice where a bound (`seq`, from a shape) or the sliced axis is symbolic: step 1, the
/// bounds as dims (negative ones count from the axis's end), clamped to the axis where
/// their difference with it is known; the axis taken whole, or gathered at start, start +
/// 1, ... (an end past a static axis, `[:seq]` of 512 positions, is then the gather's
/// index error at run time, never a silent clamp).
Tensor slice_symbolic(NodeContext& n, Tensor x) {
  const HostValue* starts = n.int_host(1, "starts");
  const HostValue* ends = n.int_host(2, "ends");
  if (starts == nullptr || ends == nullptr || starts->shape.size() != 1 ||
      ends->size() != starts->size())
    n.fail(
        "starts and ends must be known when the model is imported (numbers, or sizes from "
        "the inputs' shapes), one each per axis");
  std::vector<std::int64_t> axes, steps;
  for (std::size_t i = 0; i < starts->size(); ++i) axes.push_back(static_cast<std::int64_t>(i));
  if (n.has_input(3)) axes = n.ints(3, "axes");
  if (n.has_input(4)) steps = n.ints(4, "steps");
  if (axes.size() != starts->size() || (!steps.empty() && steps.size() != axes.size()))
    n.fail("starts, ends, axes and steps differ in length");
  for (std::size_t i = 0; i < axes.size(); ++i) {
    const std::int64_t axis = n.axis(axes[i], x.rank());
    if (!steps.empty() && steps[i] != 1)
      n.fail(cat("a slice with symbolic bounds or over a symbolic dim needs step 1, not ", steps[i],
                 " (fix the dims with --dim)"));
    const Dim size = x.shape().dims()[static_cast<std::size_t>(axis)];
    const auto bound = [&](const HostValue& h, bool is_end) -> Dim {
      if (h.symbolic() && !h.symbols[i].empty()) return Dim(h.symbols[i]);
      const std::int64_t v = h.ints[i];
      if (is_end && v >= std::numeric_limits<std::int32_t>::max()) return size;  // to the end
      if (v >= 0) return size.is_static() ? Dim(std::min(v, size.size())) : Dim(v);
      if (size.is_static()) return Dim(std::max<std::int64_t>(0, size.size() + v));
      const std::optional<std::int64_t> below = constant_difference(size, Dim(-v));
      if (below && *below < 0) return Dim(0);
      return size - Dim(-v);  // counted from the end: seq - 1
    };
    Dim start = bound(*starts, false), end = bound(*ends, true);
    for (Dim* b : {&start, &end})
      if (const auto past = constant_difference(*b, size); past && *past > 0) *b = size;
    Dim count = 0;
    if (const auto k = constant_difference(end, start)) {
      count = Dim(std::max<std::int64_t>(0, *k));
    } else {
      try {
        count = end - start;
      } catch (const UserError& e) {
        n.fail(cat("slice [", start, ", ", end, ") along axis ", axis, ": ", e.what()));
      }
    }
    if (start == Dim(0) && count == size) continue;  // the whole axis
    Tensor at = iota(count);
    if (start != Dim(0)) at = at + size_value(start);
    x = gather(x, at, axis);
  }
  return x;
}

Outputs slice_(NodeContext& n) {
  Tensor x = n.input(0);
  const HostValue* starts = n.int_host(1, "starts");
  const HostValue* ends = n.int_host(2, "ends");
  bool symbolic =
      (starts != nullptr && starts->symbolic()) || (ends != nullptr && ends->symbolic());
  if (!symbolic && starts != nullptr && ends != nullptr && n.has_input(3)) {
    for (const std::int64_t a : n.ints(3, "axes"))
      symbolic =
          symbolic || !x.shape().dims()[static_cast<std::size_t>(n.axis(a, x.rank()))].is_static();
  } else if (!symbolic && starts != nullptr) {
    for (std::size_t i = 0; i < starts->size() && i < x.rank(); ++i)
      symbolic = symbolic || !x.shape().dims()[i].is_static();
  }
  if (symbolic) return {traced(slice_symbolic(n, x))};
  const SliceSpec s = slice_spec(n, x.rank());
  for (std::size_t i = 0; i < s.axes.size(); ++i) {
    const Dim& dim = x.shape().dims()[s.axes[i]];
    if (!dim.is_static()) {
      if (s.starts[i] == 0 && s.ends[i] >= std::numeric_limits<std::int32_t>::max() &&
          s.steps[i] == 1)
        continue;
      n.fail(cat("slicing symbolic dim ", dim, " is not supported (only the whole axis)"));
    }
    const SliceRange r = slice_range(s.starts[i], s.ends[i], s.steps[i], dim.size());
    if (r.step > 0) {
      const std::int64_t start = r.count == 0 ? 0 : r.first;
      const std::int64_t stop = r.count == 0 ? 0 : r.at(r.count - 1) + 1;
      x = slice(x, s.axes[i], start, stop, r.step);
    } else {  // backwards: the picked elements, gathered
      if (r.count > static_cast<std::int64_t>(kMaxBackwardSlice))
        n.fail(cat("a backwards slice of ", r.count, " elements along axis ", s.axes[i],
                   " is more than kiln imports (", kMaxBackwardSlice, ")"));
      std::vector<std::int64_t> picked(static_cast<std::size_t>(r.count));
      for (std::int64_t k = 0; k < r.count; ++k) picked[static_cast<std::size_t>(k)] = r.at(k);
      const Tensor indices = Tensor::from_data(picked, Shape{r.count});
      x = gather(x, indices, s.axes[i]);
    }
  }
  return {traced(x)};
}
Folded fold_slice(NodeContext& n) {
  const HostValue* x = n.host(0);
  if (x == nullptr || x->shape.size() != 1) return std::nullopt;  // shape vectors
  for (std::size_t i = 1; i < n.num_inputs(); ++i)
    if (n.has_input(i) && n.host(i) == nullptr) return std::nullopt;
  const SliceSpec s = slice_spec(n, 1);
  const SliceRange r = s.axes.empty()
                           ? SliceRange{0, x->shape[0], 1}
                           : slice_range(s.starts[0], s.ends[0], s.steps[0], x->shape[0]);
  HostValue out = like(*x, {0});
  for (std::int64_t k = 0; k < r.count; ++k)
    copy_element(*x, static_cast<std::size_t>(r.at(k)), out);
  out.shape = {static_cast<std::int64_t>(out.size())};
  if (!out.symbolic()) out.symbols.clear();
  return one(std::move(out));
}

Outputs expand(NodeContext& n) {
  const Tensor x = n.input(0);
  const HostValue* target = n.int_host(1, "the shape");
  if (target == nullptr) n.fail("the shape (input 1) must be known when the model is imported");
  const std::size_t rank = std::max(x.rank(), target->size());
  std::vector<Dim> out(rank, Dim(1));
  for (std::size_t i = 0; i < rank; ++i) {
    const std::size_t xi = i + x.rank() - rank, ti = i + target->size() - rank;
    const Dim a = i + x.rank() >= rank ? x.shape().dims()[xi] : Dim(1);
    const Dim b = i + target->size() >= rank ? target->dim(ti) : Dim(1);
    out[i] = b == Dim(1) ? a : b;
    if (a != b && a != Dim(1) && b != Dim(1))
      n.fail(
          cat("cannot expand ", x.shape(), " to ", target->size(), " dims: ", a, " against ", b));
  }
  return {traced(Shape(out) == x.shape() ? x : broadcast_to(x, Shape(out)))};
}

Outputs gather_(NodeContext& n) {
  const Tensor x = n.input(0);
  const std::int64_t axis = n.axis(n.attr_int("axis", 0), x.rank());
  const Dim& dim = x.shape().dims()[axis];
  Tensor indices = n.input(1);
  if (dim.is_static()) {  // ONNX: negative indices count from the end
    const Tensor size = Tensor::scalar(static_cast<double>(dim.size()), indices.dtype());
    indices = where(indices < 0.0, indices + size, indices);
  }
  return {traced(gather(x, indices, axis))};
}
Folded fold_gather(NodeContext& n) {
  const HostValue* x = n.host(0);
  const HostValue* idx = n.host(1);
  if (x == nullptr || idx == nullptr || idx->symbolic() || idx->is_float()) return std::nullopt;
  if (x->shape.empty()) n.fail("cannot gather from a scalar");
  const std::int64_t axis = n.axis(n.attr_int("axis", 0), x->shape.size());
  std::vector<std::int64_t> shape(x->shape.begin(), x->shape.begin() + axis);
  shape.insert(shape.end(), idx->shape.begin(), idx->shape.end());
  shape.insert(shape.end(), x->shape.begin() + axis + 1, x->shape.end());
  HostValue out = like(*x, shape);
  std::int64_t outer = 1, inner = 1;
  for (std::int64_t i = 0; i < axis; ++i) outer *= x->shape[i];
  for (std::size_t i = axis + 1; i < x->shape.size(); ++i) inner *= x->shape[i];
  const std::int64_t size = x->shape[axis];
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t k : idx->ints) {
      if (k < -size || k >= size) n.fail(cat("index ", k, " is out of range for a dim of ", size));
      if (k < 0) k += size;
      for (std::int64_t i = 0; i < inner; ++i)
        copy_element(*x, static_cast<std::size_t>((o * size + k) * inner + i), out);
    }
  if (!out.symbolic()) out.symbols.clear();
  return one(std::move(out));
}

// ---- Constant, ConstantOfShape, Range --------------------------------------------------------

Outputs constant(NodeContext& n) {
  const auto& attrs = n.node().attribute();
  if (attrs.size() != 1) n.fail("needs exactly one value attribute");
  const onnx::AttributeProto& a = attrs.Get(0);
  OnnxValue v;
  if (a.name() == "value") {
    v.data = to_tensor(a.t(), {"", n.where()});
  } else if (a.name() == "value_float") {
    v.data = Tensor::scalar(a.f(), DType::f32);
  } else if (a.name() == "value_int") {
    v.data = Tensor::from_data(std::vector<std::int64_t>{a.i()}, Shape{});
  } else if (a.name() == "value_floats") {
    const std::vector<float> f(a.floats().begin(), a.floats().end());
    v.data = Tensor::from_data(f, Shape{static_cast<std::int64_t>(f.size())});
  } else if (a.name() == "value_ints") {
    const std::vector<std::int64_t> i(a.ints().begin(), a.ints().end());
    v.data = Tensor::from_data(i, Shape{static_cast<std::int64_t>(i.size())});
  } else {
    n.fail(cat("attribute '", a.name(), "' is not supported (strings and sparse tensors)"));
  }
  if (v.data->num_elements() > kMaxEmbeddedConstant) v.weight_name = n.node().output(0);
  return {std::move(v)};
}

double fill_value(NodeContext& n, DType& dtype) {
  dtype = DType::f32;
  const auto* a = n.attribute("value");
  if (a == nullptr) return 0;
  const Tensor t = to_tensor(a->t(), {"", n.where()});
  if (t.num_elements() != 1) n.fail("value must hold one element");
  dtype = t.dtype();
  return t.to_doubles()[0];
}
Outputs constant_of_shape(NodeContext& n) {
  DType dtype = DType::f32;
  const double value = fill_value(n, dtype);
  const HostValue* shape = n.int_host(0, "the shape");
  if (shape == nullptr) n.fail("the shape (input 0) must be known when the model is imported");
  std::vector<Dim> dims;
  for (std::size_t i = 0; i < shape->size(); ++i) dims.push_back(shape->dim(i));
  const Tensor s = Tensor::scalar(value, dtype);
  if (Shape(dims).is_static())
    return {traced(Tensor::full(TensorLayout(dtype, Shape(dims)), value))};
  return {traced(broadcast_to(s, Shape(dims)))};
}
Folded fold_constant_of_shape(NodeContext& n) {
  const HostValue* shape = n.int_host(0, "the shape");
  if (shape == nullptr || shape->symbolic()) return std::nullopt;
  std::int64_t count = 1;
  for (const std::int64_t d : shape->ints) {
    if (d < 0) n.fail(cat("the shape (input 0) has a negative dim, ", d));
    count = checked_mul(count, d, "ConstantOfShape");
  }
  if (count > static_cast<std::int64_t>(kMaxHostElements)) return std::nullopt;
  HostValue out;
  const double value = fill_value(n, out.dtype);
  out.shape = shape->ints;
  if (out.is_float())
    out.floats.assign(count, value);
  else
    out.ints.assign(count, static_cast<std::int64_t>(value));
  return one(std::move(out));
}

/// Range's start, limit and delta share one type (ONNX's T): a mix would read one
/// number from the wrong list.
void check_range_types(NodeContext& n, const HostValue& start, const HostValue& limit,
                       const HostValue& delta) {
  if (start.dtype != limit.dtype || start.dtype != delta.dtype)
    n.fail(cat("start, limit and delta must have one type; they are ", name(start.dtype), ", ",
               name(limit.dtype), " and ", name(delta.dtype)));
}

/// Range over a symbolic limit (GPT-2's and Llama's position ids: Range(0, seq, 1)):
/// start + 0, 1, ... for limit - start elements, integers with delta 1.
Outputs range_(NodeContext& n) {
  const HostValue* start = n.host(0);
  const HostValue* limit = n.host(1);
  const HostValue* delta = n.host(2);
  if (!start || !limit || !delta || start->size() != 1 || limit->size() != 1 || delta->size() != 1)
    n.fail(
        "start, limit and delta must be known when the model is imported (numbers, or sizes "
        "from the inputs' shapes)");
  check_range_types(n, *start, *limit, *delta);
  if (start->is_float() || delta->symbolic() || delta->ints[0] != 1)
    n.fail("a Range over a symbolic dim must count integers by 1 (fix the dims with --dim)");
  Dim first = 0, count = 0;
  try {
    first = start->dim(0);
    const Dim last = limit->dim(0);
    const std::optional<std::int64_t> k = constant_difference(last, first);
    count = k ? Dim(std::max<std::int64_t>(0, *k)) : last - first;
  } catch (const UserError& e) {
    n.fail(cat("Range from ", start->dims_text(), " to ", limit->dims_text(), ": ", e.what()));
  }
  Tensor out = iota(count);
  if (first != Dim(0)) out = out + size_value(first);
  return {traced(start->dtype == DType::i64 ? out : cast(out, start->dtype))};
}
Folded fold_range(NodeContext& n) {
  const HostValue* start = n.host(0);
  const HostValue* limit = n.host(1);
  const HostValue* delta = n.host(2);
  if (!start || !limit || !delta || start->symbolic() || limit->symbolic() || delta->symbolic() ||
      start->size() != 1 || limit->size() != 1 || delta->size() != 1)
    return std::nullopt;
  check_range_types(n, *start, *limit, *delta);
  HostValue out;
  out.dtype = start->dtype;
  if (out.is_float()) {
    const double s = start->floats[0], l = limit->floats[0], d = delta->floats[0];
    if (d == 0) n.fail("delta is 0");
    const double count = std::max(0.0, std::ceil((l - s) / d));
    if (count > kMaxHostElements) return std::nullopt;
    for (double i = 0; i < count; ++i) out.floats.push_back(s + i * d);
  } else {
    const std::int64_t s = start->ints[0], l = limit->ints[0], d = delta->ints[0];
    if (d == 0) n.fail("delta is 0");
    for (std::int64_t v = s; d > 0 ? v < l : v > l; v += d) {
      out.ints.push_back(v);
      if (out.ints.size() > kMaxHostElements) return std::nullopt;
    }
  }
  out.shape = {static_cast<std::int64_t>(out.size())};
  return one(std::move(out));
}

const OpConverter kConverters[] = {
    {"Concat", concat_, fold_concat},
    {"Constant", constant},
    {"ConstantOfShape", constant_of_shape, fold_constant_of_shape},
    {"Expand", expand},
    {"Flatten", flatten},
    {"Gather", gather_, fold_gather},
    {"Range", range_, fold_range},
    {"Reshape", reshape_, fold_reshape},
    {"Shape", no_convert, fold_shape},
    {"Size", no_convert, fold_size},
    {"Slice", slice_, fold_slice},
    {"Split", split_},
    {"Squeeze", squeeze, fold_squeeze},
    {"Transpose", transpose_},
    {"Unsqueeze", unsqueeze, fold_unsqueeze},
};

}  // namespace

std::span<const OpConverter> shape_converters() { return kConverters; }

}  // namespace kiln::onnx_import
