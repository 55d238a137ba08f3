// Ops that index by data or scan along an axis: gather_elements, gather_nd (ONNX's
// GatherElements and GatherND, NumPy's take_along_axis and advanced indexing), their
// inverses scatter_elements and scatter_nd, cumsum, and top_k (the k largest or smallest
// along an axis, with their indices).
// Indices are i32 or i64 and may be negative (counting from the end, as in ONNX and
// NumPy); one outside [-n, n) is an error at run time, naming the op.

#include <algorithm>

#include "ir/ops/ops.hpp"
#include "kiln/core/error.hpp"

namespace kiln::ir::detail {
namespace {

using Kind = Attribute::Kind;

void check_indices(const TensorType& idx) {
  if (idx.dtype != DType::i32 && idx.dtype != DType::i64)
    throw UserError(cat("indices (operand 1) must be i32 or i64, got ", name(idx.dtype)));
}

/// Whether \p a <= \p b holds for every value the dims can take (equal, or both static).
bool fits_in(const Dim& a, const Dim& b) {
  if (a == b) return true;
  return a.is_static() && b.is_static() && a.size() <= b.size();
}

// out[i] = x[i with axis replaced by idx[i]]: the result has the indices' shape; off the
// axis the indices may be shorter than x.
std::vector<TensorType> infer_gather_elements(const InferContext& ctx) {
  const TensorType &x = ctx.operand(0), &idx = ctx.operand(1);
  check_indices(idx);
  const Device device = common_device(ctx);
  if (x.shape.rank() == 0) throw UserError("gather_elements needs x of rank >= 1");
  if (idx.shape.rank() != x.shape.rank())
    throw UserError(cat("indices ", idx.shape, " must have x's rank (", x.shape.rank(), "), got ",
                        idx.shape.rank()));
  const std::size_t axis = normalize_axis(ctx.attr("axis").as_int(), x.shape.rank());
  for (std::size_t d = 0; d < x.shape.rank(); ++d)
    if (d != axis && !fits_in(idx.shape.dims()[d], x.shape.dims()[d]))
      throw UserError(cat("indices ", idx.shape, " are longer than x ", x.shape, " at axis ", d,
                          " (off the gather axis ", axis, " they must fit in x)"));
  return {{x.dtype, idx.shape, device}};
}

// The last dim of the indices (k, static) indexes x's dims batch_dims .. batch_dims + k - 1;
// the result is idx.shape[:-1] + x.shape[batch_dims + k:].
std::vector<TensorType> infer_gather_nd(const InferContext& ctx) {
  const TensorType &x = ctx.operand(0), &idx = ctx.operand(1);
  check_indices(idx);
  const Device device = common_device(ctx);
  const std::int64_t b = ctx.attr("batch_dims").as_int();
  const std::size_t q = idx.shape.rank(), r = x.shape.rank();
  if (q == 0) throw UserError("gather_nd needs indices of rank >= 1");
  const Dim& last = idx.shape.dims().back();
  if (!last.is_static())
    throw UserError(cat("the last dim of the indices ", idx.shape,
                        " (how many of x's dims each index names) must be static"));
  const std::int64_t k = last.size();
  if (b < 0 || static_cast<std::size_t>(b) >= q || static_cast<std::size_t>(b) > r)
    throw UserError(cat("batch_dims ", b, " must be in [0, ", std::min(q - 1, r),
                        "] for indices of rank ", q, " and x of rank ", r));
  if (k < 1 || static_cast<std::size_t>(b + k) > r)
    throw UserError(cat("each index names ", k, " dims of x ", x.shape, " after its ", b,
                        " batch dims; x has only ", r));
  for (std::int64_t d = 0; d < b; ++d)
    if (!(idx.shape.dims()[d] == x.shape.dims()[d]))
      throw UserError(
          cat("batch dim ", d, " of the indices ", idx.shape, " and of x ", x.shape, " differ"));
  std::vector<Dim> dims(idx.shape.dims().begin(), idx.shape.dims().end() - 1);
  dims.insert(dims.end(), x.shape.dims().begin() + b + k, x.shape.dims().end());
  return {{x.dtype, Shape(std::move(dims)), device}};
}

/// Scatters' `reduction`: how an update combines with the element it lands on.
void check_reduction(const InferContext& ctx, DType dtype) {
  const Attribute* r = ctx.find("reduction");
  if (r == nullptr) return;
  const std::string& mode = r->as_string();
  if (mode != "none" && mode != "add" && mode != "mul" && mode != "max" && mode != "min")
    throw UserError(cat("reduction must be \"none\", \"add\", \"mul\", \"max\" or \"min\", got \"",
                        mode, "\""));
  if (mode != "none" && dtype == DType::bool_)
    throw UserError(cat("reduction \"", mode, "\" is not defined for bool tensors"));
}

// x with x[i with axis replaced by idx[i]] = updates[i]: indices and updates of one shape,
// x's rank, fitting in x off the axis.
std::vector<TensorType> infer_scatter_elements(const InferContext& ctx) {
  const TensorType &x = ctx.operand(0), &idx = ctx.operand(1), &up = ctx.operand(2);
  check_indices(idx);
  const Device device = common_device(ctx);
  if (x.shape.rank() == 0) throw UserError("scatter_elements needs x of rank >= 1");
  if (up.dtype != x.dtype)
    throw UserError(cat("the updates (operand 2) must have x's dtype ", name(x.dtype), ", got ",
                        name(up.dtype)));
  if (!(idx.shape == up.shape))
    throw UserError(
        cat("the indices ", idx.shape, " and the updates ", up.shape, " must have one shape"));
  if (idx.shape.rank() != x.shape.rank())
    throw UserError(cat("indices ", idx.shape, " must have x's rank (", x.shape.rank(), ")"));
  const std::size_t axis = normalize_axis(ctx.attr("axis").as_int(), x.shape.rank());
  for (std::size_t d = 0; d < x.shape.rank(); ++d)
    if (d != axis && !fits_in(idx.shape.dims()[d], x.shape.dims()[d]))
      throw UserError(cat("indices ", idx.shape, " are longer than x ", x.shape, " at axis ", d,
                          " (off the scatter axis ", axis, " they must fit in x)"));
  check_reduction(ctx, x.dtype);
  return {{x.dtype, x.shape, device}};
}

// x with the slices at the index tuples (the last axis of the indices, k static) replaced
// by the updates, of shape idx.shape[:-1] + x.shape[k:].
std::vector<TensorType> infer_scatter_nd(const InferContext& ctx) {
  const TensorType &x = ctx.operand(0), &idx = ctx.operand(1), &up = ctx.operand(2);
  check_indices(idx);
  const Device device = common_device(ctx);
  if (up.dtype != x.dtype)
    throw UserError(cat("the updates (operand 2) must have x's dtype ", name(x.dtype), ", got ",
                        name(up.dtype)));
  const std::size_t q = idx.shape.rank(), r = x.shape.rank();
  if (q == 0) throw UserError("scatter_nd needs indices of rank >= 1");
  const Dim& last = idx.shape.dims().back();
  if (!last.is_static() || last.size() < 1 || static_cast<std::size_t>(last.size()) > r)
    throw UserError(cat("the last dim of the indices ", idx.shape,
                        " (how many of x's dims each index names) must be static, 1 to ", r));
  std::vector<Dim> want(idx.shape.dims().begin(), idx.shape.dims().end() - 1);
  want.insert(want.end(), x.shape.dims().begin() + last.size(), x.shape.dims().end());
  if (!(up.shape == Shape(want)))
    throw UserError(cat("the updates ", up.shape, " must be ", Shape(want),
                        " (the indices' dims but the last, then x's after the indexed ones)"));
  check_reduction(ctx, x.dtype);
  return {{x.dtype, x.shape, device}};
}

std::vector<TensorType> infer_cumsum(const InferContext& ctx) {
  const TensorType& x = ctx.operand(0);
  if (x.dtype == DType::bool_) throw UserError("cumsum is not defined for bool tensors");
  if (x.shape.rank() == 0) throw UserError("cumsum needs a tensor of rank >= 1");
  normalize_axis(ctx.attr("axis").as_int(), x.shape.rank());
  return {x};
}

// values and indices (i64) of the k best along the axis: x's shape with k there.
std::vector<TensorType> infer_top_k(const InferContext& ctx) {
  const TensorType& x = ctx.operand(0);
  if (x.dtype == DType::bool_) throw UserError("top_k is not defined for bool tensors");
  if (x.shape.rank() == 0) throw UserError("top_k needs a tensor of rank >= 1");
  const std::size_t axis = normalize_axis(ctx.attr("axis").as_int(), x.shape.rank());
  const std::int64_t k = ctx.attr("k").as_int();
  const Dim& n = x.shape.dims()[axis];
  if (k < 0 || (n.is_static() && k > n.size()))
    throw UserError(
        cat("k = ", k, " must be in [0, ", n, "], the size of axis ", axis, " of ", x.shape));
  std::vector<Dim> dims(x.shape.dims().begin(), x.shape.dims().end());
  dims[axis] = Dim(k);
  return {{x.dtype, Shape(dims), x.device}, {DType::i64, Shape(std::move(dims)), x.device}};
}

}  // namespace

void register_indexing_ops(OpRegistry& r) {
  r.add(make_op("kiln.top_k",
                "the k largest (or smallest) elements along an axis, best first (ties: the "
                "lower index first; NaN counts as larger than every number), and their indices",
                1, 1, infer_top_k,
                {{"k", Kind::integer}, {"axis", Kind::integer}, {"largest", Kind::boolean}}));
  r.add(make_op("kiln.gather_elements",
                "x at the indices along an axis, element by element (take_along_axis)", 2, 2,
                infer_gather_elements, {{"axis", Kind::integer}}));
  r.add(make_op("kiln.gather_nd",
                "slices of x at the index tuples of the last axis of the indices (GatherND)", 2, 2,
                infer_gather_nd, {{"batch_dims", Kind::integer}}));
  r.add(make_op("kiln.scatter_elements",
                "x with the updates written at the indices along an axis, element by element; "
                "reduction none (the last write wins), add, mul, max or min",
                3, 3, infer_scatter_elements,
                {{"axis", Kind::integer}, {"reduction", Kind::string, false}}));
  r.add(make_op("kiln.scatter_nd",
                "x with the updates written at the index tuples of the last axis of the "
                "indices (ScatterND); reduction none (the last write wins), add, mul, max or min",
                3, 3, infer_scatter_nd, {{"reduction", Kind::string, false}}));
  r.add(make_op("kiln.cumsum",
                "running sum along an axis; exclusive leaves out each element, reverse runs "
                "from the end",
                1, 1, infer_cumsum,
                {{"axis", Kind::integer},
                 {"exclusive", Kind::boolean, false},
                 {"reverse", Kind::boolean, false}}));
}

}  // namespace kiln::ir::detail
