// ONNX's element-wise ops as kiln ops or compositions of them, one entry per op type.

#include <cmath>
#include <limits>

#include "core/str.hpp"
#include "onnx/fold.hpp"
#include "onnx/proto.hpp"

namespace kiln::onnx_import {
namespace {
using detail::cat;
using Outputs = std::vector<OnnxValue>;
using Folded = std::optional<std::vector<HostValue>>;

Tensor scalar_like(double value, const Tensor& like) { return Tensor::scalar(value, like.dtype()); }

template <Tensor (*F)(const Tensor&, Loc)>
Outputs unary(NodeContext& n) {
  return {traced(F(n.input(0), Loc::current()))};
}

// ---- binary arithmetic and comparisons, folded on the host where known ----------------

std::int64_t int_add(std::int64_t a, std::int64_t b) {
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
}
std::int64_t int_sub(std::int64_t a, std::int64_t b) {
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) - static_cast<std::uint64_t>(b));
}
std::int64_t int_mul(std::int64_t a, std::int64_t b) {
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) * static_cast<std::uint64_t>(b));
}
std::int64_t int_div(std::int64_t a, std::int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return static_cast<std::int64_t>(0 - static_cast<std::uint64_t>(a));
  return a / b;
}
std::int64_t int_eq(std::int64_t a, std::int64_t b) { return a == b; }
std::int64_t int_lt(std::int64_t a, std::int64_t b) { return a < b; }
std::int64_t int_le(std::int64_t a, std::int64_t b) { return a <= b; }
std::int64_t int_gt(std::int64_t a, std::int64_t b) { return a > b; }
std::int64_t int_ge(std::int64_t a, std::int64_t b) { return a >= b; }
std::int64_t int_max(std::int64_t a, std::int64_t b) { return std::max(a, b); }
std::int64_t int_min(std::int64_t a, std::int64_t b) { return std::min(a, b); }
double f_add(double a, double b) { return a + b; }
double f_sub(double a, double b) { return a - b; }
double f_mul(double a, double b) { return a * b; }
double f_div(double a, double b) { return a / b; }
double f_eq(double a, double b) { return a == b; }
double f_lt(double a, double b) { return a < b; }
double f_le(double a, double b) { return a <= b; }
double f_gt(double a, double b) { return a > b; }
double f_ge(double a, double b) { return a >= b; }
double f_max(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }
double f_min(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b); }

template <std::int64_t (*I)(std::int64_t, std::int64_t), double (*F)(double, double), SymbolRule R,
          bool Compare = false>
Folded fold2(NodeContext& n) {
  const auto in = all_known(n);
  if (!in || n.num_inputs() != 2 || (*in)[0] == nullptr || (*in)[1] == nullptr) return std::nullopt;
  std::optional<HostValue> out = fold_binary(n, *(*in)[0], *(*in)[1], I, F, R, Compare);
  if (!out) return std::nullopt;
  return std::vector<HostValue>{std::move(*out)};
}

Outputs add(NodeContext& n) { return {traced(n.input(0) + n.input(1))}; }
Outputs sub(NodeContext& n) { return {traced(n.input(0) - n.input(1))}; }
Outputs mul(NodeContext& n) { return {traced(n.input(0) * n.input(1))}; }
Outputs div(NodeContext& n) { return {traced(n.input(0) / n.input(1))}; }
Outputs equal_(NodeContext& n) { return {traced(equal(n.input(0), n.input(1)))}; }
Outputs less(NodeContext& n) { return {traced(n.input(0) < n.input(1))}; }
Outputs less_equal(NodeContext& n) { return {traced(n.input(0) <= n.input(1))}; }
Outputs greater(NodeContext& n) { return {traced(n.input(0) > n.input(1))}; }
Outputs greater_equal(NodeContext& n) { return {traced(n.input(0) >= n.input(1))}; }

Outputs pow_(NodeContext& n) {
  const Tensor base = n.input(0);
  Tensor out = pow(base, n.input(1));
  if (out.dtype() != base.dtype()) out = cast(out, base.dtype());  // ONNX: the base's dtype
  return {traced(out)};
}

template <Tensor (*F)(const Tensor&, const Tensor&, Loc)>
Outputs variadic(NodeContext& n) {
  if (n.num_inputs() == 0) n.fail("needs at least one input");
  Tensor out = n.input(0);
  for (std::size_t i = 1; i < n.num_inputs(); ++i) out = F(out, n.input(i), Loc::current());
  return {traced(out)};
}
template <std::int64_t (*I)(std::int64_t, std::int64_t), double (*F)(double, double)>
Folded fold_variadic(NodeContext& n) {
  const auto in = all_known(n);
  if (!in || in->empty() || (*in)[0] == nullptr) return std::nullopt;
  HostValue out = *(*in)[0];
  for (std::size_t i = 1; i < in->size(); ++i) {
    if ((*in)[i] == nullptr) return std::nullopt;
    std::optional<HostValue> next = fold_binary(n, out, *(*in)[i], I, F, SymbolRule::max_min);
    if (!next) return std::nullopt;
    out = std::move(*next);
  }
  return std::vector<HostValue>{std::move(out)};
}

Outputs where_(NodeContext& n) { return {traced(where(n.input(0), n.input(1), n.input(2)))}; }

// ---- logic ------------------------------------------------------------------------------

Outputs not_(NodeContext& n) {
  const Tensor x = n.input(0);
  return {traced(equal(x, scalar_like(0, x)))};
}
Outputs and_(NodeContext& n) {
  const Tensor b = n.input(1);
  return {traced(where(n.input(0), b, scalar_like(0, b)))};
}
Outputs or_(NodeContext& n) {
  const Tensor b = n.input(1);
  return {traced(where(n.input(0), scalar_like(1, b), b))};
}
Outputs xor_(NodeContext& n) { return {traced(not_equal(n.input(0), n.input(1)))}; }

// ---- activations ------------------------------------------------------------------------

Outputs reciprocal(NodeContext& n) { return {traced(1.0 / n.input(0))}; }
Outputs gelu_(NodeContext& n) {
  n.only_attributes({"approximate"});
  return {traced(gelu(n.input(0), n.attr_string("approximate", "none")))};
}
Outputs leaky_relu(NodeContext& n) {
  const Tensor x = n.input(0);
  return {traced(where(x < 0.0, x * n.attr_float("alpha", 0.01), x))};
}
Tensor hard_sigmoid_of(const Tensor& x, double alpha, double beta) {
  return minimum(maximum(x * alpha + beta, scalar_like(0, x)), scalar_like(1, x));
}
Outputs hard_sigmoid(NodeContext& n) {
  return {
      traced(hard_sigmoid_of(n.input(0), n.attr_float("alpha", 0.2), n.attr_float("beta", 0.5)))};
}
Outputs hard_swish(NodeContext& n) {
  const Tensor x = n.input(0);
  return {traced(x * hard_sigmoid_of(x, 1.0 / 6, 0.5))};
}
Outputs elu(NodeContext& n) {
  const Tensor x = n.input(0);
  const double alpha = n.attr_float("alpha", 1.0);
  return {traced(where(x < 0.0, (exp(x) - 1.0) * alpha, x))};
}
Outputs selu(NodeContext& n) {
  const Tensor x = n.input(0);
  const double alpha = n.attr_float("alpha", 1.67326319217681884765625);
  const double gamma = n.attr_float("gamma", 1.05070102214813232421875);
  return {traced(where(x <= scalar_like(0, x), exp(x) * alpha - alpha, x) * gamma)};
}
Tensor softplus_of(const Tensor& x) { return log(exp(x) + 1.0); }
Outputs softplus(NodeContext& n) { return {traced(softplus_of(n.input(0)))}; }
Outputs softsign(NodeContext& n) {
  const Tensor x = n.input(0);
  return {traced(x / (abs(x) + 1.0))};
}
Outputs mish(NodeContext& n) {
  const Tensor x = n.input(0);
  return {traced(x * tanh(softplus_of(x)))};
}
Outputs clip(NodeContext& n) {
  Tensor x = n.input(0);
  if (n.has_input(1)) x = maximum(x, n.input(1));
  if (n.has_input(2)) x = minimum(x, n.input(2));
  return {traced(x)};
}
Outputs is_nan(NodeContext& n) {
  const Tensor x = n.input(0);
  return {traced(not_equal(x, x))};
}
Outputs is_inf(NodeContext& n) {
  const Tensor x = n.input(0);
  const bool negative = n.attr_int("detect_negative", 1) != 0;
  const bool positive = n.attr_int("detect_positive", 1) != 0;
  const Tensor inf = scalar_like(std::numeric_limits<double>::infinity(), x);
  if (positive && negative) return {traced(equal(abs(x), inf))};
  if (positive) return {traced(equal(x, inf))};
  if (negative) return {traced(equal(x, neg(inf)))};
  return {traced(abs(x) < neg(inf))};
}

// ---- dtypes -------------------------------------------------------------------------------

Outputs cast_(NodeContext& n) {
  const auto to = static_cast<std::int32_t>(n.attr_int("to", 0));
  return {traced(cast(n.input(0), to_dtype(to, n.where())))};
}
Folded fold_cast(NodeContext& n) {
  const HostValue* h = n.host(0);
  if (h == nullptr) return std::nullopt;
  const DType to = to_dtype(static_cast<std::int32_t>(n.attr_int("to", 0)), n.where());
  HostValue out = *h;
  out.dtype = to;
  if (h->symbolic()) {
    if (!is_integer(to)) return std::nullopt;
    return std::vector<HostValue>{std::move(out)};  // dims as i32 or i64
  }
  out.ints.clear();
  out.floats.clear();
  const Tensor from = to_tensor(*h, n.where());
  const std::size_t in_size = size_of(h->dtype);
  std::byte element[8];
  for (std::size_t i = 0; i < h->size(); ++i) {
    convert_element(h->dtype, from.bytes().data() + i * in_size, to, element);
    if (is_floating(to))
      out.floats.push_back(load_as_double(to, element));
    else
      out.ints.push_back(load_as_int(to, element));
  }
  return std::vector<HostValue>{std::move(out)};
}
Outputs cast_like(NodeContext& n) { return {traced(cast(n.input(0), n.layout(1).dtype))}; }

Outputs identity(NodeContext& n) { return {traced(n.input(0))}; }
Folded fold_identity(NodeContext& n) {
  const HostValue* h = n.host(0);
  if (h == nullptr) return std::nullopt;
  return std::vector<HostValue>{*h};
}

Outputs neg_(NodeContext& n) { return {traced(neg(n.input(0)))}; }
Folded fold_neg(NodeContext& n) {
  const HostValue* h = n.host(0);
  if (h == nullptr || h->symbolic()) return std::nullopt;
  HostValue out = *h;
  for (auto& v : out.ints) v = int_sub(0, v);
  for (auto& v : out.floats) v = -v;
  return std::vector<HostValue>{std::move(out)};
}

// ---- Mod, bitwise ops, BitShift --------------------------------------------------------------

/// fmod = 1: the sign of the dividend (C's fmod); fmod = 0 (integers only, as ONNX says):
/// the sign of the divisor (Python's %), a nonzero remainder of the other sign moved by b.
Outputs mod(NodeContext& n) {
  n.only_attributes({"fmod"});
  const Tensor a = n.input(0), b = n.input(1);
  const Tensor r = kiln::fmod(a, b);
  if (n.attr_int("fmod", 0) != 0) return {traced(r)};
  if (is_floating(r.dtype()))
    n.fail(cat("fmod = 0 on ", r.dtype(),
               " tensors: ONNX defines Mod of floating-point "
               "tensors with fmod = 1 only"));
  const Tensor differ = not_equal(r < 0.0, b < 0.0);
  const Tensor moves = where(differ, not_equal(r, scalar_like(0, r)), differ);
  return {traced(where(moves, r + b, r))};
}

template <Tensor (*F)(const Tensor&, const Tensor&, Loc)>
Outputs binary_op(NodeContext& n) {
  n.only_attributes({});
  return {traced(F(n.input(0), n.input(1), Loc::current()))};
}

Outputs bit_shift(NodeContext& n) {
  n.only_attributes({"direction"});
  const std::string direction = n.attr_string("direction", "");
  if (direction == "LEFT") return {traced(shift_left(n.input(0), n.input(1)))};
  if (direction == "RIGHT") return {traced(shift_right(n.input(0), n.input(1)))};
  n.fail(cat("direction \"", direction, "\" is not LEFT or RIGHT"));
}

constexpr SymbolRule kAdd = SymbolRule::add, kSub = SymbolRule::sub, kMul = SymbolRule::mul,
                     kDiv = SymbolRule::div, kEq = SymbolRule::equal, kNone = SymbolRule::none;

const OpConverter kConverters[] = {
    {"Abs", unary<kiln::abs>},
    {"Add", add, fold2<int_add, f_add, kAdd>},
    {"And", and_, nullptr, 7},
    {"BitShift", bit_shift, nullptr, 11},
    {"BitwiseAnd", binary_op<bitwise_and>, nullptr, 18},
    {"BitwiseNot", unary<bitwise_not>, nullptr, 18},
    {"BitwiseOr", binary_op<bitwise_or>, nullptr, 18},
    {"BitwiseXor", binary_op<bitwise_xor>, nullptr, 18},
    {"Cast", cast_, fold_cast},
    {"CastLike", cast_like},
    {"Ceil", unary<kiln::ceil>},
    {"Clip", clip},
    {"Cos", unary<kiln::cos>},
    {"Div", div, fold2<int_div, f_div, kDiv>},
    {"Elu", elu},
    {"Equal", equal_, fold2<int_eq, f_eq, kEq, true>},
    {"Erf", unary<kiln::erf>},
    {"Exp", unary<kiln::exp>},
    {"Floor", unary<kiln::floor>},
    {"Gelu", gelu_, nullptr, 20},
    {"Greater", greater, fold2<int_gt, f_gt, kNone, true>},
    {"GreaterOrEqual", greater_equal, fold2<int_ge, f_ge, kNone, true>},
    {"HardSigmoid", hard_sigmoid},
    {"HardSwish", hard_swish},
    {"Identity", identity, fold_identity},
    {"IsInf", is_inf},
    {"IsNaN", is_nan},
    {"LeakyRelu", leaky_relu},
    {"Less", less, fold2<int_lt, f_lt, kNone, true>},
    {"LessOrEqual", less_equal, fold2<int_le, f_le, kNone, true>},
    {"Log", unary<kiln::log>},
    {"Max", variadic<maximum>, fold_variadic<int_max, f_max>},
    {"Min", variadic<minimum>, fold_variadic<int_min, f_min>},
    {"Mish", mish},
    {"Mod", mod},
    {"Mul", mul, fold2<int_mul, f_mul, kMul>},
    {"Neg", neg_, fold_neg},
    {"Not", not_, nullptr, 1},
    {"Or", or_, nullptr, 7},
    {"Pow", pow_},
    {"Reciprocal", reciprocal},
    {"Relu", unary<kiln::relu>},
    {"Round", unary<kiln::round>},
    {"Selu", selu},
    {"Sigmoid", unary<kiln::sigmoid>},
    {"Sign", unary<kiln::sign>},
    {"Sin", unary<kiln::sin>},
    {"Softplus", softplus},
    {"Softsign", softsign},
    {"Sqrt", unary<kiln::sqrt>},
    {"Sub", sub, fold2<int_sub, f_sub, kSub>},
    {"Tan", unary<kiln::tan>},
    {"Tanh", unary<kiln::tanh>},
    {"Where", where_},
    {"Xor", xor_, nullptr, 7},
};

}  // namespace

std::span<const OpConverter> elementwise_converters() { return kConverters; }

}  // namespace kiln::onnx_import
