// Tensor ops while staging: resolve operands to IR values of the current graph (embedding
// constants, rejecting placeholders and tensors of other graphs), promote dtypes, and add
// the IR op with the caller's source location.

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>

#include "core/str.hpp"
#include "kiln/core/error.hpp"
#include "kiln/ir/op_registry.hpp"
#include "stage/frame.hpp"

namespace kiln {
namespace detail {

std::string Role::str() const {
  if (tree == nullptr) return cat(what, " ", index);
  return cat(what, " '", tree->leaf_paths().at(index), "'");
}

ir::Value value_of(Frame& frame, const Tensor& t, std::string_view op, const SourceLocation& where,
                   const Role& role) {
  const auto fail = [&](const std::string& why) -> ir::Value {
    throw UserError(cat(op, " at ", where_string(where), ": ", role.str(), " ", why));
  };
  if (t.empty()) return fail("is an empty Tensor (default-constructed)");
  if (t.is_placeholder())
    return fail(cat("is a placeholder (", t.layout(),
                    "): placeholders stand for stage() inputs and hold no value"));
  if (t.is_constant()) {
    auto it = frame.constants.find(t.data().get());
    if (it != frame.constants.end()) return ir::Value{it->second.second};
    const ir::Value v =
        frame.graph()
            .add_op_typed(ir::lookup_op("kiln.constant"), {}, {{"value", t.data()->to_dense()}},
                          {to_ir(t.layout())}, location_of(where))
            .result(0);
    frame.constants.emplace(t.data().get(), std::make_pair(t.data(), v.id));
    return v;
  }
  if (!t.frame()->open()) return fail("comes from a staging run that has finished");
  if (t.frame().get() != &frame)
    return fail(
        "belongs to another graph: a subgraph body used a tensor of its caller (pass it to the "
        "subgraph as an argument instead)");
  return ir::Value{t.value_id()};
}

std::vector<ir::Value> output_values(Frame& frame, const std::vector<Tensor>& leaves,
                                     const TreeDef& tree, std::string_view what) {
  std::vector<ir::Value> out;
  for (std::size_t i = 0; i < leaves.size(); ++i)
    out.push_back(
        // No location: a constant returned as an output was made by no op of the user's.
        value_of(frame, leaves[i], what, SourceLocation(), Role{"output leaf", i, &tree}));
  return out;
}

namespace {

int category(DType d) { return d == DType::bool_ ? 0 : is_floating(d) ? 2 : 1; }

int width(DType d) {
  switch (d) {
    case DType::f64:
    case DType::i64:
      return 3;
    case DType::f32:
    case DType::i32:
      return 2;
    default:
      return 1;  // f16, bf16, i8, u8, bool
  }
}

}  // namespace

/// The dtype two operands compute in (see kiln/stage/tensor.hpp).
DType promote(DType a, DType b) {
  if (a == b) return a;
  if (category(a) != category(b)) return category(a) > category(b) ? a : b;
  if (width(a) != width(b)) return width(a) > width(b) ? a : b;
  return category(a) == 2 ? DType::f32 : DType::i32;  // f16 with bf16, i8 with u8
}

namespace {

using Attrs = std::vector<ir::NamedAttribute>;

/// Adds \p op over \p operands to the current graph; returns every result as a tensor.
std::vector<Tensor> apply_all(std::string_view op, std::span<const Tensor* const> operands,
                              Attrs attrs, const SourceLocation& where) {
  Frame& frame = require_frame(op, where);
  std::vector<ir::Value> values;
  std::size_t i = 0;
  for (const Tensor* t : operands)
    values.push_back(value_of(frame, *t, op, where, Role{"operand", i++}));
  const ir::OpView view = frame.graph().add_op(op, values, std::move(attrs), location_of(where));
  std::vector<Tensor> out;
  const auto self = frame.shared_from_this();
  for (std::size_t r = 0; r < view.num_results(); ++r)
    out.push_back(
        Tensor::traced(self, view.result(r).id, to_layout(frame.graph().type(view.result(r)))));
  return out;
}

std::vector<Tensor> apply_all(std::string_view op, std::initializer_list<const Tensor*> operands,
                              Attrs attrs, const SourceLocation& where) {
  return apply_all(op, std::span<const Tensor* const>(operands.begin(), operands.size()),
                   std::move(attrs), where);
}

Tensor apply(std::string_view op, std::initializer_list<const Tensor*> operands, Attrs attrs,
             const SourceLocation& where) {
  return std::move(apply_all(op, operands, std::move(attrs), where).front());
}

/// \p op over one shard per device.
std::vector<Tensor> apply_to_shards(std::string_view op, const std::vector<Tensor>& shards,
                                    Attrs attrs, const SourceLocation& where) {
  if (shards.empty())
    throw UserError(detail::cat(op.substr(5), " at ", where_string(where),
                                ": no shards (pass one tensor per device)"));
  std::vector<const Tensor*> operands;
  for (const Tensor& t : shards) operands.push_back(&t);
  return apply_all(op, operands, std::move(attrs), where);
}

Tensor to_dtype(const Tensor& x, DType dtype, const SourceLocation& where) {
  if (x.dtype() == dtype) return x;
  if (x.is_constant() && x.rank() == 0) {  // a scalar: re-make it rather than add a cast
    alignas(8) std::byte converted[8];     // as kiln.cast converts: one rounding
    convert_element(x.dtype(), x.bytes().data(), dtype, converted);
    return Tensor::from_bytes(dtype, Shape{}, x.device(), converted, size_of(dtype));
  }
  return apply("kiln.cast", {&x}, {{"dtype", dtype}}, where);
}

Tensor binary(std::string_view op, const Tensor& a, const Tensor& b, const SourceLocation& where) {
  if (a.empty() || b.empty()) return apply(op, {&a, &b}, {}, where);  // reports the empty one
  const DType d = promote(a.dtype(), b.dtype());
  const Tensor pa = to_dtype(a, d, where), pb = to_dtype(b, d, where);
  return apply(op, {&pa, &pb}, {}, where);
}

/// A C++ scalar next to tensor \p t: an integral value takes t's dtype (bool becomes
/// i64), a fractional one keeps floats and makes integer tensors f32. An integral value
/// that the integer dtype cannot hold, or of 2^53 or more (where the double it arrived as
/// may have lost bits), is refused rather than saturated or rounded.
Tensor scalar_for(const Tensor& t, double v, std::string_view op, const SourceLocation& where) {
  const bool integral = std::isfinite(v) && v == std::floor(v);
  DType d = t.dtype();
  if (d == DType::bool_) d = integral ? DType::i64 : DType::f32;
  if (!integral && !is_floating(d)) d = DType::f32;
  if (integral && !is_floating(d)) {
    alignas(8) std::byte slot[8];
    store_from_double(d, v, slot);
    const bool fits = load_as_double(d, slot) == v;
    const bool exact = std::fabs(v) < 9007199254740992.0;  // below 2^53 every integer is
    if (!fits || !exact)
      throw UserError(cat(op.substr(5), " at ", where_string(where), ": the scalar ",
                          std::fabs(v) < 9.2e18 ? cat(static_cast<std::int64_t>(v)) : exact_text(v),
                          fits ? " is 2^53 or more, where a C++ double (the scalar's type) may "
                                 "have lost integer bits"
                               : cat(" does not fit the ", name(d), " tensor beside it"),
                          ": make it a tensor of the dtype you mean (Tensor::from_data) or cast "
                          "the tensor first"));
  }
  return Tensor::scalar(v, d, t.device());
}

Tensor binary_scalar(std::string_view op, const Tensor& t, double v, bool scalar_first,
                     const SourceLocation& where) {
  if (t.empty()) return apply(op, {&t}, {}, where);
  const Tensor s = scalar_for(t, v, op, where);
  return scalar_first ? binary(op, s, t, where) : binary(op, t, s, where);
}

Tensor unary(std::string_view op, const Tensor& x, const SourceLocation& where, Attrs attrs = {}) {
  return apply(op, {&x}, std::move(attrs), where);
}

/// Float ops on integer tensors compute in f32 (as PyTorch does for exp, sqrt, ...).
Tensor float_of(const Tensor& x, const SourceLocation& where) {
  return !x.empty() && !is_floating(x.dtype()) ? to_dtype(x, DType::f32, where) : x;
}
Tensor unary_float(std::string_view op, const Tensor& x, const SourceLocation& where) {
  return unary(op, float_of(x, where), where);
}

ir::Attribute int_array(const std::vector<std::int64_t>& v) {
  ir::Attribute::Array a;
  for (std::int64_t x : v) a.emplace_back(x);
  return ir::Attribute(std::move(a));
}

std::vector<std::int64_t> all_axes(const Tensor& x, std::vector<std::int64_t> axes) {
  if (!axes.empty()) return axes;
  for (std::size_t i = 0; i < x.rank(); ++i) axes.push_back(static_cast<std::int64_t>(i));
  return axes;
}

}  // namespace
}  // namespace detail

using detail::binary;
using detail::binary_scalar;
using detail::unary;
using detail::unary_float;

Tensor operator+(LTensor a, const Tensor& b) { return binary("kiln.add", a.value, b, a.where); }
Tensor operator-(LTensor a, const Tensor& b) { return binary("kiln.sub", a.value, b, a.where); }
Tensor operator*(LTensor a, const Tensor& b) { return binary("kiln.mul", a.value, b, a.where); }
Tensor operator/(LTensor a, const Tensor& b) { return binary("kiln.div", a.value, b, a.where); }
Tensor operator+(LTensor a, double b) {
  return binary_scalar("kiln.add", a.value, b, false, a.where);
}
Tensor operator-(LTensor a, double b) {
  return binary_scalar("kiln.sub", a.value, b, false, a.where);
}
Tensor operator*(LTensor a, double b) {
  return binary_scalar("kiln.mul", a.value, b, false, a.where);
}
Tensor operator/(LTensor a, double b) {
  return binary_scalar("kiln.div", a.value, b, false, a.where);
}
Tensor operator+(Located<double> a, const Tensor& b) {
  return binary_scalar("kiln.add", b, a.value, true, a.where);
}
Tensor operator-(Located<double> a, const Tensor& b) {
  return binary_scalar("kiln.sub", b, a.value, true, a.where);
}
Tensor operator*(Located<double> a, const Tensor& b) {
  return binary_scalar("kiln.mul", b, a.value, true, a.where);
}
Tensor operator/(Located<double> a, const Tensor& b) {
  return binary_scalar("kiln.div", b, a.value, true, a.where);
}
Tensor operator-(LTensor a) { return unary("kiln.neg", a.value, a.where); }
Tensor operator<(LTensor a, const Tensor& b) { return binary("kiln.lt", a.value, b, a.where); }
Tensor operator<=(LTensor a, const Tensor& b) { return binary("kiln.le", a.value, b, a.where); }
Tensor operator>(LTensor a, const Tensor& b) { return binary("kiln.gt", a.value, b, a.where); }
Tensor operator>=(LTensor a, const Tensor& b) { return binary("kiln.ge", a.value, b, a.where); }
Tensor operator<(LTensor a, double b) {
  return binary_scalar("kiln.lt", a.value, b, false, a.where);
}
Tensor operator>(LTensor a, double b) {
  return binary_scalar("kiln.gt", a.value, b, false, a.where);
}
Tensor scalar_like(const Tensor& tensor, double value, std::string_view op, Loc where) {
  if (tensor.empty())
    throw UserError(detail::cat(op, " at ", detail::where_string(where),
                                ": the tensor beside the scalar is empty (default-constructed)"));
  return detail::scalar_for(tensor, value, detail::cat("kiln.", op), where);
}
Tensor equal(const Tensor& a, const Tensor& b, Loc where) { return binary("kiln.eq", a, b, where); }
Tensor not_equal(const Tensor& a, const Tensor& b, Loc where) {
  return binary("kiln.ne", a, b, where);
}

Tensor pow(const Tensor& a, const Tensor& b, Loc where) { return binary("kiln.pow", a, b, where); }
Tensor pow(const Tensor& a, double b, Loc where) {
  return binary_scalar("kiln.pow", a, b, false, where);
}
Tensor maximum(const Tensor& a, const Tensor& b, Loc where) {
  return binary("kiln.maximum", a, b, where);
}
Tensor minimum(const Tensor& a, const Tensor& b, Loc where) {
  return binary("kiln.minimum", a, b, where);
}

Tensor fmod(const Tensor& a, const Tensor& b, Loc where) {
  return binary("kiln.fmod", a, b, where);
}
Tensor bitwise_and(const Tensor& a, const Tensor& b, Loc where) {
  return binary("kiln.bitwise_and", a, b, where);
}
Tensor bitwise_or(const Tensor& a, const Tensor& b, Loc where) {
  return binary("kiln.bitwise_or", a, b, where);
}
Tensor bitwise_xor(const Tensor& a, const Tensor& b, Loc where) {
  return binary("kiln.bitwise_xor", a, b, where);
}
Tensor bitwise_not(const Tensor& x, Loc where) { return unary("kiln.bitwise_not", x, where); }
Tensor shift_left(const Tensor& a, const Tensor& b, Loc where) {
  return binary("kiln.shift_left", a, b, where);
}
Tensor shift_right(const Tensor& a, const Tensor& b, Loc where) {
  return binary("kiln.shift_right", a, b, where);
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b, Loc loc) {
  if (a.empty() || b.empty()) return detail::apply("kiln.where", {&cond, &a, &b}, {}, loc);
  const DType d = detail::promote(a.dtype(), b.dtype());
  const Tensor pa = detail::to_dtype(a, d, loc), pb = detail::to_dtype(b, d, loc);
  return detail::apply("kiln.where", {&cond, &pa, &pb}, {}, loc);
}

Tensor neg(const Tensor& x, Loc where) { return unary("kiln.neg", x, where); }
Tensor abs(const Tensor& x, Loc where) { return unary("kiln.abs", x, where); }
Tensor exp(const Tensor& x, Loc where) { return unary_float("kiln.exp", x, where); }
Tensor log(const Tensor& x, Loc where) { return unary_float("kiln.log", x, where); }
Tensor sqrt(const Tensor& x, Loc where) { return unary_float("kiln.sqrt", x, where); }
Tensor rsqrt(const Tensor& x, Loc where) { return unary_float("kiln.rsqrt", x, where); }
Tensor tanh(const Tensor& x, Loc where) { return unary_float("kiln.tanh", x, where); }
Tensor erf(const Tensor& x, Loc where) { return unary_float("kiln.erf", x, where); }
Tensor sin(const Tensor& x, Loc where) { return unary_float("kiln.sin", x, where); }
Tensor cos(const Tensor& x, Loc where) { return unary_float("kiln.cos", x, where); }
Tensor tan(const Tensor& x, Loc where) { return unary_float("kiln.tan", x, where); }
Tensor sign(const Tensor& x, Loc where) { return unary("kiln.sign", x, where); }
Tensor floor(const Tensor& x, Loc where) { return unary("kiln.floor", x, where); }
Tensor ceil(const Tensor& x, Loc where) { return unary("kiln.ceil", x, where); }
Tensor round(const Tensor& x, Loc where) { return unary("kiln.round", x, where); }
Tensor sigmoid(const Tensor& x, Loc where) { return unary_float("kiln.sigmoid", x, where); }
Tensor relu(const Tensor& x, Loc where) { return unary("kiln.relu", x, where); }
Tensor gelu(const Tensor& x, const std::string& approximate, Loc where) {
  if (approximate == "none") return unary_float("kiln.gelu", x, where);
  return unary("kiln.gelu", detail::float_of(x, where), where, {{"approximate", approximate}});
}
Tensor silu(const Tensor& x, Loc where) { return unary_float("kiln.silu", x, where); }
Tensor cast(const Tensor& x, DType dtype, Loc where) {
  return unary("kiln.cast", x, where, {{"dtype", dtype}});
}

Tensor matmul(const Tensor& a, const Tensor& b, Loc where) {
  return binary("kiln.matmul", a, b, where);
}

Tensor sum(const Tensor& x, std::vector<std::int64_t> axes, bool keepdim, Loc where) {
  return unary(
      "kiln.reduce_sum", x, where,
      {{"axes", detail::int_array(detail::all_axes(x, std::move(axes)))}, {"keepdim", keepdim}});
}
Tensor mean(const Tensor& x, std::vector<std::int64_t> axes, bool keepdim, Loc where) {
  return unary(
      "kiln.reduce_mean", detail::float_of(x, where), where,
      {{"axes", detail::int_array(detail::all_axes(x, std::move(axes)))}, {"keepdim", keepdim}});
}
Tensor max(const Tensor& x, std::vector<std::int64_t> axes, bool keepdim, Loc where) {
  return unary(
      "kiln.reduce_max", x, where,
      {{"axes", detail::int_array(detail::all_axes(x, std::move(axes)))}, {"keepdim", keepdim}});
}
Tensor min(const Tensor& x, std::vector<std::int64_t> axes, bool keepdim, Loc where) {
  return unary(
      "kiln.reduce_min", x, where,
      {{"axes", detail::int_array(detail::all_axes(x, std::move(axes)))}, {"keepdim", keepdim}});
}
Tensor prod(const Tensor& x, std::vector<std::int64_t> axes, bool keepdim, Loc where) {
  return unary(
      "kiln.reduce_prod", x, where,
      {{"axes", detail::int_array(detail::all_axes(x, std::move(axes)))}, {"keepdim", keepdim}});
}
Tensor argmax(const Tensor& x, std::int64_t axis, bool keepdim, Loc where) {
  return unary("kiln.argmax", x, where, {{"axis", axis}, {"keepdim", keepdim}});
}
Tensor softmax(const Tensor& x, std::int64_t axis, Loc where) {
  return unary("kiln.softmax", detail::float_of(x, where), where, {{"axis", axis}});
}
Tensor log_softmax(const Tensor& x, std::int64_t axis, Loc where) {
  return unary("kiln.log_softmax", detail::float_of(x, where), where, {{"axis", axis}});
}
Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps, Loc where) {
  return detail::apply("kiln.layer_norm", {&x, &gamma, &beta}, {{"eps", eps}}, where);
}
Tensor rms_norm(const Tensor& x, const Tensor& gamma, double eps, Loc where) {
  return detail::apply("kiln.rms_norm", {&x, &gamma}, {{"eps", eps}}, where);
}

Tensor reshape(const Tensor& x, Shape shape, Loc where) {
  return unary("kiln.reshape", x, where, {{"shape", std::move(shape)}});
}
Tensor permute(const Tensor& x, std::vector<std::int64_t> perm, Loc where) {
  return unary("kiln.transpose", x, where, {{"perm", detail::int_array(perm)}});
}
Tensor transpose(const Tensor& x, Loc where) {
  std::vector<std::int64_t> perm;
  for (std::size_t i = x.rank(); i-- > 0;) perm.push_back(static_cast<std::int64_t>(i));
  return permute(x, std::move(perm), where);
}
Tensor transpose(const Tensor& x, std::int64_t axis0, std::int64_t axis1, Loc where) {
  const auto rank = static_cast<std::int64_t>(x.rank());
  const auto norm = [&](std::int64_t a) {
    if (a < -rank || a >= rank)
      throw UserError(detail::cat("transpose at ", detail::where_string(where), ": axis ", a,
                                  " is out of range for ", x.layout()));
    return a < 0 ? a + rank : a;
  };
  std::vector<std::int64_t> perm(static_cast<std::size_t>(rank));
  for (std::int64_t i = 0; i < rank; ++i) perm[static_cast<std::size_t>(i)] = i;
  std::swap(perm[static_cast<std::size_t>(norm(axis0))],
            perm[static_cast<std::size_t>(norm(axis1))]);
  return permute(x, std::move(perm), where);
}
Tensor broadcast_to(const Tensor& x, Shape shape, Loc where) {
  return unary("kiln.broadcast_to", x, where, {{"shape", std::move(shape)}});
}

Tensor slice(const Tensor& x, std::int64_t axis, std::int64_t start, std::int64_t stop,
             std::int64_t step, Loc where) {
  const auto rank = static_cast<std::int64_t>(x.rank());
  if (axis < -rank || axis >= rank)
    throw UserError(detail::cat("slice at ", detail::where_string(where), ": axis ", axis,
                                " is out of range for ", x.layout()));
  const auto a = static_cast<std::size_t>(axis < 0 ? axis + rank : axis);
  std::vector<std::int64_t> starts(x.rank(), 0), steps(x.rank(), 1),
      stops(x.rank(), std::numeric_limits<std::int64_t>::max());
  const Dim& dim = x.shape().dims()[a];
  if (dim.is_static()) {  // negative indices count from the end
    const std::int64_t n = dim.size();
    if (start < 0) start += n;
    if (stop < 0) stop += n;
    start = std::clamp<std::int64_t>(start, 0, n);
  }
  starts[a] = start;
  stops[a] = stop;
  steps[a] = step;
  return unary("kiln.slice", x, where,
               {{"starts", detail::int_array(starts)},
                {"stops", detail::int_array(stops)},
                {"steps", detail::int_array(steps)}});
}

Tensor concat(const std::vector<Tensor>& xs, std::int64_t axis, Loc where) {
  detail::Frame& frame = detail::require_frame("kiln.concat", where);
  if (xs.empty())
    throw UserError(
        detail::cat("concat at ", detail::where_string(where), ": nothing to concatenate"));
  DType d = xs.front().dtype();
  for (const Tensor& t : xs) d = detail::promote(d, t.dtype());
  std::vector<ir::Value> values;
  for (std::size_t i = 0; i < xs.size(); ++i)
    values.push_back(detail::value_of(frame, detail::to_dtype(xs[i], d, where), "kiln.concat",
                                      where, detail::Role{"operand", i}));
  const ir::OpView op =
      frame.graph().add_op("kiln.concat", values, {{"axis", axis}}, detail::location_of(where));
  return Tensor::traced(frame.shared_from_this(), op.result(0).id,
                        detail::to_layout(frame.graph().type(op.result(0))));
}

std::vector<Tensor> split(const Tensor& x, std::vector<std::int64_t> sizes, std::int64_t axis,
                          Loc where) {
  return detail::apply_all("kiln.split", {&x},
                           {{"axis", axis}, {"sizes", detail::int_array(sizes)}}, where);
}

std::vector<Tensor> allreduce_sum(const std::vector<Tensor>& shards, Loc where) {
  return detail::apply_to_shards("kiln.allreduce_sum", shards, {}, where);
}
std::vector<Tensor> allgather(const std::vector<Tensor>& shards, std::int64_t axis, Loc where) {
  return detail::apply_to_shards("kiln.allgather", shards, {{"axis", axis}}, where);
}
std::vector<Tensor> reduce_scatter_sum(const std::vector<Tensor>& shards, std::int64_t axis,
                                       Loc where) {
  return detail::apply_to_shards("kiln.reduce_scatter_sum", shards, {{"axis", axis}}, where);
}
std::vector<Tensor> all_to_all(const std::vector<Tensor>& shards, std::int64_t split_axis,
                               std::int64_t concat_axis, Loc where) {
  return detail::apply_to_shards("kiln.all_to_all", shards,
                                 {{"split_axis", split_axis}, {"concat_axis", concat_axis}}, where);
}
Tensor transfer_to(const Tensor& x, Device device, Loc where) {
  if (x.device() == device) return x;
  return detail::apply("kiln.transfer", {&x}, {{"device", device.str()}}, where);
}
std::vector<Tensor> broadcast(const Tensor& x, const std::vector<Device>& devices, Loc where) {
  std::vector<Tensor> out;
  for (const Device& d : devices) out.push_back(transfer_to(x, d, where));
  return out;
}

Tensor gather(const Tensor& x, const Tensor& indices, std::int64_t axis, Loc where) {
  return detail::apply("kiln.gather", {&x, &indices}, {{"axis", axis}}, where);
}
Tensor gather_elements(const Tensor& x, const Tensor& indices, std::int64_t axis, Loc where) {
  return detail::apply("kiln.gather_elements", {&x, &indices}, {{"axis", axis}}, where);
}
Tensor gather_nd(const Tensor& x, const Tensor& indices, std::int64_t batch_dims, Loc where) {
  return detail::apply("kiln.gather_nd", {&x, &indices}, {{"batch_dims", batch_dims}}, where);
}
Tensor scatter_elements(const Tensor& x, const Tensor& indices, const Tensor& updates,
                        std::int64_t axis, const std::string& reduction, Loc where) {
  return detail::apply("kiln.scatter_elements", {&x, &indices, &updates},
                       {{"axis", axis}, {"reduction", reduction}}, where);
}
Tensor scatter_nd(const Tensor& x, const Tensor& indices, const Tensor& updates,
                  const std::string& reduction, Loc where) {
  return detail::apply("kiln.scatter_nd", {&x, &indices, &updates}, {{"reduction", reduction}},
                       where);
}
std::pair<Tensor, Tensor> top_k(const Tensor& x, std::int64_t k, std::int64_t axis, bool largest,
                                Loc where) {
  std::vector<Tensor> r = detail::apply_all(
      "kiln.top_k", {&x}, {{"k", k}, {"axis", axis}, {"largest", largest}}, where);
  return {std::move(r[0]), std::move(r[1])};
}
Tensor resize(const Tensor& x, std::vector<std::int64_t> sizes, const Resampling& how,
              std::vector<double> scales, Loc where) {
  if (scales.empty() && sizes.size() == x.rank())
    for (std::size_t d = 0; d < sizes.size(); ++d) {
      const Dim& in = x.shape().dims()[d];
      scales.push_back(sizes[d] == -1 || !in.is_static() || in.size() == 0
                           ? 1.0
                           : static_cast<double>(sizes[d]) / static_cast<double>(in.size()));
    }
  ir::Attribute::Array scale_values, roi;
  for (double v : scales) scale_values.emplace_back(v);
  for (double v : how.roi) roi.emplace_back(v);
  detail::Attrs attrs{{"sizes", detail::int_array(sizes)},
                      {"scales", ir::Attribute(std::move(scale_values))},
                      {"mode", how.mode},
                      {"coordinate_transformation_mode", how.coordinates},
                      {"nearest_mode", how.nearest_mode},
                      {"cubic_coeff_a", how.cubic_coeff_a},
                      {"exclude_outside", how.exclude_outside},
                      {"extrapolation_value", how.extrapolation_value},
                      {"antialias", how.antialias}};
  if (!how.roi.empty()) attrs.push_back({"roi", ir::Attribute(std::move(roi))});
  return detail::apply("kiln.resize", {&x}, std::move(attrs), where);
}
Tensor cumsum(const Tensor& x, std::int64_t axis, bool exclusive, bool reverse, Loc where) {
  return detail::apply("kiln.cumsum", {&x},
                       {{"axis", axis}, {"exclusive", exclusive}, {"reverse", reverse}}, where);
}
namespace {

/// \p window's attributes for an op over \p x: empty lists filled with their defaults.
std::vector<ir::NamedAttribute> window_attributes(const Tensor& x, const Window& window) {
  const std::size_t s = x.rank() >= 2 ? x.rank() - 2 : 0;
  const auto or_fill = [](const std::vector<std::int64_t>& v, std::size_t n, std::int64_t fill) {
    return detail::int_array(v.empty() ? std::vector<std::int64_t>(n, fill) : v);
  };
  return {{"strides", or_fill(window.strides, s, 1)},
          {"pads", or_fill(window.pads, 2 * s, 0)},
          {"dilations", or_fill(window.dilations, s, 1)}};
}

Tensor apply_conv(const char* op, std::vector<const Tensor*> operands, const Window& window,
                  bool transposed, Loc where) {
  std::vector<ir::NamedAttribute> attrs = window_attributes(*operands[0], window);
  attrs.push_back({"groups", window.groups});
  if (transposed) {
    const std::size_t s = operands[0]->rank() >= 2 ? operands[0]->rank() - 2 : 0;
    attrs.push_back({"output_padding", detail::int_array(window.output_padding.empty()
                                                             ? std::vector<std::int64_t>(s, 0)
                                                             : window.output_padding)});
  }
  return std::move(
      detail::apply_all(op, std::span<const Tensor* const>(operands), std::move(attrs), where)
          .front());
}

}  // namespace

Tensor conv(const Tensor& x, const Tensor& w, const Window& window, Loc where) {
  return apply_conv("kiln.conv", {&x, &w}, window, false, where);
}
Tensor conv(const Tensor& x, const Tensor& w, const Tensor& bias, const Window& window, Loc where) {
  return apply_conv("kiln.conv", {&x, &w, &bias}, window, false, where);
}
Tensor conv_transpose(const Tensor& x, const Tensor& w, const Window& window, Loc where) {
  return apply_conv("kiln.conv_transpose", {&x, &w}, window, true, where);
}
Tensor conv_transpose(const Tensor& x, const Tensor& w, const Tensor& bias, const Window& window,
                      Loc where) {
  return apply_conv("kiln.conv_transpose", {&x, &w, &bias}, window, true, where);
}
Tensor max_pool(const Tensor& x, std::vector<std::int64_t> kernel, const Window& window,
                bool ceil_mode, Loc where) {
  std::vector<ir::NamedAttribute> attrs = window_attributes(x, window);
  attrs.push_back({"kernel_shape", detail::int_array(kernel)});
  attrs.push_back({"ceil_mode", ceil_mode});
  return detail::apply("kiln.max_pool", {&x}, std::move(attrs), where);
}
Tensor avg_pool(const Tensor& x, std::vector<std::int64_t> kernel, const Window& window,
                bool count_include_pad, bool ceil_mode, Loc where) {
  std::vector<ir::NamedAttribute> attrs = window_attributes(x, window);
  attrs.push_back({"kernel_shape", detail::int_array(kernel)});
  attrs.push_back({"ceil_mode", ceil_mode});
  attrs.push_back({"count_include_pad", count_include_pad});
  return detail::apply("kiln.avg_pool", {&x}, std::move(attrs), where);
}
Tensor embedding(const Tensor& table, const Tensor& ids, Loc where) {
  return gather(table, ids, 0, where);
}

Tensor arange(double start, double stop, double step, DType dtype, Loc where) {
  if (step == 0 || !std::isfinite(start) || !std::isfinite(stop) || !std::isfinite(step))
    throw UserError(detail::cat("arange at ", detail::where_string(where),
                                ": start, stop and step must be finite and step non-zero"));
  const double count = std::ceil((stop - start) / step);
  if (count > 1e8)
    throw UserError(detail::cat("arange at ", detail::where_string(where), ": ", count,
                                " elements is too many for an embedded constant"));
  std::vector<double> values;
  for (double i = 0; i < count; ++i) values.push_back(start + i * step);
  detail::require_frame("arange", where);
  return Tensor::constant(values, Shape{static_cast<std::int64_t>(values.size())}, dtype);
}

}  // namespace kiln
