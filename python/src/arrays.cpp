// NumPy arrays and DLPack tensors in and out of kiln without copies (docs/python.md,
// "Arrays").

#include <nanobind/ndarray.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "bindings.hpp"
#include "kiln/core/error.hpp"

namespace kiln::python {
namespace {

using nb::dlpack::dtype_code;
using AnyArray = nb::ndarray<nb::ro>;

nb::object& bfloat16_type() {
  static nb::object* type = nullptr;  // leaked on purpose: lives as long as the module
  if (type == nullptr) type = new nb::object(nb::module_::import_("ml_dtypes").attr("bfloat16"));
  return *type;
}

PyTypeObject* numpy_ndarray_type() {
  static PyTypeObject* type = nullptr;  // a reference kept for the life of the process
  if (type == nullptr)
    type = reinterpret_cast<PyTypeObject*>(
        nb::object(nb::module_::import_("numpy").attr("ndarray")).release().ptr());
  return type;
}

/// True for an `ml_dtypes.bfloat16` NumPy array (which NumPy's DLPack and buffer export
/// cannot describe: kiln views it as uint16 and reads the bits as bf16).
bool is_bfloat16_array(nb::handle object) {
  const nb::object type = object.attr("dtype").attr("type");
  if (nb::cast<std::string>(type.attr("__name__")) != "bfloat16") return false;
  return type.is(bfloat16_type());  // ml_dtypes is imported only for such an array
}

/// The dtype of a buffer's format ('f', '<i8', ...), if kiln has one.
std::optional<DType> dtype_of_format(const char* format, Py_ssize_t itemsize) {
  if (format == nullptr) return std::nullopt;
  if (*format == '<' || *format == '=' || *format == '@') ++format;
  if (format[0] == 0 || format[1] != 0) return std::nullopt;
  switch (format[0]) {
    case 'f':
      return itemsize == 4 ? std::optional(DType::f32) : std::nullopt;
    case 'd':
      return itemsize == 8 ? std::optional(DType::f64) : std::nullopt;
    case 'e':
      return itemsize == 2 ? std::optional(DType::f16) : std::nullopt;
    case 'b':
      return DType::i8;
    case 'B':
      return DType::u8;
    case '?':
      return itemsize == 1 ? std::optional(DType::bool_) : std::nullopt;
    case 'i':
    case 'l':
    case 'q':
      if (itemsize == 4) return DType::i32;
      if (itemsize == 8) return DType::i64;
      return std::nullopt;
    case 'H':
      return std::nullopt;  // uint16: bf16 bits only when asked (see below)
    default:
      return std::nullopt;
  }
}

/// A NumPy array through the buffer protocol (the fast path: no DLPack capsule, no
/// Python call), borrowed when C-contiguous and aligned. Empty when the buffer cannot be
/// read this way (the caller then takes the general path).
std::optional<Tensor> borrow_buffer(nb::handle object, bool bf16_bits, Device device) {
  auto view = std::make_unique<Py_buffer>();
  if (PyObject_GetBuffer(object.ptr(), view.get(), PyBUF_RECORDS_RO) != 0) {
    PyErr_Clear();
    return std::nullopt;
  }
  std::optional<DType> dtype = dtype_of_format(view->format, view->itemsize);
  if (bf16_bits && view->itemsize == 2) dtype = DType::bf16;
  bool contiguous = true;
  std::vector<Dim> dims;
  Py_ssize_t expected = view->itemsize;
  for (int d = view->ndim; d-- > 0;) {
    if (view->shape[d] != 1 && view->strides[d] != expected) contiguous = false;
    expected *= view->shape[d];
  }
  const bool aligned = dtype && reinterpret_cast<std::uintptr_t>(view->buf) % size_of(*dtype) == 0;
  if (!dtype || !contiguous || !aligned) {
    PyBuffer_Release(view.get());
    return std::nullopt;
  }
  for (int d = 0; d < view->ndim; ++d) dims.emplace_back(static_cast<std::int64_t>(view->shape[d]));
  const void* data = view->buf;
  const auto bytes = static_cast<std::size_t>(view->len);
  std::shared_ptr<const void> owner(view.release(), [](const void* p) {
    nb::gil_scoped_acquire gil;
    auto* buffer = static_cast<Py_buffer*>(const_cast<void*>(p));
    PyBuffer_Release(buffer);
    delete buffer;
  });
  return Tensor::borrow(*dtype, Shape(std::move(dims)), device, data, bytes, std::move(owner));
}

DType dtype_from_dlpack(nb::dlpack::dtype t, bool bf16_bits, const std::string& what) {
  if (t.lanes == 1) {
    const auto code = static_cast<dtype_code>(t.code);
    if (code == dtype_code::Float && t.bits == 32) return DType::f32;
    if (code == dtype_code::Float && t.bits == 64) return DType::f64;
    if (code == dtype_code::Float && t.bits == 16) return DType::f16;
    if (code == dtype_code::Bfloat && t.bits == 16) return DType::bf16;
    if (code == dtype_code::UInt && t.bits == 16 && bf16_bits) return DType::bf16;
    if (code == dtype_code::Int && t.bits == 8) return DType::i8;
    if (code == dtype_code::Int && t.bits == 32) return DType::i32;
    if (code == dtype_code::Int && t.bits == 64) return DType::i64;
    if (code == dtype_code::UInt && t.bits == 8) return DType::u8;
    if (code == dtype_code::Bool && t.bits == 8) return DType::bool_;
  }
  static const char* kCodes[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
  const std::string code = t.code < 7 ? kCodes[t.code] : "code " + std::to_string(t.code);
  throw UserError(what + ": kiln has no dtype for " + code + std::to_string(t.bits) +
                  (t.lanes != 1 ? " x" + std::to_string(t.lanes) : "") +
                  " elements; kiln takes float32, float64, float16, bfloat16 (ml_dtypes), "
                  "int8, int32, int64, uint8 and bool: cast the array to one of those");
}

nb::dlpack::dtype dlpack_of(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return nb::dtype<float>();
    case DType::f64:
      return nb::dtype<double>();
    case DType::f16:
      return {static_cast<std::uint8_t>(dtype_code::Float), 16, 1};
    case DType::bf16:
      return {static_cast<std::uint8_t>(dtype_code::Bfloat), 16, 1};
    case DType::i8:
      return nb::dtype<std::int8_t>();
    case DType::u8:
      return nb::dtype<std::uint8_t>();
    case DType::i32:
      return nb::dtype<std::int32_t>();
    case DType::i64:
      return nb::dtype<std::int64_t>();
    case DType::bool_:
      return nb::dtype<bool>();
  }
  return nb::dtype<float>();
}

bool c_contiguous(const AnyArray& a) {
  std::int64_t expected = 1;
  for (std::size_t d = a.ndim(); d-- > 0;) {
    if (a.shape(d) != 1 && a.stride(d) != expected) return false;
    expected *= static_cast<std::int64_t>(a.shape(d));
  }
  return true;
}

/// The GIL-taking deleter of what a borrowed tensor holds.
template <class T>
std::shared_ptr<const void> hold(T value) {
  return std::shared_ptr<const void>(new T(std::move(value)), [](const void* p) {
    nb::gil_scoped_acquire gil;
    delete static_cast<const T*>(p);
  });
}

/// A wrapper that gives nb::ndarray the owner it keeps: the tensor (shared data).
nb::capsule tensor_owner(const Tensor& tensor) {
  return nb::capsule(new Tensor(tensor), [](void* p) noexcept { delete static_cast<Tensor*>(p); });
}

template <class Framework>
nb::object export_array(const Tensor& tensor, bool bf16_as_bits) {
  if (!tensor.is_constant())
    throw UserError("kiln.Tensor: this tensor is " +
                    std::string(tensor.empty()            ? "empty"
                                : tensor.is_placeholder() ? "a placeholder"
                                                          : "traced") +
                    " and holds no data to export");
  if (!tensor.device().is_cpu())
    throw UserError("kiln.Tensor: the tensor is on " + text_of(tensor.device()) +
                    "; only CPU tensors export as arrays");
  std::vector<std::size_t> shape;
  for (const Dim& d : tensor.shape().dims()) shape.push_back(static_cast<std::size_t>(d.size()));
  nb::dlpack::dtype dtype = dlpack_of(tensor.dtype());
  if (tensor.dtype() == DType::bf16 && bf16_as_bits) dtype = nb::dtype<std::uint16_t>();
  void* data = const_cast<std::byte*>(tensor.bytes().data());
  nb::ndarray<Framework> array(data, shape.size(), shape.data(), tensor_owner(tensor), nullptr,
                               dtype, nb::device::cpu::value);
  return nb::cast(std::move(array), nb::rv_policy::reference);
}

}  // namespace

bool is_numpy_array(nb::handle object) {
  return PyObject_TypeCheck(object.ptr(), numpy_ndarray_type()) != 0;
}

bool is_array_like(nb::handle object) {
  if (is_numpy_array(object)) return true;
  const nb::handle type = object.type();
  return type_has(type, "__dlpack__") || type_has(type, "__array_interface__") ||
         type_has(type, "__array__");
}

bool type_has(nb::handle type, const char* name) {
  // Through the MRO's dicts: no AttributeError raised and cleared (which costs a
  // microsecond) for the common answer, no.
  PyObject* mro = reinterpret_cast<PyTypeObject*>(type.ptr())->tp_mro;
  if (mro == nullptr) return false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); ++i) {
    PyObject* dict = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i))->tp_dict;
    if (dict != nullptr && PyDict_GetItemString(dict, name) != nullptr) return true;
  }
  return false;
}

Tensor tensor_from_object(nb::handle object, const std::string& what, Device device) {
  if (nb::isinstance<Tensor>(object)) {
    const Tensor& t = nb::cast<const Tensor&>(object);
    if (!t.is_constant())
      throw UserError(what + ": a kiln.Tensor that is " +
                      (t.empty()            ? "empty"
                       : t.is_placeholder() ? "a placeholder"
                                            : "traced") +
                      " holds no data; pass an array (NumPy, or anything with __dlpack__)");
    return t;
  }
  nb::object source = nb::borrow(object);
  bool bf16_bits = false;
  if (is_numpy_array(object)) {
    if (std::optional<Tensor> t = borrow_buffer(object, false, device)) return *std::move(t);
    bf16_bits = is_bfloat16_array(object);
    if (bf16_bits) {
      source = source.attr("view")(nb::module_::import_("numpy").attr("uint16"));
      if (std::optional<Tensor> t = borrow_buffer(source, true, device)) return *std::move(t);
    }
  }
  AnyArray array;
  if (!nb::try_cast(source, array, /*convert=*/false) &&
      !nb::try_cast(source, array, /*convert=*/true))
    throw UserError(what + ": a " + qualified_name(object.type()) +
                    " is not an array kiln can read: pass a NumPy array, a kiln.Tensor, or "
                    "an object with __dlpack__ (a PyTorch or JAX CPU tensor)");
  if (array.device_type() != nb::device::cpu::value)
    throw UserError(what + ": the array is on a device other than the CPU (DLPack device type " +
                    std::to_string(array.device_type()) +
                    "); kiln's Python calls take CPU arrays: copy it to the CPU first");
  const DType dtype = dtype_from_dlpack(array.dtype(), bf16_bits, what);
  std::vector<Dim> dims;
  for (std::size_t d = 0; d < array.ndim(); ++d)
    dims.emplace_back(static_cast<std::int64_t>(array.shape(d)));
  Shape shape(std::move(dims));
  const std::size_t bytes = array.nbytes();
  const auto aligned = reinterpret_cast<std::uintptr_t>(array.data()) % size_of(dtype) == 0;
  if (c_contiguous(array) && aligned)
    return Tensor::borrow(dtype, std::move(shape), Device::cpu(), array.data(), bytes, hold(array));
  // A strided or misaligned view: NumPy makes the contiguous copy kiln reads.
  nb::object copy = nb::module_::import_("numpy").attr("ascontiguousarray")(source);
  AnyArray contiguous;
  if (!nb::try_cast(copy, contiguous, false) || !c_contiguous(contiguous))
    throw UserError(what + ": the array is not C-contiguous and NumPy could not copy it");
  return Tensor::from_bytes(dtype, std::move(shape), device, contiguous.data(), bytes);
}

nb::object tensor_to_numpy(const Tensor& tensor) {
  nb::object array = export_array<nb::numpy>(tensor, /*bf16_as_bits=*/true);
  if (tensor.dtype() == DType::bf16) return array.attr("view")(bfloat16_type());
  return array;
}

nb::object tensor_dlpack(const Tensor& tensor, nb::kwargs kwargs) {
  return export_array<nb::array_api>(tensor, false).attr("__dlpack__")(**kwargs);
}

}  // namespace kiln::python
