// DType, Device, TensorLayout, Tensor with Python's operators, and every op of the C++
// staging API as a function of the module, located at the caller's Python line.

#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "kiln/core/error.hpp"

namespace kiln::python {
namespace {

using Axes = std::optional<std::vector<std::int64_t>>;

/// Axes given as None (all), one int, or a sequence.
std::vector<std::int64_t> axes_of(nb::handle axes) {
  if (axes.is_none()) return {};
  if (PyLong_Check(axes.ptr())) return {nb::cast<std::int64_t>(axes)};
  return nb::cast<std::vector<std::int64_t>>(axes);
}

enum class Binary {
  add,
  sub,
  mul,
  div,
  pow,
  lt,
  le,
  gt,
  ge,
  eq,
  ne,
  band,
  bor,
  bxor,
  shl,
  shr,
  max,
  min,
  fmod,
  matmul
};

const char* binary_name(Binary op) {
  static const char* kNames[] = {
      "add",        "sub",         "mul",     "div",     "pow",         "lt",         "le",
      "gt",         "ge",          "eq",      "ne",      "bitwise_and", "bitwise_or", "bitwise_xor",
      "shift_left", "shift_right", "maximum", "minimum", "fmod",        "matmul"};
  return kNames[static_cast<int>(op)];
}

Tensor apply(Binary op, const Tensor& a, const Tensor& b, const Loc& w) {
  switch (op) {
    case Binary::add:
      return Located<const Tensor&>(a, w) + b;
    case Binary::sub:
      return Located<const Tensor&>(a, w) - b;
    case Binary::mul:
      return Located<const Tensor&>(a, w) * b;
    case Binary::div:
      return Located<const Tensor&>(a, w) / b;
    case Binary::pow:
      return kiln::pow(a, b, w);
    case Binary::lt:
      return Located<const Tensor&>(a, w) < b;
    case Binary::le:
      return Located<const Tensor&>(a, w) <= b;
    case Binary::gt:
      return Located<const Tensor&>(a, w) > b;
    case Binary::ge:
      return Located<const Tensor&>(a, w) >= b;
    case Binary::eq:
      return kiln::equal(a, b, w);
    case Binary::ne:
      return kiln::not_equal(a, b, w);
    case Binary::band:
      return kiln::bitwise_and(a, b, w);
    case Binary::bor:
      return kiln::bitwise_or(a, b, w);
    case Binary::bxor:
      return kiln::bitwise_xor(a, b, w);
    case Binary::shl:
      return kiln::shift_left(a, b, w);
    case Binary::shr:
      return kiln::shift_right(a, b, w);
    case Binary::max:
      return kiln::maximum(a, b, w);
    case Binary::min:
      return kiln::minimum(a, b, w);
    case Binary::fmod:
      return kiln::fmod(a, b, w);
    case Binary::matmul:
      return kiln::matmul(a, b, w);
  }
  throw InternalError("unknown binary op");
}

bool is_scalar(nb::handle v) { return PyLong_Check(v.ptr()) || PyFloat_Check(v.ptr()); }

/// \p v as an operand beside \p t: a tensor, an array (a constant), or a Python number with
/// PyTorch's rule (an int takes the tensor's dtype; a float beside an integer or bool tensor
/// makes the op f32, casting the tensor).
std::optional<Tensor> operand(Tensor& t, nb::handle v, Binary op, const Loc& w) {
  if (nb::isinstance<Tensor>(v)) return nb::cast<Tensor>(v);
  if (is_scalar(v)) {
    const bool py_float = PyFloat_Check(v.ptr());
    if (py_float && !t.empty() && !is_floating(t.dtype())) t = kiln::cast(t, DType::f32, w);
    double value = 0;
    if (py_float) {
      value = PyFloat_AsDouble(v.ptr());
    } else {
      int overflow = 0;
      const long long i = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
      if (overflow != 0)
        throw UserError(std::string(binary_name(op)) + " at " + w.file_name() + ":" +
                        std::to_string(w.line()) + ": the scalar " +
                        nb::cast<std::string>(nb::str(v)) + " does not fit in int64");
      value = static_cast<double>(i);
      if (static_cast<long long>(value) != i || std::fabs(value) >= 9007199254740992.0)
        throw UserError(std::string(binary_name(op)) + " at " + w.file_name() + ":" +
                        std::to_string(w.line()) + ": the scalar " + std::to_string(i) +
                        " is 2^53 or more, beyond what kiln takes as a scalar exactly: make "
                        "it a tensor (numpy.int64 array) of the dtype you mean");
    }
    return kiln::scalar_like(t, value, binary_name(op), w);
  }
  if (is_array_like(v)) return tensor_from_object(v, std::string(binary_name(op)) + " operand");
  return std::nullopt;
}

/// The binding of operator \p op: `self op other`, or `other op self` when \p reflected.
nb::object binary_method(Binary op, bool reflected, const Tensor& self, nb::handle other) {
  const Loc w = caller_location();
  Tensor t = self;
  std::optional<Tensor> o = operand(t, other, op, w);
  if (!o) return nb::borrow(Py_NotImplemented);
  return nb::cast(reflected ? apply(op, *o, t, w) : apply(op, t, *o, w));
}

/// The module function of \p op: either operand may be a Python number or an array.
Tensor binary_function(Binary op, nb::handle a, nb::handle b) {
  const Loc w = caller_location();
  if (nb::isinstance<Tensor>(a)) {
    Tensor t = nb::cast<Tensor>(a);
    std::optional<Tensor> o = operand(t, b, op, w);
    if (!o)
      throw nb::type_error((std::string("kiln.") + binary_name(op) +
                            ": the second operand is not a tensor, array or number")
                               .c_str());
    return apply(op, t, *o, w);
  }
  if (nb::isinstance<Tensor>(b)) {
    Tensor t = nb::cast<Tensor>(b);
    std::optional<Tensor> o = operand(t, a, op, w);
    if (!o)
      throw nb::type_error((std::string("kiln.") + binary_name(op) +
                            ": the first operand is not a tensor, array or number")
                               .c_str());
    return apply(op, *o, t, w);
  }
  const Tensor ta = tensor_from_object(a, std::string("kiln.") + binary_name(op));
  const Tensor tb = tensor_from_object(b, std::string("kiln.") + binary_name(op));
  return apply(op, ta, tb, w);
}

Tensor as_tensor_operand(nb::handle v, const Tensor& like, const char* what, const Loc& w) {
  if (nb::isinstance<Tensor>(v)) return nb::cast<Tensor>(v);
  if (is_scalar(v)) return kiln::scalar_like(like, nb::cast<double>(v), what, w);
  return tensor_from_object(v, what);
}

Window window_of(std::vector<std::int64_t> strides, std::vector<std::int64_t> pads,
                 std::vector<std::int64_t> dilations, std::int64_t groups,
                 std::vector<std::int64_t> output_padding) {
  return Window{std::move(strides), std::move(pads), std::move(dilations), groups,
                std::move(output_padding)};
}

const char* kind_of(const Tensor& t) {
  if (t.empty()) return "empty";
  if (t.is_placeholder()) return "placeholder";
  if (t.is_traced()) return "traced";
  return "concrete";
}

}  // namespace

Shape shape_from_python(nb::handle shape) {
  if (nb::isinstance<Shape>(shape)) return nb::cast<Shape>(shape);
  std::vector<Dim> dims;
  for (nb::handle d : shape) {
    if (PyUnicode_Check(d.ptr()))
      dims.emplace_back(std::string_view(nb::cast<std::string>(d)));
    else if (PyLong_Check(d.ptr()) || nb::hasattr(d, "__index__"))
      dims.emplace_back(nb::cast<std::int64_t>(d.attr("__index__")()));
    else
      throw UserError(
          "kiln: a shape's dims are ints (static) or str (symbolic, 'batch' or "
          "'batch*seq'); got a " +
          qualified_name(d.type()));
  }
  return Shape(std::move(dims));
}

nb::tuple shape_to_python(const Shape& shape) {
  nb::list out;
  for (const Dim& d : shape.dims()) {
    if (d.is_static())
      out.append(nb::int_(d.size()));
    else
      out.append(nb::str(d.symbol().c_str()));
  }
  return nb::tuple(out);
}

void register_tensor(nb::module_& m) {
  nb::enum_<DType>(m, "DType", "Element types.")
      .value("float32", DType::f32)
      .value("float16", DType::f16)
      .value("bfloat16", DType::bf16)
      .value("float64", DType::f64)
      .value("int8", DType::i8)
      .value("uint8", DType::u8)
      .value("int32", DType::i32)
      .value("int64", DType::i64)
      .value("bool", DType::bool_)
      .def_prop_ro("size_in_bytes", [](DType d) { return size_of(d); })
      .def_prop_ro(
          "short_name", [](DType d) { return std::string(name(d)); },
          "kiln's own name: f32, bf16, i64, ...");

  nb::class_<Device>(m, "Device", "A device: cpu:N or cuda:N.")
      .def(nb::new_([](const std::string& text) { return Device::parse(text); }), nb::arg("text"),
           "Parses 'cpu', 'cpu:1', 'cuda:0'.")
      .def_prop_ro("index", &Device::index)
      .def_prop_ro("kind", [](const Device& d) { return d.is_cpu() ? "cpu" : "cuda"; })
      .def("__eq__", [](const Device& a, const Device& b) { return a == b; })
      .def("__hash__", [](const Device& d) { return d.index() * 2 + (d.is_cuda() ? 1 : 0); })
      .def("__str__", [](const Device& d) { return text_of(d); })
      .def("__repr__", [](const Device& d) { return "Device('" + text_of(d) + "')"; });
  m.def("CPU", &Device::cpu, nb::arg("id") = 0,
        "The CPU device cpu:id (a virtual CPU device "
        "for id > 0: set_cpu_device_count).");
  m.def("CUDA", &Device::cuda, nb::arg("id") = 0, "The GPU cuda:id.");
  m.def("Accelerator", &Device::cuda, nb::arg("id") = 0, "The GPU cuda:id (MAX's name).");

  nb::class_<TensorLayout>(m, "TensorLayout", "dtype, shape (ints and symbolic names) and device.")
      .def(
          "__init__",
          [](TensorLayout* self, DType dtype, nb::handle shape, Device device) {
            new (self) TensorLayout(dtype, shape_from_python(shape), device);
          },
          nb::arg("dtype"), nb::arg("shape"), nb::arg("device") = Device::cpu())
      .def_prop_ro("dtype", [](const TensorLayout& l) { return l.dtype; })
      .def_prop_ro("shape", [](const TensorLayout& l) { return shape_to_python(l.shape); })
      .def_prop_ro("device", [](const TensorLayout& l) { return l.device; })
      .def_prop_ro("rank", [](const TensorLayout& l) { return l.shape.rank(); })
      .def("__eq__", [](const TensorLayout& a, const TensorLayout& b) { return a == b; })
      .def("__hash__", [](const TensorLayout& l) { return std::hash<std::string>{}(to_string(l)); })
      .def("__str__", [](const TensorLayout& l) { return to_string(l); })
      .def("__repr__", [](const TensorLayout& l) { return "TensorLayout(" + to_string(l) + ")"; });

  auto tensor = nb::class_<Tensor>(
      m, "Tensor",
      "A tensor: a placeholder (a layout), a traced value of the function being staged (ops "
      "on it add IR ops), or concrete data (an array, borrowed without a copy).");
  tensor.def(nb::init<TensorLayout>(), nb::arg("layout"), "A placeholder with this layout.")
      .def_prop_ro("dtype", &Tensor::dtype)
      .def_prop_ro("shape", [](const Tensor& t) { return shape_to_python(t.shape()); })
      .def_prop_ro("device", &Tensor::device)
      .def_prop_ro("layout", [](const Tensor& t) { return t.layout(); })
      .def_prop_ro("rank", &Tensor::rank)
      .def_prop_ro("ndim", &Tensor::rank)
      .def_prop_ro("kind", &kind_of, "'placeholder', 'traced', 'concrete' or 'empty'.")
      .def_prop_ro(
          "data_ptr",
          [](const Tensor& t) { return reinterpret_cast<std::uintptr_t>(t.bytes().data()); },
          "The address of a concrete tensor's elements (0 otherwise).")
      .def("numpy", &tensor_to_numpy, "A concrete tensor as a NumPy array over its memory.")
      .def(
          "__array__",
          [](const Tensor& t, nb::handle dtype, nb::handle copy) {
            nb::object a = tensor_to_numpy(t);
            if (!dtype.is_none()) a = a.attr("astype")(dtype);
            if (!copy.is_none() && nb::cast<bool>(copy)) a = a.attr("copy")();
            return a;
          },
          nb::arg("dtype") = nb::none(), nb::arg("copy") = nb::none())
      .def("__dlpack__", &tensor_dlpack)
      .def("__dlpack_device__", [](const Tensor&) { return nb::make_tuple(1, 0); })
      .def("__repr__", [](const Tensor& t) { return text_of(t); })
      .def("__bool__",
           [](const Tensor&) -> bool {
             throw UserError(
                 "kiln.Tensor has no truth value while staging (the graph computes it later): "
                 "use kiln.where(cond, a, b) to choose per element, or a static Python value "
                 "to choose what to stage");
           })
      .def("__len__",
           [](const Tensor& t) -> std::int64_t {
             if (t.rank() == 0) throw nb::type_error("len() of a rank-0 kiln.Tensor");
             return t.shape()[0].size();
           })
      .def("__hash__", [](nb::handle self) { return reinterpret_cast<std::uintptr_t>(self.ptr()); })
      .def("__neg__", [](const Tensor& t) { return kiln::neg(t, caller_location()); })
      .def("__pos__", [](const Tensor& t) { return t; })
      .def("__abs__", [](const Tensor& t) { return kiln::abs(t, caller_location()); })
      .def("__invert__", [](const Tensor& t) { return kiln::bitwise_not(t, caller_location()); })
      .def("__getitem__",
           [](nb::handle self, nb::handle key) {
             return nb::module_::import_("kiln._indexing").attr("getitem")(self, key);
           })
      .def("__mod__",
           [](const Tensor&, nb::handle) -> Tensor {
             throw UserError(
                 "kiln.Tensor has no %: Python's % floors (the result takes the "
                 "divisor's sign) and kiln computes C's truncated remainder: call "
                 "kiln.fmod(a, b), which takes the dividend's sign");
           })
      .def("__floordiv__",
           [](const Tensor& a, nb::handle b) -> Tensor {
             (void)a;
             (void)b;
             throw UserError("kiln.Tensor has no //: write kiln.floor(a / b) for floats");
           })
      .def(
          "reshape",
          [](const Tensor& t, nb::args shape) {
            nb::handle s = shape.size() == 1 && !PyLong_Check(shape[0].ptr()) &&
                                   !PyUnicode_Check(shape[0].ptr())
                               ? shape[0]
                               : nb::handle(shape);
            return kiln::reshape(t, shape_from_python(s), caller_location());
          },
          "x.reshape(2, 3) or x.reshape((2, 'seq')).")
      .def_prop_ro("T", [](const Tensor& t) { return kiln::transpose(t, caller_location()); })
      .def(
          "transpose",
          [](const Tensor& t, std::int64_t a, std::int64_t b) {
            return kiln::transpose(t, a, b, caller_location());
          },
          nb::arg("axis0"), nb::arg("axis1"))
      .def("permute",
           [](const Tensor& t, nb::args perm) {
             return kiln::permute(t, axes_of(perm.size() == 1 ? perm[0] : nb::handle(perm)),
                                  caller_location());
           })
      .def(
          "astype", [](const Tensor& t, DType d) { return kiln::cast(t, d, caller_location()); },
          nb::arg("dtype"))
      .def(
          "sum",
          [](const Tensor& t, nb::handle axis, bool keepdim) {
            return kiln::sum(t, axes_of(axis), keepdim, caller_location());
          },
          nb::arg("axis") = nb::none(), nb::arg("keepdim") = false)
      .def(
          "mean",
          [](const Tensor& t, nb::handle axis, bool keepdim) {
            return kiln::mean(t, axes_of(axis), keepdim, caller_location());
          },
          nb::arg("axis") = nb::none(), nb::arg("keepdim") = false);

  struct Method {
    const char* name;
    Binary op;
    bool reflected;
  };
  static const Method kMethods[] = {
      {"__add__", Binary::add, false},       {"__radd__", Binary::add, true},
      {"__sub__", Binary::sub, false},       {"__rsub__", Binary::sub, true},
      {"__mul__", Binary::mul, false},       {"__rmul__", Binary::mul, true},
      {"__truediv__", Binary::div, false},   {"__rtruediv__", Binary::div, true},
      {"__pow__", Binary::pow, false},       {"__rpow__", Binary::pow, true},
      {"__matmul__", Binary::matmul, false}, {"__rmatmul__", Binary::matmul, true},
      {"__lt__", Binary::lt, false},         {"__le__", Binary::le, false},
      {"__gt__", Binary::gt, false},         {"__ge__", Binary::ge, false},
      {"__eq__", Binary::eq, false},         {"__ne__", Binary::ne, false},
      {"__and__", Binary::band, false},      {"__rand__", Binary::band, true},
      {"__or__", Binary::bor, false},        {"__ror__", Binary::bor, true},
      {"__xor__", Binary::bxor, false},      {"__rxor__", Binary::bxor, true},
      {"__lshift__", Binary::shl, false},    {"__rlshift__", Binary::shl, true},
      {"__rshift__", Binary::shr, false},    {"__rrshift__", Binary::shr, true},
  };
  for (const Method& method : kMethods) {
    const Binary op = method.op;
    const bool reflected = method.reflected;
    tensor.def(method.name, [op, reflected](const Tensor& self, nb::handle other) {
      return binary_method(op, reflected, self, other);
    });
  }
}

void register_ops(nb::module_& m) {
  // ---- element-wise ----
  struct Named {
    const char* name;
    Binary op;
  };
  static const Named kBinary[] = {
      {"add", Binary::add},         {"sub", Binary::sub},          {"mul", Binary::mul},
      {"div", Binary::div},         {"pow", Binary::pow},          {"maximum", Binary::max},
      {"minimum", Binary::min},     {"fmod", Binary::fmod},        {"equal", Binary::eq},
      {"not_equal", Binary::ne},    {"less", Binary::lt},          {"less_equal", Binary::le},
      {"greater", Binary::gt},      {"greater_equal", Binary::ge}, {"bitwise_and", Binary::band},
      {"bitwise_or", Binary::bor},  {"bitwise_xor", Binary::bxor}, {"shift_left", Binary::shl},
      {"shift_right", Binary::shr}, {"matmul", Binary::matmul},
  };
  for (const Named& n : kBinary) {
    const Binary op = n.op;
    m.def(
        n.name, [op](nb::handle a, nb::handle b) { return binary_function(op, a, b); },
        nb::arg("a"), nb::arg("b"));
  }
  using Unary = Tensor (*)(const Tensor&, Loc);
  struct NamedUnary {
    const char* name;
    Unary fn;
  };
  static const NamedUnary kUnary[] = {
      {"neg", &kiln::neg},
      {"abs", &kiln::abs},
      {"exp", &kiln::exp},
      {"log", &kiln::log},
      {"sqrt", &kiln::sqrt},
      {"rsqrt", &kiln::rsqrt},
      {"tanh", &kiln::tanh},
      {"erf", &kiln::erf},
      {"sin", &kiln::sin},
      {"cos", &kiln::cos},
      {"tan", &kiln::tan},
      {"sign", &kiln::sign},
      {"floor", &kiln::floor},
      {"ceil", &kiln::ceil},
      {"round", &kiln::round},
      {"sigmoid", &kiln::sigmoid},
      {"relu", &kiln::relu},
      {"silu", &kiln::silu},
      {"bitwise_not", &kiln::bitwise_not},
  };
  for (const NamedUnary& n : kUnary) {
    const Unary fn = n.fn;
    m.def(
        n.name, [fn](const Tensor& x) { return fn(x, caller_location()); }, nb::arg("x"));
  }
  m.def(
      "gelu",
      [](const Tensor& x, const std::string& approximate) {
        return kiln::gelu(x, approximate, caller_location());
      },
      nb::arg("x"), nb::arg("approximate") = "none");
  m.def(
      "cast", [](const Tensor& x, DType d) { return kiln::cast(x, d, caller_location()); },
      nb::arg("x"), nb::arg("dtype"));
  m.def(
      "where",
      [](const Tensor& cond, nb::handle a, nb::handle b) {
        const Loc w = caller_location();
        const bool a_tensor = nb::isinstance<Tensor>(a);
        const bool b_tensor = nb::isinstance<Tensor>(b);
        if (!a_tensor && !b_tensor && is_scalar(a) && is_scalar(b))
          throw UserError(
              "kiln.where: pass at least one of a and b as a tensor (two numbers "
              "give no dtype)");
        const Tensor ta =
            a_tensor ? nb::cast<Tensor>(a) : as_tensor_operand(a, nb::cast<Tensor>(b), "where", w);
        const Tensor tb = b_tensor ? nb::cast<Tensor>(b) : as_tensor_operand(b, ta, "where", w);
        return kiln::where(cond, ta, tb, w);
      },
      nb::arg("cond"), nb::arg("a"), nb::arg("b"));

  // ---- reductions, normalisation ----
  using Reduce = Tensor (*)(const Tensor&, std::vector<std::int64_t>, bool, Loc);
  struct NamedReduce {
    const char* name;
    Reduce fn;
  };
  static const NamedReduce kReduce[] = {{"sum", &kiln::sum},
                                        {"mean", &kiln::mean},
                                        {"max", &kiln::max},
                                        {"min", &kiln::min},
                                        {"prod", &kiln::prod}};
  for (const NamedReduce& n : kReduce) {
    const Reduce fn = n.fn;
    m.def(
        n.name,
        [fn](const Tensor& x, nb::handle axis, bool keepdim) {
          return fn(x, axes_of(axis), keepdim, caller_location());
        },
        nb::arg("x"), nb::arg("axis") = nb::none(), nb::arg("keepdim") = false,
        "Over the axes given (an int, a sequence; None: all).");
  }
  m.def(
      "argmax",
      [](const Tensor& x, std::int64_t axis, bool keepdim) {
        return kiln::argmax(x, axis, keepdim, caller_location());
      },
      nb::arg("x"), nb::arg("axis"), nb::arg("keepdim") = false);
  m.def(
      "softmax",
      [](const Tensor& x, std::int64_t axis) { return kiln::softmax(x, axis, caller_location()); },
      nb::arg("x"), nb::arg("axis") = -1);
  m.def(
      "log_softmax",
      [](const Tensor& x, std::int64_t axis) {
        return kiln::log_softmax(x, axis, caller_location());
      },
      nb::arg("x"), nb::arg("axis") = -1);
  m.def(
      "layer_norm",
      [](const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps) {
        return kiln::layer_norm(x, gamma, beta, eps, caller_location());
      },
      nb::arg("x"), nb::arg("gamma"), nb::arg("beta"), nb::arg("eps") = 1e-5);
  m.def(
      "rms_norm",
      [](const Tensor& x, const Tensor& gamma, double eps) {
        return kiln::rms_norm(x, gamma, eps, caller_location());
      },
      nb::arg("x"), nb::arg("gamma"), nb::arg("eps") = 1e-6);

  // ---- shapes and indexing ----
  m.def(
      "reshape",
      [](const Tensor& x, nb::handle shape) {
        return kiln::reshape(x, shape_from_python(shape), caller_location());
      },
      nb::arg("x"), nb::arg("shape"));
  m.def(
      "transpose",
      [](const Tensor& x, std::optional<std::int64_t> a, std::optional<std::int64_t> b) {
        if (!a && !b) return kiln::transpose(x, caller_location());
        if (!a || !b) throw UserError("kiln.transpose: pass both axes, or neither (all reversed)");
        return kiln::transpose(x, *a, *b, caller_location());
      },
      nb::arg("x"), nb::arg("axis0") = nb::none(), nb::arg("axis1") = nb::none());
  m.def(
      "permute",
      [](const Tensor& x, std::vector<std::int64_t> perm) {
        return kiln::permute(x, std::move(perm), caller_location());
      },
      nb::arg("x"), nb::arg("perm"));
  m.def(
      "broadcast_to",
      [](const Tensor& x, nb::handle shape) {
        return kiln::broadcast_to(x, shape_from_python(shape), caller_location());
      },
      nb::arg("x"), nb::arg("shape"));
  m.def(
      "slice",
      [](const Tensor& x, std::int64_t axis, std::int64_t start, std::int64_t stop,
         std::int64_t step) { return kiln::slice(x, axis, start, stop, step, caller_location()); },
      nb::arg("x"), nb::arg("axis"), nb::arg("start"), nb::arg("stop"), nb::arg("step") = 1);
  m.def(
      "concat",
      [](const std::vector<Tensor>& xs, std::int64_t axis) {
        return kiln::concat(xs, axis, caller_location());
      },
      nb::arg("xs"), nb::arg("axis") = 0);
  m.def(
      "split",
      [](const Tensor& x, std::vector<std::int64_t> sizes, std::int64_t axis) {
        return kiln::split(x, std::move(sizes), axis, caller_location());
      },
      nb::arg("x"), nb::arg("sizes"), nb::arg("axis") = 0);
  m.def(
      "gather",
      [](const Tensor& x, const Tensor& indices, std::int64_t axis) {
        return kiln::gather(x, indices, axis, caller_location());
      },
      nb::arg("x"), nb::arg("indices"), nb::arg("axis") = 0);
  m.def(
      "gather_elements",
      [](const Tensor& x, const Tensor& indices, std::int64_t axis) {
        return kiln::gather_elements(x, indices, axis, caller_location());
      },
      nb::arg("x"), nb::arg("indices"), nb::arg("axis"));
  m.def(
      "gather_nd",
      [](const Tensor& x, const Tensor& indices, std::int64_t batch_dims) {
        return kiln::gather_nd(x, indices, batch_dims, caller_location());
      },
      nb::arg("x"), nb::arg("indices"), nb::arg("batch_dims") = 0);
  m.def(
      "scatter_elements",
      [](const Tensor& x, const Tensor& indices, const Tensor& updates, std::int64_t axis,
         const std::string& reduction) {
        return kiln::scatter_elements(x, indices, updates, axis, reduction, caller_location());
      },
      nb::arg("x"), nb::arg("indices"), nb::arg("updates"), nb::arg("axis"),
      nb::arg("reduction") = "none");
  m.def(
      "scatter_nd",
      [](const Tensor& x, const Tensor& indices, const Tensor& updates,
         const std::string& reduction) {
        return kiln::scatter_nd(x, indices, updates, reduction, caller_location());
      },
      nb::arg("x"), nb::arg("indices"), nb::arg("updates"), nb::arg("reduction") = "none");
  m.def(
      "top_k",
      [](const Tensor& x, std::int64_t k, std::int64_t axis, bool largest) {
        return kiln::top_k(x, k, axis, largest, caller_location());
      },
      nb::arg("x"), nb::arg("k"), nb::arg("axis") = -1, nb::arg("largest") = true,
      "(values, indices) of the k largest (or smallest) along the axis.");
  m.def(
      "cumsum",
      [](const Tensor& x, std::int64_t axis, bool exclusive, bool reverse) {
        return kiln::cumsum(x, axis, exclusive, reverse, caller_location());
      },
      nb::arg("x"), nb::arg("axis"), nb::arg("exclusive") = false, nb::arg("reverse") = false);
  m.def(
      "embedding",
      [](const Tensor& table, const Tensor& ids) {
        return kiln::embedding(table, ids, caller_location());
      },
      nb::arg("table"), nb::arg("ids"));

  // ---- windows ----
  using Ints = std::vector<std::int64_t>;
  m.def(
      "conv",
      [](const Tensor& x, const Tensor& w, std::optional<Tensor> bias, Ints strides, Ints pads,
         Ints dilations, std::int64_t groups) {
        const Window win =
            window_of(std::move(strides), std::move(pads), std::move(dilations), groups, {});
        return bias ? kiln::conv(x, w, *bias, win, caller_location())
                    : kiln::conv(x, w, win, caller_location());
      },
      nb::arg("x"), nb::arg("w"), nb::arg("bias") = nb::none(), nb::arg("strides") = Ints{},
      nb::arg("pads") = Ints{}, nb::arg("dilations") = Ints{}, nb::arg("groups") = 1,
      "Convolution of x [N, C, S...] by w [M, C/groups, K...]; pads: all begins, then all ends.");
  m.def(
      "conv_transpose",
      [](const Tensor& x, const Tensor& w, std::optional<Tensor> bias, Ints strides, Ints pads,
         Ints dilations, std::int64_t groups, Ints output_padding) {
        const Window win = window_of(std::move(strides), std::move(pads), std::move(dilations),
                                     groups, std::move(output_padding));
        return bias ? kiln::conv_transpose(x, w, *bias, win, caller_location())
                    : kiln::conv_transpose(x, w, win, caller_location());
      },
      nb::arg("x"), nb::arg("w"), nb::arg("bias") = nb::none(), nb::arg("strides") = Ints{},
      nb::arg("pads") = Ints{}, nb::arg("dilations") = Ints{}, nb::arg("groups") = 1,
      nb::arg("output_padding") = Ints{});
  m.def(
      "max_pool",
      [](const Tensor& x, Ints kernel, Ints strides, Ints pads, Ints dilations, bool ceil_mode) {
        return kiln::max_pool(
            x, std::move(kernel),
            window_of(std::move(strides), std::move(pads), std::move(dilations), 1, {}), ceil_mode,
            caller_location());
      },
      nb::arg("x"), nb::arg("kernel"), nb::arg("strides") = Ints{}, nb::arg("pads") = Ints{},
      nb::arg("dilations") = Ints{}, nb::arg("ceil_mode") = false);
  m.def(
      "avg_pool",
      [](const Tensor& x, Ints kernel, Ints strides, Ints pads, bool count_include_pad,
         bool ceil_mode) {
        return kiln::avg_pool(x, std::move(kernel),
                              window_of(std::move(strides), std::move(pads), {}, 1, {}),
                              count_include_pad, ceil_mode, caller_location());
      },
      nb::arg("x"), nb::arg("kernel"), nb::arg("strides") = Ints{}, nb::arg("pads") = Ints{},
      nb::arg("count_include_pad") = false, nb::arg("ceil_mode") = false);
  m.def(
      "resize",
      [](const Tensor& x, Ints sizes, const std::string& mode, const std::string& coordinates,
         const std::string& nearest_mode, double cubic_coeff_a, bool exclude_outside,
         bool antialias, double extrapolation_value, std::vector<double> roi,
         std::vector<double> scales) {
        const Resampling how{
            mode,      coordinates,         nearest_mode,  cubic_coeff_a, exclude_outside,
            antialias, extrapolation_value, std::move(roi)};
        return kiln::resize(x, std::move(sizes), how, std::move(scales), caller_location());
      },
      nb::arg("x"), nb::arg("sizes"), nb::arg("mode") = "nearest",
      nb::arg("coordinates") = "half_pixel", nb::arg("nearest_mode") = "round_prefer_floor",
      nb::arg("cubic_coeff_a") = -0.75, nb::arg("exclude_outside") = false,
      nb::arg("antialias") = false, nb::arg("extrapolation_value") = 0.0,
      nb::arg("roi") = std::vector<double>{}, nb::arg("scales") = std::vector<double>{});

  // ---- between devices ----
  m.def(
      "allreduce_sum",
      [](const std::vector<Tensor>& shards) {
        return kiln::allreduce_sum(shards, caller_location());
      },
      nb::arg("shards"));
  m.def(
      "allgather",
      [](const std::vector<Tensor>& shards, std::int64_t axis) {
        return kiln::allgather(shards, axis, caller_location());
      },
      nb::arg("shards"), nb::arg("axis"));
  m.def(
      "reduce_scatter_sum",
      [](const std::vector<Tensor>& shards, std::int64_t axis) {
        return kiln::reduce_scatter_sum(shards, axis, caller_location());
      },
      nb::arg("shards"), nb::arg("axis"));
  m.def(
      "all_to_all",
      [](const std::vector<Tensor>& shards, std::int64_t split_axis, std::int64_t concat_axis) {
        return kiln::all_to_all(shards, split_axis, concat_axis, caller_location());
      },
      nb::arg("shards"), nb::arg("split_axis"), nb::arg("concat_axis"));
  m.def(
      "transfer_to",
      [](const Tensor& x, Device d) { return kiln::transfer_to(x, d, caller_location()); },
      nb::arg("x"), nb::arg("device"));
  m.def(
      "broadcast",
      [](const Tensor& x, const std::vector<Device>& devices) {
        return kiln::broadcast(x, devices, caller_location());
      },
      nb::arg("x"), nb::arg("devices"));

  // ---- creation ----
  m.def(
      "arange",
      [](double start, std::optional<double> stop, double step, DType dtype) {
        if (!stop) return kiln::arange(0, start, step, dtype, caller_location());
        return kiln::arange(start, *stop, step, dtype, caller_location());
      },
      nb::arg("start"), nb::arg("stop") = nb::none(), nb::arg("step") = 1.0,
      nb::arg("dtype") = DType::i64, "start, start + step, ... below stop (arange(n): 0..n-1).");
  m.def(
      "asarray", [](nb::handle object) { return tensor_from_object(object, "kiln.asarray"); },
      nb::arg("array"),
      "An array (NumPy, or anything with __dlpack__) as a concrete kiln.Tensor: borrowed "
      "without a copy when it is C-contiguous and aligned.");
}

}  // namespace kiln::python
