// The compiler's definition of every elementwise op: one entry each (see elementwise.hpp).
//
// Floats follow IEEE and PyTorch (NaN propagates through maximum, minimum and relu);
// integers are exact, wrapping at 64 bits as two's complement (each result is then
// wrapped to its dtype's width), as in NumPy and PyTorch. The CUDA forms compute the
// same formulas as the CPU's (the array forms' in vector_math_impl.hpp).

#include "compiler/ops/elementwise.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "core/str.hpp"
#include "kiln/ir/op_registry.hpp"

namespace kiln::compiler {

using kiln::detail::cat;

std::string CudaTerms::fn(std::string_view name) const {
  return f32 ? cat(name, "f") : std::string(name);
}

std::string CudaTerms::lit(std::string_view number) const {
  return f32 ? cat(number, "f") : std::string(number);
}

namespace {

using I = std::int64_t;
using U64 = std::uint64_t;

I wrap(U64 x) { return static_cast<I>(x); }
I ineg(I x) { return wrap(0 - U64(x)); }
double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

bool gelu_tanh_form(const ir::OpView& op) {
  const ir::Attribute* mode = op.find("approximate");
  return mode != nullptr && mode->as_string() == "tanh";
}

// CUDA expressions shared by several ops.
std::string cuda_operand(const CudaTerms& t) { return t.a; }
std::string cuda_maximum(const CudaTerms& t) {  // NaN from either side propagates
  return cat("(", t.a, " < ", t.b, " || ", t.b, " != ", t.b, " ? ", t.b, " : ", t.a, ")");
}
std::string cuda_minimum(const CudaTerms& t) {
  return cat("(", t.b, " < ", t.a, " || ", t.b, " != ", t.b, " ? ", t.b, " : ", t.a, ")");
}
std::string unsigned_a(const CudaTerms& t) { return cat("(unsigned long long)", t.a); }
std::string unsigned_b(const CudaTerms& t) { return cat("(unsigned long long)", t.b); }

/// x fmod 0 = 0 (as NumPy); INT64_MIN fmod -1 = 0 (C++ leaves it undefined).
I int_fmod(I a, I b) { return b == 0 || b == -1 ? 0 : a % b; }
/// Counts outside [0, 63] shift every bit out.
I shift_left(I a, I b) { return b < 0 || b > 63 ? 0 : wrap(U64(a) << b); }
I shift_right(I a, I b) { return b < 0 || b > 63 ? (a < 0 ? -1 : 0) : a >> b; }

/// An op on integers only (its IR rule refuses floats and bools).
ElementwiseDef integer_binary(const char* name, I (*f)(I, I),
                              std::string (*cuda)(const CudaTerms&)) {
  return {&ir::lookup_op(name), ElementwiseKind::binary,
          ElementwiseForm{.int_binary = f, .cuda_int = cuda}};
}

/// A comparison: 1 or 0 in every dtype, the same expression on integers.
ElementwiseDef compare(const char* name, double (*f)(double, double), I (*i)(I, I),
                       vmath::Binary mask, std::string (*cuda)(const CudaTerms&)) {
  return {&ir::lookup_op(name), ElementwiseKind::binary,
          ElementwiseForm{
              .binary = f, .int_binary = i, .vector_binary = mask, .cuda = cuda, .cuda_int = cuda}};
}

std::vector<ElementwiseDef> make_definitions() {
  using K = ElementwiseKind;
  using vmath::Binary;
  using vmath::Unary;
  const auto def = [](const char* name, K kind, ElementwiseForm form) {
    return ElementwiseDef{&ir::lookup_op(name), kind, form};
  };
  std::vector<ElementwiseDef> d;
  // ---- binary arithmetic -------------------------------------------------------------------
  d.push_back(def("kiln.add", K::binary,
                  {.binary = [](double a, double b) { return a + b; },
                   .int_binary = [](I a, I b) { return wrap(U64(a) + U64(b)); },
                   .vector_binary = Binary::add,
                   .cuda = [](const CudaTerms& t) { return cat(t.a, " + ", t.b); },
                   .cuda_int =
                       [](const CudaTerms& t) {
                         return cat("kiln_wrap(", unsigned_a(t), " + ", unsigned_b(t), ")");
                       }}));
  d.back().neutral = NeutralOperand{.value = 0, .negative = true, .either_side = true};
  d.push_back(def("kiln.sub", K::binary,
                  {.binary = [](double a, double b) { return a - b; },
                   .int_binary = [](I a, I b) { return wrap(U64(a) - U64(b)); },
                   .vector_binary = Binary::sub,
                   .cuda = [](const CudaTerms& t) { return cat(t.a, " - ", t.b); },
                   .cuda_int =
                       [](const CudaTerms& t) {
                         return cat("kiln_wrap(", unsigned_a(t), " - ", unsigned_b(t), ")");
                       }}));
  d.back().neutral = NeutralOperand{.value = 0};
  d.push_back(def("kiln.mul", K::binary,
                  {.binary = [](double a, double b) { return a * b; },
                   .int_binary = [](I a, I b) { return wrap(U64(a) * U64(b)); },
                   .vector_binary = Binary::mul,
                   .cuda = [](const CudaTerms& t) { return cat(t.a, " * ", t.b); },
                   .cuda_int =
                       [](const CudaTerms& t) {
                         return cat("kiln_wrap(", unsigned_a(t), " * ", unsigned_b(t), ")");
                       }}));
  d.back().neutral = NeutralOperand{.value = 1, .either_side = true};
  d.push_back(
      def("kiln.div", K::binary,
          {.binary = [](double a, double b) { return a / b; },
           .int_binary = [](I a, I b) -> I {  // truncates; x / 0 = 0 (documented)
             if (b == 0) return 0;
             if (b == -1) return ineg(a);  // INT64_MIN / -1 wraps
             return a / b;
           },
           .vector_binary = Binary::div,
           .cuda = [](const CudaTerms& t) { return cat(t.a, " / ", t.b); },
           .cuda_int = [](const CudaTerms& t) { return cat("kiln_idiv(", t.a, ", ", t.b, ")"); }}));
  d.back().neutral = NeutralOperand{.value = 1};
  d.push_back(
      def("kiln.pow", K::binary,
          {.binary = [](double a, double b) { return std::pow(a, b); },
           .int_binary = [](I a, I b) -> I {  // PyTorch's integer pow
             if (b < 0) return a == 1 ? 1 : a == -1 ? ((-(b + 1)) % 2 == 0 ? -1 : 1) : 0;
             U64 result = 1, base = U64(a);
             for (U64 e = U64(b); e != 0; e >>= 1, base *= base)
               if ((e & 1) != 0) result *= base;
             return wrap(result);
           },
           .vector_binary = Binary::pow,
           .cuda = [](const CudaTerms& t) { return cat(t.fn("pow"), "(", t.a, ", ", t.b, ")"); },
           .cuda_int = [](const CudaTerms& t) { return cat("kiln_ipow(", t.a, ", ", t.b, ")"); }}));
  d.push_back(
      def("kiln.maximum", K::binary,
          {.binary = [](double a, double b) { return a != a   ? a
                                                     : b != b ? b
                                                              : std::max(a, b); },
           .int_binary = [](I a, I b) { return std::max(a, b); },
           .vector_binary = Binary::max,
           .cuda = cuda_maximum,
           .cuda_int = cuda_maximum}));
  d.push_back(
      def("kiln.minimum", K::binary,
          {.binary = [](double a, double b) { return a != a   ? a
                                                     : b != b ? b
                                                              : std::min(a, b); },
           .int_binary = [](I a, I b) { return std::min(a, b); },
           .vector_binary = Binary::min,
           .cuda = cuda_minimum,
           .cuda_int = cuda_minimum}));
  d.push_back(def(
      "kiln.fmod", K::binary,  // exact in every float type: no rounding
      {.binary = [](double a, double b) { return std::fmod(a, b); },
       .int_binary = int_fmod,
       .vector_binary = Binary::fmod,
       .cuda = [](const CudaTerms& t) { return cat(t.fn("fmod"), "(", t.a, ", ", t.b, ")"); },
       .cuda_int = [](const CudaTerms& t) { return cat("kiln_ifmod(", t.a, ", ", t.b, ")"); }}));
  // ---- bitwise, on integers ------------------------------------------------------------------
  // On values sign-extended to int64, then wrapped to the dtype's width: the dtype's bits.
  d.push_back(integer_binary(
      "kiln.bitwise_and", [](I a, I b) { return a & b; },
      [](const CudaTerms& t) { return cat("(", t.a, " & ", t.b, ")"); }));
  d.push_back(integer_binary(
      "kiln.bitwise_or", [](I a, I b) { return a | b; },
      [](const CudaTerms& t) { return cat("(", t.a, " | ", t.b, ")"); }));
  d.push_back(integer_binary(
      "kiln.bitwise_xor", [](I a, I b) { return a ^ b; },
      [](const CudaTerms& t) { return cat("(", t.a, " ^ ", t.b, ")"); }));
  d.push_back(def("kiln.bitwise_not", K::unary,
                  {.int_unary = [](I x) { return ~x; },
                   .cuda_int = [](const CudaTerms& t) { return cat("(~", t.a, ")"); }}));
  d.push_back(integer_binary("kiln.shift_left", shift_left, [](const CudaTerms& t) {
    return cat("kiln_shl(", t.a, ", ", t.b, ")");
  }));
  d.push_back(integer_binary("kiln.shift_right", shift_right, [](const CudaTerms& t) {
    return cat("kiln_shr(", t.a, ", ", t.b, ")");
  }));
  // ---- comparisons ---------------------------------------------------------------------------
  d.push_back(compare(
      "kiln.eq", [](double a, double b) -> double { return a == b; },
      [](I a, I b) -> I { return a == b; }, Binary::eq,
      [](const CudaTerms& t) { return cat("(", t.a, " == ", t.b, " ? 1 : 0)"); }));
  d.push_back(compare(
      "kiln.ne", [](double a, double b) -> double { return a != b; },
      [](I a, I b) -> I { return a != b; }, Binary::ne,
      [](const CudaTerms& t) { return cat("(", t.a, " != ", t.b, " ? 1 : 0)"); }));
  d.push_back(compare(
      "kiln.lt", [](double a, double b) -> double { return a < b; },
      [](I a, I b) -> I { return a < b; }, Binary::lt,
      [](const CudaTerms& t) { return cat("(", t.a, " < ", t.b, " ? 1 : 0)"); }));
  d.push_back(compare(
      "kiln.le", [](double a, double b) -> double { return a <= b; },
      [](I a, I b) -> I { return a <= b; }, Binary::le,
      [](const CudaTerms& t) { return cat("(", t.a, " <= ", t.b, " ? 1 : 0)"); }));
  d.push_back(compare(
      "kiln.gt", [](double a, double b) -> double { return a > b; },
      [](I a, I b) -> I { return a > b; }, Binary::gt,
      [](const CudaTerms& t) { return cat("(", t.a, " > ", t.b, " ? 1 : 0)"); }));
  d.push_back(compare(
      "kiln.ge", [](double a, double b) -> double { return a >= b; },
      [](I a, I b) -> I { return a >= b; }, Binary::ge,
      [](const CudaTerms& t) { return cat("(", t.a, " >= ", t.b, " ? 1 : 0)"); }));
  // ---- unary, on every numeric dtype ---------------------------------------------------------
  d.push_back(
      def("kiln.neg", K::unary,
          {.unary = [](double x) { return -x; },
           .int_unary = ineg,
           .vector_unary = Unary::neg,
           .cuda = [](const CudaTerms& t) { return cat("-", t.a); },
           .cuda_int =
               [](const CudaTerms& t) { return cat("kiln_wrap(0ull - ", unsigned_a(t), ")"); }}));
  d.back().involution = true;
  d.push_back(def("kiln.abs", K::unary,
                  {.unary = [](double x) { return std::fabs(x); },
                   .int_unary = [](I x) { return x < 0 ? ineg(x) : x; },
                   .vector_unary = Unary::abs,
                   .cuda = [](const CudaTerms& t) { return cat(t.fn("fabs"), "(", t.a, ")"); },
                   .cuda_int =
                       [](const CudaTerms& t) {
                         return cat("(", t.a, " < 0 ? kiln_wrap(0ull - ", unsigned_a(t),
                                    ") : ", t.a, ")");
                       }}));
  d.push_back(def(
      "kiln.relu", K::unary,  // NaN stays NaN, as in PyTorch
      {.unary = [](double x) { return x > 0 || x != x ? x : 0; },
       .int_unary = [](I x) { return std::max<I>(x, 0); },
       .vector_unary = Unary::relu,
       .cuda =
           [](const CudaTerms& t) {
             const std::string zero = t.lit("0.0");
             return cat("(", t.a, " > ", zero, " || ", t.a, " != ", t.a, " ? ", t.a, " : ", zero,
                        ")");
           },
       .cuda_int = [](const CudaTerms& t) { return cat("(", t.a, " > 0 ? ", t.a, " : 0LL)"); }}));
  d.push_back(def("kiln.sign", K::unary,  // NaN and signed zeros stay as they are
                  {.unary = [](double x) { return x > 0   ? 1.0
                                                  : x < 0 ? -1.0
                                                          : x; },
                   .int_unary = [](I x) -> I { return (x > 0) - (x < 0); },
                   .vector_unary = Unary::sign,
                   .cuda =
                       [](const CudaTerms& t) {
                         return cat("(", t.a, " > ", t.lit("0.0"), " ? ", t.lit("1.0"), " : ", t.a,
                                    " < ", t.lit("0.0"), " ? ", t.lit("-1.0"), " : ", t.a, ")");
                       },
                   .cuda_int =
                       [](const CudaTerms& t) {
                         return cat("(long long)((", t.a, " > 0) - (", t.a, " < 0))");
                       }}));
  // Integers are whole already: floor, ceil and round return them as they are.
  d.push_back(def("kiln.floor", K::unary,
                  {.unary = [](double x) { return std::floor(x); },
                   .int_unary = [](I x) { return x; },
                   .vector_unary = Unary::floor,
                   .cuda = [](const CudaTerms& t) { return cat(t.fn("floor"), "(", t.a, ")"); },
                   .cuda_int = cuda_operand}));
  d.push_back(def("kiln.ceil", K::unary,
                  {.unary = [](double x) { return std::ceil(x); },
                   .int_unary = [](I x) { return x; },
                   .vector_unary = Unary::ceil,
                   .cuda = [](const CudaTerms& t) { return cat(t.fn("ceil"), "(", t.a, ")"); },
                   .cuda_int = cuda_operand}));
  d.push_back(def("kiln.round", K::unary,  // halves to even: C's rint, CUDA's rint
                  {.unary = [](double x) { return std::nearbyint(x); },
                   .int_unary = [](I x) { return x; },
                   .vector_unary = Unary::round,
                   .cuda = [](const CudaTerms& t) { return cat(t.fn("rint"), "(", t.a, ")"); },
                   .cuda_int = cuda_operand}));
  // ---- unary, on floating-point dtypes -------------------------------------------------------
  d.push_back(def("kiln.exp", K::unary,
                  {.unary = [](double x) { return std::exp(x); },
                   .vector_unary = Unary::exp,
                   .cuda = [](const CudaTerms& t) { return cat(t.fn("exp"), "(", t.a, ")"); }}));
  d.push_back(def("kiln.log", K::unary,
                  {.unary = [](double x) { return std::log(x); },
                   .vector_unary = Unary::log,
                   .cuda = [](const CudaTerms& t) { return cat(t.fn("log"), "(", t.a, ")"); }}));
  d.push_back(def("kiln.sqrt", K::unary,
                  {.unary = [](double x) { return std::sqrt(x); },
                   .vector_unary = Unary::sqrt,
                   .cuda = [](const CudaTerms& t) { return cat(t.fn("sqrt"), "(", t.a, ")"); }}));
  d.push_back(def("kiln.rsqrt", K::unary,
                  {.unary = [](double x) { return 1 / std::sqrt(x); },
                   .vector_unary = Unary::rsqrt,
                   .cuda =
                       [](const CudaTerms& t) {
                         return cat(t.lit("1.0"), " / ", t.fn("sqrt"), "(", t.a, ")");
                       }}));
  d.push_back(def("kiln.tanh", K::unary,
                  {.unary = [](double x) { return std::tanh(x); },
                   .vector_unary = Unary::tanh,
                   .cuda = [](const CudaTerms& t) { return cat(t.fn("tanh"), "(", t.a, ")"); }}));
  d.push_back(def("kiln.erf", K::unary,
                  {.unary = [](double x) { return std::erf(x); },
                   .vector_unary = Unary::erf,
                   .cuda = [](const CudaTerms& t) { return cat(t.fn("erf"), "(", t.a, ")"); }}));
  d.push_back(def("kiln.sin", K::unary,
                  {.unary = [](double x) { return std::sin(x); },
                   .vector_unary = Unary::sin,
                   .cuda = [](const CudaTerms& t) { return cat(t.fn("sin"), "(", t.a, ")"); }}));
  d.push_back(def("kiln.cos", K::unary,
                  {.unary = [](double x) { return std::cos(x); },
                   .vector_unary = Unary::cos,
                   .cuda = [](const CudaTerms& t) { return cat(t.fn("cos"), "(", t.a, ")"); }}));
  d.push_back(def("kiln.tan", K::unary,
                  {.unary = [](double x) { return std::tan(x); },
                   .vector_unary = Unary::tan,
                   .cuda = [](const CudaTerms& t) { return cat(t.fn("tan"), "(", t.a, ")"); }}));
  d.push_back(
      def("kiln.sigmoid", K::unary,
          {.unary = sigmoid, .vector_unary = Unary::sigmoid, .cuda = [](const CudaTerms& t) {
             return cat(t.lit("1.0"), " / (", t.lit("1.0"), " + ", t.fn("exp"), "(-", t.a, "))");
           }}));
  d.push_back(def("kiln.silu", K::unary,
                  {.unary = [](double x) { return x * sigmoid(x); },
                   .vector_unary = Unary::silu,
                   .cuda =
                       [](const CudaTerms& t) {
                         return cat(t.a, " / (", t.lit("1.0"), " + ", t.fn("exp"), "(-", t.a, "))");
                       }}));
  ElementwiseDef gelu =
      def("kiln.gelu", K::unary,
          {.unary = [](double x) { return 0.5 * x * (1 + std::erf(x * M_SQRT1_2)); },
           .vector_unary = Unary::gelu_erf,
           .cuda =
               [](const CudaTerms& t) {
                 return cat(t.lit("0.5"), " * ", t.a, " * (", t.lit("1.0"), " + ", t.fn("erf"), "(",
                            t.a, " * ", t.lit("0.70710678118654752440"), "))");
               }});
  gelu.variant = {
      // approximate = "tanh": 0.5 x (1 + tanh u), = x sigmoid(2u) in f32 arrays
      .unary =
          [](double x) {
            return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
          },
      .vector_unary = Unary::gelu_tanh,
      .cuda = [](const CudaTerms& t) {  // each in the CPU's formula for its float type
        const std::string cube = cat(t.a, " * ", t.a, " * ", t.a);
        if (t.f32)
          return cat(t.a, " / (1.0f + expf(-1.5957691216057308f * (", t.a, " + 0.044715f * ", cube,
                     ")))");
        return cat("0.5 * ", t.a, " * (1.0 + tanh(0.7978845608028654 * (", t.a, " + 0.044715 * ",
                   cube, ")))");
      }};
  gelu.picks_variant = gelu_tanh_form;
  d.push_back(gelu);
  // ---- select and conversion -----------------------------------------------------------------
  d.push_back(def("kiln.where", K::select, {}));  // the interpreter and codegen select
  d.push_back(def("kiln.cast", K::cast,           // the conversion is the caller's
                  {.vector_unary = Unary::copy, .cuda = cuda_operand, .cuda_int = cuda_operand}));
  d.back().identity_on_same_type = true;
  return d;
}

}  // namespace

const std::vector<ElementwiseDef>& elementwise_defs() {
  static const std::vector<ElementwiseDef> defs = make_definitions();
  return defs;
}

const ElementwiseDef* find_elementwise(const ir::OpDef& op) {
  static const std::unordered_map<const ir::OpDef*, const ElementwiseDef*> by_op = [] {
    std::unordered_map<const ir::OpDef*, const ElementwiseDef*> m;
    for (const ElementwiseDef& d : elementwise_defs()) m.emplace(d.op, &d);
    return m;
  }();
  const auto it = by_op.find(&op);
  return it == by_op.end() ? nullptr : it->second;
}

}  // namespace kiln::compiler
