// ONNX's Pad, Tile, Trilu, OneHot, DepthToSpace and SpaceToDepth: compositions of kiln's
// slice, concat, gather, reshape, transpose, broadcast_to, comparisons and where (which the
// compiler fuses into the kernels those ops have), with their sizes checked before
// anything is traced.

#include <algorithm>
#include <cmath>

#include "core/str.hpp"
#include "onnx/fold.hpp"

namespace kiln::onnx_import {
namespace {
using detail::cat;
using Outputs = std::vector<OnnxValue>;

/// The most classes OneHot embeds as a constant (kiln compares the indices with them).
constexpr std::int64_t kMaxOneHotDepth = std::int64_t{1} << 24;

/// The static size of \p x's \p axis; fails when it is symbolic.
std::int64_t static_dim(NodeContext& n, const Tensor& x, std::size_t axis) {
  const Dim& d = x.shape().dims()[axis];
  if (!d.is_static())
    n.fail(cat("axis ", axis, " of the input is the symbolic dim ", d.symbol(),
               ", and this op needs its size; fix it while importing (--dim ", d.symbol(), "=N)"));
  return d.size();
}

/// \p a * \p b, failing (naming \p what) when the product does not fit a dim.
std::int64_t times(NodeContext& n, std::int64_t a, std::int64_t b, std::string_view what) {
  if (static_cast<double>(a) * static_cast<double>(b) > 4.6e18)
    n.fail(cat(what, " (", a, " x ", b, ") is too large for a dim"));
  return a * b;
}

/// A scalar i64 tensor of \p v (exact, unlike a double scalar).
Tensor i64_scalar(std::int64_t v) {
  return Tensor::from_data(std::vector<std::int64_t>{v}, Shape{});
}

// ---- Pad -----------------------------------------------------------------------------------

/// \p x with \p axis's dim replaced by \p size.
Shape with_dim(const Tensor& x, std::size_t axis, std::int64_t size) {
  std::vector<Dim> dims = x.shape().dims();
  dims[axis] = size;
  return Shape(dims);
}

/// The elements \p indices (static, in order) of \p x along \p axis.
Tensor pick(const Tensor& x, std::size_t axis, const std::vector<std::int64_t>& indices) {
  return gather(x, Tensor::from_data(indices, Shape{static_cast<std::int64_t>(indices.size())}),
                static_cast<std::int64_t>(axis));
}

/// Per padded axis: negative pads crop (a slice), positive ones join blocks before and
/// after (concat): the constant (broadcast), the edge element (broadcast), the mirror
/// image without the edge (reflect) or the other end (wrap), each gathered by index.
Outputs pad(NodeContext& n) {
  n.only_attributes({"mode"});
  Tensor x = n.input(0);
  const std::string mode = n.attr_string("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    n.fail(cat("mode \"", mode, "\" is not constant, reflect, edge or wrap"));
  const std::vector<std::int64_t> pads = n.ints(1, "the pads");
  std::vector<std::int64_t> axes;
  if (n.opset() >= 18 && n.has_input(3)) {
    for (std::int64_t a : n.ints(3, "the axes")) axes.push_back(n.axis(a, x.rank()));
  } else {
    for (std::size_t a = 0; a < x.rank(); ++a) axes.push_back(static_cast<std::int64_t>(a));
  }
  if (pads.size() != 2 * axes.size())
    n.fail(cat("the pads (input 1) hold ", pads.size(), " values for ", axes.size(),
               " axes; they need a begin and an end for each"));
  Tensor value = Tensor::scalar(0, x.dtype());
  if (mode == "constant" && n.has_input(2)) {
    value = n.input(2);
    if (value.num_elements() != 1)
      n.fail(cat("the constant value (input 2) must be one element; got ", value.shape()));
    value = cast(reshape(value, Shape{}), x.dtype());
  }
  for (std::size_t i = 0; i < axes.size(); ++i) {
    const auto axis = static_cast<std::size_t>(axes[i]);
    const std::int64_t begin = pads[i], end = pads[i + axes.size()];
    if (begin == 0 && end == 0) continue;
    std::int64_t size = static_dim(n, x, axis);
    if (std::fabs(static_cast<double>(begin)) + std::fabs(static_cast<double>(end)) > 4.0e18)
      n.fail(cat("the pads ", begin, " and ", end, " of axis ", axis, " are too large"));
    const std::int64_t crop_begin = std::max<std::int64_t>(-begin, 0);
    const std::int64_t crop_end = std::max<std::int64_t>(-end, 0);
    if (crop_begin + crop_end > size)
      n.fail(cat("the negative pads ", begin, " and ", end, " of axis ", axis,
                 " remove more than its ", size, " elements"));
    if (crop_begin + crop_end > 0) {
      x = slice(x, static_cast<std::int64_t>(axis), crop_begin, size - crop_end);
      size -= crop_begin + crop_end;
    }
    const std::int64_t before = std::max<std::int64_t>(begin, 0);
    const std::int64_t after = std::max<std::int64_t>(end, 0);
    if (before == 0 && after == 0) continue;
    if (mode != "constant" && size == 0)
      n.fail(cat("mode ", mode, " pads axis ", axis, ", which has no elements"));
    if (mode == "reflect" && (before >= size || after >= size))
      n.fail(cat("mode reflect pads axis ", axis, " of ", size, " elements by ", before, " and ",
                 after, "; each must be below ", size));
    if (mode == "wrap" && (before > size || after > size))
      n.fail(cat("mode wrap pads axis ", axis, " of ", size, " elements by ", before, " and ",
                 after, "; each must be at most ", size));
    const auto block = [&](std::int64_t count, bool at_start) {
      const auto ax = static_cast<std::int64_t>(axis);
      if (mode == "constant") return broadcast_to(value, with_dim(x, axis, count));
      if (mode == "edge") {
        const Tensor edge = at_start ? slice(x, ax, 0, 1) : slice(x, ax, size - 1, size);
        return broadcast_to(edge, with_dim(x, axis, count));
      }
      std::vector<std::int64_t> indices;
      for (std::int64_t k = 0; k < count; ++k) {
        if (mode == "reflect")  // x[count], ..., x[1] before; x[size - 2], ... after
          indices.push_back(at_start ? count - k : size - 2 - k);
        else  // wrap: the last `count` elements before, the first `count` after
          indices.push_back(at_start ? size - count + k : k);
      }
      return pick(x, axis, indices);
    };
    std::vector<Tensor> parts;
    if (before > 0) parts.push_back(block(before, true));
    parts.push_back(x);
    if (after > 0) parts.push_back(block(after, false));
    x = concat(parts, static_cast<std::int64_t>(axis));
  }
  return {traced(x)};
}

// ---- Tile ----------------------------------------------------------------------------------

/// Each axis of size d repeated r times: [.., d, ..] -> [.., 1, d, ..] -> broadcast to
/// [.., r, d, ..] -> [.., r * d, ..]. Axes repeated once stay as they are (symbolic too).
Outputs tile(NodeContext& n) {
  n.only_attributes({});
  const Tensor x = n.input(0);
  const std::vector<std::int64_t> repeats = n.ints(1, "the repeats");
  if (repeats.size() != x.rank())
    n.fail(cat("the repeats (input 1) hold ", repeats.size(), " values for an input of rank ",
               x.rank(), "; they need one per axis"));
  std::vector<Dim> spread, stretched, out;
  bool repeated = false;
  for (std::size_t i = 0; i < x.rank(); ++i) {
    const std::int64_t r = repeats[i];
    const Dim& d = x.shape().dims()[i];
    if (r < 0) n.fail(cat("the repeat for axis ", i, " is ", r, "; repeats cannot be negative"));
    if (r == 1) {
      spread.push_back(d);
      stretched.push_back(d);
      out.push_back(d);
      continue;
    }
    repeated = true;
    const std::int64_t size = static_dim(n, x, i);
    spread.insert(spread.end(), {Dim(1), Dim(size)});
    stretched.insert(stretched.end(), {Dim(r), Dim(size)});
    out.emplace_back(times(n, r, size, cat("axis ", i, " repeated")));
  }
  if (!repeated) return {traced(x)};
  const Tensor wide = broadcast_to(reshape(x, Shape(spread)), Shape(stretched));
  return {traced(reshape(wide, Shape(out)))};
}

// ---- Trilu ---------------------------------------------------------------------------------

/// The upper (column - row >= k) or lower (column - row <= k) triangle of the last two
/// axes, the rest zeros: where(mask, x, 0), the mask from two index ranges.
Outputs trilu(NodeContext& n) {
  n.only_attributes({"upper"});
  const Tensor x = n.input(0);
  if (x.rank() < 2) n.fail(cat("the input has rank ", x.rank(), "; Trilu needs rank 2 or more"));
  std::int64_t k = 0;
  if (n.has_input(1)) {
    const std::vector<std::int64_t> v = n.ints(1, "k");
    if (v.size() != 1) n.fail(cat("k (input 1) holds ", v.size(), " values; it must hold one"));
    k = v[0];
  }
  const std::int64_t rows = static_dim(n, x, x.rank() - 2), cols = static_dim(n, x, x.rank() - 1);
  const Tensor row = reshape(arange(0, static_cast<double>(rows)), Shape{rows, 1});
  const Tensor col = reshape(arange(0, static_cast<double>(cols)), Shape{1, cols});
  const Tensor diagonal = col - row;
  const Tensor mask =
      n.attr_int("upper", 1) != 0 ? diagonal >= i64_scalar(k) : diagonal <= i64_scalar(k);
  return {traced(where(mask, x, Tensor::scalar(0, x.dtype())))};
}

// ---- OneHot --------------------------------------------------------------------------------

/// indices [..] -> [.., depth, ..] (at `axis`): on where the index (negative ones count
/// from depth) equals the class, off elsewhere (indices out of range: off everywhere).
Outputs one_hot(NodeContext& n) {
  n.only_attributes({"axis"});
  Tensor indices = n.input(0);
  const HostValue* depth_value = n.host(1);
  if (depth_value == nullptr)
    n.fail(
        "depth (input 1) must be known when the model is imported (a constant, an "
        "initializer, or computed from shapes); kiln does not take it at run time");
  if (depth_value->symbolic() || depth_value->size() != 1)
    n.fail(cat("depth (input 1) must be one number; got ", depth_value->dims_text()));
  const double d =
      depth_value->is_float() ? depth_value->floats[0] : static_cast<double>(depth_value->ints[0]);
  if (!(d >= 1) || d >= static_cast<double>(kMaxOneHotDepth) + 1)
    n.fail(cat("depth ", d, " is out of range: kiln's OneHot takes 1 to ", kMaxOneHotDepth,
               " classes"));
  const auto depth = static_cast<std::int64_t>(d);  // a fractional depth truncates, as ONNX casts
  const std::int64_t axis = n.axis(n.attr_int("axis", -1), indices.rank() + 1);
  const Tensor values = n.input(2);
  if (values.rank() != 1 || values.shape().dims()[0] != Dim(2))
    n.fail(cat("values (input 2) must be [off, on], two elements; got ", values.shape()));
  if (indices.dtype() == DType::bool_) n.fail("the indices must be numbers, not bools");
  if (indices.dtype() != DType::i64) indices = cast(indices, DType::i64);  // floats truncate
  indices = where(indices < 0.0, indices + i64_scalar(depth), indices);

  std::vector<Dim> expanded = indices.shape().dims();
  expanded.insert(expanded.begin() + axis, Dim(1));
  std::vector<Dim> classes(indices.rank() + 1, Dim(1));
  classes[axis] = depth;
  const Tensor hot = equal(reshape(indices, Shape(expanded)),
                           reshape(arange(0, static_cast<double>(depth)), Shape(classes)));
  const Tensor off = reshape(slice(values, 0, 0, 1), Shape{});
  const Tensor on = reshape(slice(values, 0, 1, 2), Shape{});
  return {traced(where(hot, on, off))};
}

// ---- DepthToSpace, SpaceToDepth ------------------------------------------------------------

struct Blocks {
  Dim batch;
  std::int64_t channels, height, width, block;
};

Blocks blocks_of(NodeContext& n, const Tensor& x) {
  n.only_attributes({"blocksize", "mode"});
  if (x.rank() != 4) n.fail(cat("the input must be [N, C, H, W]; got rank ", x.rank()));
  const std::int64_t block = n.attr_int("blocksize", 0);
  if (block < 1 || block > (1 << 20))
    n.fail(cat("blocksize ", block, " is out of range: it must be 1 to 2^20"));
  return {x.shape().dims()[0], static_dim(n, x, 1), static_dim(n, x, 2), static_dim(n, x, 3),
          block};
}

/// [N, C, H, W] -> [N, C / b², H b, W b]: DCR reads the channels as [b, b, C / b²], CRD
/// as [C / b², b, b].
Outputs depth_to_space(NodeContext& n) {
  const Tensor x = n.input(0);
  const Blocks s = blocks_of(n, x);
  const std::int64_t b = s.block, square = b * b;
  if (s.channels % square != 0)
    n.fail(cat(s.channels, " channels do not divide into blocks of ", b, " x ", b));
  const std::int64_t c = s.channels / square;
  const std::string mode = n.attr_string("mode", "DCR");
  Tensor blocks;
  if (mode == "DCR")
    blocks = permute(reshape(x, Shape{s.batch, b, b, c, s.height, s.width}), {0, 3, 4, 1, 5, 2});
  else if (mode == "CRD")
    blocks = permute(reshape(x, Shape{s.batch, c, b, b, s.height, s.width}), {0, 1, 4, 2, 5, 3});
  else
    n.fail(cat("mode \"", mode, "\" is not DCR or CRD"));
  return {traced(reshape(blocks, Shape{s.batch, c, times(n, s.height, b, "the height"),
                                       times(n, s.width, b, "the width")}))};
}

/// [N, C, H, W] -> [N, C b², H / b, W / b], the channels as [b, b, C] (DCR's inverse).
Outputs space_to_depth(NodeContext& n) {
  const Tensor x = n.input(0);
  const Blocks s = blocks_of(n, x);
  const std::int64_t b = s.block;
  if (s.height % b != 0 || s.width % b != 0)
    n.fail(cat("the spatial dims ", s.height, " x ", s.width, " do not divide into blocks of ", b,
               " x ", b));
  const std::int64_t h = s.height / b, w = s.width / b;
  const Tensor blocks =
      permute(reshape(x, Shape{s.batch, s.channels, h, b, w, b}), {0, 3, 5, 1, 2, 4});
  return {traced(reshape(
      blocks, Shape{s.batch, times(n, s.channels, b * b, "the channels times the block"), h, w}))};
}

const OpConverter kConverters[] = {
    {"DepthToSpace", depth_to_space},
    {"OneHot", one_hot, nullptr, 11},
    {"Pad", pad},
    {"SpaceToDepth", space_to_depth},
    {"Tile", tile},
    {"Trilu", trilu, nullptr, 14},
};

}  // namespace

std::span<const OpConverter> layout_converters() { return kConverters; }

}  // namespace kiln::onnx_import
