#include "ir/ops/ops.hpp"

#include "kiln/core/error.hpp"

namespace kiln::ir::detail {

void register_builtin_ops(OpRegistry& registry) {
  register_elementwise_ops(registry);
  register_structural_ops(registry);
  register_collective_ops(registry);
  register_indexing_ops(registry);
  register_nn_ops(registry);
}

OpDef make_op(std::string name, std::string summary, int min_operands, int max_operands,
              InferFn infer, std::vector<AttrSpec> attributes) {
  OpDef def;
  def.name = std::move(name);
  def.summary = std::move(summary);
  def.min_operands = min_operands;
  def.max_operands = max_operands;
  def.infer = infer;
  def.attributes = std::move(attributes);
  return def;
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  const std::size_t rank = std::max(a.rank(), b.rank());
  static const Dim kOne(1);
  std::vector<Dim> out(rank, kOne);
  for (std::size_t i = 0; i < rank; ++i) {
    const bool has_a = i < a.rank(), has_b = i < b.rank();
    const Dim& da = has_a ? a.dims()[a.rank() - 1 - i] : kOne;
    const Dim& db = has_b ? b.dims()[b.rank() - 1 - i] : kOne;
    Dim& o = out[rank - 1 - i];
    const auto is_one = [](const Dim& d) { return d.is_static() && d.size() == 1; };
    if (!has_a || is_one(da)) {
      o = db;
    } else if (!has_b || is_one(db) || da == db) {
      o = da;
    } else {
      throw UserError(cat("shapes ", a, " and ", b, " do not broadcast: dim ", da, " vs ", db,
                          " at axis ", -static_cast<std::int64_t>(i) - 1,
                          " (from the end); dims must be equal or 1"));
    }
  }
  return Shape(std::move(out));
}

Device common_device(const InferContext& ctx) {
  const auto ops = ctx.operands();
  for (std::size_t i = 1; i < ops.size(); ++i)
    if (ops[i].device != ops[0].device)
      throw UserError(cat("operand ", i, " is on ", ops[i].device, " but operand 0 is on ",
                          ops[0].device, "; move one of them first"));
  return ops.empty() ? Device::cpu() : ops[0].device;
}

DType common_dtype(const InferContext& ctx) {
  const auto ops = ctx.operands();
  for (std::size_t i = 1; i < ops.size(); ++i)
    if (ops[i].dtype != ops[0].dtype)
      throw UserError(cat("operand ", i, " is ", name(ops[i].dtype), " but operand 0 is ",
                          name(ops[0].dtype), "; cast one of them first"));
  return ops.empty() ? DType::f32 : ops[0].dtype;
}

std::size_t normalize_axis(std::int64_t axis, std::size_t rank) {
  const auto r = static_cast<std::int64_t>(rank);
  if (axis < -r || axis >= r)
    throw UserError(cat("axis ", axis, " is out of range for rank ", rank, " (valid: ", -r, " to ",
                        r - 1, ")"));
  return static_cast<std::size_t>(axis < 0 ? axis + r : axis);
}

}  // namespace kiln::ir::detail
