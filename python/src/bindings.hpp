#pragma once
// Internal to kiln's Python extension (kiln._kiln): what its source files share. Each file
// binds one part of the C++ API; module.cpp calls their register functions in order.

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include <sstream>
#include <string>
#include <vector>

#include "kiln/core/device.hpp"
#include "kiln/core/dtype.hpp"
#include "kiln/core/shape.hpp"
#include "kiln/core/source_location.hpp"
#include "kiln/stage/tensor.hpp"
#include "kiln/stage/tree.hpp"

namespace kiln::python {

namespace nb = nanobind;

/// What `os << value` prints.
template <class T>
std::string text_of(const T& value) {
  std::ostringstream os;
  os << value;
  return os.str();
}

// ---- location.cpp ----------------------------------------------------------------------

/// The Python call site of the running binding: the innermost Python frame outside kiln's
/// own package (so ops made inside kiln's Python helpers are located at the user's line).
/// The file name is interned: the location stays valid for the life of the process.
SourceLocation caller_location();
/// Sets the folder whose frames `caller_location` skips (kiln's package).
void set_package_dir(const std::string& dir);
void register_location(nb::module_& m);

// ---- arrays.cpp: NumPy / DLPack <-> kiln::Tensor ---------------------------------------

/// \p object (a kiln.Tensor, a NumPy array, or anything with `__dlpack__` or the buffer
/// protocol) as a concrete CPU tensor: borrowed without a copy when it is C-contiguous,
/// aligned and on the CPU; copied otherwise (a strided view). \p what names it in errors.
/// \p device: the CPU device the tensor is on (virtual CPU devices share the host's
/// memory); a kiln.Tensor keeps its own.
Tensor tensor_from_object(nb::handle object, const std::string& what,
                          Device device = Device::cpu());
/// A concrete tensor as a NumPy array over the same memory (no copy); bf16 as an
/// `ml_dtypes.bfloat16` array.
nb::object tensor_to_numpy(const Tensor& tensor);
/// True for what `tensor_from_object` takes as an array (not a kiln.Tensor).
bool is_array_like(nb::handle object);
/// True for a NumPy array (or a subclass's).
bool is_numpy_array(nb::handle object);
/// `module.QualName` of a type (`numpy.ndarray`; builtins without the module).
std::string qualified_name(nb::handle type);
/// True when \p type or a base defines \p name (no exception raised on the way).
bool type_has(nb::handle type, const char* name);
/// A concrete tensor's DLPack capsule (`__dlpack__`; bf16 as DLPack's bfloat16).
nb::object tensor_dlpack(const Tensor& tensor, nb::kwargs kwargs);

// ---- tree.cpp: pytrees -----------------------------------------------------------------

/// The structure of a Python value (kiln.TreeDef): the C++ `TreeDef` (what staging and
/// calls compare, print and name leaves by) and what rebuilding the Python value needs
/// (NamedTuple and dataclass types, static values as the objects they were).
struct PyNode {
  TreeDef::Kind kind = TreeDef::Kind::tuple;
  nb::object type;   ///< records: the class; static values: the value itself
  std::string text;  ///< static values: the exact text compared
  bool dataclass = false;
  std::vector<std::string> keys;  ///< dicts (sorted) and records (fields in order)
  std::vector<PyNode> children;
};
struct PyTree {
  PyNode root;
  TreeDef def;
};
/// Flattens \p value: its tensor leaves (kiln.Tensor, TensorLayout, arrays) appended to
/// \p leaves as the objects they are. \throws UserError naming the path of a value kiln
/// cannot compare exactly (see docs/python.md, "Trees").
PyTree flatten(nb::handle value, std::vector<nb::object>& leaves);
/// True when \p value has exactly \p tree's structure and static values (what `flatten`
/// would give equals tree.def), its leaves then appended to \p leaves: the allocation-free
/// check of a call's arguments. False says nothing of why: flatten and compare for that.
bool match_tree(const PyTree& tree, nb::handle value, std::vector<nb::object>& leaves);
/// \p tree with its leaves replaced by \p leaves, in order.
nb::object unflatten(const PyTree& tree, const std::vector<nb::object>& leaves);
void register_tree(nb::module_& m);

/// Garbage-collector support for what holds trees (their NamedTuple and dataclass types and
/// static values may lead back to the holder, through a module's globals).
int visit_tree(const PyNode& node, visitproc visit, void* arg);
void clear_tree(PyNode& node);
inline int visit_trees(const PyTree& t, visitproc visit, void* arg) {
  return visit_tree(t.root, visit, arg);
}
template <class T>
int visit_trees(const T& holder, visitproc visit, void* arg) {
  if (const int r = visit_tree(holder.in_tree.root, visit, arg); r != 0) return r;
  return visit_tree(holder.out_tree.root, visit, arg);
}
inline void clear_trees(PyTree& t) { clear_tree(t.root); }
template <class T>
void clear_trees(T& holder) {
  clear_tree(holder.in_tree.root);
  clear_tree(holder.out_tree.root);
}
/// The type slots of a class whose instances hold trees (`visit_trees`, `clear_trees`).
template <class T>
PyType_Slot* tree_gc_slots() {
  static PyType_Slot slots[] = {
      {Py_tp_traverse, reinterpret_cast<void*>(+[](PyObject* self, visitproc visit, void* arg) {
         Py_VISIT(Py_TYPE(self));
         return nb::inst_ready(self) ? visit_trees(*nb::inst_ptr<T>(self), visit, arg) : 0;
       })},
      {Py_tp_clear, reinterpret_cast<void*>(+[](PyObject* self) {
         clear_trees(*nb::inst_ptr<T>(self));
         return 0;
       })},
      {0, nullptr}};
  return slots;
}

// ---- tensor_ops.cpp: DType, Device, TensorLayout, Tensor and the staging ops ------------
Shape shape_from_python(nb::handle shape);
nb::tuple shape_to_python(const Shape& shape);
void register_tensor(nb::module_& m);
void register_ops(nb::module_& m);

// ---- staging.cpp: stage, StagedGraph, subgraphs, weights, nn, sharding ----------------
void register_staging(nb::module_& m);

// ---- compiled.cpp: CompiledCallable, weights files, ONNX -------------------------------
void register_compiled(nb::module_& m);

}  // namespace kiln::python
