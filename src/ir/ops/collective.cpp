// Ops between devices: collectives over one value per device (operand i and result i on
// the same device, every operand on a different one) and point-to-point transfers.
//
// Shards split an axis as evenly as possible: of D elements over N shards, the first
// D mod N get one more (see `shard_size`).

#include <set>

#include "ir/ops/ops.hpp"
#include "kiln/core/error.hpp"

namespace kiln::ir::detail {
namespace {

using Kind = Attribute::Kind;

/// Operands of one dtype and shape (up to the axis \p except, if any), one per device.
DType check_one_per_device(const InferContext& ctx, std::size_t except = SIZE_MAX) {
  const DType dtype = common_dtype(ctx);
  std::set<std::string> devices;
  for (std::size_t i = 0; i < ctx.operands().size(); ++i) {
    const TensorType& t = ctx.operand(i);
    if (!devices.insert(t.device.str()).second)
      throw UserError(cat("operand ", i, " is on ", t.device,
                          " like an earlier operand; a collective takes one value per device"));
    const Shape& first = ctx.operand(0).shape;
    bool same = t.shape.rank() == first.rank();
    for (std::size_t d = 0; same && d < first.rank(); ++d)
      same = d == except || t.shape.dims()[d] == first.dims()[d];
    if (!same)
      throw UserError(cat("operand ", i, " is ", t.shape, " but operand 0 is ", first,
                          except == SIZE_MAX ? "; every shard must have the same shape"
                                             : cat("; shards may differ only at axis ", except)));
  }
  return dtype;
}

/// The static size of \p axis of \p t, or a UserError naming \p what.
std::int64_t static_axis(const TensorType& t, std::size_t axis, const char* what) {
  const Dim& d = t.shape.dims()[axis];
  if (!d.is_static())
    throw UserError(cat(what, " needs a static size at axis ", axis, ", got ", t.shape));
  return d.size();
}

std::vector<TensorType> infer_allreduce(const InferContext& ctx) {
  check_one_per_device(ctx);
  return {ctx.operands().begin(), ctx.operands().end()};
}

std::vector<TensorType> infer_allgather(const InferContext& ctx) {
  const std::size_t axis = normalize_axis(ctx.attr("axis").as_int(), ctx.operand(0).shape.rank());
  check_one_per_device(ctx, axis);
  std::int64_t total = 0;
  for (const TensorType& t : ctx.operands()) total += static_axis(t, axis, "allgather");
  std::vector<TensorType> out;
  for (const TensorType& t : ctx.operands()) {
    std::vector<Dim> dims = t.shape.dims();
    dims[axis] = Dim(total);
    out.push_back({t.dtype, Shape(std::move(dims)), t.device});
  }
  return out;
}

std::vector<TensorType> infer_reduce_scatter(const InferContext& ctx) {
  const std::size_t axis = normalize_axis(ctx.attr("axis").as_int(), ctx.operand(0).shape.rank());
  check_one_per_device(ctx);
  const std::int64_t size = static_axis(ctx.operand(0), axis, "reduce_scatter_sum");
  const auto n = static_cast<std::int64_t>(ctx.operands().size());
  std::vector<TensorType> out;
  for (std::int64_t i = 0; i < n; ++i) {
    const TensorType& t = ctx.operand(static_cast<std::size_t>(i));
    std::vector<Dim> dims = t.shape.dims();
    dims[axis] = Dim(shard_size(size, n, i));
    out.push_back({t.dtype, Shape(std::move(dims)), t.device});
  }
  return out;
}

std::vector<TensorType> infer_all_to_all(const InferContext& ctx) {
  const std::size_t rank = ctx.operand(0).shape.rank();
  const std::size_t split = normalize_axis(ctx.attr("split_axis").as_int(), rank);
  const std::size_t concat = normalize_axis(ctx.attr("concat_axis").as_int(), rank);
  check_one_per_device(ctx);
  const auto n = static_cast<std::int64_t>(ctx.operands().size());
  const std::int64_t size = static_axis(ctx.operand(0), split, "all_to_all");
  if (size % n != 0)
    throw UserError(cat("all_to_all splits axis ", split, " of ", ctx.operand(0).shape, " into ", n,
                        " equal pieces, but ", size, " is not a multiple of ", n));
  std::vector<TensorType> out;
  for (const TensorType& t : ctx.operands()) {
    std::vector<Dim> dims = t.shape.dims();
    if (split != concat) dims[concat] = Dim(static_axis(t, concat, "all_to_all") * n);
    if (split != concat) dims[split] = Dim(size / n);
    out.push_back({t.dtype, Shape(std::move(dims)), t.device});
  }
  return out;
}

std::vector<TensorType> infer_transfer(const InferContext& ctx) {
  const TensorType& x = ctx.operand(0);
  const Device to = Device::parse(ctx.attr("device").as_string());
  if (to == x.device)
    throw UserError(cat("the operand is on ", to.str(),
                        " already: a transfer goes to another "
                        "device (remove it; kiln::transfer_to returns such a tensor as it is)"));
  return {{x.dtype, x.shape, to}};
}

/// \p def, marked collective.
OpDef collective(OpDef def) {
  def.traits |= static_cast<std::uint8_t>(OpTrait::collective);
  return def;
}

}  // namespace

void register_collective_ops(OpRegistry& r) {
  // Every op of this file runs between devices.
  r.add(collective(make_op("kiln.allreduce_sum",
                           "every result is the sum of the operands (one per device)", 1, -1,
                           infer_allreduce)));
  r.add(collective(make_op("kiln.allgather",
                           "every result is the operands (one per device) joined along an axis", 1,
                           -1, infer_allgather, {{"axis", Kind::integer}})));
  r.add(collective(
      make_op("kiln.reduce_scatter_sum",
              "result i is shard i along an axis of the sum of the operands (one per device)", 1,
              -1, infer_reduce_scatter, {{"axis", Kind::integer}})));
  r.add(collective(make_op(
      "kiln.all_to_all",
      "result i joins, along concat_axis, piece i (along split_axis) of every operand", 1, -1,
      infer_all_to_all, {{"split_axis", Kind::integer}, {"concat_axis", Kind::integer}})));
  r.add(collective(make_op("kiln.transfer", "the operand, copied to another device", 1, 1,
                           infer_transfer, {{"device", Kind::string}})));
}

}  // namespace kiln::ir::detail
