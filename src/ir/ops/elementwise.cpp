// Element-wise ops: binary arithmetic with NumPy broadcasting (operands of one dtype; the
// staging layer inserts casts for type promotion), comparisons, select, unary math, cast.

#include "ir/ops/ops.hpp"
#include "kiln/core/error.hpp"

namespace kiln::ir::detail {
namespace {

std::vector<TensorType> infer_binary(const InferContext& ctx) {
  const DType dtype = common_dtype(ctx);
  if (dtype == DType::bool_)
    throw UserError(cat(ctx.op(), " is not defined for bool tensors; cast them first"));
  return {
      {dtype, broadcast_shapes(ctx.operand(0).shape, ctx.operand(1).shape), common_device(ctx)}};
}

std::vector<TensorType> infer_binary_integer(const InferContext& ctx) {
  const DType dtype = common_dtype(ctx);
  if (!is_integer(dtype))
    throw UserError(cat(ctx.op(), " needs integer tensors, got ", name(dtype),
                        is_floating(dtype) ? "; cast them first" : ""));
  return {
      {dtype, broadcast_shapes(ctx.operand(0).shape, ctx.operand(1).shape), common_device(ctx)}};
}

std::vector<TensorType> infer_compare(const InferContext& ctx) {
  common_dtype(ctx);
  return {{DType::bool_, broadcast_shapes(ctx.operand(0).shape, ctx.operand(1).shape),
           common_device(ctx)}};
}

std::vector<TensorType> infer_where(const InferContext& ctx) {
  const TensorType &cond = ctx.operand(0), &a = ctx.operand(1), &b = ctx.operand(2);
  if (cond.dtype != DType::bool_)
    throw UserError(cat("the condition (operand 0) must be bool, got ", name(cond.dtype)));
  if (a.dtype != b.dtype)
    throw UserError(
        cat("the two branches must have one dtype, got ", name(a.dtype), " and ", name(b.dtype)));
  return {{a.dtype, broadcast_shapes(cond.shape, broadcast_shapes(a.shape, b.shape)),
           common_device(ctx)}};
}

std::vector<TensorType> infer_unary_float(const InferContext& ctx) {
  const TensorType& x = ctx.operand(0);
  if (!is_floating(x.dtype))
    throw UserError(
        cat(ctx.op(), " needs a floating-point tensor, got ", name(x.dtype), "; cast it first"));
  return {x};
}

std::vector<TensorType> infer_unary_numeric(const InferContext& ctx) {
  const TensorType& x = ctx.operand(0);
  if (x.dtype == DType::bool_) throw UserError(cat(ctx.op(), " is not defined for bool tensors"));
  return {x};
}

std::vector<TensorType> infer_unary_integer(const InferContext& ctx) {
  const TensorType& x = ctx.operand(0);
  if (!is_integer(x.dtype))
    throw UserError(cat(ctx.op(), " needs an integer tensor, got ", name(x.dtype)));
  return {x};
}

std::vector<TensorType> infer_cast(const InferContext& ctx) {
  TensorType out = ctx.operand(0);
  out.dtype = ctx.attr("dtype").as_dtype();
  return {out};
}

std::vector<TensorType> infer_gelu(const InferContext& ctx) {
  if (const Attribute* a = ctx.find("approximate")) {
    const std::string& mode = a->as_string();
    if (mode != "none" && mode != "tanh")
      throw UserError(cat("approximate must be \"none\" or \"tanh\", got \"", mode, "\""));
  }
  return infer_unary_float(ctx);
}

OpDef op(std::string name, std::string summary, int operands, InferFn infer,
         std::vector<AttrSpec> attributes = {}) {
  OpDef def;
  def.name = std::move(name);
  def.summary = std::move(summary);
  def.min_operands = def.max_operands = operands;
  def.infer = infer;
  def.attributes = std::move(attributes);
  def.traits = static_cast<std::uint8_t>(OpTrait::elementwise);  // every op of this file
  return def;
}

}  // namespace

void register_elementwise_ops(OpRegistry& r) {
  for (const char* name : {"add", "sub", "mul", "div", "pow", "maximum", "minimum"})
    r.add(
        op(cat("kiln.", name), cat("element-wise ", name, " with broadcasting"), 2, infer_binary));
  r.add(op("kiln.fmod",
           "element-wise remainder of the truncated division, the sign of the dividend (C's "
           "fmod); integers: x fmod 0 = 0",
           2, infer_binary));
  for (const char* name : {"and", "or", "xor"})
    r.add(op(cat("kiln.bitwise_", name), cat("element-wise bitwise ", name, " of integers"), 2,
             infer_binary_integer));
  r.add(op("kiln.bitwise_not", "element-wise bitwise not of integers", 1, infer_unary_integer));
  r.add(op("kiln.shift_left",
           "element-wise a << b of integers, wrapped to the dtype; a count outside [0, 63] gives 0",
           2, infer_binary_integer));
  r.add(op("kiln.shift_right",
           "element-wise a >> b of integers (arithmetic for signed dtypes); a count outside "
           "[0, 63] gives 0 (-1 for a negative a)",
           2, infer_binary_integer));
  for (const char* name : {"eq", "ne", "lt", "le", "gt", "ge"})
    r.add(op(cat("kiln.", name), cat("element-wise comparison ", name, "; bool result"), 2,
             infer_compare));
  r.add(op("kiln.where", "select: cond ? a : b, with broadcasting", 3, infer_where));
  for (const char* name :
       {"exp", "log", "sqrt", "rsqrt", "tanh", "erf", "sigmoid", "silu", "sin", "cos", "tan"})
    r.add(op(cat("kiln.", name), cat("element-wise ", name), 1, infer_unary_float));
  for (const char* name : {"neg", "abs", "relu", "sign", "floor", "ceil"})
    r.add(op(cat("kiln.", name), cat("element-wise ", name), 1, infer_unary_numeric));
  r.add(op("kiln.round", "element-wise round to the nearest integer, halves to even", 1,
           infer_unary_numeric));
  r.add(op("kiln.gelu", "GELU; approximate = \"none\" (erf, default) or \"tanh\"", 1, infer_gelu,
           {{"approximate", Attribute::Kind::string, false}}));
  r.add(op("kiln.cast", "converts to another dtype", 1, infer_cast,
           {{"dtype", Attribute::Kind::dtype}}));
}

}  // namespace kiln::ir::detail
