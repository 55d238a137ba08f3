// Ops that move or combine data (matmul, reshape, transpose, broadcast, concat, split),
// reductions and normalisations, and the ops whose result types are given: weights,
// constants and subgraph calls.

#include <algorithm>
#include <limits>
#include <map>

#include "ir/ops/ops.hpp"
#include "kiln/core/error.hpp"

namespace kiln::ir::detail {
namespace {

using Kind = Attribute::Kind;

std::vector<TensorType> infer_matmul(const InferContext& ctx) {
  const DType dtype = common_dtype(ctx);
  if (dtype == DType::bool_) throw UserError("matmul is not defined for bool tensors");
  const Shape &a = ctx.operand(0).shape, &b = ctx.operand(1).shape;
  if (a.rank() == 0 || b.rank() == 0)
    throw UserError(cat("matmul needs tensors of rank >= 1, got ", a, " and ", b));
  // Rank-1 operands act as a row (left) or column (right) vector, as in NumPy.
  std::vector<Dim> ad = a.dims(), bd = b.dims();
  if (ad.size() == 1) ad.insert(ad.begin(), Dim(1));
  if (bd.size() == 1) bd.push_back(Dim(1));
  const Dim& k_a = ad.back();
  const Dim& k_b = bd[bd.size() - 2];
  if (!(k_a == k_b))
    throw UserError(
        cat("matmul of ", a, " by ", b, ": inner dimensions differ (", k_a, " vs ", k_b, ")"));
  const Shape batch = broadcast_shapes(Shape(std::vector<Dim>(ad.begin(), ad.end() - 2)),
                                       Shape(std::vector<Dim>(bd.begin(), bd.end() - 2)));
  std::vector<Dim> out = batch.dims();
  if (a.rank() > 1) out.push_back(ad[ad.size() - 2]);
  if (b.rank() > 1) out.push_back(bd.back());
  return {{dtype, Shape(std::move(out)), common_device(ctx)}};
}

// A shape's element count as one dim (an expression over its symbolic dims' names): two
// shapes hold the same number of elements for every value of the names when both agree.
Dim volume(const Shape& s) {
  Dim n = 1;
  for (const Dim& d : s.dims()) n = n * d;
  return n;
}

std::vector<TensorType> infer_reshape(const InferContext& ctx) {
  TensorType out = ctx.operand(0);
  const Shape& to = ctx.attr("shape").as_shape();
  if (volume(out.shape) != volume(to))
    throw UserError(cat("cannot reshape ", out.shape, " to ", to, ": the element counts differ"));
  out.shape = to;
  return {out};
}

std::vector<TensorType> infer_transpose(const InferContext& ctx) {
  TensorType out = ctx.operand(0);
  const std::vector<std::int64_t> perm = ctx.attr("perm").as_int_array();
  const std::size_t rank = out.shape.rank();
  std::vector<bool> seen(rank, false);
  std::vector<Dim> dims;
  if (perm.size() != rank)
    throw UserError(cat("perm [", join(perm, ", "), "] has ", perm.size(),
                        " entries for a tensor of rank ", rank));
  for (std::int64_t p : perm) {
    const std::size_t axis = normalize_axis(p, rank);
    if (seen[axis]) throw UserError(cat("perm [", join(perm, ", "), "] repeats axis ", p));
    seen[axis] = true;
    dims.push_back(out.shape.dims()[axis]);
  }
  out.shape = Shape(std::move(dims));
  return {out};
}

std::vector<TensorType> infer_broadcast_to(const InferContext& ctx) {
  TensorType out = ctx.operand(0);
  const Shape& to = ctx.attr("shape").as_shape();
  if (broadcast_shapes(out.shape, to) != to)
    throw UserError(cat("cannot broadcast ", out.shape, " to ", to));
  out.shape = to;
  return {out};
}

std::vector<TensorType> infer_concat(const InferContext& ctx) {
  const DType dtype = common_dtype(ctx);
  const Device device = common_device(ctx);
  const Shape& first = ctx.operand(0).shape;
  const std::size_t axis = normalize_axis(ctx.attr("axis").as_int(), first.rank());
  for (std::size_t i = 0; i < ctx.operands().size(); ++i) {
    const Shape& s = ctx.operand(i).shape;
    if (s.rank() != first.rank())
      throw UserError(
          cat("operand ", i, " has rank ", s.rank(), " but operand 0 has rank ", first.rank()));
    for (std::size_t d = 0; d < s.rank(); ++d)
      if (d != axis && !(s.dims()[d] == first.dims()[d]))
        throw UserError(cat("operand ", i, " ", s, " differs from operand 0 ", first, " at axis ",
                            d, " (only the concat axis may differ)"));
  }
  Dim total = 0;  // static, or a sum over symbolic dims (seq + 1)
  for (std::size_t i = 0; i < ctx.operands().size(); ++i) {
    const Dim& d = ctx.operand(i).shape.dims()[axis];
    total = total.is_static() && d.is_static()
                ? Dim(checked_add(total.size(), d.size(), "the concat axis's total size"))
                : total + d;
  }
  std::vector<Dim> dims = first.dims();
  dims[axis] = total;
  return {{dtype, Shape(std::move(dims)), device}};
}

std::vector<TensorType> infer_split(const InferContext& ctx) {
  const TensorType& x = ctx.operand(0);
  const std::size_t axis = normalize_axis(ctx.attr("axis").as_int(), x.shape.rank());
  const std::vector<std::int64_t> sizes = ctx.attr("sizes").as_int_array();
  const Dim& along = x.shape.dims()[axis];
  if (sizes.empty() || std::any_of(sizes.begin(), sizes.end(), [](auto s) { return s < 0; }))
    throw UserError(cat("sizes [", join(sizes, ", "), "] must be non-empty and >= 0"));
  std::int64_t sum = 0;
  for (std::int64_t s : sizes)
    sum = checked_add(sum, s, cat("the sum of sizes [", join(sizes, ", "), "]"));
  if (!along.is_static() || along.size() != sum)
    throw UserError(cat("sizes [", join(sizes, ", "), "] sum to ", sum, " but axis ", axis, " of ",
                        x.shape, " is ", along));
  std::vector<TensorType> out;
  for (std::int64_t s : sizes) {
    std::vector<Dim> dims = x.shape.dims();
    dims[axis] = Dim(s);
    out.push_back({x.dtype, Shape(std::move(dims)), x.device});
  }
  return out;
}

Shape reduced(const Shape& shape, const std::vector<std::size_t>& axes, bool keepdim) {
  std::vector<Dim> dims;
  for (std::size_t d = 0; d < shape.rank(); ++d) {
    const bool reduce = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (!reduce) {
      dims.push_back(shape.dims()[d]);
    } else if (keepdim) {
      dims.emplace_back(1);
    }
  }
  return Shape(std::move(dims));
}

/// Max, min and argmax have no identity: over an axis of static size 0 they are an error,
/// as in PyTorch (a symbolic dim of size 0 is refused when the call runs).
void check_not_empty(const InferContext& ctx, const Shape& shape, std::size_t axis) {
  const Dim& d = shape.dims()[axis];
  if (d.is_static() && d.size() == 0)
    throw UserError(cat(ctx.op(), " over axis ", axis, ", of size 0, has no value (the ",
                        ctx.op() == "kiln.argmax" ? "argmax" : "extremum",
                        " of no elements); slice or pad the operand first"));
}

std::vector<TensorType> infer_reduce(const InferContext& ctx) {
  TensorType out = ctx.operand(0);
  if (out.dtype == DType::bool_) throw UserError(cat(ctx.op(), " is not defined for bool"));
  if (ctx.op() == "kiln.reduce_mean" && !is_floating(out.dtype))
    throw UserError(cat(ctx.op(), " needs a floating-point tensor, got ", name(out.dtype),
                        " (a mean of integers is not an integer; PyTorch refuses it too): cast "
                        "to a float first"));
  const bool extremum = ctx.op() == "kiln.reduce_max" || ctx.op() == "kiln.reduce_min";
  std::vector<std::size_t> axes;
  for (std::int64_t a : ctx.attr("axes").as_int_array()) {
    const std::size_t axis = normalize_axis(a, out.shape.rank());
    if (std::find(axes.begin(), axes.end(), axis) != axes.end())
      throw UserError(cat("axis ", a, " is listed twice"));
    if (extremum) check_not_empty(ctx, out.shape, axis);
    axes.push_back(axis);
  }
  const Attribute* keep = ctx.find("keepdim");
  out.shape = reduced(out.shape, axes, keep != nullptr && keep->as_bool());
  return {out};
}

std::vector<TensorType> infer_argmax(const InferContext& ctx) {
  TensorType out = ctx.operand(0);
  const std::size_t axis = normalize_axis(ctx.attr("axis").as_int(), out.shape.rank());
  check_not_empty(ctx, out.shape, axis);
  const Attribute* keep = ctx.find("keepdim");
  out.shape = reduced(out.shape, {axis}, keep != nullptr && keep->as_bool());
  out.dtype = DType::i64;
  return {out};
}

std::vector<TensorType> infer_softmax(const InferContext& ctx) {
  const TensorType& x = ctx.operand(0);
  if (!is_floating(x.dtype))
    throw UserError(cat(ctx.op(), " needs a floating-point tensor, got ", name(x.dtype)));
  normalize_axis(ctx.attr("axis").as_int(), x.shape.rank());
  return {x};
}

std::vector<TensorType> infer_slice(const InferContext& ctx) {
  TensorType out = ctx.operand(0);
  const std::vector<std::int64_t> starts = ctx.attr("starts").as_int_array();
  const std::vector<std::int64_t> stops = ctx.attr("stops").as_int_array();
  const std::vector<std::int64_t> steps = ctx.attr("steps").as_int_array();
  const std::size_t rank = out.shape.rank();
  if (starts.size() != rank || stops.size() != rank || steps.size() != rank)
    throw UserError(cat("starts, stops and steps need one entry per axis (rank ", rank, "), got ",
                        starts.size(), ", ", stops.size(), " and ", steps.size()));
  std::vector<Dim> dims;
  for (std::size_t d = 0; d < rank; ++d) {
    const Dim& dim = out.shape.dims()[d];
    if (steps[d] < 1) throw UserError(cat("step ", steps[d], " at axis ", d, " must be >= 1"));
    if (!dim.is_static()) {
      if (starts[d] != 0 || stops[d] != std::numeric_limits<std::int64_t>::max() || steps[d] != 1)
        throw UserError(
            cat("axis ", d, " is symbolic (", dim, "); only the whole axis can be taken there"));
      dims.push_back(dim);
      continue;
    }
    const std::int64_t n = dim.size();
    const std::int64_t start = std::clamp(starts[d], std::int64_t{0}, n);
    const std::int64_t stop = std::clamp(stops[d], start, n);
    if (starts[d] < 0 || starts[d] > n)
      throw UserError(cat("start ", starts[d], " at axis ", d, " is outside [0, ", n, "]"));
    dims.emplace_back(slice_length(start, stop, steps[d]));
  }
  out.shape = Shape(std::move(dims));
  return {out};
}

std::vector<TensorType> infer_gather(const InferContext& ctx) {
  const TensorType &x = ctx.operand(0), &idx = ctx.operand(1);
  if (idx.dtype != DType::i32 && idx.dtype != DType::i64)
    throw UserError(cat("indices (operand 1) must be i32 or i64, got ", name(idx.dtype)));
  common_device(ctx);
  const std::size_t axis = normalize_axis(ctx.attr("axis").as_int(), x.shape.rank());
  std::vector<Dim> dims(x.shape.dims().begin(), x.shape.dims().begin() + static_cast<long>(axis));
  dims.insert(dims.end(), idx.shape.dims().begin(), idx.shape.dims().end());
  dims.insert(dims.end(), x.shape.dims().begin() + static_cast<long>(axis) + 1,
              x.shape.dims().end());
  return {{x.dtype, Shape(std::move(dims)), x.device}};
}

// x normalised over its last axis, scaled by gamma (and shifted by beta for layer_norm).
std::vector<TensorType> infer_norm(const InferContext& ctx) {
  const TensorType& x = ctx.operand(0);
  common_dtype(ctx);
  common_device(ctx);
  if (!is_floating(x.dtype))
    throw UserError(cat(ctx.op(), " needs a floating-point tensor, got ", name(x.dtype)));
  if (x.shape.rank() == 0) throw UserError(cat(ctx.op(), " needs a tensor of rank >= 1"));
  const Dim& last = x.shape.dims().back();
  for (std::size_t i = 1; i < ctx.operands().size(); ++i) {
    const Shape& p = ctx.operand(i).shape;
    if (p.rank() != 1 || !(p.dims()[0] == last))
      throw UserError(cat("operand ", i, " has shape ", p, "; it must be [", last,
                          "], the size of the normalised (last) axis of ", x.shape));
  }
  if (ctx.attr("eps").as_float() <= 0) throw UserError("eps must be > 0");
  return {x};
}

void verify_weight(const InferContext& ctx, std::span<const TensorType> results) {
  if (ctx.attr("name").as_string().empty()) throw UserError("a weight needs a non-empty name");
  if (results.size() != 1)
    throw UserError(cat("a weight has exactly one result, got ", results.size()));
}

void verify_constant(const InferContext& ctx, std::span<const TensorType> results) {
  const DenseData& value = ctx.attr("value").as_dense();
  if (results.size() != 1)
    throw UserError(cat("a constant has exactly one result, got ", results.size()));
  if (value.dtype != results[0].dtype || value.shape != results[0].shape)
    throw UserError(cat("the value is ", name(value.dtype), value.shape, " but the result is ",
                        name(results[0].dtype), results[0].shape));
}

}  // namespace

void register_structural_ops(OpRegistry& r) {
  r.add(make_op("kiln.slice", "elements start:stop:step along every axis (stop clamps)", 1, 1,
                infer_slice,
                {{"starts", Kind::array}, {"stops", Kind::array}, {"steps", Kind::array}}));
  r.add(make_op("kiln.gather", "x indexed along an axis by an integer tensor (embedding lookup)", 2,
                2, infer_gather, {{"axis", Kind::integer}}));
  r.add(make_op("kiln.layer_norm", "(x - mean) / sqrt(var + eps) * gamma + beta over the last axis",
                3, 3, infer_norm, {{"eps", Kind::floating}}));
  r.add(make_op("kiln.rms_norm", "x / sqrt(mean(x^2) + eps) * gamma over the last axis", 2, 2,
                infer_norm, {{"eps", Kind::floating}}));
  r.add(make_op("kiln.matmul", "matrix product; batch dims broadcast, rank-1 operands as vectors",
                2, 2, infer_matmul));
  r.add(make_op("kiln.reshape", "same elements, new shape", 1, 1, infer_reshape,
                {{"shape", Kind::shape}}));
  r.add(make_op("kiln.transpose", "permutes the axes", 1, 1, infer_transpose,
                {{"perm", Kind::array}}));
  r.add(make_op("kiln.broadcast_to", "stretches size-1 and missing dims", 1, 1, infer_broadcast_to,
                {{"shape", Kind::shape}}));
  r.add(make_op("kiln.concat", "joins tensors along an axis", 1, -1, infer_concat,
                {{"axis", Kind::integer}}));
  r.add(make_op("kiln.split", "splits a tensor along an axis into pieces of the given sizes", 1, 1,
                infer_split, {{"axis", Kind::integer}, {"sizes", Kind::array}}));
  for (const char* name : {"sum", "mean", "max", "min", "prod"})
    r.add(make_op(cat("kiln.reduce_", name), cat(name, " over axes"), 1, 1, infer_reduce,
                  {{"axes", Kind::array}, {"keepdim", Kind::boolean, false}}));
  r.add(make_op("kiln.argmax", "index of the largest element along an axis (i64)", 1, 1,
                infer_argmax, {{"axis", Kind::integer}, {"keepdim", Kind::boolean, false}}));
  for (const char* name : {"softmax", "log_softmax"})
    r.add(make_op(cat("kiln.", name), cat(name, " along an axis"), 1, 1, infer_softmax,
                  {{"axis", Kind::integer}}));

  OpDef weight = make_op("kiln.weight", "a named external tensor; its result type says what", 0, 0,
                         nullptr, {{"name", Kind::string}});
  weight.verify = verify_weight;
  r.add(std::move(weight));
  OpDef constant = make_op("kiln.constant", "a tensor embedded in the graph", 0, 0, nullptr,
                           {{"value", Kind::dense}});
  constant.verify = verify_constant;
  r.add(std::move(constant));
  // Elementwise ops fused into one kernel: the body is a graph of the module; operands
  // broadcast to the result like the body's ops do. Checked like a call by the verifier.
  r.add(make_op("kiln.fused", "elementwise ops fused into one kernel; callee is their body", 1, -1,
                nullptr, {{"callee", Kind::symbol}}));
  // Calls are checked against their callee by the verifier (it sees the module).
  r.add(make_op("func.call", "calls a subgraph; kiln.prefix prefixes its weight names", 0, -1,
                nullptr, {{"callee", Kind::symbol}, {"kiln.prefix", Kind::string, false}}));
}

}  // namespace kiln::ir::detail
