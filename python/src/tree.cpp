// Pytrees over Python values: tuples, lists, dicts, None, NamedTuples and dataclasses,
// with tensors as leaves and everything else static (docs/python.md, "Trees").

#include <algorithm>
#include <string>

#include "bindings.hpp"
#include "kiln/core/error.hpp"

namespace kiln::python {
namespace {

std::string child_path(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

}  // namespace

std::string qualified_name(nb::handle type) {
  const std::string module = nb::cast<std::string>(nb::getattr(type, "__module__", nb::str("")));
  const std::string name = nb::cast<std::string>(type.attr("__qualname__"));
  return module.empty() || module == "builtins" ? name : module + "." + name;
}

namespace {

bool is_leaf(nb::handle value) {
  return is_numpy_array(value) || nb::isinstance<Tensor>(value) ||
         nb::isinstance<TensorLayout>(value) || is_array_like(value);
}

/// The exact text of a static value, or "" when kiln cannot compare it exactly.
std::string static_text(nb::handle value) {
  if (PyBool_Check(value.ptr())) return value.ptr() == Py_True ? "True" : "False";
  if (PyLong_CheckExact(value.ptr())) return nb::cast<std::string>(nb::str(value));
  if (PyFloat_CheckExact(value.ptr())) return detail::exact_text(PyFloat_AsDouble(value.ptr()));
  if (PyUnicode_CheckExact(value.ptr()) || PyBytes_CheckExact(value.ptr()))
    return nb::cast<std::string>(nb::repr(value));
  const nb::object enum_type = nb::module_::import_("enum").attr("Enum");
  if (nb::isinstance(value, enum_type)) return nb::cast<std::string>(nb::repr(value));
  return "";
}

PyNode flatten_at(nb::handle value, std::vector<nb::object>& leaves, const std::string& path,
                  std::vector<TreeDef>& defs_out) {
  PyNode node;
  std::vector<TreeDef> children;
  const auto finish = [&](std::string type) {
    defs_out.push_back(TreeDef::node(node.kind, std::move(type), node.keys, std::move(children)));
    return node;
  };
  if (is_leaf(value)) {
    node.kind = TreeDef::Kind::tensor;
    leaves.push_back(nb::borrow(value));
    defs_out.push_back(TreeDef::tensor());
    return node;
  }
  if (value.is_none()) {
    node.kind = TreeDef::Kind::optional;
    return finish("None");
  }
  if (PyTuple_Check(value.ptr())) {
    const nb::tuple tuple = nb::borrow<nb::tuple>(value);
    const bool named = !PyTuple_CheckExact(value.ptr()) && type_has(value.type(), "_fields");
    node.kind = named ? TreeDef::Kind::record : TreeDef::Kind::tuple;
    if (named) {
      node.type = nb::borrow(value.type());
      for (nb::handle f : value.type().attr("_fields"))
        node.keys.push_back(nb::cast<std::string>(f));
    }
    for (std::size_t i = 0; i < tuple.size(); ++i)
      node.children.push_back(flatten_at(
          tuple[i], leaves, child_path(path, named ? node.keys[i] : std::to_string(i)), children));
    return finish(named ? qualified_name(value.type()) : "tuple");
  }
  if (PyList_Check(value.ptr())) {
    node.kind = TreeDef::Kind::list;
    const nb::list list = nb::borrow<nb::list>(value);
    for (std::size_t i = 0; i < list.size(); ++i)
      node.children.push_back(
          flatten_at(list[i], leaves, child_path(path, std::to_string(i)), children));
    return finish("list");
  }
  if (PyDict_Check(value.ptr())) {
    node.kind = TreeDef::Kind::dict;
    const nb::dict dict = nb::borrow<nb::dict>(value);
    for (auto [k, v] : dict) {
      if (!PyUnicode_Check(k.ptr()))
        throw UserError("kiln tree: the dict at " + (path.empty() ? "the top" : path) +
                        " has the key " + nb::cast<std::string>(nb::repr(k)) +
                        "; a tree's dict keys must be str");
      node.keys.push_back(nb::cast<std::string>(k));
    }
    std::sort(node.keys.begin(), node.keys.end());  // as JAX does: key order is not structure
    for (const std::string& k : node.keys)
      node.children.push_back(flatten_at(dict[k.c_str()], leaves, child_path(path, k), children));
    return finish("dict");
  }
  if (!PyType_Check(value.ptr()) && type_has(value.type(), "__dataclass_fields__")) {
    node.kind = TreeDef::Kind::record;
    node.dataclass = true;
    node.type = nb::borrow(value.type());
    for (nb::handle field : nb::module_::import_("dataclasses").attr("fields")(value)) {
      const std::string name = nb::cast<std::string>(field.attr("name"));
      node.keys.push_back(name);
      node.children.push_back(
          flatten_at(value.attr(name.c_str()), leaves, child_path(path, name), children));
    }
    return finish(qualified_name(value.type()));
  }
  const std::string text = static_text(value);
  if (text.empty())
    throw UserError(
        "kiln tree: the " + qualified_name(value.type()) + " at " +
        (path.empty() ? "the top" : path) +
        " is neither a tensor (kiln.Tensor, TensorLayout, an array) nor a container "
        "(tuple, list, dict, None, NamedTuple, dataclass) nor a static value kiln compares "
        "exactly (int, float, bool, str, bytes, an Enum member): make it one of those");
  node.kind = TreeDef::Kind::static_value;
  node.type = nb::borrow(value);
  node.text = text;
  defs_out.push_back(TreeDef::static_value(qualified_name(value.type()), text));
  return node;
}

bool match(const PyNode& node, nb::handle value, std::vector<nb::object>& leaves) {
  switch (node.kind) {
    case TreeDef::Kind::tensor:
      if (!is_leaf(value)) return false;
      leaves.push_back(nb::borrow(value));
      return true;
    case TreeDef::Kind::static_value:
      return value.type().is(node.type.type()) && static_text(value) == node.text;
    case TreeDef::Kind::optional:
      if (node.children.empty()) return value.is_none();
      return !value.is_none() && match(node.children[0], value, leaves);
    case TreeDef::Kind::tuple:
    case TreeDef::Kind::list: {
      const bool tuple = node.kind == TreeDef::Kind::tuple;
      if (tuple ? !PyTuple_CheckExact(value.ptr()) : !PyList_CheckExact(value.ptr())) return false;
      const Py_ssize_t n = tuple ? PyTuple_GET_SIZE(value.ptr()) : PyList_GET_SIZE(value.ptr());
      if (n != static_cast<Py_ssize_t>(node.children.size())) return false;
      for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject* item = tuple ? PyTuple_GET_ITEM(value.ptr(), i) : PyList_GET_ITEM(value.ptr(), i);
        if (!match(node.children[static_cast<std::size_t>(i)], item, leaves)) return false;
      }
      return true;
    }
    case TreeDef::Kind::dict: {
      if (!PyDict_CheckExact(value.ptr()) ||
          PyDict_Size(value.ptr()) != static_cast<Py_ssize_t>(node.keys.size()))
        return false;
      for (std::size_t i = 0; i < node.keys.size(); ++i) {
        PyObject* item = PyDict_GetItemString(value.ptr(), node.keys[i].c_str());
        if (item == nullptr || !match(node.children[i], item, leaves)) return false;
      }
      return true;
    }
    case TreeDef::Kind::record: {
      if (!value.type().is(node.type)) return false;
      for (std::size_t i = 0; i < node.keys.size(); ++i) {
        const nb::object item =
            node.dataclass ? value.attr(node.keys[i].c_str()) : nb::borrow(value[nb::int_(i)]);
        if (!match(node.children[i], item, leaves)) return false;
      }
      return true;
    }
  }
  return false;
}

nb::object build(const PyNode& node, const std::vector<nb::object>& leaves, std::size_t& next) {
  switch (node.kind) {
    case TreeDef::Kind::tensor:
      return leaves[next++];
    case TreeDef::Kind::static_value:
      return node.type;
    case TreeDef::Kind::optional:
      return node.children.empty() ? nb::none() : build(node.children[0], leaves, next);
    case TreeDef::Kind::list: {
      nb::list out;
      for (const PyNode& c : node.children) out.append(build(c, leaves, next));
      return out;
    }
    case TreeDef::Kind::dict: {
      nb::dict out;
      for (std::size_t i = 0; i < node.children.size(); ++i)
        out[node.keys[i].c_str()] = build(node.children[i], leaves, next);
      return out;
    }
    case TreeDef::Kind::tuple:
    case TreeDef::Kind::record: {
      nb::list items;
      for (const PyNode& c : node.children) items.append(build(c, leaves, next));
      if (node.kind == TreeDef::Kind::tuple) return nb::tuple(items);
      if (!node.dataclass) return node.type(*items);
      nb::object out = node.type.attr("__new__")(node.type);
      const nb::object set = nb::module_::import_("builtins").attr("object").attr("__setattr__");
      for (std::size_t i = 0; i < node.keys.size(); ++i) set(out, node.keys[i], items[i]);
      return out;
    }
  }
  return nb::none();
}

}  // namespace

PyTree flatten(nb::handle value, std::vector<nb::object>& leaves) {
  std::vector<TreeDef> defs;
  PyTree tree;
  tree.root = flatten_at(value, leaves, "", defs);
  tree.def = std::move(defs.back());
  return tree;
}

int visit_tree(const PyNode& node, visitproc visit, void* arg) {
  Py_VISIT(node.type.ptr());
  for (const PyNode& child : node.children)
    if (const int r = visit_tree(child, visit, arg); r != 0) return r;
  return 0;
}

void clear_tree(PyNode& node) {
  node.type.reset();
  for (PyNode& child : node.children) clear_tree(child);
}

bool match_tree(const PyTree& tree, nb::handle value, std::vector<nb::object>& leaves) {
  const std::size_t start = leaves.size();
  if (match(tree.root, value, leaves)) return true;
  leaves.resize(start);
  return false;
}

nb::object unflatten(const PyTree& tree, const std::vector<nb::object>& leaves) {
  if (leaves.size() != tree.def.num_leaves())
    throw UserError("kiln.TreeDef.unflatten: " + std::to_string(leaves.size()) +
                    " leaves for a tree of " + std::to_string(tree.def.num_leaves()) + " (" +
                    tree.def.str() + ")");
  std::size_t next = 0;
  return build(tree.root, leaves, next);
}

void register_tree(nb::module_& m) {
  nb::class_<PyTree>(m, "TreeDef", nb::type_slots(tree_gc_slots<PyTree>()),
                     "The structure of a Python value: containers, keys and static values, "
                     "with tensors as leaves (the seed's treedef).")
      .def_prop_ro(
          "num_leaves", [](const PyTree& t) { return t.def.num_leaves(); },
          "Number of tensor leaves.")
      .def(
          "leaf_paths", [](const PyTree& t) { return t.def.leaf_paths(); },
          "The path of every leaf, in leaf order: '0', '1.a', 'layers.3'.")
      .def(
          "difference", [](const PyTree& a, const PyTree& b) { return a.def.difference(b.def); },
          "Where the two trees first differ ('at 1.n: static value 3 vs 4'), or '' when equal.")
      .def(
          "unflatten",
          [](const PyTree& t, const std::vector<nb::object>& leaves) {
            return unflatten(t, leaves);
          },
          "The value of this structure with these leaves, in order.")
      .def("__eq__", [](const PyTree& a, const PyTree& b) { return a.def == b.def; })
      .def("__hash__", [](const PyTree& t) { return std::hash<std::string>{}(t.def.str()); })
      .def("__str__", [](const PyTree& t) { return t.def.str(); })
      .def("__repr__", [](const PyTree& t) { return "TreeDef(" + t.def.str() + ")"; });
  m.def(
      "tree_flatten",
      [](nb::handle value) {
        std::vector<nb::object> leaves;
        PyTree tree = flatten(value, leaves);
        return nb::make_tuple(leaves, std::move(tree));
      },
      nb::arg("value"),
      "(leaves, treedef) of a value: its tensor leaves in order and its structure.");
  m.def(
      "tree_unflatten",
      [](const PyTree& tree, const std::vector<nb::object>& leaves) {
        return unflatten(tree, leaves);
      },
      nb::arg("treedef"), nb::arg("leaves"), "The inverse of tree_flatten.");
}

}  // namespace kiln::python
