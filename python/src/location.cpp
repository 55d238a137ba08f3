#include <Python.h>

#include <mutex>
#include <string>
#include <unordered_set>

#include "bindings.hpp"

namespace kiln::python {
namespace {

std::string g_package_dir;  // set once, at import (GIL held)

/// Interned file names: every location points into this set, which only grows (one entry
/// per distinct Python file that staged an op).
const char* intern(std::string name) {
  static std::mutex mutex;
  static std::unordered_set<std::string> names;
  std::scoped_lock lock(mutex);
  return names.insert(std::move(name)).first->c_str();
}

bool inside_package(const std::string& file) {
  return !g_package_dir.empty() && file.compare(0, g_package_dir.size(), g_package_dir) == 0;
}

std::string filename_of(PyCodeObject* code) {
  PyObject* name = PyObject_GetAttrString(reinterpret_cast<PyObject*>(code), "co_filename");
  std::string out;
  if (name != nullptr) {
    if (const char* text = PyUnicode_AsUTF8(name); text != nullptr) out = text;
    Py_DECREF(name);
  }
  if (PyErr_Occurred()) PyErr_Clear();
  return out;
}

}  // namespace

void set_package_dir(const std::string& dir) { g_package_dir = dir; }

SourceLocation caller_location() {
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed
  if (frame == nullptr) return SourceLocation::at(intern("<python>"), 1, 1);
  Py_INCREF(frame);
  while (frame != nullptr) {
    PyCodeObject* code = PyFrame_GetCode(frame);  // new reference
    std::string file = filename_of(code);
    PyFrameObject* back = PyFrame_GetBack(frame);  // new reference or null
    if (!inside_package(file) || back == nullptr) {
      const int line = PyFrame_GetLineNumber(frame);
      int column = 0;
#if PY_VERSION_HEX >= 0x030B0000
      int start_line = 0, end_line = 0, start_column = 0, end_column = 0;
      if (PyCode_Addr2Location(code, PyFrame_GetLasti(frame), &start_line, &start_column, &end_line,
                               &end_column) &&
          start_column >= 0)
        column = start_column + 1;  // Python counts columns from 0, MLIR from 1
#endif
      Py_DECREF(code);
      Py_DECREF(frame);
      Py_XDECREF(back);
      return SourceLocation::at(intern(std::move(file)), static_cast<std::uint32_t>(line),
                                static_cast<std::uint32_t>(column));
    }
    Py_DECREF(code);
    Py_DECREF(frame);
    frame = back;
  }
  return SourceLocation::at(intern("<python>"), 1, 1);
}

void register_location(nb::module_& m) {
  m.def("_set_package_dir", &set_package_dir,
        "Internal: the folder of kiln's Python files, whose frames are not user call sites.");
}

}  // namespace kiln::python
