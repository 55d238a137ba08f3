// kiln._kiln: kiln's C++ API for Python (the package kiln re-exports it; docs/python.md).

#include "bindings.hpp"
#include "kiln/core/error.hpp"

namespace kiln::python {
namespace {

PyObject* g_error = nullptr;
PyObject* g_user_error = nullptr;
PyObject* g_device_error = nullptr;
PyObject* g_internal_error = nullptr;

PyObject* new_exception(nb::module_& m, const char* name, PyObject* bases, const char* doc) {
  const std::string qualified = std::string("kiln.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (type == nullptr) throw nb::python_error();
  m.attr(name) = nb::handle(type);
  return type;
}

void register_errors(nb::module_& m) {
  g_error = new_exception(m, "Error", PyExc_Exception, "Base of every error kiln raises.");
  const nb::tuple user_bases = nb::make_tuple(nb::handle(g_error), nb::handle(PyExc_ValueError));
  g_user_error = new_exception(m, "UserError", user_bases.ptr(),
                               "Bad input or misuse (kiln::UserError): the message names the "
                               "value, the place and the fix.");
  const nb::tuple device_bases =
      nb::make_tuple(nb::handle(g_error), nb::handle(PyExc_RuntimeError));
  g_device_error = new_exception(m, "DeviceError", device_bases.ptr(),
                                 "A device, the OS or a kernel failed (kiln::DeviceError).");
  g_internal_error =
      new_exception(m, "InternalError", device_bases.ptr(), "A bug in kiln (kiln::InternalError).");
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const UserError& e) {
      PyErr_SetString(g_user_error, e.what());
    } catch (const DeviceError& e) {
      PyErr_SetString(g_device_error, e.what());
    } catch (const InternalError& e) {
      PyErr_SetString(g_internal_error, e.what());
    } catch (const Error& e) {
      PyErr_SetString(g_error, e.what());
    }
  });
}

}  // namespace
}  // namespace kiln::python

NB_MODULE(_kiln, m) {
  using namespace kiln::python;
  m.doc() = "kiln's C++ library for Python: device graphs' compiled callables and staged graphs";
  register_errors(m);
  register_location(m);
  register_tensor(m);
  register_tree(m);
  register_ops(m);
  register_staging(m);
  register_compiled(m);
}
